"""Coefficient table (against statsmodels) and the summary of local coefficients."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
import statsmodels.api as sm
import torch
from numpy.testing import assert_allclose
from sklearn.exceptions import NotFittedError

from autoglm_graph import GraphGLMClassifier, GraphGLMRegressor
from autoglm_graph.datasets import make_varying_coefficients
from autoglm_graph.glm._inference import coef_table, local_coef_summary

GLM_ONLY = dict(local_penalty=np.inf, device="cpu")
# The exact GLM: no balance shift of the intercept (the regressor's default).
GLM_ONLY_REG = {**GLM_ONLY, "balance": False}
LINKS = sm.families.links
SM_FAMILIES = {
    "gaussian": lambda: sm.families.Gaussian(),
    "poisson": lambda: sm.families.Poisson(),
    "gamma": lambda: sm.families.Gamma(LINKS.Log()),
    "binomial": lambda: sm.families.Binomial(),
    "tweedie": lambda: sm.families.Tweedie(var_power=1.5, link=LINKS.Log()),
    "negative_binomial": lambda: sm.families.NegativeBinomial(alpha=0.5),
}


def _data(family: str, n: int = 300, seed: int = 0):
    """Numeric X with unequal means and scales, and y from a known GLM."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3)) * [1.0, 2.0, 0.5] + [0.0, 1.0, 3.0]
    eta = 0.2 + X @ [0.3, -0.2, 0.1]
    mu = np.exp(eta)
    y = {
        "gaussian": lambda: eta + rng.normal(size=n),
        "poisson": lambda: rng.poisson(mu),
        "gamma": lambda: rng.gamma(2.0, mu / 2.0),
        "binomial": lambda: (rng.random(n) < 1 / (1 + np.exp(-eta))).astype(int),
        "tweedie": lambda: rng.poisson(mu) * rng.gamma(2.0, 0.5, size=n),
        "negative_binomial": lambda: rng.negative_binomial(2, 2 / (2 + mu)),
    }[family]()
    return X, y


def _fit_glm(family: str, X, y, **kwargs):
    if family == "binomial":
        return GraphGLMClassifier(**GLM_ONLY, **kwargs).fit(X, y)
    return GraphGLMRegressor(
        family=family, power=1.5, theta=0.5, **GLM_ONLY_REG, **kwargs
    ).fit(X, y)


def _user_design(model, X):
    """The design in the user's units (those of coef_ and coef_table)."""
    shift, scale = model.preprocessor_.design_scaling()
    return model.preprocessor_.transform(X, dtype=np.float64) * scale + shift


def _design(model, X):
    return sm.add_constant(_user_design(model, X), has_constant="add")


def _compare(table, result, alpha=0.05):
    assert_allclose(table["coef"], result.params, rtol=1e-3)
    assert_allclose(table["std_err"], result.bse, rtol=1e-3)
    assert_allclose(table["z"], result.tvalues, rtol=1e-3)
    assert_allclose(table["p_value"], result.pvalues, rtol=1e-3, atol=1e-10)
    ci = result.conf_int(alpha=alpha)
    assert_allclose(table["ci_lower"], ci[:, 0], rtol=1e-3, atol=1e-8)
    assert_allclose(table["ci_upper"], ci[:, 1], rtol=1e-3, atol=1e-8)


