"""Plots of autoglm_graph.explain.plotting: each one draws and saves a non-empty PNG."""

from __future__ import annotations

import sys

import numpy as np
import pytest

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")
optuna = pytest.importorskip("optuna")

import matplotlib.pyplot as plt  # noqa: E402

from autoglm_graph import GraphGLMClassifier, GraphGLMRegressor  # noqa: E402
from autoglm_graph.datasets import make_varying_coefficients  # noqa: E402
from autoglm_graph.explain.plotting import (  # noqa: E402
    plot_coefficient_map,
    plot_history,
    plot_local_coef,
    plot_neighborhood,
    plot_param_importances,
    plot_search_history,
)

FAST = {"hidden_channels": 16, "heads": 2, "max_epochs": 8, "n_neighbors": 8}


@pytest.fixture(scope="module")
def poisson_data():
    X, y, _ = make_varying_coefficients(
        300, 3, family="poisson", random_state=0, return_frame=True
    )
    return X, y


@pytest.fixture(scope="module")
def network_model(poisson_data):
    """A model whose network is always kept (no early stopping to reject it)."""
    X, y = poisson_data
    model = GraphGLMRegressor(
        family="poisson", early_stopping=False, random_state=0, **FAST
    )
    return model.fit(X, y)


@pytest.fixture(scope="module")
def validated_model(poisson_data):
    """A model trained with early stopping: history has the epoch-0 baseline."""
    X, y = poisson_data
    return GraphGLMRegressor(family="poisson", random_state=0, **FAST).fit(X, y)


@pytest.fixture(scope="module")
def global_model(poisson_data):
    X, y = poisson_data
    return GraphGLMRegressor(family="poisson", local_penalty=np.inf).fit(X, y)


@pytest.fixture(scope="module")
def study():
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(
        study_name="toy", sampler=optuna.samplers.RandomSampler(seed=0)
    )
    study.optimize(
        lambda t: t.suggest_float("a", -1, 1) ** 2 + 0.1 * t.suggest_int("b", 0, 3),
        n_trials=10,
    )
    return study


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def _saved(ax, tmp_path, name="plot.png"):
    path = tmp_path / name
    ax.figure.savefig(path)
    assert path.stat().st_size > 1000
    return path


def test_plot_local_coef(network_model, poisson_data, tmp_path):
    X, _ = poisson_data
    ax = plot_local_coef(network_model, X.iloc[:100])
    _saved(ax, tmp_path)
    assert [t.get_text() for t in ax.get_yticklabels()]  # one label per feature


def test_plot_local_coef_features_and_given_axes(network_model, poisson_data, tmp_path):
    X, _ = poisson_data
    _, axes = plt.subplots(1, 2)
    ax = plot_local_coef(network_model, X, features=["intercept", "x0"], ax=axes[1])
    assert ax is axes[1]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["intercept", "x0"]
    _saved(ax, tmp_path)
    with pytest.raises(ValueError, match="Unknown features"):
        plot_local_coef(network_model, X, features=["nope"])


def test_plot_local_coef_global_only_and_multinomial(global_model, tmp_path):
    X, y, _ = make_varying_coefficients(
        200, 3, family="multinomial", random_state=0, return_frame=True
    )
    _saved(plot_local_coef(global_model, X), tmp_path, "global.png")
    model = GraphGLMClassifier(random_state=0, **FAST).fit(X, y)
    ax = plot_local_coef(model, X, class_label=model.classes_[1])
    assert isinstance(model.classes_[1], np.integer)
    # "class 1", not "class np.int64(1)"
    assert ax.get_title().splitlines()[0].endswith(f", class {int(model.classes_[1])}")
    _saved(ax, tmp_path, "multinomial.png")
    with pytest.raises(ValueError, match=r"one of \[0, 1, 2\]; got 'no such class'"):
        plot_local_coef(model, X, class_label="no such class")


def test_plot_neighborhood(network_model, poisson_data, tmp_path):
    X, _ = poisson_data
    ax = plot_neighborhood(network_model, X.iloc[[5]])
    assert len(ax.patches) == len(network_model.explain(X.iloc[[5]]))
    _saved(ax, tmp_path)
    _saved(plot_neighborhood(network_model, X.iloc[5]), tmp_path, "series.png")
    with pytest.raises(ValueError, match="one row"):
        plot_neighborhood(network_model, X.iloc[:2])


def test_plot_neighborhood_global_only_draws_a_note(global_model, poisson_data):
    X, _ = poisson_data
    ax = plot_neighborhood(global_model, X.iloc[[0]])
    assert not ax.patches
    assert "global GLM" in ax.texts[0].get_text()


def test_plot_history(validated_model, network_model, tmp_path):
    ax = plot_history(validated_model)
    labels = ax.get_legend_handles_labels()[1]
    assert "global GLM (validation)" in labels
    _saved(ax, tmp_path)
    _saved(plot_history(network_model), tmp_path, "no_validation.png")


def test_plot_history_global_only_raises(global_model):
    with pytest.raises(ValueError, match="trained none"):
        plot_history(global_model)


def test_plot_search_history(study, tmp_path):
    ax = plot_search_history(study)
    _saved(ax, tmp_path)
    # Few trials: matplotlib's default ticks would be 0.0, 0.2, ..., 1.0.
    few = optuna.create_study(study_name="two")
    few.optimize(lambda t: t.suggest_float("a", -1, 1) ** 2, n_trials=2)
    ticks = plot_search_history(few).get_xticks()
    assert len(ticks) > 1
    assert np.array_equal(ticks, np.round(ticks))  # whole trial numbers

    class Search:  # stands in for GraphGLMSearchCV
        study_ = study

    _, given = plt.subplots()
    assert plot_search_history(Search(), ax=given) is given


def test_plot_param_importances(study, tmp_path):
    ax = plot_param_importances(study)
    assert {t.get_text() for t in ax.get_yticklabels()} == {"a", "b"}
    _saved(ax, tmp_path)


def test_search_plots_reject_other_objects():
    with pytest.raises(TypeError, match="optuna Study"):
        plot_search_history(object())


def test_missing_matplotlib_says_how_to_install(validated_model, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib.pyplot", None)  # import fails
    with pytest.raises(ImportError, match="pip install matplotlib"):
        plot_history(validated_model)


def test_plot_coefficient_map(network_model, global_model, poisson_data, tmp_path):
    X, _ = poisson_data
    # Coordinates beside the model's columns, rounded: rows share locations.
    places = X.assign(long=X["x0"].round(0), lat=X["x1"].round(0))
    n_places = len(places.groupby(["long", "lat"]))
    for model, term in [
        (network_model, "linear_predictor"),
        (network_model, "x2"),
        (network_model, "intercept"),
        (global_model, "x2"),
    ]:
        ax = plot_coefficient_map(model, places, term)
        _saved(ax, tmp_path, f"map_{term}.png")
        assert len(ax.collections[0].get_offsets()) == n_places
    ax = plot_coefficient_map(network_model, X, x="x0", y="x1")  # model inputs
    _saved(ax, tmp_path)
    plt.close("all")


def test_plot_coefficient_map_bad_input(network_model, poisson_data):
    X, _ = poisson_data
    with pytest.raises(ValueError, match="'term' parameter"):
        plot_coefficient_map(network_model, X, "nope", x="x0", y="x1")
    with pytest.raises(ValueError, match="coordinate columns"):
        plot_coefficient_map(network_model, X.to_numpy(), x="x0", y="x1")
    with pytest.raises(ValueError, match="coordinate columns"):
        plot_coefficient_map(network_model, X)  # no long/lat
