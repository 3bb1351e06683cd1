"""The global GLM is scikit-learn's GLM: same objective on the user's X, exactly.

``local_penalty=inf`` leaves the global GLM, fitted in float64 by Newton's
method to a gradient tolerance, with the L2 penalty on the coefficients in the
user's units (issue #14).
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
from numpy.testing import assert_allclose
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import (
    GammaRegressor,
    LogisticRegression,
    PoissonRegressor,
    Ridge,
    TweedieRegressor,
)
from sklearn.utils.estimator_checks import (
    check_sample_weight_equivalence_on_dense_data,
)

from autoglm_graph import GraphGLMClassifier, GraphGLMRegressor
from autoglm_graph.glm._solver import fit_global_glm
from autoglm_graph.glm.families import get_family

GLM_ONLY = dict(local_penalty=np.inf, device="cpu")
# The exact GLM: no balance shift of the intercept (the regressor's default).
GLM_ONLY_REG = {**GLM_ONLY, "balance": False}
ALPHAS = [0.0, 1e-4, 1.0]
RTOL = 1e-6


def _raw(n: int = 300, seed: int = 0):
    """Unstandardised numeric X: scales from 0.1 to 100, means far from 0."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 4)) * [1.0, 10.0, 0.1, 100.0] + [0.0, 5.0, 1.0, -50.0]
    eta = 0.3 * X[:, 0] + 0.02 * X[:, 1] + X[:, 2] + 0.001 * X[:, 3]
    return rng, X, eta


def _close(actual, desired, rtol=RTOL):
    # Relative, with a floor at 1e-3 for coefficients near 0.
    actual, desired = np.asarray(actual, float), np.asarray(desired, float)
    assert_allclose(actual, desired, rtol=rtol, atol=rtol * 1e-3)


def _sklearn_regressor(family: str, alpha: float, n: int):
    if family == "gaussian":
        # Ridge minimises ||y - Xb||^2 + a ||b||^2: a = alpha * n.
        return Ridge(alpha=alpha * n, tol=1e-14)
    kwargs = dict(alpha=alpha, tol=1e-14, max_iter=10_000, solver="newton-cholesky")
    if family == "tweedie":
        return TweedieRegressor(power=1.5, link="log", **kwargs)
    return {"poisson": PoissonRegressor, "gamma": GammaRegressor}[family](**kwargs)


@pytest.mark.parametrize("alpha", ALPHAS)
@pytest.mark.parametrize("family", ["poisson", "gamma", "tweedie", "gaussian"])
def test_equals_sklearn_regressors_on_raw_x(family, alpha):
    rng, X, eta = _raw()
    mu = np.exp(eta)
    y = {
        "poisson": lambda: rng.poisson(mu),
        "gamma": lambda: rng.gamma(2.0, mu / 2.0),
        "tweedie": lambda: rng.poisson(mu) * rng.gamma(2.0, 0.5, size=len(mu)),
        "gaussian": lambda: eta + rng.normal(size=len(eta)),
    }[family]().astype(float)
    model = GraphGLMRegressor(family=family, power=1.5, alpha=alpha, **GLM_ONLY_REG)
    model.fit(X, y)
    ref = _sklearn_regressor(family, alpha, len(y)).fit(X, y)
    _close(model.coef_, ref.coef_)
    _close(model.intercept_, ref.intercept_)
    _close(model.predict(X), ref.predict(X))
    assert model.global_glm_.converged


@pytest.mark.parametrize("alpha", ALPHAS)
def test_equals_logistic_regression_on_raw_x(alpha):
    rng, X, eta = _raw()
    y = rng.random(len(eta)) < 1 / (1 + np.exp(-(eta - eta.mean())))
    model = GraphGLMClassifier(alpha=alpha, **GLM_ONLY).fit(X, y)
    # LogisticRegression: C * sum_i loss_i + ||b||^2 / 2, so C = 1 / (n alpha).
    C = np.inf if alpha == 0 else 1 / (len(y) * alpha)
    ref = LogisticRegression(C=C, tol=1e-14, max_iter=10_000, solver="newton-cholesky")
    ref.fit(X, y)
    _close(model.coef_, ref.coef_, rtol=1e-5)  # sklearn's own tolerance
    _close(model.intercept_, ref.intercept_, rtol=1e-5)
    _close(model.predict_proba(X), ref.predict_proba(X))


