"""Factor tables for tariffs (``factor_table``)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from autoglm_graph import GraphGLMClassifier, GraphGLMRegressor

SMALL = dict(
    hidden_channels=16, heads=2, max_epochs=10, early_stopping=False, random_state=0
)


@pytest.fixture(scope="module")
def portfolio():
    rng = np.random.default_rng(0)
    n = 800
    X = pd.DataFrame(
        {
            "age": rng.normal(40, 10, size=n),
            "region": rng.choice(list("xyz"), size=n, p=[0.5, 0.3, 0.2]),
        }
    )
    exposure = rng.uniform(0.2, 1.0, n)
    eta = 0.03 * (X.age - 40) + 0.4 * (X.region == "y") - 1.0
    y = rng.poisson(exposure * np.exp(eta))
    weight = rng.uniform(0.5, 2.0, n)
    return X, y, weight, np.log(exposure)


@pytest.fixture(scope="module")
def poisson(portfolio):
    X, y, weight, offset = portfolio
    model = GraphGLMRegressor(family="poisson", **SMALL)
    model.fit(X, y, sample_weight=weight, offset=offset)
    assert not model.is_global_only_, model.global_only_reason_
    return model


def test_relativities_are_the_coef_table_exponentiated(poisson, portfolio):
    X, y, weight, offset = portfolio
    table = poisson.factor_table(X, y, weight, offset)
    coefs = poisson.coef_table(X, y, weight, offset)
    # Every term of the GLM, and the base level (no term: the reference).
    base = f"region_{poisson.base_levels_['region']}"
    assert sorted(table["term"]) == sorted([*coefs.index, base])
    reference = table.set_index("term").loc[base]
    assert reference["coef"] == 0.0 and reference["relativity"] == 1.0
    by_term = table.set_index("term").loc[coefs.index]
    np.testing.assert_allclose(by_term["coef"], coefs["coef"], rtol=0, atol=0)
    np.testing.assert_allclose(by_term["relativity"], np.exp(coefs["coef"]))
    np.testing.assert_allclose(
        by_term["relativity_ci_lower"], np.exp(coefs["ci_lower"])
    )
    np.testing.assert_allclose(
        by_term["relativity_ci_upper"], np.exp(coefs["ci_upper"])
    )
    np.testing.assert_allclose(
        by_term["relativity_std_err"], np.exp(coefs["coef"]) * coefs["std_err"]
    )


def test_counts_weights_and_exposure_per_level(poisson, portfolio):
    X, y, weight, offset = portfolio
    table = poisson.factor_table(X, y, weight, offset)
    frame = X.assign(w=weight, e=np.exp(offset))
    groups = frame.groupby("region").agg(
        rows=("w", "size"), weight=("w", "sum"), exposure=("e", "sum")
    )
    levels = table[table["column"] == "region"].set_index("level")
    assert sorted(levels.index) == sorted(groups.index)
    for column in ("rows", "weight", "exposure"):
        np.testing.assert_allclose(levels[column], groups.loc[levels.index, column])
    numeric = table.set_index("term").loc[["intercept", "age"]]
    assert (numeric["rows"] == len(X)).all()
    np.testing.assert_allclose(numeric["weight"], weight.sum())


def test_local_spread_is_that_of_local_coef(poisson, portfolio):
    X, y, weight, offset = portfolio
    table = poisson.factor_table(X, y, weight, offset).set_index("term")
    local = np.exp(poisson.local_coef(X, offset))
    for term, at in [("age", slice(None)), ("region_y", (X["region"] == "y").values)]:
        values = local[term].to_numpy()[at]
        np.testing.assert_allclose(table.loc[term, "local_mean"], values.mean())
        np.testing.assert_allclose(
            table.loc[term, ["local_q05", "local_q50", "local_q95"]].astype(float),
            np.quantile(values, [0.05, 0.5, 0.95]),
        )
    assert (table["local_q95"] - table["local_q05"]).max() > 1e-4  # a network


def test_glm_only_has_no_spread_and_writes_to_csv(portfolio, tmp_path):
    X, y, weight, offset = portfolio
    model = GraphGLMRegressor(family="poisson", local_penalty=np.inf)
    model.fit(X, y, sample_weight=weight, offset=offset)
    table = model.factor_table(X, y, weight, offset)
    for column in ("local_mean", "local_q05", "local_q50", "local_q95"):
        np.testing.assert_allclose(table[column], table["relativity"], rtol=1e-12)
    table.to_csv(tmp_path / "factors.csv", index=False)
    back = pd.read_csv(tmp_path / "factors.csv", keep_default_na=False)
    assert back.shape == table.shape and list(back.columns) == list(table.columns)
    without_y = model.factor_table(X)
    assert without_y["std_err"].isna().all() and "exposure" not in without_y
    np.testing.assert_allclose(without_y["relativity"], table["relativity"])
    assert (without_y["weight"] == without_y["rows"]).all()


def test_other_links_have_no_relativity(portfolio):
    X, y, _, _ = portfolio
    model = GraphGLMRegressor(local_penalty=np.inf).fit(X, y.astype(float))
    table = model.factor_table(X, y)
    assert table["coef"].notna().all()
    for column in ("relativity", "relativity_ci_lower", "local_mean", "local_q95"):
        assert table[column].isna().all()


def test_multinomial_raises(portfolio):
    X, _, _, _ = portfolio
    labels = np.resize(["a", "b", "c"], len(X))
    model = GraphGLMClassifier(local_penalty=np.inf).fit(X, labels)
    with pytest.raises(ValueError, match="single-output"):
        model.factor_table(X)