@pytest.mark.parametrize("cov_type", ["fisher", "sandwich"])
@pytest.mark.parametrize("family", ["gaussian", "poisson", "binomial", "gamma"])
def test_matches_statsmodels(family, cov_type):
    X, y = _data(family)
    model = _fit_glm(family, X, y, alpha=0.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # training data: no warning
        table = model.coef_table(X, y, cov_type=cov_type, alpha=0.1)
    sm_cov = "nonrobust" if cov_type == "fisher" else "HC0"
    result = sm.GLM(y, _design(model, X), family=SM_FAMILIES[family]()).fit(
        cov_type=sm_cov, tol=1e-12
    )
    _compare(table, result, alpha=0.1)
    assert table.index.tolist() == ["intercept", "x0", "x1", "x2"]
    if cov_type == "fisher":
        assert table.attrs["dispersion"] == pytest.approx(result.scale, rel=1e-6)


@pytest.mark.parametrize("family", ["tweedie", "negative_binomial"])
def test_dispersion_of_other_families(family):
    X, y = _data(family)
    model = _fit_glm(family, X, y, alpha=0.0)
    result = sm.GLM(y, _design(model, X), family=SM_FAMILIES[family]()).fit(tol=1e-12)
    _compare(model.coef_table(X, y), result)
    expected = 1.0 if family == "negative_binomial" else result.scale
    assert model.coef_table(X, y).attrs["dispersion"] == pytest.approx(expected)


@pytest.mark.parametrize("cov_type", ["fisher", "sandwich"])
def test_weights_and_offset_match_statsmodels(cov_type):
    X, y = _data("poisson")
    rng = np.random.default_rng(5)
    weight, offset = rng.uniform(0.5, 2.0, len(y)), rng.normal(0, 0.3, len(y))
    model = GraphGLMRegressor(family="poisson", alpha=0.0, **GLM_ONLY_REG)
    model.fit(X, y, sample_weight=weight, offset=offset)
    table = model.coef_table(X, y, weight, offset, cov_type=cov_type)
    result = sm.GLM(
        y,
        _design(model, X),
        family=sm.families.Poisson(),
        offset=offset,
        var_weights=weight,
    ).fit(cov_type="nonrobust" if cov_type == "fisher" else "HC0", tol=1e-12)
    _compare(table, result)


def test_penalised_standard_errors_use_the_penalised_hessian():
    # The objective is (1/n) sum d_i/2 + alpha/2 ||beta||^2: its Hessian from
    # autograd, times n, is the inverse covariance (poisson: dispersion 1).
    X, y = _data("poisson")
    model = GraphGLMRegressor(family="poisson", alpha=0.05, **GLM_ONLY_REG).fit(X, y)
    design = torch.as_tensor(_user_design(model, X))
    yt = torch.as_tensor(y, dtype=torch.float64)

    def objective(params):
        eta = params[0] + design @ params[1:]
        penalty = 0.5 * model.alpha * (params[1:] ** 2).sum()
        return 0.5 * model.family_.unit_deviance(yt, eta).mean() + penalty

    params = torch.as_tensor(np.r_[model.intercept_, model.coef_])
    hessian = torch.autograd.functional.hessian(objective, params).numpy()
    expected = np.sqrt(np.diag(np.linalg.inv(len(y) * hessian)))
    assert_allclose(model.coef_table(X, y)["std_err"], expected, rtol=1e-6)
    unpenalised = GraphGLMRegressor(family="poisson", alpha=0.0, **GLM_ONLY_REG).fit(
        X, y
    )
    table0 = unpenalised.coef_table(X, y)
    assert (model.coef_table(X, y)["std_err"][1:] < table0["std_err"][1:]).all()


def test_multinomial_reference_class_matches_mnlogit():
    X, _ = _data("gaussian", n=400)
    rng = np.random.default_rng(2)
    eta = np.column_stack(
        [np.zeros(len(X)), X @ [0.5, -0.3, 0.2], X @ [-0.4, 0.1, 0.3]]
    )
    p = np.exp(eta) / np.exp(eta).sum(axis=1, keepdims=True)
    codes = np.array([rng.choice(3, p=row) for row in p])
    labels = np.array(["ant", "bee", "cat"])[codes]
    model = GraphGLMClassifier(alpha=0.0, **GLM_ONLY).fit(X, labels)
    table = model.coef_table(X, labels)
    # "ant", the first class, is the reference: rows for the other two only.
    assert table.index.names == ["class", "term"]
    assert table.index.get_level_values("class").unique().tolist() == ["bee", "cat"]
    assert table.attrs["reference_class"] == "ant"
    result = sm.MNLogit(codes, _design(model, X)).fit(disp=0, method="newton")
    assert_allclose(table["coef"], result.params.T.ravel(), rtol=1e-3, atol=1e-6)
    assert_allclose(table["std_err"], result.bse.T.ravel(), rtol=1e-3)
    assert_allclose(table.attrs["cov"], result.cov_params(), rtol=1e-3, atol=1e-8)


def test_default_penalty_on_a_collinear_design(mixed_frame, mixed_target):
    # All one-hot levels plus an intercept: identified only through the penalty.
    model = GraphGLMRegressor(family="gamma", **GLM_ONLY_REG).fit(
        mixed_frame, mixed_target
    )
    for cov_type in ("fisher", "sandwich"):
        table = model.coef_table(mixed_frame, mixed_target, cov_type=cov_type)
        assert np.isfinite(table.to_numpy()).all()
        assert table.index.tolist() == ["intercept", *model.feature_names_out_]
        assert_allclose(table["coef"].iloc[1:], model.coef_)
        assert (table["ci_lower"] < table["coef"]).all()
        assert (table["coef"] < table["ci_upper"]).all()


@pytest.mark.parametrize("alpha", [1e-8, 0.0])  # penalty in the user's units
def test_fisher_table_where_probabilities_reach_0_or_1(alpha):
    # Breast cancer is (nearly) separable: fitted probabilities round to
    # exactly 0 or 1, where (dmu/deta)^2 / V(mu) is 0/0 (issue #16).
    from scipy.special import expit
    from sklearn.datasets import load_breast_cancer

    X, y = load_breast_cancer(return_X_y=True, as_frame=True)
    model = GraphGLMClassifier(alpha=alpha, **GLM_ONLY).fit(X, y)
    design = _design(model, X)
    eta = design @ np.r_[model.intercept_, model.coef_.ravel()]
    assert expit(eta).max() == 1.0  # the case of the issue
    for cov_type in ("fisher", "sandwich"):
        table = model.coef_table(X, y, cov_type=cov_type)
        # (z may be inf: with no penalty the sandwich's scores are all ~0.)
        assert np.isfinite(table.drop(columns=["z", "p_value"]).to_numpy()).all()
    assert (model.coef_table(X, y)["std_err"] > 0).all()
    if alpha > 0:
        # Logit is canonical: the Fisher information is X' diag(p (1 - p)) X,
        # here in a form that is 0 (not 0/0) where p rounds to 0 or 1.
        weight = expit(eta) * expit(-eta)
        hessian = design.T @ (design * weight[:, None])
        hessian += np.diag(np.r_[0.0, np.full(design.shape[1] - 1, alpha * len(y))])
        cov = model.coef_table(X, y).attrs["cov"]
        # (pinv of the raw-unit Hessian, condition ~1e12 here, loses digits.)
        assert_allclose(cov, np.linalg.pinv(hessian), rtol=1e-5, atol=1e-12)


def test_coef_table_errors():
    X, y = _data("poisson")
    with pytest.raises(NotFittedError):
        GraphGLMRegressor().coef_table(X, y)
    model = _fit_glm("poisson", X, y)
    with pytest.raises(ValueError, match="'cov_type' parameter"):
        model.coef_table(X, y, cov_type="HC3")
    with pytest.raises(ValueError, match="'alpha' parameter"):
        model.coef_table(X, y, alpha=1.5)
    with pytest.warns(UserWarning, match="not stationary"):
        model.coef_table(X, y[::-1])
    X, y = _data("binomial")
    classifier = _fit_glm("binomial", X, y)
    with pytest.raises(ValueError, match="labels not seen in fit"):
        classifier.coef_table(X, np.where(y == 1, 1, 7))


# ------------------------------------------------------------ local summary
@pytest.fixture(scope="module")
def network_model():
    X, y, _ = make_varying_coefficients(
        600, 3, n_groups=3, family="gaussian", random_state=0
    )
    model = GraphGLMRegressor(
        max_epochs=10, hidden_channels=16, heads=2, device="cpu", random_state=0
    )
    return model.fit(X, y), X


def test_local_coef_summary(network_model):
    model, X = network_model
    summary = model.local_coef_summary(X[:300])
    local = model.local_coef(X[:300])
    assert summary.index.tolist() == local.columns.tolist()
    assert summary.columns.tolist() == [
        "global",
        "mean",
        "sd",
        "q05",
        "q25",
        "q50",
        "q75",
        "q95",
        "opposite_sign_share",
    ]
    assert_allclose(summary["global"], np.r_[model.intercept_, model.coef_])
    assert_allclose(summary["mean"], local.mean())
    assert_allclose(summary["sd"], local.std())
    assert_allclose(summary["q25"], local.quantile(0.25))
    assert_allclose(summary["q95"], local.quantile(0.95))
    opposite = (np.sign(local) == -np.sign(summary["global"])) & (local != 0)
    assert_allclose(summary["opposite_sign_share"], opposite.mean())
    if not model.is_global_only_:
        assert (summary["sd"] > 0).all()
    assert (summary["q05"] <= summary["q50"]).all()
    assert (summary["q50"] <= summary["q95"]).all()


def test_local_coef_summary_of_the_global_glm():
    X, y = _data("poisson")
    model = _fit_glm("poisson", X, y)
    summary = local_coef_summary(model, X)
    assert (summary["sd"] == 0).all()
    assert (summary["opposite_sign_share"] == 0).all()
    for column in ("mean", "q05", "q50", "q95"):
        assert_allclose(summary[column], summary["global"])
    one_row = model.local_coef_summary(X[:1])
    assert (one_row["sd"] == 0).all()


def test_local_coef_summary_multinomial():
    X, y = _data("gaussian")
    labels = np.array(["a", "b", "c"])[np.digitize(y, np.quantile(y, [1 / 3, 2 / 3]))]
    model = GraphGLMClassifier(**GLM_ONLY).fit(X, labels)
    summary = model.local_coef_summary(X)
    assert summary.index.names == ["class", "term"]
    assert len(summary) == 3 * 4
    assert_allclose(summary["global"], np.c_[model.intercept_, model.coef_].ravel())


def test_function_and_method_agree():
    X, y = _data("gamma")
    model = _fit_glm("gamma", X, y)
    pd.testing.assert_frame_equal(coef_table(model, X, y), model.coef_table(X, y))


@pytest.mark.parametrize("cov_type", ["fisher", "sandwich"])
@pytest.mark.parametrize("family", ["gamma", "poisson"])
def test_frequency_weights_match_statsmodels_freq_weights(family, cov_type):
    X, y = _data(family)
    weight = np.random.default_rng(4).integers(1, 5, len(y)).astype(float)
    model = _fit_glm(family, X, y, alpha=0.0)
    model.fit(X, y, sample_weight=weight)
    table = model.coef_table(X, y, weight, cov_type=cov_type, weights="frequency")
    result = sm.GLM(
        y, _design(model, X), family=SM_FAMILIES[family](), freq_weights=weight
    ).fit(cov_type="nonrobust" if cov_type == "fisher" else "HC0", tol=1e-12)
    _compare(table, result)
    # The same as the repeated rows, with no weights.
    rows = np.repeat(np.arange(len(y)), weight.astype(int))
    repeated = _fit_glm(family, X[rows], y[rows], alpha=0.0)
    expected = repeated.coef_table(X[rows], y[rows], cov_type=cov_type)
    assert_allclose(table["std_err"], expected["std_err"], rtol=1e-6)
    with pytest.raises(ValueError, match="'weights' parameter must be one of"):
        model.coef_table(X, y, weight, weights="analytic")
