"""TabR's difference message (``FitPolicy.edge_difference_channels``)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from autoglm_graph import FitPolicy, GraphGLMRegressor, load
from autoglm_graph.datasets import make_varying_coefficients
from autoglm_graph.neighbors import cosine_topk
from autoglm_graph.network.edge_difference import EdgeDifferenceMessage
from autoglm_graph.network.modules import GraphGLMNet
from autoglm_graph.network.rows import query_forward

POLICY = FitPolicy(edge_difference_channels=3)


def _net(message_passing: str, policy: FitPolicy = POLICY) -> GraphGLMNet:
    return GraphGLMNet(
        6,
        7,
        hidden_channels=16,
        heads=4,
        num_layers=2,
        target_channels=2,
        message_passing=message_passing,
        policy=policy,
    )


def _pair() -> tuple[GraphGLMNet, GraphGLMNet]:
    torch.manual_seed(0)
    fused, reference = _net("auto"), _net("pyg")
    with torch.no_grad():
        for p in fused.parameters():
            p.normal_(0, 0.3)  # the zero head would hide differences
    reference.load_state_dict(fused.state_dict())
    return fused.eval(), reference.eval()


def _masked_graph(queries, base, k=5):
    graph = cosine_topk(queries, base, n_neighbors=k, threshold=0.1)
    graph.mask[4] = False  # a row without any real neighbour
    return graph


def test_off_by_default_and_the_weights_of_earlier_files_are_unchanged():
    plain = _net("auto", FitPolicy())
    assert plain.edge_message is None
    assert not any("edge_message" in key for key in plain.state_dict())
    assert len(plain.source_projection(1, torch.randn(3, 18))) == 2
    # Only the last layer (the outcome messages) has the difference message.
    net = _net("auto")
    assert len(net.source_projection(0, torch.randn(3, 16))) == 2
    assert len(net.source_projection(1, torch.randn(3, 18))) == 3


def test_the_untrained_message_is_zero_so_the_network_starts_without_it():
    torch.manual_seed(3)
    with_message, without = _net("auto").eval(), _net("auto", FitPolicy()).eval()
    assert torch.equal(with_message.edge_message.out, torch.zeros(16, 4 * 3))
    with torch.no_grad():
        without.head[-1].weight.normal_()  # a head that is not zero
    # The same weights, the message's own aside.
    missing, unexpected = with_message.load_state_dict(
        without.state_dict(), strict=False
    )
    assert all(key.startswith("edge_message.") for key in missing) and missing
    assert not unexpected
    context, targets = torch.randn(30, 6), torch.randn(30, 2)
    graph = cosine_topk(context, n_neighbors=4)
    a, _ = with_message(context, targets, with_message.adjacency(graph, 30))
    b, _ = without(context, targets, without.adjacency(graph, 30))
    assert a.abs().sum() > 0
    torch.testing.assert_close(a, b, atol=0, rtol=0)


def test_the_message_is_the_attention_average_of_the_activated_differences():
    """Against a loop over rows, heads and neighbours of the formula."""
    torch.manual_seed(1)
    message = EdgeDifferenceMessage(hidden_channels=5, heads=2, channels=3)
    with torch.no_grad():
        message.bias.normal_()
        message.out.normal_()
    h_dst, h_src = torch.randn(4, 5), torch.randn(6, 5)
    indices = torch.randint(0, 6, (4, 3))
    alpha = torch.rand(4, 2, 3)
    got = message.fixed_degree(h_dst, message.sources(h_src), indices, alpha)
    V, U, b = message.project, message.out, message.bias
    expected = torch.zeros(4, 5)
    for i in range(4):
        per_head = []
        for head in range(2):
            total = torch.zeros(3)
            for slot in range(3):
                j = indices[i, slot]
                total += alpha[i, head, slot] * torch.relu(
                    V @ (h_dst[i] - h_src[j]) + b
                )
            per_head.append(total)
        expected[i] = U @ torch.cat(per_head)
    torch.testing.assert_close(got, expected)
    # The edge-list form gives the same message.
    rows = torch.arange(4).repeat_interleave(3)
    edge_index = torch.stack([indices.reshape(-1), rows])
    flat_alpha = alpha.transpose(1, 2).reshape(-1, 2)
    listed = message.edge_list(h_dst, message.sources(h_src), edge_index, flat_alpha)
    torch.testing.assert_close(listed, expected)


def test_fast_path_equals_pyg_path_forward_query_and_gradients():
    fused, reference = _pair()
    context, targets = torch.randn(50, 6), torch.randn(50, 2)
    graph = _masked_graph(context, context)
    out_f, states_f = fused(context, targets, fused.adjacency(graph, 50))
    out_r, states_r = reference(context, targets, reference.adjacency(graph, 50))
    torch.testing.assert_close(out_f, out_r, atol=1e-5, rtol=1e-5)

    out_f.square().sum().backward()
    out_r.square().sum().backward()
    for (name, a), b in zip(
        fused.named_parameters(), reference.parameters(), strict=True
    ):
        torch.testing.assert_close(a.grad, b.grad, atol=1e-4, rtol=1e-4, msg=name)
    assert fused.edge_message.project.grad.abs().sum() > 0
    # The message is part of the output: without it the output differs.
    with torch.no_grad():
        fused.edge_message.out.zero_()
        out_without, _ = fused(context, targets, fused.adjacency(graph, 50))
        assert not torch.allclose(out_without, out_f, atol=1e-3)
    fused.load_state_dict(reference.state_dict())

    queries = torch.randn(9, 6)
    q_graph = _masked_graph(queries, context)
    with torch.no_grad():
        q_f = fused.forward_query(queries, states_f, fused.adjacency(q_graph, 50))
        q_r = reference.forward_query(
            queries, states_r, reference.adjacency(q_graph, 50)
        )
        projected = [
            fused.source_projection(layer, x) for layer, x in enumerate(states_f.layers)
        ]
        q_p = query_forward(
            fused,
            queries,
            states_f,
            fused.adjacency(q_graph, 50),
            precision="fp32",
            projected=projected,
        )
    torch.testing.assert_close(q_f, q_r, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(q_p, q_f, atol=1e-6, rtol=1e-6)


@pytest.fixture(scope="module")
def data():
    X, y, _ = make_varying_coefficients(
        700, 3, n_groups=3, family="poisson", random_state=0
    )
    return X[:600], y[:600], X[600:]


@pytest.mark.parametrize(
    "policy",
    [
        POLICY,
        # Cached-state steps over parts: the sources' projections include
        # the message's and are written back by part.
        FitPolicy(
            edge_difference_channels=3,
            cached_state_min_rows=100,
            cached_state_part_rows=150,
        ),
    ],
    ids=["full_batch", "cached_states"],
)
def test_an_estimator_fits_with_the_message_and_its_file_predicts_the_same(
    data, policy, tmp_path
):
    X, y, X_test = data
    model = GraphGLMRegressor(
        family="poisson",
        hidden_channels=16,
        max_epochs=8,
        random_state=0,
        fit_policy=policy,
    ).fit(X, y)
    net = model.network_
    assert net.edge_message.project.shape == (3, 16)
    # Trained away from its zero start.
    assert net.edge_message.out.abs().sum() > 0
    predictions = model.predict(X_test)
    assert np.isfinite(predictions).all()
    loaded = load(model.save(tmp_path / "model.zip"))
    np.testing.assert_allclose(loaded.predict(X_test), predictions, rtol=1e-6)
