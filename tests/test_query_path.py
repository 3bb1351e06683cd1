"""New rows' pass through the fitted network: all heads in one product and the
training rows' projections kept, both the same bits as the training's path."""

from __future__ import annotations

import pytest
import torch

from autoglm_graph import FitPolicy, GraphGLMRegressor
from autoglm_graph.datasets import make_varying_coefficients
from autoglm_graph.network.fused import FixedDegreeAdjacency, fixed_degree_gat
from autoglm_graph.network.rows import query_forward

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")


@pytest.mark.parametrize("threshold", [0.2, -1.0])
def test_all_heads_forced_gives_the_per_head_bits(threshold):
    from torch_geometric.nn import GATConv

    from autoglm_graph.neighbors import cosine_topk

    generator = torch.Generator().manual_seed(0)
    queries, base = torch.randn(50, 5, generator=generator), torch.randn(70, 5)
    graph = cosine_topk(queries, base, n_neighbors=6, threshold=threshold)
    torch.manual_seed(0)
    conv = GATConv((11, 9), 4, heads=3, add_self_loops=False, edge_dim=1).eval()
    x = (torch.randn(70, 11), torch.randn(50, 9))
    per_head = FixedDegreeAdjacency(graph, 70, all_heads_max_src_rows=0)
    forced = FixedDegreeAdjacency(graph, 70, all_heads_max_src_rows=0, all_heads=True)
    assert not per_head.all_heads and forced.all_heads
    with torch.no_grad():
        expected, alpha = fixed_degree_gat(conv, x, per_head, True)
        got, got_alpha = fixed_degree_gat(conv, x, forced, True)
    assert torch.equal(got, expected) and torch.equal(got_alpha, alpha)


@pytest.fixture(scope="module")
def fitted():
    X, y, _ = make_varying_coefficients(600, 3, family="poisson", random_state=0)
    # One product per head in training (the threshold below the rows), so
    # that prediction's all-heads product is checked against it.
    model = GraphGLMRegressor(
        family="poisson",
        hidden_channels=16,
        heads=4,
        max_epochs=4,
        early_stopping=False,  # the network kept, whatever its gain
        random_state=0,
        device="cpu",
        fit_policy=FitPolicy(all_heads_max_src_rows=1),
    ).fit(X[:500], y[:500])
    assert not model.is_global_only_ and model._fitted.net.fused
    predictor = model.predictor()
    context = torch.as_tensor(
        predictor.glm_terms.context(predictor.design(X[500:])), dtype=torch.float32
    )
    return model._fitted, context


def _reference(network, context, return_attention=False):
    """The pass as training's validation runs it: the network's own
    adjacency (one product per head here), the states projected anew."""
    with torch.no_grad():
        z, queries = network.graph_vectors(context)
        graph = network.search(queries.float())
        n_src = network.rows.context.shape[0]
        adjacency = network.net.adjacency(graph, n_src=n_src)
        assert not adjacency.all_heads
        return query_forward(
            network.net,
            context,
            network.states,
            adjacency,
            z=z,
            precision=network.precision,
            return_attention=return_attention,
        )


def test_a_query_gives_the_bits_of_the_training_path(fitted):
    network, context = fitted
    graph = network.search(network.graph_vectors(context)[1].float())
    assert network.query_adjacency(graph).all_heads
    assert torch.equal(network.query(context), _reference(network, context))
    out, (edges, attention) = network.query(context, return_attention=True)
    ref, (ref_edges, ref_attention) = _reference(network, context, True)
    assert torch.equal(out, ref)
    assert torch.equal(edges, ref_edges) and torch.equal(attention, ref_attention)


def test_the_projections_are_kept_and_formed_again_after_a_change(fitted):
    network, context = fitted
    network.query(context[:5])
    kept = network.source_projections()
    assert kept is network.source_projections()  # formed once
    assert len(kept) == network.net.num_layers
    conv = network.net.convs[0]
    saved = conv.lin_src.weight.detach().clone()
    try:
        with torch.no_grad():
            conv.lin_src.weight.mul_(1.5)  # in place: same tensor, new version
        assert network.source_projections() is not kept
        assert torch.equal(network.query(context), _reference(network, context))
    finally:
        with torch.no_grad():
            conv.lin_src.weight.copy_(saved)
    assert torch.equal(network.query(context), _reference(network, context))


def test_the_projections_are_not_saved(fitted):
    network, context = fitted
    network.query(context[:5])
    config, tensors = network.state()
    assert not any("projection" in name for name in [*tensors, *config])
