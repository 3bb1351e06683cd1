"""Piecewise-linear encodings of numeric context columns (network area)."""

from __future__ import annotations

import pytest
import torch

from autoglm_graph.network.embeddings import (
    PiecewiseLinearEncoding,
    numeric_columns,
    quantile_edges,
)


def test_numeric_columns_are_the_non_binary_ones():
    context = torch.tensor([[0.5, 1.0, 0.0, 2.0], [-1.0, 0.0, 1.0, 2.0]])
    assert numeric_columns(context) == (0, 3)


def test_linear_reads_the_columns_as_they_are_and_other_kinds_are_refused():
    import numpy as np

    from autoglm_graph import GraphGLMRegressor
    from autoglm_graph.datasets import make_varying_coefficients

    X, y, _ = make_varying_coefficients(1200, 3, family="poisson", random_state=0)
    params = {"family": "poisson", "max_epochs": 8, "random_state": 0}
    # "linear": the encoder's weights keep their names (files saved before
    # the option load as they did).
    linear = GraphGLMRegressor(
        numeric_embedding="linear", local_penalty=1e-6, **params
    ).fit(X, y)
    assert not linear.is_global_only_
    assert isinstance(linear.network_.encoder[0], torch.nn.Linear)
    assert np.isfinite(linear.predict(X)).all()
    # "periodic" (PLR embeddings) was removed (issue #59).
    for kind in ("periodic", "plr"):
        with pytest.raises(ValueError, match="'numeric_embedding' parameter"):
            GraphGLMRegressor(numeric_embedding=kind, **params).fit(X, y)


def test_piecewise_linear_encoding_is_the_ple_formula():
    # Column 1 has edges 0, 1, 3: two bins; column 2 edges -1, 1: one bin.
    layer = PiecewiseLinearEncoding(3, [1, 2], [(0.0, 1.0, 3.0), (-1.0, 1.0)])
    x = torch.tensor(
        [[5.0, -0.5, 0.0], [6.0, 0.5, 3.0], [7.0, 2.0, -3.0], [8.0, 4.0, 1.0]]
    )
    out = layer(x)
    assert layer.out_channels == 1 + 2 + 1 == out.shape[1]
    torch.testing.assert_close(out[:, 0], x[:, 0])  # the other column first
    # First bin unclipped below, last bin unclipped above, inner clipped.
    expected_1 = torch.tensor([[-0.5, 0.0], [0.5, 0.0], [1.0, 0.5], [1.0, 1.5]])
    torch.testing.assert_close(out[:, 1:3], expected_1)
    torch.testing.assert_close(out[:, 3], (x[:, 2] + 1.0) / 2.0)


def test_piecewise_linear_encoding_spans_the_column_itself():
    # x - b_0 is sum_t width_t * bin_t: the linear encoder's input is kept.
    torch.manual_seed(0)
    x = torch.randn(200, 2)
    edges = quantile_edges(x, [0, 1], n_bins=8)
    layer = PiecewiseLinearEncoding(2, [0, 1], edges)
    out = layer(x)
    for i, column in enumerate(edges):
        widths = torch.diff(torch.tensor(column, dtype=torch.float32))
        bins = out[:, 8 * i : 8 * (i + 1)]
        torch.testing.assert_close(bins @ widths + column[0], x[:, i])


def test_quantile_edges_are_distinct_and_a_constant_column_gets_one_bin():
    x = torch.tensor([[0.0, 2.0], [0.0, 2.0], [0.0, 2.0], [1.0, 2.0], [3.0, 2.0]])
    edges = quantile_edges(x, [0, 1], n_bins=4)
    assert edges[0] == (0.0, 1.0, 3.0)
    assert edges[1] == (2.0, 3.0)


def test_piecewise_linear_encoding_refuses_bad_edges():
    with pytest.raises(ValueError, match="increasing"):
        PiecewiseLinearEncoding(2, [0], [(1.0, 1.0)])
    with pytest.raises(ValueError, match="increasing"):
        PiecewiseLinearEncoding(2, [0, 1], [(0.0, 1.0)])
    with pytest.raises(ValueError, match=r"numeric columns must be increasing"):
        PiecewiseLinearEncoding(2, [1, 0], [(0.0, 1.0), (0.0, 1.0)])


