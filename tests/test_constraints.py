"""Constraints on the per-row coefficients: ``global_terms`` and ``local_sign``."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch
from optuna.distributions import CategoricalDistribution
from sklearn.base import clone

from autoglm_graph import GraphGLMRegressor, GraphGLMSearchCV, load
from autoglm_graph.network.constraints import CoefficientMap

SMALL = dict(
    family="poisson",
    hidden_channels=16,
    heads=2,
    max_epochs=20,
    early_stopping=False,
    device="cpu",
    random_state=0,
)
GLOBAL = ["intercept", "r", "c"]
SIGN = {"a": "positive", "b": "negative"}


def _frame(n, rng, spread=1.0):
    return pd.DataFrame(
        {
            "a": rng.normal(size=n) * spread,
            "b": rng.normal(size=n) * spread + 3,
            "c": rng.normal(size=n) * spread,
            "r": rng.choice(list("xyz"), size=n),
        }
    )


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    X = _frame(600, rng)
    eta = 0.5 * X.a * (1 + 0.8 * np.sin(2 * X.c)) - 0.4 * X.b + 0.3 * (X.r == "y")
    y = rng.poisson(np.exp(eta + 1.0))
    far = _frame(200, np.random.default_rng(1), spread=100.0)
    return X, y, far


@pytest.fixture(scope="module")
def constrained(data):
    X, y, _ = data
    model = GraphGLMRegressor(global_terms=GLOBAL, local_sign=SIGN, **SMALL)
    model.fit(X, y)
    assert not model.is_global_only_, model.global_only_reason_
    return model


def test_global_terms_have_no_spread_on_new_rows(constrained, data):
    X, _, far = data
    for rows in (X, far):
        coef = constrained.local_coef(rows)
        levels = [n for n in constrained.feature_names_out_ if n.startswith("r_")]
        held = ["intercept", "c", *levels]  # the base level has no term
        spread = coef[held].max() - coef[held].min()
        assert (spread <= 1e-12).all(), spread
        np.testing.assert_allclose(
            coef[held].iloc[0], [constrained.intercept_, *constrained.coef_[2:]]
        )
        # the free (signed) slopes do vary: the network is there
        assert coef["a"].std() > 1e-3 and coef["b"].std() > 1e-3


def test_local_sign_kept_on_training_and_far_rows(constrained, data):
    X, _, far = data
    for rows in (X, far):
        coef = constrained.local_coef(rows)
        assert (coef["a"] > 0).all() and (coef["b"] < 0).all()


def test_global_terms_alone_and_signs_alone(data):
    X, y, far = data
    only_global = GraphGLMRegressor(global_terms=["a"], **SMALL).fit(X, y)
    coef = only_global.local_coef(far)
    assert np.ptp(coef["a"]) <= 1e-12 and coef["b"].std() > 0
    only_sign = GraphGLMRegressor(local_sign={"b": "negative"}, **SMALL).fit(X, y)
    assert (only_sign.local_coef(far)["b"] < 0).all()


def test_local_sign_against_the_glm_raises(data):
    X, y, _ = data
    model = GraphGLMRegressor(local_sign={"a": "negative"}, **SMALL)
    with pytest.raises(ValueError, match=r"local_sign.*negative.*'a'.*global GLM"):
        model.fit(X, y)


def test_constraints_nest_the_glm(data):
    X, y, far = data
    glm = GraphGLMRegressor(local_penalty=np.inf, **SMALL).fit(X, y)
    model = clone(glm).set_params(global_terms=GLOBAL, local_sign=SIGN).fit(X, y)
    assert model.is_global_only_
    np.testing.assert_array_equal(model.coef_, glm.coef_)
    np.testing.assert_array_equal(model.predict(far), glm.predict(far))


def test_coefficient_map_at_zero_is_the_glm():
    raw = torch.zeros(5, 2, 4, dtype=torch.float64)
    mapping = CoefficientMap(
        held=np.array([0, 3]),
        signed=np.array([1]),
        theta=np.array([[0.5], [-2.0]]),
        intercept_tie=np.array([0.1, 2.0, -1.0]),
    )
    assert torch.equal(mapping.apply(raw), raw)
    raw = torch.randn(5, 2, 4, dtype=torch.float64) * 50
    out = mapping.apply(raw)
    assert (out[:, :, 3] == 0).all()
    theta = torch.tensor([0.5, -2.0], dtype=torch.float64)
    assert (torch.sign(theta + out[:, :, 1]) == torch.sign(theta)).all()
    torch.testing.assert_close(
        out[:, :, 0],
        out[:, :, 1:] @ torch.tensor([0.1, 2.0, -1.0], dtype=torch.float64),
    )


@pytest.mark.parametrize(
    ("params", "match"),
    [
        ({"global_terms": ["nope"]}, "'global_terms'.*got 'nope'"),
        ({"global_terms": "a"}, "'global_terms'.*list.*got 'a'"),
        ({"local_sign": {"nope": "positive"}}, "'local_sign'.*got 'nope'"),
        ({"local_sign": {"a": "up"}}, "'local_sign'.*'positive' or 'negative'.*'up'"),
        ({"local_sign": ["a"]}, "'local_sign'.*dict.*got \\['a'\\]"),
        (
            {"global_terms": ["a"], "local_sign": {"a": "positive"}},
            "'local_sign'.*held global.*got 'a'",
        ),
        ({"local_sign": {"intercept": "positive"}}, "'local_sign'.*slopes"),
    ],
)
def test_bad_constraints_raise(data, params, match):
    X, y, _ = data
    with pytest.raises(ValueError, match=match):
        GraphGLMRegressor(**SMALL, **params).fit(X, y)


def test_constraints_get_params_and_clone():
    model = GraphGLMRegressor(global_terms=GLOBAL, local_sign=SIGN)
    params = model.get_params()
    assert params["global_terms"] is GLOBAL and params["local_sign"] is SIGN
    copy = clone(model)
    assert copy.global_terms == GLOBAL and copy.local_sign == SIGN
    default = GraphGLMRegressor().get_params()
    assert default["global_terms"] is None and default["local_sign"] is None


def test_constraints_save_load_round_trip(constrained, data, tmp_path):
    _, _, far = data
    constrained.save(tmp_path / "m")
    loaded = load(tmp_path / "m")
    assert loaded.get_params() == constrained.get_params()
    pd.testing.assert_frame_equal(loaded.local_coef(far), constrained.local_coef(far))


# Optuna warns that such choices need an in-memory study (not a storage).
@pytest.mark.filterwarnings("ignore:Choices for a categorical distribution")
def test_constraints_searchable_when_in_the_space(data):
    X, y, _ = data
    space = {
        "global_terms": CategoricalDistribution([None, ("c",)]),
        "local_sign": CategoricalDistribution([None, {"a": "positive"}]),
    }
    estimator = GraphGLMRegressor(**{**SMALL, "max_epochs": 3, "early_stopping": True})
    search = GraphGLMSearchCV(
        estimator, param_distributions=space, n_trials=3, cv=None, random_state=0
    )
    search.fit(X, y)
    assert set(search.best_params_) == {"global_terms", "local_sign"}
    assert "global_terms" not in GraphGLMRegressor.default_search_space("poisson")
