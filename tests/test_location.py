"""The location effect (``location_columns``): its sums, leave-one-out, fit and use."""

from __future__ import annotations

import copy
import pickle

import numpy as np
import pandas as pd
import pytest

from autoglm_graph import GraphGLMClassifier, GraphGLMRegressor, get_family, load
from autoglm_graph.network.location import (
    LocationEffect,
    fit_location_effect,
    neighbourhood_sums,
    row_terms,
)


def spatial_poisson(n: int, amplitude: float, seed: int = 0):
    """Claim counts whose log rate varies smoothly over (long, lat)."""
    rng = np.random.default_rng(seed)
    lon, lat = rng.uniform(0, 10, n), rng.uniform(0, 10, n)
    x = rng.normal(size=n)
    exposure = rng.uniform(0.2, 1.0, n)
    log_rate = -1.0 + 0.3 * x + amplitude * np.sin(lon / 2) * np.cos(lat / 3)
    y = rng.poisson(exposure * np.exp(log_rate)).astype(float)
    X = pd.DataFrame(
        {"long": lon, "lat": lat, "x": x, "zone": rng.choice(["a", "b"], n)}
    )
    return X, y, np.log(exposure)


def poisson_deviance(y, mu) -> float:
    ratio = np.where(y > 0, y / mu, 1.0)
    return float(2 * np.mean(y * np.log(ratio) - (y - mu)))


def test_row_terms_of_a_poisson_log_link_are_residual_and_mean():
    y = np.array([0.0, 2.0, 1.0])
    eta = np.log([0.5, 1.5, 1.0])
    score, info = row_terms(get_family("poisson"), y, eta, np.array([1.0, 2.0, 1.0]))
    np.testing.assert_allclose(score, [-0.5, 1.0, 0.0])
    np.testing.assert_allclose(info, [0.5, 3.0, 1.0])


def test_neighbourhood_sums_take_the_nearest_locations_until_k_rows():
    # Locations 0, 1, 3, 7 on a line, holding 2, 1, 1, 3 rows.
    effect = LocationEffect(
        columns=[0],
        points=np.array([[0.0], [1.0], [3.0], [7.0]]),
        counts=np.array([2.0, 1.0, 1.0, 3.0]),
        score=np.array([1.0, 10.0, 100.0, 1000.0]),
        info=np.array([2.0, 20.0, 200.0, 2000.0]),
        n_neighbors=3,
        coefficient=1.0,
    )
    score, info = neighbourhood_sums(effect, np.array([[0.2], [6.0]]), [1, 3, 4])
    # From 0.2: location 0 alone has 2 rows (>= 1); with 1 it has 3; then 3.
    np.testing.assert_allclose(score[0], [1.0, 11.0, 111.0])
    # From 6.0: location 7 has 3 rows (>= 1 and >= 3); 4 rows need location 3.
    np.testing.assert_allclose(score[1], [1000.0, 1000.0, 1100.0])
    np.testing.assert_allclose(info[1], [2000.0, 2000.0, 2200.0])
    np.testing.assert_allclose(effect.local_intercept(np.array([[0.2]])), [11 / 22])


def test_a_training_rows_own_outcome_never_enters_its_shift():
    X, y, offset = spatial_poisson(3000, amplitude=0.8)
    family = get_family("poisson")
    locations = X[["long", "lat"]].to_numpy()
    eta = np.full(len(y), np.log(y.mean())) + offset

    def train_shift(targets):
        effect, shift, _ = fit_location_effect(
            family, [0, 1], (locations, targets, eta, np.ones(len(y))), None, 200
        )
        assert effect is not None
        return shift / effect.coefficient

    changed = y.copy()
    changed[7] += 5.0
    before, after = train_shift(y), train_shift(changed)
    assert before[7] == pytest.approx(after[7], abs=1e-12)
    assert not np.allclose(np.delete(before, 7), np.delete(after, 7))


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_the_location_effect_is_found_and_used_by_predictions():
    X, y, offset = spatial_poisson(8000, amplitude=0.8)
    train, test = slice(0, 6000), slice(6000, None)
    params = dict(family="poisson", max_epochs=3, random_state=0)
    glm = GraphGLMRegressor(family="poisson", local_penalty=np.inf)
    glm.fit(X[train], y[train], offset=offset[train])
    model = GraphGLMRegressor(location_columns=["long", "lat"], **params)
    model.fit(X[train], y[train], offset=offset[train])
    effect = model.location_effect_
    assert effect is not None and not model.is_global_only_
    assert model.location_report_["gain"] > model.location_report_["gain_se"]
    assert 0 < effect.coefficient <= 2 and effect.columns == [0, 1]
    # It lowers the test deviance well below the global GLM's.
    mu_glm = glm.predict(X[test], offset=offset[test])
    mu = model.predict(X[test], offset=offset[test])
    assert poisson_deviance(y[test], mu) < 0.97 * poisson_deviance(y[test], mu_glm)
    # Its shift is each row's local intercept, and the fit stays balanced.
    shift = effect.shift(X[test][["long", "lat"]].to_numpy())
    without = copy.copy(model)
    without.location_effect_ = None
    mu_without = without.predict(X[test], offset=offset[test])
    np.testing.assert_allclose(np.log(mu) - np.log(mu_without), shift, atol=1e-6)
    if model.network_ is None:
        local = model.local_coef(X[test])["intercept"].to_numpy()
        np.testing.assert_allclose(local, model.intercept_ + shift, rtol=1e-9)
    fitted = model.predict(X[train], offset=offset[train])
    assert fitted.sum() / y[train].sum() == pytest.approx(1.0, rel=1e-8)


