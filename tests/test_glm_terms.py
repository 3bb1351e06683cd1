"""The global GLM's terms (issue #37): treatment coding of categorical columns
against a base level, ``fit_intercept=False`` and the intercept-only GLM, each
against scikit-learn or statsmodels."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import statsmodels.api as sm
from numpy.testing import assert_allclose
from sklearn.linear_model import (
    GammaRegressor,
    LogisticRegression,
    PoissonRegressor,
    Ridge,
    TweedieRegressor,
)

from autoglm_graph import GraphGLMClassifier, GraphGLMRegressor
from autoglm_graph.persistence._io import load_model, save_model

GLM_ONLY = dict(local_penalty=np.inf, device="cpu")
TOL = 1e-6


def _frame(n: int = 400, seed: int = 0):
    """Poisson counts with exposure, weights and two categorical columns."""
    rng = np.random.default_rng(seed)
    X = pd.DataFrame(
        {
            "age": rng.normal(40, 10, n),
            "region": rng.choice(
                ["north", "south", "east", "west"], n, p=[0.2, 0.4, 0.3, 0.1]
            ),
            "car": rng.choice(["small", "large"], n),
        }
    )
    effect = X["region"].map({"north": 0.0, "south": 0.3, "east": -0.2, "west": 0.5})
    exposure = rng.uniform(0.5, 2.0, n)
    eta = -1 + 0.02 * X["age"] + effect + 0.4 * (X["car"] == "large")
    y = rng.poisson(exposure * np.exp(eta)).astype(float)
    weight = rng.uniform(0.5, 1.5, n)
    return X, y, np.log(exposure), weight


def _treatment_design(X, bases):
    parts = [pd.Series(1.0, index=X.index, name="intercept"), X[["age"]]]
    for column, base in bases.items():
        dummies = pd.get_dummies(X[column], prefix=column, dtype=float)
        parts.append(dummies.drop(columns=f"{column}_{base}"))
    return pd.concat(parts, axis=1)


@pytest.mark.parametrize("base_levels", [None, {"region": "west", "car": "small"}])
def test_treatment_coding_equals_statsmodels(base_levels):
    X, y, offset, weight = _frame()
    model = GraphGLMRegressor(
        family="poisson", alpha=0.0, balance=False, base_levels=base_levels, **GLM_ONLY
    ).fit(X, y, sample_weight=weight, offset=offset)
    # Default bases: the level of largest total weight.
    expected = {
        c: pd.Series(weight).groupby(X[c].to_numpy()).sum().idxmax()
        for c in ("region", "car")
    }
    assert model.base_levels_ == {**expected, **(base_levels or {})}
    design = _treatment_design(X, model.base_levels_)
    ref = sm.GLM(
        y, design, family=sm.families.Poisson(), offset=offset, var_weights=weight
    ).fit(tol=1e-12)
    table = model.coef_table(X, y, sample_weight=weight, offset=offset)
    assert list(table.index) == list(design.columns)
    assert_allclose(table["coef"], ref.params, rtol=TOL, atol=TOL)
    assert_allclose(table["std_err"], ref.bse, rtol=TOL, atol=TOL)
    # The joint Wald test of a factor: statsmodels' wald_test_terms.
    joint = model.wald_test_terms(X, y, sample_weight=weight, offset=offset)
    levels = [c for c in design.columns if c.startswith("region_")]
    ref_test = ref.wald_test(
        np.eye(len(design.columns))[[list(design.columns).index(c) for c in levels]],
        scalar=True,
    )
    assert joint.loc["region", "df"] == len(levels)
    assert_allclose(joint.loc["region", "chi2"], ref_test.statistic, rtol=TOL)
    assert_allclose(
        joint.loc["region", "p_value"], ref_test.pvalue, rtol=1e-5, atol=1e-300
    )
    assert_allclose(joint.loc["age", "chi2"], table.loc["age", "z"] ** 2, rtol=1e-9)


def test_all_levels_keeps_every_level_and_the_network_context():
    X, y, offset, _ = _frame()
    kept = GraphGLMRegressor(
        family="poisson", categorical_coding="all_levels", **GLM_ONLY
    )
    kept.fit(X, y, offset=offset)
    assert len(kept.feature_names_out_) == kept.preprocessor_.n_features_out_
    assert kept.base_levels_ == {}
    coded = GraphGLMRegressor(family="poisson", max_epochs=2, random_state=0)
    coded.fit(X, y, offset=offset)
    assert len(coded.feature_names_out_) == coded.preprocessor_.n_features_out_ - 2
    assert len(coded.local_coef(X[:5]).columns) == len(coded.feature_names_out_) + 1


@pytest.mark.parametrize(
    ("params", "match"),
    [
        ({"base_levels": {"colour": "red"}}, r"base_levels.*\['colour'\].*categorical"),
        ({"base_levels": {"region": "mars"}}, r"base_levels.*'mars'.*'region'"),
        ({"base_levels": ["region"]}, r"base_levels.*dict"),
        (
            {"base_levels": {"region": "west"}, "categorical_coding": "all_levels"},
            r"base_levels.*treatment",
        ),
        ({"categorical_coding": "sum"}, r"categorical_coding"),
        ({"fit_intercept": "no"}, r"fit_intercept"),
        ({"fit_intercept": False, "balance": True}, r"balance.*fit_intercept=True"),
    ],
)
def test_bad_term_parameters(params, match):
    X, y, _, _ = _frame(60)
    with pytest.raises(ValueError, match=match):
        GraphGLMRegressor(family="poisson", **GLM_ONLY, **params).fit(X, y)


def _raw(n: int = 300, seed: int = 0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3)) * [1.0, 10.0, 0.1] + [1.0, 5.0, 1.0]
    return rng, X, 0.3 * X[:, 0] + 0.02 * X[:, 1] + X[:, 2] - 1.5


@pytest.mark.parametrize("alpha", [0.0, 1e-2])
@pytest.mark.parametrize("family", ["poisson", "gamma", "tweedie", "gaussian"])
def test_no_intercept_equals_sklearn(family, alpha):
    rng, X, eta = _raw()
    mu = np.exp(eta)
    y = {
        "poisson": lambda: rng.poisson(mu),
        "gamma": lambda: rng.gamma(2.0, mu / 2.0),
        "tweedie": lambda: rng.poisson(mu) * rng.gamma(2.0, 0.5, size=len(mu)),
        "gaussian": lambda: eta + rng.normal(size=len(eta)),
    }[family]().astype(float)
    model = GraphGLMRegressor(
        family=family, alpha=alpha, fit_intercept=False, **GLM_ONLY
    ).fit(X, y)
    kwargs = dict(fit_intercept=False, tol=1e-14, max_iter=10_000)
    if family == "gaussian":
        ref = Ridge(alpha=alpha * len(y), fit_intercept=False, tol=1e-14)
    elif family == "tweedie":
        ref = TweedieRegressor(power=1.5, link="log", alpha=alpha, **kwargs)
    else:
        cls = {"poisson": PoissonRegressor, "gamma": GammaRegressor}[family]
        ref = cls(alpha=alpha, solver="newton-cholesky", **kwargs)
    ref.fit(X, y)
    assert_allclose(model.coef_, ref.coef_, rtol=TOL, atol=1e-9)
    assert model.intercept_ == 0.0
    assert_allclose(model.predict(X), ref.predict(X), rtol=TOL)
    assert "intercept" not in model.coef_table(X, y).index


def test_no_intercept_classifier_equals_logistic_regression():
    rng, X, eta = _raw()
    y = rng.random(len(eta)) < 1 / (1 + np.exp(-eta))
    alpha = 1e-2
    model = GraphGLMClassifier(alpha=alpha, fit_intercept=False, **GLM_ONLY).fit(X, y)
    ref = LogisticRegression(
        C=1 / (len(y) * alpha),
        fit_intercept=False,
        tol=1e-14,
        max_iter=10_000,
        solver="newton-cholesky",
    ).fit(X, y)
    assert_allclose(model.coef_, ref.coef_, rtol=1e-5, atol=1e-9)
    assert_allclose(model.predict_proba(X), ref.predict_proba(X), rtol=TOL)


def test_no_intercept_network_varies_the_slopes_only(tmp_path):
    rng, X, eta = _raw(600)
    y = rng.poisson(np.exp(eta * (1 + 0.5 * (X[:, 0] > 1)))).astype(float)
    model = GraphGLMRegressor(
        family="poisson",
        fit_intercept=False,
        max_epochs=3,
        random_state=0,
        fit_policy=None,
    ).fit(X, y)
    local = model.local_coef(X[:20])
    assert list(local.columns) == ["x0", "x1", "x2"]
    eta_rows = np.sum(local.to_numpy() * X[:20], axis=1)
    assert_allclose(np.log(model.predict(X[:20])), eta_rows, rtol=1e-5, atol=1e-6)
    same = load_model(save_model(model, tmp_path / "m.zip"))
    assert same.fit_intercept is False
    assert_allclose(same.predict(X[:20]), model.predict(X[:20]), rtol=1e-12)


@pytest.mark.parametrize(
    "X",
    [
        np.empty((50, 0)),
        pd.DataFrame(index=range(50)),
        pd.DataFrame({"c": [1.0] * 50, "d": ["q"] * 50}),
    ],
    ids=["array", "empty_frame", "constant_columns"],
)
def test_intercept_only_equals_statsmodels(X, tmp_path):
    rng = np.random.default_rng(0)
    y = rng.poisson(2.0, 50).astype(float)
    weight = rng.uniform(0.5, 2.0, 50)
    offset = rng.normal(0, 0.1, 50)
    model = GraphGLMRegressor(family="poisson", alpha=0.0, balance=False)
    model.fit(X, y, sample_weight=weight, offset=offset)
    ref = sm.GLM(
        y,
        np.ones((50, 1)),
        family=sm.families.Poisson(),
        offset=offset,
        var_weights=weight,
    ).fit(tol=1e-12)
    assert "intercept-only" in model.global_only_reason_
    assert model.is_global_only_
    assert_allclose(model.intercept_, ref.params[0], rtol=TOL)
    table = model.coef_table(X, y, sample_weight=weight, offset=offset)
    assert_allclose(table.loc["intercept", "std_err"], ref.bse[0], rtol=TOL)
    assert_allclose(
        model.predict(X[:3], offset=offset[:3]), ref.predict(offset=offset)[:3]
    )
    assert list(model.local_coef(X[:3]).columns) == ["intercept"]
    same = load_model(save_model(model, tmp_path / "m.zip"))
    assert_allclose(same.predict(X), model.predict(X), rtol=1e-12)


def test_no_intercept_without_columns_is_an_error():
    with pytest.raises(ValueError, match=r"fit_intercept.*no term"):
        GraphGLMRegressor(fit_intercept=False).fit(np.empty((20, 0)), np.arange(20.0))


def test_zero_samples_still_raise():
    with pytest.raises(ValueError, match="0 sample"):
        GraphGLMRegressor().fit(np.empty((0, 0)), [])


def test_save_load_keeps_base_levels(tmp_path):
    X, y, offset, _ = _frame()
    model = GraphGLMRegressor(
        family="poisson", base_levels={"region": "east"}, max_epochs=2, random_state=0
    ).fit(X, y, offset=offset)
    same = load_model(save_model(model, tmp_path / "m.zip"))
    assert same.base_levels == {"region": "east"}
    assert same.base_levels_ == model.base_levels_
    assert list(same.feature_names_out_) == list(model.feature_names_out_)
    assert_allclose(same.predict(X, offset=offset), model.predict(X, offset=offset))
    assert_allclose(same.local_coef(X[:5]), model.local_coef(X[:5]))