def test_penalty_is_on_the_users_units():
    # Rescaling a column by 10 divides its coefficient by 10 only when the
    # penalty is on the standardised design; with sklearn's objective the
    # penalty itself changes, and the fit equals PoissonRegressor on each X.
    rng, X, eta = _raw()
    y = rng.poisson(np.exp(eta)).astype(float)
    for scale in (1.0, 10.0):
        Xs = X * [1.0, scale, 1.0, 1.0]
        model = GraphGLMRegressor(family="poisson", alpha=1.0, **GLM_ONLY_REG).fit(
            Xs, y
        )
        ref = PoissonRegressor(alpha=1.0, tol=1e-14, solver="newton-cholesky")
        _close(model.coef_, ref.fit(Xs, y).coef_)


def test_coef_in_users_units_with_categorical_and_local_coef(mixed_frame):
    # With every level kept (categorical_coding="all_levels") each is the
    # shift for its level; numeric columns are per unit of the user's column.
    rng = np.random.default_rng(3)
    frame = mixed_frame.copy()
    numeric = frame.select_dtypes("number").columns
    frame[numeric] = frame[numeric].fillna(frame[numeric].median())
    model = GraphGLMRegressor(
        family="gaussian", alpha=1e-3, categorical_coding="all_levels", **GLM_ONLY_REG
    )
    y = rng.normal(size=len(frame))
    model.fit(frame, y)
    shift, scale = model.preprocessor_.design_scaling()
    user = model.preprocessor_.transform(frame, dtype=np.float64) * scale + shift
    assert_allclose(user @ model.coef_ + model.intercept_, model.predict(frame))
    names = list(model.feature_names_out_)
    for col in (c for c in numeric if c in names):  # constants are dropped
        assert_allclose(user[:, names.index(col)], frame[col])
    local = model.local_coef(frame)
    assert_allclose(local.iloc[0, 1:], model.coef_, rtol=1e-12)
    assert_allclose(local["intercept"], model.intercept_, rtol=1e-12)


@pytest.mark.parametrize("alpha", [1e-4, 1.0])
@pytest.mark.parametrize(
    "make",
    [
        lambda a: GraphGLMRegressor(family="gaussian", alpha=a, **GLM_ONLY_REG),
        lambda a: GraphGLMRegressor(family="poisson", alpha=a, **GLM_ONLY_REG),
        lambda a: GraphGLMClassifier(alpha=a, **GLM_ONLY),
    ],
    ids=["gaussian", "poisson", "classifier"],
)
def test_sample_weight_equivalence(make, alpha):
    # scikit-learn's check: weight 0 == dropped row, weight 2 == repeated row.
    # (It has 30 features and 15 rows, so alpha=0 is not identified.)
    estimator = make(alpha)
    check_sample_weight_equivalence_on_dense_data(type(estimator).__name__, estimator)


@pytest.mark.parametrize("family", ["poisson", "gamma"])
def test_weights_equal_repeats_at_alpha_1(family):
    rng, X, eta = _raw(n=120)
    mu = np.exp(eta)
    y = rng.poisson(mu) + 1.0 if family == "gamma" else rng.poisson(mu) * 1.0
    w = rng.integers(0, 4, size=len(y))
    weighted = GraphGLMRegressor(family=family, alpha=1.0, **GLM_ONLY_REG)
    weighted.fit(X, y, sample_weight=w)
    repeated = GraphGLMRegressor(family=family, alpha=1.0, **GLM_ONLY_REG)
    repeated.fit(np.repeat(X, w, axis=0), np.repeat(y, w))
    _close(weighted.coef_, repeated.coef_, rtol=1e-8)
    _close(weighted.intercept_, repeated.intercept_, rtol=1e-8)


def test_precision_far_beyond_float32():
    # An ill-conditioned gaussian fit (Longley-like collinearity): float64
    # Newton reaches the least-squares solution to ~1e-10.
    rng = np.random.default_rng(0)
    t = np.arange(40.0)
    X = np.column_stack([t, t + rng.normal(0, 0.01, 40), np.sqrt(t + 1) * 1000])
    y = X @ [2.0, -1.0, 0.003] + rng.normal(size=40)
    model = GraphGLMRegressor(alpha=0.0, **GLM_ONLY_REG).fit(X, y)
    X1 = np.column_stack([np.ones(40), X])
    exact = np.linalg.lstsq(X1, y, rcond=None)[0]
    _close(np.r_[model.intercept_, model.coef_], exact, rtol=1e-8)


def test_separation_warns():
    X = np.r_[np.linspace(-2, -0.1, 20), np.linspace(0.1, 2, 20)][:, None]
    y = (X[:, 0] > 0).astype(int)
    with pytest.warns(ConvergenceWarning, match="separation"):
        GraphGLMClassifier(alpha=0.0, **GLM_ONLY).fit(X, y)


