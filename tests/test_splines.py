"""Penalised spline main effects of the global GLM (``splines``)."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import hashlib
import json

import numpy as np
import pandas as pd
import pytest

from autoglm_graph import GraphGLMRegressor
from autoglm_graph.explain.plotting import plot_term
from autoglm_graph.glm._solver import fit_global_glm
from autoglm_graph.glm.families import PoissonFamily
from autoglm_graph.persistence._io import load_model


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    n = 1500
    X = pd.DataFrame(
        {
            "age": rng.uniform(18, 80, n),
            "d": rng.normal(size=n),
            "r": rng.choice(list("abc"), n),
        }
    )
    eta = 0.5 * np.sin(X.age / 10) + 0.2 * X.d + (X.r == "b") * 0.3
    return X, rng.poisson(np.exp(eta))


@pytest.fixture(scope="module")
def gam(data):
    X, y = data
    return GraphGLMRegressor(
        family="poisson", splines=["age"], local_penalty=np.inf
    ).fit(X, y)


def _deviance(y, mu):
    return np.mean(2 * (np.where(y > 0, y * np.log(np.maximum(y, 1) / mu), 0) - y + mu))


def test_gam_beats_the_linear_glm_on_a_curved_effect(data, gam):
    X, y = data
    linear = GraphGLMRegressor(family="poisson", local_penalty=np.inf).fit(X, y)
    assert gam.feature_names_out_[:2].tolist() == ["age", "d"]
    assert gam.feature_names_out_[4] == "age_s1"
    assert gam.splines_penalty_ in gam.splines_scores_
    assert _deviance(y, gam.predict(X)) < 0.97 * _deviance(y, linear.predict(X))


def test_the_fit_is_the_direct_penalised_solve(data, gam):
    X, y = data
    terms = gam.predictor().glm_terms
    design = terms.select(gam.predictor().design(X))
    direct = fit_global_glm(
        design,
        y.astype(float),
        PoissonFamily(),
        alpha=1.0,
        penalty_weights=terms.penalty_weights(gam.alpha),
    )
    np.testing.assert_allclose(direct.coef, gam.global_glm_.coef, atol=1e-6)


def test_an_infinite_smoothing_penalty_is_the_linear_glm(data, gam):
    X, y = data
    terms = gam.predictor().glm_terms
    stiff = terms.__class__(**{**terms.__dict__})
    stiff = stiff.__class__(
        **{**stiff.__dict__, "splines": terms.splines.with_penalty(1e10)}
    )
    design = terms.select(gam.predictor().design(X))
    glm = fit_global_glm(
        design,
        y.astype(float),
        PoissonFamily(),
        alpha=1.0,
        penalty_weights=stiff.penalty_weights(gam.alpha),
    )
    linear = GraphGLMRegressor(family="poisson", local_penalty=np.inf).fit(X, y)
    np.testing.assert_allclose(glm.coef[0, :4], linear.global_glm_.coef[0], atol=1e-5)
    np.testing.assert_allclose(glm.coef[0, 4:], 0.0, atol=1e-5)


def test_new_rows_beyond_the_range_continue_linearly(gam):
    far = pd.DataFrame({"age": [100.0, 120.0, 140.0], "d": 0.0, "r": "a"})
    eta = np.log(gam.predict(far))
    assert np.all(np.isfinite(eta))
    assert abs((eta[2] - eta[1]) - (eta[1] - eta[0])) < 1e-8


def test_network_fit_and_save_load_round_trip(data, tmp_path):
    X, y = data
    model = GraphGLMRegressor(
        family="poisson", splines=True, max_epochs=2, random_state=0
    ).fit(X, y)
    design = model.predictor().design(X)
    assert model.predictor().glm_terms.context(design).shape[1] == 5
    model.save(tmp_path / "m")
    loaded = load_model(tmp_path / "m")
    rows = pd.concat([X.iloc[:5], pd.DataFrame({"age": [200.0], "d": 9.0, "r": "c"})])
    np.testing.assert_array_equal(loaded.predict(rows), model.predict(rows))
    assert loaded.get_params()["splines"] is True


def test_tables_group_a_column_and_its_basis(data, gam):
    X, y = data
    wald = gam.wald_test_terms(X, y)
    n_basis = sum(n.startswith("age_s") for n in gam.feature_names_out_)
    assert wald.loc["age", "df"] == n_basis + 1
    assert "age_s1" not in wald.index
    table = gam.coef_table(X, y)
    assert np.all(table["std_err"] > 0)
    factors = gam.factor_table(X, y)
    assert "age_s1" in set(factors["term"])


def test_plot_term_draws_a_band(data, gam):
    X, y = data
    ax = plot_term(gam, "age", X, y)
    assert ax.figure is not None
    lines = ax.get_lines()[0].get_ydata()
    assert np.ptp(lines) > 0.3  # the sine's shape, not a straight line
    assert plot_term(gam, "d", X) is not None


@pytest.mark.parametrize(
    "splines, match",
    [(["missing"], "splines"), (["r_c"], "splines"), ("age", "splines")],
)
def test_bad_splines(data, splines, match):
    X, y = data
    with pytest.raises(ValueError, match=match):
        GraphGLMRegressor(family="poisson", splines=splines).fit(X, y)


def test_splines_with_a_formula_is_an_error(data):
    X, y = data
    with pytest.raises(ValueError, match="splines"):
        GraphGLMRegressor(formula="age + d", splines=True).fit(X, y)


def test_a_spline_column_held_global_holds_its_basis(data):
    X, y = data
    model = GraphGLMRegressor(
        family="poisson",
        splines=True,
        global_terms=["age"],
        local_sign={"d": "positive"},
        max_epochs=2,
        random_state=0,
    ).fit(X, y)
    local = model.local_coef(X.iloc[:50])
    ages = [c for c in local.columns if c == "age" or c.startswith("age_s")]
    assert len(ages) > 1
    assert np.ptp(local[ages].to_numpy(), axis=0).max() == 0.0


# The network kept (no selection against the GLM), so that a free term varies.
KEPT = dict(
    family="poisson",
    splines=["age"],
    hidden_channels=16,
    heads=2,
    max_epochs=3,
    early_stopping=False,
    random_state=0,
)


def _spread(model, X, columns):
    """Each column's range of per-row coefficients on ``X``."""
    return np.ptp(model.local_coef(X)[columns].to_numpy(), axis=0)