def test_estimator_with_piecewise_linear_encoding_fits_saves_and_loads(tmp_path):
    import hashlib
    import json

    import numpy as np

    from autoglm_graph import FitPolicy, GraphGLMRegressor, load
    from autoglm_graph.datasets import make_varying_coefficients
    from autoglm_graph.persistence import ModelFileError

    X, y, _ = make_varying_coefficients(1200, 3, family="poisson", random_state=0)
    model = GraphGLMRegressor(
        family="poisson",
        numeric_embedding="piecewise_linear",
        fit_policy=FitPolicy(embedding_bins=6),
        local_penalty=1e-6,
        max_epochs=8,
        random_state=0,
    ).fit(X, y)
    assert not model.is_global_only_
    encoding = model.network_.encoder[0]
    assert isinstance(encoding, PiecewiseLinearEncoding)
    assert encoding.numeric.tolist() == [0, 1, 2]
    assert all(len(column) == 7 for column in encoding.edges)
    path = model.save(tmp_path / "m")
    loaded = load(path)
    assert loaded.network_.encoder[0].edges == encoding.edges
    np.testing.assert_array_equal(loaded.predict(X), model.predict(X))
    del loaded
    # A file whose edges do not increase is refused before anything is built.
    config = json.loads((path / "model.json").read_text())
    net = config["fitted"]["network"]["net"]
    net["numeric_edges"][0] = net["numeric_edges"][0][::-1]
    (path / "model.json").write_text(json.dumps(config))
    members = ("model.json", "tensors.safetensors", "preprocessor.skops")
    (path / "checksums.sha256").write_text(
        "".join(
            f"{hashlib.sha256((path / m).read_bytes()).hexdigest()}  {m}\n"
            for m in members
        )
    )
    with pytest.raises(ModelFileError, match="numeric_edges"):
        load(path)


def test_a_layer_started_as_linear_reads_the_raw_columns_linearly():
    torch.manual_seed(0)
    x = torch.randn(300, 4)
    x[:, 2] = (x[:, 2] > 0).float()  # an indicator passes through
    edges = quantile_edges(x, [0, 1, 3], n_bins=16)
    encoding = PiecewiseLinearEncoding(4, [0, 1, 3], edges)
    layer = torch.nn.Linear(encoding.out_channels, 8)
    encoding.start_as_linear(layer)
    with_intercept = torch.cat([x, torch.ones(300, 1)], dim=1)
    out = layer(encoding(x)).detach()
    affine = torch.linalg.lstsq(with_intercept, out).solution
    torch.testing.assert_close(with_intercept @ affine, out, atol=1e-5, rtol=0)
    # Beyond the training range too (the end bins extend linearly).
    far = torch.cat([3 * torch.randn(50, 4), torch.ones(50, 1)], dim=1)
    torch.testing.assert_close(
        far @ affine, layer(encoding(far[:, :4])).detach(), atol=1e-4, rtol=0
    )
    # A default-initialised layer does not: the test can fail.
    other = torch.nn.Linear(encoding.out_channels, 8)
    residual = other(encoding(x)).detach()
    fit = torch.linalg.lstsq(with_intercept, residual).solution
    assert (with_intercept @ fit - residual).abs().max() > 1e-2


@pytest.mark.parametrize("training", [True, False], ids=["training", "eval"])
@pytest.mark.parametrize("predict_chunk", [7, 12, 5000])
def test_encode_without_gradients_in_chunks_is_the_whole_pass(training, predict_chunk):
    """The chunked no-gradient encoder (the fit's memory bound) gives the
    whole pass's values and, in training mode, the same dropout masks."""
    from autoglm_graph import FitPolicy
    from autoglm_graph.network.modules import GraphGLMNet

    x = torch.randn(1003, 5, generator=torch.Generator().manual_seed(0))
    net = GraphGLMNet(
        5,
        3,
        hidden_channels=7,
        heads=1,
        dropout=0.3,
        numeric_embedding="piecewise_linear",
        numeric_columns=(0, 2, 3),
        numeric_edges=quantile_edges(x, (0, 2, 3), 8),
        policy=FitPolicy(predict_chunk=predict_chunk),
    ).train(training)
    net.generator = torch.Generator().manual_seed(1)
    with torch.no_grad():
        chunked = net.encode(x)
    net.generator.manual_seed(1)
    whole = net.encoder(x).detach()
    # Dropout zeroes whole entries before the last linear layer, so equal
    # masks show as equal values; misaligned masks would differ by O(1).
    torch.testing.assert_close(chunked, whole, rtol=1e-5, atol=1e-5)
