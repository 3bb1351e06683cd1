"""One fitted model answers several threads at once as it answers one."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from autoglm_graph import GraphGLMClassifier, GraphGLMRegressor
from autoglm_graph.datasets import make_varying_coefficients

SMALL = dict(hidden_channels=16, heads=2, max_epochs=4, random_state=0)


@pytest.fixture(scope="module")
def models():
    X, y, _ = make_varying_coefficients(500, 3, family="poisson", random_state=0)
    labels = (y > np.median(y)).astype(int)
    return X, {
        "poisson": GraphGLMRegressor(family="poisson", **SMALL).fit(X, y),
        "input-graph": GraphGLMRegressor(
            family="poisson", graph_space="input", **SMALL
        ).fit(X, y),
        "classifier": GraphGLMClassifier(**SMALL).fit(X, labels),
        "global": GraphGLMRegressor(family="poisson", local_penalty=np.inf).fit(X, y),
    }


@pytest.mark.parametrize("kind", ["poisson", "input-graph", "classifier", "global"])
def test_threads_predicting_with_one_model_agree_with_one_thread(models, kind):
    X, fitted = models
    model = fitted[kind]
    answer = model.predict_proba if kind == "classifier" else model.predict
    rng = np.random.default_rng(0)
    batches = [rng.choice(len(X), size=rng.integers(1, 60)) for _ in range(80)]
    alone = [answer(X[b]) for b in batches]
    with ThreadPoolExecutor(max_workers=4) as pool:
        together = list(pool.map(lambda b: answer(X[b]), batches))
    for got, expected in zip(together, alone, strict=True):
        np.testing.assert_array_equal(got, expected)
