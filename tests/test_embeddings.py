"""Periodic (PLR) embeddings of numeric context columns (network area)."""

from __future__ import annotations

import math

import pytest
import torch

from autoglm_graph.network.embeddings import PeriodicEmbedding, numeric_columns


def test_numeric_columns_are_the_non_binary_ones():
    context = torch.tensor([[0.5, 1.0, 0.0, 2.0], [-1.0, 0.0, 1.0, 2.0]])
    assert numeric_columns(context) == (0, 3)


def test_shapes_order_and_repr():
    torch.manual_seed(0)
    layer = PeriodicEmbedding(5, [3, 0], n_frequencies=4, embedding_channels=3)
    x = torch.randn(7, 5)
    out = layer(x)
    assert layer.out_channels == 5 - 2 + 2 * 3 == out.shape[1]
    # The other columns first, unchanged and in their order.
    torch.testing.assert_close(out[:, :3], x[:, [1, 2, 4]])
    assert (out[:, 3:] >= 0).all()  # after the ReLU
    assert repr(layer) == (
        "PeriodicEmbedding(5 -> 9, numeric=2, n_frequencies=4, "
        "embedding_channels=3, sigma=0.1)"
    )


def test_embedding_is_the_plr_formula():
    torch.manual_seed(0)
    layer = PeriodicEmbedding(2, [1], n_frequencies=3, embedding_channels=2)
    x = torch.randn(4, 2)
    c = layer.frequencies[0]
    v = 2 * math.pi * x[:, 1:2] * c
    periodic = torch.cat([torch.cos(v), torch.sin(v)], dim=1)
    expected = torch.relu(periodic @ layer.weight[0] + layer.bias[0])
    torch.testing.assert_close(layer(x)[:, 1:], expected)


def test_rows_are_embedded_independently_and_gradients_flow():
    torch.manual_seed(1)
    layer = PeriodicEmbedding(3, [0, 2])
    x = torch.randn(6, 3)
    torch.testing.assert_close(layer(x)[2:3], layer(x[2:3]))
    layer(x).sum().backward()
    assert layer.frequencies.grad is not None and layer.frequencies.grad.abs().sum() > 0


def test_no_numeric_column_is_the_identity():
    layer = PeriodicEmbedding(3, [])
    x = torch.randn(4, 3)
    assert layer(x) is x and layer.out_channels == 3


def test_bad_columns_are_refused():
    with pytest.raises(ValueError, match=r"numeric columns must lie in \[0, 3\)"):
        PeriodicEmbedding(3, [3])


def test_estimator_with_periodic_embeddings_fits_saves_and_loads(tmp_path):
    import numpy as np

    from autoglm_graph import GraphGLMRegressor, load
    from autoglm_graph.datasets import make_varying_coefficients

    X, y, _ = make_varying_coefficients(1200, 3, family="poisson", random_state=0)
    params = {"family": "poisson", "max_epochs": 8, "random_state": 0}
    model = GraphGLMRegressor(
        numeric_embedding="periodic", local_penalty=1e-6, **params
    )
    model.fit(X, y)
    assert not model.is_global_only_
    embedding = model.network_.encoder[0]
    assert isinstance(embedding, PeriodicEmbedding)
    assert embedding.numeric.tolist() == [0, 1, 2]
    loaded = load(model.save(tmp_path / "m"))
    np.testing.assert_array_equal(loaded.predict(X), model.predict(X))
    # The default reads the columns linearly: the encoder's weights keep their
    # names (files saved before the option load as they did).
    linear = GraphGLMRegressor(local_penalty=1e-6, **params).fit(X, y)
    assert isinstance(linear.network_.encoder[0], torch.nn.Linear)
    with pytest.raises(ValueError, match="numeric_embedding"):
        GraphGLMRegressor(numeric_embedding="plr", **params).fit(X, y)
