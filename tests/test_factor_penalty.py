"""The default penalty on a categorical column: one GLM whatever its coding.

The penalty of a treatment-coded column is on its levels' spread around their
mean, so the DataFrame route (base: the heaviest level), the formula route
(base: the first level), ``categorical_coding="all_levels"`` and
scikit-learn's ridge GLM on every level's indicator fit the same GLM at any
``alpha``; and the default ``alpha`` is small enough that coefficients and
standard errors are statsmodels' unpenalised ones to a documented bound.
"""

import numpy as np
import pandas as pd
import pytest
from sklearn.linear_model import PoissonRegressor
from sklearn.preprocessing import OneHotEncoder

from autoglm_graph import GraphGLMClassifier, GraphGLMRegressor
from autoglm_graph.glm import fit_global_glm
from autoglm_graph.glm.families import get_family

FORMULA = "y ~ x + C(state)"


def _rare_level_counts(seed=0, n=5000):
    """A Poisson count on a numeric column and a 40-level factor, 10 of its
    levels on under 1 % of the rows (the case where a ridge on treatment
    contrasts moved the fit by several per cent)."""
    rng = np.random.default_rng(seed)
    levels = [f"s{i:02d}" for i in range(40)]
    share = np.r_[np.full(30, 0.9 / 30), np.full(10, 0.08 / 10)]
    state = rng.choice(levels, size=n, p=share / share.sum())
    effect = dict(zip(levels, rng.normal(0.0, 0.5, 40), strict=True))
    x = rng.normal(size=n)
    mu = np.exp(-1.0 + 0.3 * x + np.array([effect[s] for s in state]))
    X = pd.DataFrame({"x": x, "state": pd.Categorical(state)})
    return X, rng.poisson(mu).astype(float)


def _glm(**params):
    return GraphGLMRegressor(family="poisson", local_penalty=np.inf, **params)


def _max_relative(a, b):
    return float(np.max(np.abs(np.asarray(a) / np.asarray(b) - 1.0)))


@pytest.mark.parametrize("alpha", [1e-6, 1e-3])
def test_every_coding_of_a_factor_fits_the_same_glm(alpha):
    X, y = _rare_level_counts()
    frame = _glm(alpha=alpha).fit(X, y).predict(X)
    data = X.assign(y=y)
    formula = _glm(alpha=alpha, formula=FORMULA).fit(data).predict(data)
    all_levels = _glm(alpha=alpha, categorical_coding="all_levels").fit(X, y)
    other_base = _glm(alpha=alpha, base_levels={"state": "s35"}).fit(X, y)
    assert _max_relative(formula, frame) < 1e-8
    assert _max_relative(all_levels.predict(X), frame) < 1e-8
    assert _max_relative(other_base.predict(X), frame) < 1e-8


def test_the_penalty_is_scikit_learns_ridge_on_every_level():
    X, y = _rare_level_counts(seed=1, n=3000)
    alpha = 1e-3  # large enough that a different penalty would show
    onehot = OneHotEncoder(sparse_output=False).fit_transform(X[["state"]])
    design = np.column_stack([X["x"].to_numpy(), onehot])
    reference = PoissonRegressor(alpha=alpha, solver="newton-cholesky", tol=1e-12)
    expected = reference.fit(design, y).predict(design)
    fitted = _glm(alpha=alpha).fit(X, y)
    assert _max_relative(fitted.predict(X), expected) < 1e-6
    # The slope of the numeric column is penalised in its own units.
    assert fitted.coef_[list(fitted.feature_names_out_).index("x")] == pytest.approx(
        reference.coef_[0], rel=1e-6
    )


