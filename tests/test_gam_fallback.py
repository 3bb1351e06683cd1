"""``FitPolicy(fallback="gam")``: where the network is dropped, the GAM that
beats the GLM cross-fitted on the fit's rows (estimators area)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from autoglm_graph import FitPolicy, GraphGLMClassifier, GraphGLMRegressor
from autoglm_graph.estimators._network_fit import fold_rows
from autoglm_graph.estimators._rows import FitRows
from autoglm_graph.persistence._io import load_model

# A penalty that keeps the network's deviations near 0: it is trained and
# dropped, so the fallback is decided.
DROPPED = dict(
    family="poisson",
    local_penalty=1e6,
    hidden_channels=8,
    heads=2,
    max_epochs=3,
    random_state=0,
)


def _data(curved: bool):
    rng = np.random.default_rng(0)
    n = 1500
    X = pd.DataFrame(
        {
            "age": rng.uniform(18, 80, n),
            "d": rng.normal(size=n),
            "r": rng.choice(list("abc"), n),
        }
    )
    bend = np.sin(X.age / 8) if curved else X.age / 80
    eta = 0.6 * bend + 0.2 * X.d + (X.r == "b") * 0.3
    return X, rng.poisson(np.exp(eta))


@pytest.fixture(scope="module")
def curved():
    X, y = _data(curved=True)
    policy = FitPolicy(fallback="gam")
    return X, y, GraphGLMRegressor(**DROPPED, fit_policy=policy).fit(X, y)


def test_a_curved_effect_gets_the_gam_fitted_on_all_rows(curved):
    X, y, model = curved
    assert model.is_global_only_
    assert "the GAM" in model.global_only_reason_
    assert "over 5 folds" in model.global_only_reason_
    assert "age_s1" in model.feature_names_out_.tolist()
    # The same model as splines=True's global GLM on the same rows.
    gam = GraphGLMRegressor(family="poisson", splines=True, local_penalty=np.inf)
    gam.fit(X, y)
    assert model.splines_penalty_ == gam.splines_penalty_
    np.testing.assert_allclose(model.predict(X), gam.predict(X), rtol=1e-6)
    np.testing.assert_allclose(
        model.local_coef(X[:5]).to_numpy(), gam.local_coef(X[:5]).to_numpy()
    )


def test_the_gam_fallback_saves_and_loads(curved, tmp_path):
    X, _, model = curved
    loaded = load_model(model.save(tmp_path / "gam.agg"))
    assert loaded.feature_names_out_.tolist() == model.feature_names_out_.tolist()
    np.testing.assert_allclose(loaded.predict(X), model.predict(X), rtol=1e-12)


def test_a_linear_effect_keeps_the_glm():
    X, y = _data(curved=False)
    gam = GraphGLMRegressor(**DROPPED, fit_policy=FitPolicy(fallback="gam"))
    glm = GraphGLMRegressor(**DROPPED, fit_policy=FitPolicy(fallback="glm"))
    glm.fit(X, y)
    gam.fit(X, y)
    assert gam.global_only_reason_ == glm.global_only_reason_
    assert gam.feature_names_out_.tolist() == glm.feature_names_out_.tolist()
    np.testing.assert_array_equal(gam.predict(X), glm.predict(X))


@pytest.mark.parametrize(
    "params",
    [{"splines": ["d"]}, {"formula": "age + d + r"}],
    ids=["splines", "formula"],
)
def test_the_user_s_own_terms_are_kept(params):
    X, y = _data(curved=True)
    policy = FitPolicy(fallback="gam")
    model = GraphGLMRegressor(**DROPPED, **params, fit_policy=policy).fit(X, y)
    glm = FitPolicy(fallback="glm")
    same = GraphGLMRegressor(**DROPPED, **params, fit_policy=glm).fit(X, y)
    assert model.global_only_reason_ == same.global_only_reason_
    assert model.feature_names_out_.tolist() == same.feature_names_out_.tolist()
    np.testing.assert_array_equal(model.predict(X), same.predict(X))


def test_the_gam_must_beat_the_glm_by_fallback_standard_errors():
    X, y = _data(curved=True)
    strict = FitPolicy(fallback="gam", fallback_standard_errors=1e6)
    model = GraphGLMRegressor(**DROPPED, fit_policy=strict).fit(X, y)
    glm = GraphGLMRegressor(**DROPPED, fit_policy=FitPolicy(fallback="glm"))
    glm.fit(X, y)
    assert model.global_only_reason_ == glm.global_only_reason_
    np.testing.assert_array_equal(model.predict(X), glm.predict(X))


def test_fallback_folds_sets_the_cross_fitting():
    X, y = _data(curved=True)
    policy = FitPolicy(fallback="gam", fallback_folds=3)
    model = GraphGLMRegressor(**DROPPED, fit_policy=policy).fit(X, y)
    assert "over 3 folds" in model.global_only_reason_


def _rows(y, groups=None) -> FitRows:
    n = len(y)
    return FitRows(np.zeros((n, 1)), y, np.ones(n), None, groups)


def _held_out_once(folds, n):
    return np.array_equal(np.sort(np.concatenate(folds)), np.arange(n))


def test_folds_hold_every_row_out_once_and_groups_whole():
    groups = np.repeat(np.arange(40), 5)
    folds = fold_rows(GraphGLMRegressor(), _rows(np.ones(200), groups), 5, seed=0)
    assert len(folds) == 5 and _held_out_once(folds, 200)
    for held in folds:
        assert np.isin(groups, groups[held]).sum() == len(held)
    again = fold_rows(GraphGLMRegressor(), _rows(np.ones(200), groups), 5, seed=0)
    assert all(np.array_equal(a, b) for a, b in zip(folds, again, strict=True))


def test_folds_are_stratified_by_class_and_fewer_with_few_groups():
    y = np.r_[np.zeros(90), np.ones(10)].astype(int)
    folds = fold_rows(GraphGLMClassifier(), _rows(y), 5, seed=1)
    assert _held_out_once(folds, 100)
    assert [int(y[held].sum()) for held in folds] == [2] * 5
    few = fold_rows(GraphGLMRegressor(), _rows(np.ones(9), np.arange(9) % 3), 5, 0)
    assert len(few) == 3 and _held_out_once(few, 9)
    assert fold_rows(GraphGLMRegressor(), _rows(np.ones(4), np.zeros(4)), 5, 0) == []


def test_gam_is_the_default_fallback():
    X, y = _data(curved=True)
    model = GraphGLMRegressor(**DROPPED).fit(X, y)
    assert "the GAM" in model.global_only_reason_
