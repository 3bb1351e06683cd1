"""Each fit owns its random stream: concurrent fits are reproducible."""

from __future__ import annotations

import threading

import numpy as np
import pytest
import torch

from autoglm_graph import GraphGLMRegressor
from autoglm_graph.datasets import make_varying_coefficients
from autoglm_graph.modules import NetConfig

SMALL = dict(hidden_channels=16, heads=2, max_epochs=6, family="poisson")


@pytest.fixture(scope="module")
def rows():
    X, y, _ = make_varying_coefficients(600, 3, family="poisson", random_state=0)
    return X, y


def _fit_in_threads(rows, params_per_thread):
    X, y = rows
    results: dict = {}
    start = threading.Barrier(len(params_per_thread))

    def work(i, params):
        model = GraphGLMRegressor(**SMALL, **params)
        start.wait()  # all fits draw at the same time
        results[i] = model.fit(X, y).predict(X)

    threads = [
        threading.Thread(target=work, args=(i, p))
        for i, p in enumerate(params_per_thread)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return [results[i] for i in range(len(params_per_thread))]


def test_concurrent_seeded_fits_equal_a_fit_alone(rows):
    X, y = rows
    alone = GraphGLMRegressor(**SMALL, random_state=0).fit(X, y).predict(X)
    # Two fits of the same seed and one of another, all at once.
    same, again, other = _fit_in_threads(
        rows, [{"random_state": 0}, {"random_state": 0}, {"random_state": 1}]
    )
    np.testing.assert_array_equal(same, alone)
    np.testing.assert_array_equal(again, alone)
    assert np.abs(other - alone).max() > 0  # the seed matters


def test_a_fit_leaves_the_global_generator_alone(rows):
    X, y = rows
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    GraphGLMRegressor(**SMALL, random_state=0).fit(X, y)
    torch.testing.assert_close(torch.rand(3), expected)


def test_seeded_build_is_the_global_seed_and_owns_the_stream():
    config = NetConfig(4, 5, hidden_channels=8, heads=2, dropout=0.5)
    torch.manual_seed(7)
    reference = config.build()
    follow = torch.rand(4)
    net = config.build(seed=7)
    for got, expected in zip(net.parameters(), reference.parameters(), strict=True):
        torch.testing.assert_close(got, expected)
    # Its dropout continues the seed's stream where the build left it.
    torch.testing.assert_close(torch.rand(4, generator=net.generator), follow)
