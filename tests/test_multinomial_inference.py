"""Multinomial coef_table and wald_test_terms in the reference-class
parametrisation, against statsmodels' MNLogit (issue 44, point 2)."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
import statsmodels.api as sm
import torch
from numpy.testing import assert_allclose
from scipy import stats

from autoglm_graph import GraphGLMClassifier

GLM_ONLY = dict(local_penalty=np.inf, device="cpu")
TERMS = {"x": ["x"], "g": ["g_a", "g_c"]}  # g's base level is "b" (see _data)


def _data(n: int = 300, seed: int = 1):
    """A numeric column, a 3-level factor whose most frequent level ("b", the
    default base) is not the first one, and 3 string classes."""
    rng = np.random.default_rng(seed)
    x = rng.normal(1.0, 2.0, size=n)
    g = rng.choice(["a", "b", "c"], size=n, p=[0.3, 0.45, 0.25])
    effect = pd.Series({"a": 0.7, "b": 0.0, "c": -0.5})[g].to_numpy()
    eta = np.column_stack([np.zeros(n), 0.15 * x + effect, -0.11 * x + 0.3])
    p = np.exp(eta) / np.exp(eta).sum(axis=1, keepdims=True)
    codes = np.array([rng.choice(3, p=row) for row in p])
    y = np.array(["lab", "con", "lib"])[codes]
    return pd.DataFrame({"x": x, "g": g}), y


def _sm_design(model, X: pd.DataFrame) -> pd.DataFrame:
    """Treatment coding with the estimator's base levels, named as its terms."""
    design = pd.DataFrame({"intercept": 1.0, "x": X["x"]})
    base = model.base_levels_["g"]
    for level in sorted(X["g"].unique()):
        if level != base:
            design[f"g_{level}"] = (X["g"] == level).astype(float)
    return design


def _mnlogit(model, design: pd.DataFrame, y, cov_type: str = "nonrobust"):
    codes = np.searchsorted(model.classes_, y)  # code 0: the reference class
    return sm.MNLogit(codes, design).fit(
        disp=0, method="newton", tol=1e-12, maxiter=100, cov_type=cov_type
    )


def _by_class(result_frame: pd.DataFrame) -> np.ndarray:
    """statsmodels' [term, class - 1] frame in coef_table's (class, term) order."""
    return result_frame.to_numpy().T.ravel()


@pytest.fixture(scope="module")
def data():
    return _data()


@pytest.fixture(scope="module")
def unpenalised(data):
    X, y = data
    return GraphGLMClassifier(alpha=0.0, **GLM_ONLY).fit(X, y)


@pytest.fixture(scope="module")
def mnlogit(unpenalised, data):
    X, y = data
    return _mnlogit(unpenalised, _sm_design(unpenalised, X), y)


def test_base_level_is_not_the_first(unpenalised):
    # (Otherwise a design with drop_first would match by chance.)
    assert unpenalised.base_levels_ == {"g": "b"}
    assert unpenalised.feature_names_out_.tolist() == ["x", "g_a", "g_c"]


def test_rows_are_the_classes_other_than_the_reference(unpenalised, data):
    table = unpenalised.coef_table(*data)
    classes = unpenalised.classes_.tolist()
    assert classes == ["con", "lab", "lib"]
    assert table.index.names == ["class", "term"]
    assert table.index.tolist() == [
        (k, t) for k in classes[1:] for t in ["intercept", "x", "g_a", "g_c"]
    ]
    assert table.attrs["reference_class"] == "con"
    assert table.attrs["cov"].shape == (8, 8)  # (K - 1) * (p + 1)


def test_coef_table_matches_mnlogit(unpenalised, mnlogit, data):
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # training data: no warning
        table = unpenalised.coef_table(*data, alpha=0.1)
    assert_allclose(table["coef"], _by_class(mnlogit.params), rtol=1e-4)
    assert_allclose(table["std_err"], _by_class(mnlogit.bse), rtol=1e-4)
    assert_allclose(table["z"], _by_class(mnlogit.tvalues), rtol=1e-4)
    assert_allclose(table["p_value"], _by_class(mnlogit.pvalues), rtol=1e-4)
    assert_allclose(table.attrs["cov"], mnlogit.cov_params(), rtol=1e-4, atol=1e-8)
    ci = mnlogit.conf_int(alpha=0.1)  # rows (class, term), as coef_table's
    assert_allclose(table["ci_lower"], ci["lower"], rtol=1e-4)
    assert_allclose(table["ci_upper"], ci["upper"], rtol=1e-4)


def test_sandwich_matches_mnlogit_hc0(unpenalised, data):
    X, y = data
    table = unpenalised.coef_table(X, y, cov_type="sandwich")
    result = _mnlogit(unpenalised, _sm_design(unpenalised, X), y, cov_type="HC0")
    assert_allclose(table["std_err"], _by_class(result.bse), rtol=1e-4)