def test_the_default_penalty_leaves_statsmodels_glm_to_its_documented_bound():
    sm = pytest.importorskip("statsmodels.api")
    smf = pytest.importorskip("statsmodels.formula.api")
    X, y = _rare_level_counts()
    data = X.assign(y=y)
    reference = smf.glm(FORMULA, data=data, family=sm.families.Poisson()).fit()
    model = _glm(formula=FORMULA).fit(data)
    assert model.alpha == 1e-6
    table = model.coef_table(data, y)
    names = {"Intercept": "intercept"}
    coef = reference.params.rename(names)[table.index]
    se = reference.bse.rename(names)[table.index]
    # The docstring's bound: the coefficients move by at most about alpha *
    # sum(w) * max_j |u_j| se_j of their standard errors (u_j a level's
    # deviation from its column's mean): here under 0.01 standard errors, and
    # the standard errors by under 0.1 %.
    coef, se = coef.to_numpy(), se.to_numpy()
    levels = np.array([n.startswith("C(") for n in table.index])
    u = np.abs(coef - np.r_[coef[levels], 0.0].mean())  # the base's effect is 0
    bound = 1e-6 * len(y) * u * se
    shift = np.abs(table["coef"].to_numpy() - coef) / se
    assert shift.max() <= 2 * bound[levels].max()
    assert shift.max() < 0.01
    assert _max_relative(table["std_err"], se) < 1e-3


def test_without_an_intercept_the_penalty_stays_the_squared_slopes():
    X, y = _rare_level_counts(seed=2, n=2000)
    X = X.assign(kind=pd.Categorical(np.where(X["x"] > 0.3, "a", "b")))
    # The first factor keeps every level (it is the intercept); the second is
    # treatment-coded, and with no intercept to absorb a shift its levels keep
    # the plain ridge: no level group.
    model = _glm(alpha=1e-3, fit_intercept=False, base_levels={"kind": "a"})
    model.fit(X, y)
    assert model._terms.level_groups == ()
    onehot = OneHotEncoder(sparse_output=False).fit_transform(X[["state"]])
    kind_b = (X["kind"] == "b").to_numpy(float)
    design = np.column_stack([X["x"].to_numpy(), onehot, kind_b])
    reference = PoissonRegressor(
        alpha=1e-3, fit_intercept=False, solver="newton-cholesky", tol=1e-12
    )
    expected = reference.fit(design, y).predict(design)
    assert _max_relative(model.predict(X), expected) < 1e-6


def test_a_multinomial_fits_the_same_glm_by_either_route():
    rng = np.random.default_rng(3)
    n = 1500
    levels = [f"g{i}" for i in range(12)]
    group = rng.choice(levels, size=n, p=np.r_[np.full(10, 0.095), [0.03, 0.02]])
    x = rng.normal(size=n)
    logits = np.column_stack([np.zeros(n), 0.5 * x, -0.4 * x + (group == "g11")])
    p = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    y = np.array(["a", "b", "c"])[[rng.choice(3, p=row) for row in p]]
    X = pd.DataFrame({"x": x, "group": pd.Categorical(group)})
    frame = GraphGLMClassifier(local_penalty=np.inf, alpha=1e-3).fit(X, y)
    formula = GraphGLMClassifier(
        local_penalty=np.inf, alpha=1e-3, formula="y ~ x + C(group)"
    ).fit(X.assign(y=y))
    assert (
        np.max(np.abs(frame.predict_proba(X) - formula.predict_proba(X.assign(y=y))))
        < 1e-8
    )


def test_the_solver_takes_a_penalty_matrix():
    rng = np.random.default_rng(4)
    X = rng.normal(size=(400, 3))
    y = rng.poisson(np.exp(0.2 + X @ [0.3, -0.2, 0.1])).astype(float)
    family = get_family("poisson")
    weights = np.array([1.0, 2.0, 0.5])
    diagonal = fit_global_glm(X, y, family, alpha=0.1, penalty_weights=weights)
    matrix = fit_global_glm(X, y, family, alpha=0.1, penalty_weights=np.diag(weights))
    np.testing.assert_allclose(matrix.coef, diagonal.coef, rtol=1e-10)
    # A coupled penalty: the first two slopes shrink towards each other.
    coupled = np.array([[1.0, -1.0, 0.0], [-1.0, 1.0, 0.0], [0.0, 0.0, 0.0]])
    fit = fit_global_glm(X, y, family, alpha=100.0, penalty_weights=coupled)
    assert abs(fit.coef[0, 0] - fit.coef[0, 1]) < 0.01
    with pytest.raises(ValueError, match="penalty_weights must have shape"):
        fit_global_glm(X, y, family, alpha=0.1, penalty_weights=np.ones((2, 2)))