def test_no_location_effect_is_kept_where_there_is_none():
    X, y, offset = spatial_poisson(6000, amplitude=0.0, seed=1)
    model = GraphGLMRegressor(
        family="poisson", location_columns=[0, 1], max_epochs=3, random_state=0
    ).fit(X, y, offset=offset)
    assert model.location_effect_ is None
    report = model.location_report_
    assert report["gain"] <= report["gain_se"]


def test_a_location_effect_survives_save_load_and_pickle(tmp_path):
    X, y, offset = spatial_poisson(5000, amplitude=0.8)
    model = GraphGLMRegressor(
        family="poisson",
        location_columns=["long", "lat"],
        location_neighbors=300,
        max_epochs=3,
        random_state=0,
    ).fit(X, y, offset=offset)
    assert model.location_effect_ is not None
    assert model.location_effect_.n_neighbors == 300
    expected = model.predict(X[:200], offset=offset[:200])
    loaded = load(model.save(tmp_path / "model.zip"))
    np.testing.assert_allclose(loaded.predict(X[:200], offset=offset[:200]), expected)
    assert loaded.get_params()["location_columns"] == ["long", "lat"]
    assert loaded.location_report_ == pytest.approx(model.location_report_)
    unpickled = pickle.loads(pickle.dumps(model))
    np.testing.assert_allclose(
        unpickled.predict(X[:200], offset=offset[:200]), expected
    )


@pytest.mark.parametrize(
    "columns, message",
    [
        ("long", "list of column names"),
        ([], "at least one column"),
        (["zone"], "not a numeric"),
        (["nope"], "not a numeric"),
        ([9], "out of range"),
    ],
)
def test_bad_location_columns_are_refused(columns, message):
    X, y, offset = spatial_poisson(300, amplitude=0.0)
    model = GraphGLMRegressor(family="poisson", location_columns=columns, max_epochs=2)
    with pytest.raises(ValueError, match=message):
        model.fit(X, y, offset=offset)


def test_location_effect_refuses_multinomial_and_groups():
    X, y, _ = spatial_poisson(300, amplitude=0.0)
    labels = np.array(["a", "b", "c"])[np.arange(300) % 3]
    with pytest.raises(ValueError, match="single-output"):
        GraphGLMClassifier(location_columns=["long", "lat"], max_epochs=2).fit(
            X, labels
        )
    with pytest.raises(ValueError, match="groups"):
        GraphGLMRegressor(
            family="poisson", location_columns=["long", "lat"], max_epochs=2
        ).fit(X, y, groups=np.arange(300) // 3)


def test_location_neighbors_must_be_a_positive_integer_or_auto():
    X, y, _ = spatial_poisson(300, amplitude=0.0)
    for bad in (0, 2.5, "many"):
        model = GraphGLMRegressor(
            family="poisson", location_columns=["long"], location_neighbors=bad
        )
        with pytest.raises((ValueError, TypeError), match="location_neighbors"):
            model.fit(X, y)


def test_max_epochs_zero_fits_the_location_effect_alone():
    X, y, offset = spatial_poisson(6000, amplitude=0.8)
    model = GraphGLMRegressor(
        family="poisson", location_columns=["long", "lat"], max_epochs=0
    ).fit(X, y, offset=offset)
    assert model.network_ is None and model.location_effect_ is not None
    assert not model.is_global_only_ and model.global_only_reason_ == "max_epochs=0"
    plain = GraphGLMRegressor(family="poisson", max_epochs=0).fit(X, y, offset=offset)
    assert plain.is_global_only_ and plain.location_report_ is None
