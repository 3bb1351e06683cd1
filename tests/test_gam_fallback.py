"""``FitPolicy(fallback="gam")``: where the network is dropped, the GAM that
beats the GLM on the validation rows (estimators area)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from autoglm_graph import FitPolicy, GraphGLMRegressor
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
    glm = GraphGLMRegressor(**DROPPED).fit(X, y)
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
    same = GraphGLMRegressor(**DROPPED, **params).fit(X, y)
    assert model.global_only_reason_ == same.global_only_reason_
    assert model.feature_names_out_.tolist() == same.feature_names_out_.tolist()
    np.testing.assert_array_equal(model.predict(X), same.predict(X))
