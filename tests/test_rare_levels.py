"""Every level is kept unless the user asks to group rare ones (issue #44).

The DataFrame route is statsmodels' treatment-coded GLM and the formula
route's GLM; ``min_frequency`` groups rare levels and ``factor_table`` says
which.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import statsmodels.api as sm

from autoglm_graph import GraphGLMRegressor

GLM_ONLY = {"alpha": 0.0, "local_penalty": np.inf, "random_state": 0}


@pytest.fixture(scope="module")
def counts():
    """Poisson counts with a population offset and a 30-level factor, 12 of
    whose levels hold under 1 % of the rows."""
    rng = np.random.default_rng(3)
    weights = np.r_[np.full(18, 1.0), np.full(12, 0.08)]
    states = np.array([f"s{i:02d}" for i in range(30)])
    state = rng.choice(states, size=1500, p=weights / weights.sum())
    effect = dict(zip(states, rng.normal(0, 0.4, size=30), strict=True))
    x = rng.normal(size=1500)
    log_pop = rng.uniform(0, 3, size=1500)
    eta = log_pop + 0.5 + 0.3 * x + np.array([effect[s] for s in state])
    y = rng.poisson(np.exp(eta))
    X = pd.DataFrame({"x": x, "state": state})
    return X, y, log_pop


def test_rare_levels_kept_as_statsmodels(counts):
    X, y, offset = counts
    shares = X["state"].value_counts(normalize=True)
    assert (shares < 0.01).sum() >= 10  # the levels the old default merged
    model = GraphGLMRegressor(family="poisson", **GLM_ONLY).fit(X, y, offset=offset)
    assert model.is_global_only_
    base = model.base_levels_["state"]
    levels = sorted(set(X["state"]) - {base})
    assert [f"state_{level}" for level in levels] == [
        n for n in model.feature_names_out_ if n.startswith("state_")
    ]
    design = pd.concat(
        [X[["x"]], pd.get_dummies(X["state"])[levels].astype(float)], axis=1
    )
    reference = sm.GLM(
        y, sm.add_constant(design), family=sm.families.Poisson(), offset=offset
    ).fit(tol=1e-12)
    table = model.coef_table(X, y, offset=offset)
    np.testing.assert_allclose(
        table["coef"].to_numpy(), reference.params.to_numpy(), rtol=1e-6, atol=1e-7
    )
    np.testing.assert_allclose(
        table["std_err"].to_numpy(), reference.bse.to_numpy(), rtol=1e-5
    )
    np.testing.assert_allclose(
        model.predict(X, offset=offset),
        reference.predict(sm.add_constant(design), offset=offset),
        rtol=1e-6,
    )


def test_dataframe_route_equals_formula_route(counts):
    X, y, offset = counts
    frame = GraphGLMRegressor(family="poisson", **GLM_ONLY).fit(X, y, offset=offset)
    formula = GraphGLMRegressor(
        family="poisson", formula="y ~ x + C(state)", **GLM_ONLY
    ).fit(X.assign(y=y), offset=offset)
    np.testing.assert_allclose(
        frame.predict(X, offset=offset),
        formula.predict(X.assign(y=y), offset=offset),
        rtol=1e-6,
    )


def test_min_frequency_groups_rare_levels_and_says_which(counts):
    X, y, offset = counts
    model = GraphGLMRegressor(family="poisson", min_frequency=0.01, **GLM_ONLY)
    model.fit(X, y, offset=offset)
    rare = sorted(
        s
        for s, share in X["state"].value_counts(normalize=True).items()
        if share < 0.01
    )
    assert model.preprocessor_.infrequent_levels() == {"state": rare}
    table = model.factor_table(X, y, offset=offset)
    grouped = table[table["level"] == "infrequent_sklearn"]
    assert grouped["members"].tolist() == [", ".join(rare)]
    assert (table.loc[table["level"] != "infrequent_sklearn", "members"] == "").all()
    capped = GraphGLMRegressor(family="poisson", max_categories=5, **GLM_ONLY)
    capped.fit(X, y, offset=offset)
    assert sum(n.startswith("state_") for n in capped.feature_names_out_) == 4


@pytest.mark.parametrize(
    ("params", "match"),
    [
        ({"min_frequency": 0}, "'min_frequency' parameter must be None"),
        ({"min_frequency": 1.5}, "'min_frequency' parameter must be None"),
        ({"min_frequency": True}, "'min_frequency' parameter must be None"),
        ({"max_categories": 0}, "max_categories"),
        ({"handle_missing": "drop"}, "handle_missing"),
    ],
    ids=["zero", "share-above-one", "bool", "max-categories", "handle-missing"],
)
def test_bad_rare_level_parameters(counts, params, match):
    X, y, _ = counts
    with pytest.raises(ValueError, match=match):
        GraphGLMRegressor(family="poisson", **params, **GLM_ONLY).fit(X, y)


def test_handle_missing_error_in_the_estimator(counts):
    X, y, _ = counts
    X = X.assign(x=X["x"].mask(np.arange(len(X)) % 50 == 0))
    model = GraphGLMRegressor(family="poisson", handle_missing="error", **GLM_ONLY)
    with pytest.raises(ValueError, match=r"'x' \(30 rows\)"):
        model.fit(X, y)