def _basis(model):
    return [c for c in model.feature_names_out_ if c.startswith("age_s")]


@pytest.fixture(scope="module")
def basis_global(data):
    X, y = data
    return GraphGLMRegressor(**KEPT).fit(X, y)


def test_by_default_the_network_varies_the_linear_part_only(data, basis_global):
    X, _ = data
    assert basis_global.splines_local == "linear"
    basis = _basis(basis_global)
    assert len(basis) > 1
    assert _spread(basis_global, X, basis).max() <= 1e-12
    assert _spread(basis_global, X, ["intercept", "age", "d"]).min() > 1e-6


def test_splines_local_all_varies_the_basis(data):
    X, y = data
    model = GraphGLMRegressor(splines_local="all", **KEPT).fit(X, y)
    assert _spread(model, X, _basis(model)).min() > 1e-6


def test_global_terms_combine_with_the_basis_held(data):
    X, y = data
    model = GraphGLMRegressor(global_terms=["d"], **KEPT).fit(X, y)
    assert _spread(model, X, [*_basis(model), "d"]).max() <= 1e-12
    assert _spread(model, X, ["age"]).min() > 1e-6
    with pytest.raises(ValueError, match="splines_local='linear'"):
        GraphGLMRegressor(local_sign={"age_s1": "positive"}, **KEPT).fit(X, y)


@pytest.mark.parametrize("splines_local", ["linear", "all"])
def test_splines_local_save_load_round_trip(data, tmp_path, splines_local):
    X, y = data
    model = GraphGLMRegressor(splines_local=splines_local, **KEPT).fit(X, y)
    model.save(tmp_path / "m")
    loaded = load_model(tmp_path / "m")
    assert loaded.get_params()["splines_local"] == splines_local
    np.testing.assert_array_equal(loaded.predict(X), model.predict(X))
    pd.testing.assert_frame_equal(loaded.local_coef(X), model.local_coef(X))


def test_a_file_from_before_splines_local_varies_every_term(basis_global, tmp_path):
    basis_global.save(tmp_path / "m")
    config = json.loads((tmp_path / "m" / "model.json").read_text())
    del config["params"]["splines_local"]
    (tmp_path / "m" / "model.json").write_text(json.dumps(config))
    members = ("model.json", "tensors.safetensors", "preprocessor.skops")
    (tmp_path / "m" / "checksums.sha256").write_text(
        "".join(
            f"{hashlib.sha256((tmp_path / 'm' / m).read_bytes()).hexdigest()}  {m}\n"
            for m in members
        )
    )
    assert load_model(tmp_path / "m").get_params()["splines_local"] == "all"


@pytest.mark.parametrize("value", ["none", True, None, ["age"]])
def test_bad_splines_local(data, value):
    X, y = data
    with pytest.raises(ValueError, match="'splines_local' parameter"):
        GraphGLMRegressor(splines=True, splines_local=value).fit(X, y)