def test_quasi_complete_separation_warns():
    # Both classes only at x = 0: the slope still diverges.
    x = np.r_[np.linspace(-2, -0.1, 20), np.zeros(4), np.linspace(0.1, 2, 20)]
    y = np.r_[np.zeros(20), [0, 1, 0, 1], np.ones(20)].astype(int)
    with pytest.warns(ConvergenceWarning, match="Quasi-complete separation"):
        GraphGLMClassifier(alpha=0.0, **GLM_ONLY).fit(x[:, None], y)


def test_multinomial_separation_warns():
    X = np.repeat([[0.0], [1.0], [2.0]], 10, axis=0)
    y = np.repeat(["a", "b", "c"], 10)
    with pytest.warns(ConvergenceWarning, match="separation"):
        GraphGLMClassifier(alpha=0.0, **GLM_ONLY).fit(X, y)


@pytest.mark.parametrize("family", ["gaussian", "poisson", "gamma", "binomial"])
def test_no_warning_on_well_posed_data(family):
    rng, X, eta = _raw()
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        if family == "binomial":
            y = rng.random(len(eta)) < 1 / (1 + np.exp(-(eta - eta.mean())))
            GraphGLMClassifier(alpha=0.0, **GLM_ONLY).fit(X, y)
        else:
            y = {
                "gaussian": eta + rng.normal(size=len(eta)),
                "poisson": rng.poisson(np.exp(eta)) * 1.0,
                "gamma": rng.gamma(2.0, np.exp(eta) / 2.0),
            }[family]
            GraphGLMRegressor(family=family, alpha=0.0, **GLM_ONLY_REG).fit(X, y)


def test_solver_stopping_early_warns():
    rng, X, eta = _raw()
    y = rng.poisson(np.exp(eta)) * 1.0
    Xs = (X - X.mean(0)) / X.std(0)
    with pytest.warns(ConvergenceWarning, match="did not converge in 1 iter"):
        glm = fit_global_glm(Xs, y, get_family("poisson"), max_iter=1)
    assert not glm.converged


def test_float64_transform_matches_float32(mixed_frame):
    model = GraphGLMRegressor(family="gaussian", **GLM_ONLY_REG)
    model.fit(mixed_frame, np.arange(len(mixed_frame), dtype=float))
    d64 = model.preprocessor_.transform(mixed_frame, dtype=np.float64)
    d32 = model.preprocessor_.transform(mixed_frame)
    assert d64.dtype == np.float64 and d32.dtype == np.float32
    assert_allclose(d32, d64, rtol=1e-6, atol=1e-6)
    assert isinstance(mixed_frame, pd.DataFrame)


def test_binomial_proportions_with_trials_equal_bernoulli_rows():
    rng, X, eta = _raw(n=60)
    trials = rng.integers(1, 6, size=len(eta))
    successes = rng.binomial(trials, 1 / (1 + np.exp(-(eta - eta.mean()))))
    model = GraphGLMRegressor(family="binomial", alpha=1e-3, **GLM_ONLY_REG)
    model.fit(X, successes / trials, sample_weight=trials)
    rows = np.repeat(np.arange(len(X)), trials)
    pairs = zip(successes, trials, strict=True)
    labels = np.concatenate([np.r_[np.ones(s), np.zeros(t - s)] for s, t in pairs])
    bernoulli = GraphGLMClassifier(alpha=1e-3, **GLM_ONLY).fit(X[rows], labels)
    _close(model.coef_, bernoulli.coef_[0], rtol=1e-8)
    _close(model.intercept_, bernoulli.intercept_[0], rtol=1e-8)


def test_multinomial_regressor_is_refused():
    with pytest.raises(ValueError, match=r"multinomial.*GraphGLMClassifier"):
        GraphGLMRegressor(family="multinomial").fit(np.eye(3), [0.0, 1.0, 2.0])


def test_wide_design_uses_lbfgs_and_still_matches_sklearn():
    rng = np.random.default_rng(7)
    n, p = 1500, 400 + 20  # above fit_global_glm's newton_max_params
    X = rng.normal(size=(n, p)) * rng.uniform(0.5, 3.0, size=p)
    y = rng.poisson(np.exp(X[:, :5] @ [0.2, -0.1, 0.1, 0.05, -0.2])) * 1.0
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        model = GraphGLMRegressor(family="poisson", alpha=1e-2, **GLM_ONLY_REG).fit(
            X, y
        )
    ref = PoissonRegressor(alpha=1e-2, tol=1e-14, solver="newton-cholesky").fit(X, y)
    assert_allclose(model.coef_, ref.coef_, rtol=1e-5, atol=1e-8)
    _close(model.predict(X), ref.predict(X), rtol=1e-6)
