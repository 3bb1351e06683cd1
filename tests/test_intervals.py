"""Intervals on the per-row coefficients: ``local_coef(X, interval=...)``."""

from __future__ import annotations

import pickle
import warnings

import numpy as np
import pytest
from scipy.stats import norm

from autoglm_graph import GraphGLMClassifier, GraphGLMRegressor
from autoglm_graph.datasets import make_varying_coefficients

SMALL = dict(
    family="poisson",
    hidden_channels=16,
    heads=2,
    max_epochs=20,
    early_stopping=False,
    device="cpu",
    random_state=0,
)


@pytest.fixture(scope="module")
def data():
    X, y, _ = make_varying_coefficients(300, 3, family="poisson", random_state=0)
    return X, y


@pytest.fixture(scope="module")
def fitted(data):
    X, y = data
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return GraphGLMRegressor(interval_members=4, **SMALL).fit(X, y)


def test_columns_order_and_coef(fitted, data):
    X, _ = data
    local = fitted.local_coef(X[:50], interval=0.9)
    assert list(local.columns.levels[0]) == ["coef", "lower", "upper"]
    assert local.columns.names == ["statistic", None]
    plain = fitted.local_coef(X[:50])
    np.testing.assert_array_equal(local["coef"].to_numpy(), plain.to_numpy())
    assert list(local["lower"].columns) == list(plain.columns)
    lower, upper = local["lower"].to_numpy(), local["upper"].to_numpy()
    assert np.all(lower <= plain.to_numpy()) and np.all(plain.to_numpy() <= upper)
    assert np.all(upper > lower)
    narrow = fitted.local_coef(X[:50], interval=0.5)
    assert np.all(narrow["upper"].to_numpy() < upper)


def test_wider_away_from_the_training_rows(fitted, data):
    """Rows moved far from the data do not get narrower intervals. The
    widening is small (about 5 %, ``benchmarks/results/intervals.md``): far
    rows attend to the training rows at the data's edge, so the members'
    deviations stop moving apart there."""
    X, _ = data
    direction = np.random.default_rng(1).normal(size=(100, X.shape[1]))
    direction /= np.linalg.norm(direction, axis=1, keepdims=True)

    def width(rows):
        local = fitted.local_coef(rows, interval=0.9)
        return (local["upper"] - local["lower"]).to_numpy().mean()

    assert width(X[:100] + 10 * direction) > width(X[:100])


def test_global_glm_members_match_sandwich_errors(data):
    """With the network off, the members' spread is the GLM's sampling
    variability: the bootstrap standard errors agree with the sandwich ones."""
    X, y = data
    model = GraphGLMRegressor(
        family="poisson", local_penalty=np.inf, interval_members=60, random_state=0
    ).fit(X, y)
    local = model.local_coef(X[:1], interval=0.9)
    bootstrap_se = (local["upper"] - local["lower"]).to_numpy()[0] / (
        2 * norm.ppf(0.95)
    )
    sandwich = model.coef_table(X, y, cov_type="sandwich")["std_err"].to_numpy()
    np.testing.assert_allclose(bootstrap_se, sandwich, rtol=0.3)


def test_same_seed_same_members(data):
    X, y = data
    params = dict(family="poisson", local_penalty=np.inf, interval_members=3)
    a = GraphGLMRegressor(random_state=3, **params).fit(X, y)
    b = GraphGLMRegressor(random_state=3, **params).fit(X, y)
    np.testing.assert_array_equal(
        a.local_coef(X, interval=0.8).to_numpy(),
        b.local_coef(X, interval=0.8).to_numpy(),
    )


def test_classifier_and_pickle(data):
    X, y = data
    labels = (y > np.median(y)).astype(int)
    model = GraphGLMClassifier(
        local_penalty=np.inf, interval_members=2, random_state=0
    ).fit(X, labels)
    local = pickle.loads(pickle.dumps(model)).local_coef(X[:5], interval=0.9)
    assert local.shape == (5, 3 * 4)
    assert np.all(local["lower"].to_numpy() <= local["upper"].to_numpy())


def test_default_fits_no_members(fitted, data):
    X, y = data
    model = GraphGLMRegressor(family="poisson", local_penalty=np.inf).fit(X, y)
    assert model.interval_members_ == []
    with pytest.raises(ValueError, match="interval_members >= 2"):
        model.local_coef(X, interval=0.9)


@pytest.mark.parametrize("interval", [0, 1, 1.5, -0.1, "0.9", True])
def test_bad_interval(fitted, data, interval):
    with pytest.raises(ValueError, match=r"'interval' parameter.*got interval="):
        fitted.local_coef(data[0][:5], interval=interval)


@pytest.mark.parametrize("members", [1, -1, 2.5, True])
def test_bad_interval_members(data, members):
    with pytest.raises(ValueError, match="'interval_members' parameter"):
        GraphGLMRegressor(interval_members=members).fit(*data)


def test_save_warns_that_members_are_not_saved(fitted, tmp_path):
    with pytest.warns(UserWarning, match="interval_members_"):
        fitted.save(tmp_path / "model")