@pytest.mark.parametrize("term", list(TERMS))
def test_wald_test_terms_df_and_likelihood_ratio(term, unpenalised, mnlogit, data):
    X, y = data
    wald = unpenalised.wald_test_terms(X, y)
    assert wald.index.tolist() == ["intercept", "x", "g"]
    K = len(unpenalised.classes_)
    columns = TERMS[term]
    assert wald.loc[term, "df"] == len(columns) * (K - 1)
    # The Wald statistic is statsmodels' on the same parameters ...
    # (statsmodels' parameters are flattened class by class.)
    names = mnlogit.params.index.tolist()
    rows = [(k, names.index(c)) for k in range(K - 1) for c in columns]
    restriction = np.zeros((len(rows), mnlogit.params.size))
    for r, (k, j) in enumerate(rows):
        restriction[r, k * len(names) + j] = 1.0
    expected = mnlogit.wald_test(restriction, scalar=True)
    assert wald.loc[term, "chi2"] == pytest.approx(float(expected.statistic), rel=1e-4)
    # ... and its p-value close to the likelihood-ratio test's.
    design = _sm_design(unpenalised, X)
    reduced = _mnlogit(unpenalised, design.drop(columns=columns), y)
    lr = 2 * (mnlogit.llf - reduced.llf)
    log10_lr = stats.chi2.logsf(lr, len(columns) * (K - 1)) / np.log(10)
    assert log10_lr < -2  # a small p, as in the issue
    assert abs(np.log10(wald.loc[term, "p_value"]) - log10_lr) < 0.3


def test_default_alpha_standard_errors_are_those_of_the_fit(unpenalised, data):
    # The default alpha no longer decides the (all-classes) standard errors.
    X, y = data
    model = GraphGLMClassifier(**GLM_ONLY).fit(X, y)
    assert model.alpha > 0
    table, table0 = model.coef_table(X, y), unpenalised.coef_table(X, y)
    assert_allclose(table["std_err"], table0["std_err"], rtol=0.05)
    assert_allclose(table["coef"], table0["coef"], rtol=0.05, atol=1e-3)
    wald, wald0 = model.wald_test_terms(X, y), unpenalised.wald_test_terms(X, y)
    assert wald["df"].tolist() == wald0["df"].tolist() == [2, 2, 4]
    assert_allclose(np.log10(wald["p_value"]), np.log10(wald0["p_value"]), atol=0.05)


def test_penalised_covariance_is_that_of_the_differences(data):
    # The fit penalises every class: (1/n) sum d_i/2 + alpha/2 sum_k |beta_k|^2.
    # Its penalised Hessian's pseudo-inverse, mapped to the differences
    # beta_k - beta_0 (the prior's marginal), is the reported covariance.
    X, y = data
    model = GraphGLMClassifier(alpha=0.05, **GLM_ONLY).fit(X, y)
    design = torch.as_tensor(_sm_design(model, X).to_numpy())
    onehot = torch.as_tensor(np.eye(3)[np.searchsorted(model.classes_, y)])
    K, m = 3, design.shape[1]

    # The factor g (3 levels, 2 treatment columns) pays its levels' spread
    # around their mean (the base's effect is 0): sum e^2 - (sum e)^2 / 3.
    levels = [j for j, n in enumerate(_sm_design(model, X).columns) if n[:2] == "g_"]
    assert len(levels) == 2

    def objective(params):
        B = params.reshape(K, m)
        loglik = (onehot * torch.log_softmax(design @ B.T, dim=1)).sum(1).mean()
        spread = (B[:, levels].sum(1) ** 2).sum() / 3
        return -loglik + 0.5 * model.alpha * ((B[:, 1:] ** 2).sum() - spread)

    params = np.c_[model.intercept_, model.coef_]
    hessian = torch.autograd.functional.hessian(
        objective, torch.as_tensor(params.ravel())
    ).numpy()
    difference = np.kron(np.c_[-np.ones(K - 1), np.eye(K - 1)], np.eye(m))
    expected = difference @ np.linalg.pinv(len(y) * hessian) @ difference.T
    table = model.coef_table(X, y)
    assert_allclose(table["coef"], (params[1:] - params[0]).ravel(), rtol=1e-10)
    assert_allclose(table.attrs["cov"], expected, rtol=1e-6, atol=1e-10)
    # The penalty shrinks: smaller standard errors than without it.
    unpenalised = GraphGLMClassifier(alpha=0.0, **GLM_ONLY).fit(X, y)
    assert (table["std_err"] < unpenalised.coef_table(X, y)["std_err"]).all()
