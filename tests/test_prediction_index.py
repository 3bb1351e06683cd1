"""The prediction index: recall, batch invariance, determinism, saving."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
import torch

from autoglm_graph import FitPolicy, GraphGLMRegressor, cosine_topk, recall_at_k
from autoglm_graph.datasets import make_varying_coefficients
from autoglm_graph.neighbors._prediction_index import PredictionIndex
from autoglm_graph.persistence._io import load_model, save_model

pytest.importorskip("faiss")
pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")

#: The index from 1,000 training rows, so that a small fit uses it.
POLICY = FitPolicy(predict_index_min_rows=1_000)


@pytest.fixture(scope="module")
def data():
    X, y, _ = make_varying_coefficients(4_000, 8, 20, family="poisson", random_state=0)
    return X[:3_000], y[:3_000], X[3_000:]


@pytest.fixture(scope="module")
def model(data):
    X, y, _ = data
    # The prediction index is the CPU's (CUDA searches exactly), and equal to
    # the bit is the CPU's guarantee.
    return GraphGLMRegressor(
        family="poisson", max_epochs=3, random_state=0, fit_policy=POLICY, device="cpu"
    ).fit(X, y)


def test_the_index_reaches_its_recall_on_new_rows(model, data):
    fitted = model._fitted
    assert fitted.prediction_index is not None
    assert fitted.prediction_index.recall >= 0.99
    context = torch.as_tensor(model.predictor().design(data[2]), dtype=torch.float32)
    queries = fitted.graph_vectors(context)[1].float()
    exact = cosine_topk(
        queries,
        fitted.base_vectors().float(),
        n_neighbors=fitted.graph.n_neighbors,
        threshold=fitted.graph.threshold,
    )
    assert recall_at_k(fitted.search(queries), exact) >= 0.99


def test_a_row_is_predicted_alone_as_in_a_batch(model, data):
    X_new = data[2][:100]
    together = model.predict(X_new)
    alone = np.concatenate([model.predict(X_new[i : i + 1]) for i in range(100)])
    np.testing.assert_allclose(alone, together, rtol=1e-5)


def test_the_same_fit_gives_the_same_predictions(model, data):
    X, y, X_new = data
    again = GraphGLMRegressor(
        family="poisson", max_epochs=3, random_state=0, fit_policy=POLICY, device="cpu"
    ).fit(X, y)
    assert again._fitted.prediction_index == model._fitted.prediction_index
    np.testing.assert_array_equal(again.predict(X_new), model.predict(X_new))


def test_pickling_and_saving_rebuild_the_same_index(model, data, tmp_path):
    expected = model.predict(data[2])
    copy = pickle.loads(pickle.dumps(model))
    assert copy._fitted.index is None  # rebuilt at the first search
    np.testing.assert_array_equal(copy.predict(data[2]), expected)
    path = save_model(model, tmp_path / "model.agg")
    loaded = load_model(path)
    assert loaded._fitted.prediction_index == model._fitted.prediction_index
    np.testing.assert_array_equal(loaded.predict(data[2]), expected)


def test_below_the_threshold_prediction_searches_exactly(data):
    X, y, _ = data
    model = GraphGLMRegressor(family="poisson", max_epochs=2, random_state=0)
    model.fit(X, y)
    assert model._fitted.prediction_index is None
    assert model._fitted.index[1].backend_ == "exact"


@pytest.mark.parametrize(
    "config",
    [
        {"m": 32, "ef_construction": 40, "ef_search": 10**9, "recall": 0.99},
        {"m": 32, "ef_construction": 40, "ef_search": 48},
        {"m": True, "ef_construction": 40, "ef_search": 48, "recall": 0.99},
        {"m": 32, "ef_construction": 40, "ef_search": 48, "recall": 2.0},
    ],
)
def test_a_malformed_configuration_is_refused(config):
    with pytest.raises(ValueError, match="prediction index"):
        PredictionIndex.from_config(config)
