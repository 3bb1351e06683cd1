"""The fixed-degree fast path equals torch_geometric's GATConv; precision paths."""

import dataclasses

import numpy as np
import pytest
import torch
from torch_geometric.nn import GATConv

from autoglm_graph import FitPolicy, GraphGLMRegressor
from autoglm_graph.datasets import make_varying_coefficients
from autoglm_graph.neighbors import cosine_topk
from autoglm_graph.neighbors._graph import NeighborGraph
from autoglm_graph.network import NetConfig
from autoglm_graph.network.epochs import khop_subgraph
from autoglm_graph.network.fused import (
    FixedDegreeAdjacency,
    FixedDegreeGATConv,
    fixed_degree_gat,
)
from autoglm_graph.network.modules import GraphGLMNet
from autoglm_graph.network.training import TrainingState


def _graph(n_dst=60, n_src=80, k=6, seed=0, masked=True) -> NeighborGraph:
    generator = torch.Generator().manual_seed(seed)
    queries = torch.randn(n_dst, 5, generator=generator)
    base = torch.randn(n_src, 5, generator=generator)
    if not masked:  # every neighbour real: the attention's unmasked path
        return cosine_topk(queries, base, n_neighbors=k, threshold=-1.0)
    graph = cosine_topk(queries, base, n_neighbors=k, threshold=0.2)
    graph.mask[7] = False  # a row without any real neighbour
    # A slot an approximate search left empty: index -1, similarity -inf.
    graph.indices[3, -1], graph.similarities[3, -1] = -1, -float("inf")
    graph.mask[3, -1] = False
    return graph


@pytest.mark.parametrize("masked", [True, False])
@pytest.mark.parametrize("heads, channels", [(1, 8), (4, 4), (3, 5)])
def test_equals_gatconv_forward_backward_and_attention(heads, channels, masked):
    torch.manual_seed(0)
    graph = _graph(masked=masked)
    n_dst, n_src = graph.indices.shape[0], 80
    x_src = torch.randn(n_src, 11, requires_grad=True)
    x_dst = torch.randn(n_dst, 9, requires_grad=True)
    conv = GATConv((11, 9), channels, heads=heads, add_self_loops=False, edge_dim=1)
    with torch.no_grad():  # non-zero bias and edge weights, so both are checked
        conv.bias.normal_()
        conv.att_edge.normal_()
    edge_index, weight = graph.to_edge_index()
    ref, (_, ref_alpha) = conv(
        (x_src, x_dst),
        edge_index,
        edge_attr=weight.unsqueeze(1),
        return_attention_weights=True,
    )
    adjacency = FixedDegreeAdjacency(graph, n_src)
    assert adjacency.unmasked is not masked
    out, alpha = fixed_degree_gat(conv, (x_src, x_dst), adjacency, True)
    torch.testing.assert_close(out, ref, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(alpha[graph.mask], ref_alpha, atol=1e-6, rtol=1e-5)
    assert torch.all(alpha[~graph.mask] == 0)
    if masked:
        torch.testing.assert_close(out[7], conv.bias.expand(heads * channels))

    upstream = torch.randn_like(ref)
    inputs = [x_src, x_dst, *conv.parameters()]
    expected = torch.autograd.grad((ref * upstream).sum(), inputs)
    got = torch.autograd.grad((out * upstream).sum(), inputs)
    for g_got, g_ref in zip(got, expected, strict=True):
        torch.testing.assert_close(g_got, g_ref, atol=1e-5, rtol=1e-4)

    # The fast path's own layer, GATConv's weights loaded: the same bits.
    fixed = FixedDegreeGATConv((11, 9), channels, heads=heads)
    assert repr(fixed) == f"FixedDegreeGATConv((11, 9), {channels}, heads={heads})"
    fixed.load_state_dict(conv.state_dict())
    out_fixed, alpha_fixed = fixed((x_src, x_dst), adjacency, True)
    assert torch.equal(out_fixed, out) and torch.equal(alpha_fixed, alpha)
    inputs_fixed = [x_src, x_dst, *fixed.parameters()]
    got_fixed = torch.autograd.grad((out_fixed * upstream).sum(), inputs_fixed)
    for g_fixed, g_got in zip(got_fixed, got, strict=True):
        assert torch.equal(g_fixed, g_got)


@pytest.mark.parametrize(
    "config, policy",
    [
        ({}, {}),
        ({"num_layers": 3, "heads": 2, "target_channels": 3, "dropout": 0.1}, {}),
        ({"num_layers": 1, "heads": 1, "hidden_channels": 8}, {}),
        (
            {
                "numeric_embedding": "piecewise_linear",
                "numeric_columns": (0, 2),
                "numeric_edges": ((-1.0, 0.0, 1.0), (-2.0, 0.5, 2.0)),
            },
            {},
        ),
    ],
)
def test_fused_layers_draw_the_weights_of_gatconv(config, policy):
    """A network on the fast path (FixedDegreeGATConv, no torch_geometric)
    and one of torch_geometric's GATConv, built at one seed: the same
    parameters, in the same order, the same bits, the generator left in the
    same state (a fit is the same whichever layer holds the weights)."""
    spec = NetConfig(in_channels=5, out_channels=12, **config)
    fused = spec.build(seed=3, policy=FitPolicy(**policy))
    reference = dataclasses.replace(spec, message_passing="pyg")
    reference = reference.build(seed=3, policy=FitPolicy(**policy))
    assert isinstance(fused.convs[0], FixedDegreeGATConv)
    assert isinstance(reference.convs[0], GATConv)
    named = list(fused.named_parameters())
    assert [n for n, _ in named] == [n for n, _ in reference.named_parameters()]
    for (name, a), b in zip(named, reference.parameters(), strict=True):
        assert torch.equal(a, b), name
    assert torch.equal(fused.generator.get_state(), reference.generator.get_state())


def test_aggregate_gradcheck_in_float64():
    graph = _graph(n_dst=12, n_src=15, k=4)
    adjacency = FixedDegreeAdjacency(graph, 15)
    from autoglm_graph.network.fused import _AttentionAggregate

    heads = 2
    alpha = torch.rand(12, heads, 4, dtype=torch.float64, requires_grad=True)
    x = torch.randn(15, heads, 3, dtype=torch.float64, requires_grad=True)

    def aggregate(a, states):
        # The kernel computes in float32 by design; gradcheck its float64 maths
        # through a float32 round trip with a tolerance to match.
        return _AttentionAggregate.apply(a, states, adjacency)

    out = aggregate(alpha.float(), x.float())
    assert out.shape == (12, heads, 3)
    # Reference: per head, the dense [12, 15] matrix of attention weights
    # (slots that are not neighbours point at row 0 in the kernel's layout).
    dense = torch.zeros(heads, 12, 15, dtype=torch.float64)
    rows = torch.arange(12).repeat_interleave(4)
    cols = adjacency.indices.reshape(-1)
    for h in range(heads):
        weights = alpha.detach()[:, h].reshape(-1)
        dense[h].index_put_((rows, cols), weights, accumulate=True)
    expected = (dense @ x.detach().transpose(0, 1)).transpose(0, 1)
    torch.testing.assert_close(out.double(), expected, atol=1e-5, rtol=1e-5)
    assert torch.autograd.gradcheck(
        lambda a, s: aggregate(a.float(), s.float()).double(),
        (alpha, x),
        eps=1e-3,
        atol=1e-2,
    )


@pytest.mark.parametrize("all_heads", [True, False])
def test_aggregate_is_one_product_per_head_bit_for_bit(all_heads):
    # Each row of the all-heads CSR matrix sums its k terms in rank order, as
    # one product per head does: forward and both gradients agree exactly,
    # on both paths (all heads at once below the row limit, per head beyond).
    from autoglm_graph.network.fused import _AttentionAggregate, _csr

    graph = _graph(n_dst=30, n_src=40, k=5)
    adjacency = FixedDegreeAdjacency(graph, 40, 10**9 if all_heads else 0)
    assert adjacency.all_heads == all_heads
    heads, n, m, k = 3, 30, 40, 5
    alpha = torch.rand(n, heads, k, requires_grad=True)
    x = torch.randn(m, heads, 8, requires_grad=True)
    upstream = torch.randn(n, heads, 8)
    out = _AttentionAggregate.apply(alpha, x, adjacency)
    grad_alpha, grad_x = torch.autograd.grad((out * upstream).sum(), (alpha, x))
    built = {heads for _, heads in adjacency._structures}
    assert built == ({heads} if all_heads else {1})

    crow, col = adjacency.structure()
    t_crow, t_col, perm = adjacency.transpose()
    pattern = _csr(crow, col, torch.zeros(n * k), (n, m))
    for h in range(heads):
        a = alpha.detach()[:, h].reshape(-1)
        assert torch.equal(out[:, h], _csr(crow, col, a, (n, m)) @ x.detach()[:, h])
        sampled = torch.sparse.sampled_addmm(pattern, upstream[:, h], x[:, h].t())
        assert torch.equal(grad_alpha[:, h].reshape(-1), sampled.values())
        transposed = _csr(t_crow, t_col, a[perm], (m, n)) @ upstream[:, h]
        assert torch.equal(grad_x[:, h], transposed)


def _net_pair(conv: str = "gat"):
    kwargs = dict(hidden_channels=16, heads=4, num_layers=2, target_channels=2)
    fused = GraphGLMNet(6, 7, message_passing="auto", conv=conv, **kwargs)
    reference = GraphGLMNet(6, 7, message_passing="pyg", conv=conv, **kwargs)
    with torch.no_grad():
        for p in fused.parameters():
            p.normal_(0, 0.3)  # the zero head would hide differences
    reference.load_state_dict(fused.state_dict())
    return fused.eval(), reference.eval()


def test_network_fast_path_equals_pyg_path():
    torch.manual_seed(1)
    fused, reference = _net_pair()
    assert fused.fused and not reference.fused
    context, targets = torch.randn(50, 6), torch.randn(50, 2)
    graph = cosine_topk(context, n_neighbors=5)
    out_f, states_f = fused(context, targets, fused.adjacency(graph, 50))
    out_r, states_r = reference(context, targets, reference.adjacency(graph, 50))
    torch.testing.assert_close(out_f, out_r, atol=1e-5, rtol=1e-5)

    queries = torch.randn(9, 6)
    q_graph = cosine_topk(queries, context, n_neighbors=5)
    q_f, (edges_f, att_f) = fused.forward_query(
        queries, states_f, fused.adjacency(q_graph, 50), return_attention=True
    )
    q_r, (edges_r, att_r) = reference.forward_query(
        queries, states_r, reference.adjacency(q_graph, 50), return_attention=True
    )
    torch.testing.assert_close(q_f, q_r, atol=1e-5, rtol=1e-5)
    assert torch.equal(edges_f, edges_r)
    torch.testing.assert_close(att_f, att_r, atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("message_passing", ["auto", "pyg"])
def test_source_states_are_forwards_without_the_last_layer(message_passing):
    """Validation and prediction read the training rows' states only: the
    shortcut gives forward()'s states bit for bit, and never runs the last
    layer or the head."""
    torch.manual_seed(2)
    net, _ = _net_pair()
    if message_passing == "pyg":
        _, net = _net_pair()
    context, targets = torch.randn(40, 6), torch.randn(40, 2)
    adjacency = net.adjacency(cosine_topk(context, n_neighbors=5), 40)
    _, full = net(context, targets, adjacency)
    calls = []
    hooks = [
        module.register_forward_hook(lambda *_: calls.append(1))
        for module in (net.norms[-1], net.head)
    ]
    short = net.source_states(context, targets, adjacency)
    for hook in hooks:
        hook.remove()
    assert not calls
    assert len(short.layers) == len(full.layers) == net.num_layers
    for a, b in zip(short.layers, full.layers, strict=True):
        assert torch.equal(a, b)
    assert torch.equal(short.pooled, full.pooled)
    assert torch.equal(short.embedding, full.embedding)


def test_gatv2_has_no_fast_path():
    net = GraphGLMNet(4, 5, hidden_channels=8, heads=2, conv="gatv2")
    assert not net.fused
    with pytest.raises(ValueError, match="conv='gat' only"):
        GraphGLMNet(
            4, 5, hidden_channels=8, heads=2, conv="gatv2", message_passing="fused"
        )
    with pytest.raises(ValueError, match="message_passing"):
        GraphGLMRegressor(conv="gatv2", message_passing="fused").fit(
            np.ones((20, 2)), np.ones(20)
        )


def test_khop_subgraph_keeps_only_inner_neighbours():
    graph = cosine_topk(torch.randn(40, 3), n_neighbors=4)
    batch = torch.tensor([0, 5])
    nodes, sub, position = khop_subgraph(graph, batch, num_layers=1)
    assert torch.equal(nodes[position], batch)
    # Batch rows keep all their neighbours, relabelled into ``nodes``.
    for row, pos in zip(batch.tolist(), position.tolist(), strict=True):
        assert torch.equal(nodes[sub.indices[pos]], graph.indices[row])
        assert sub.mask[pos].all()
    assert torch.all(sub.indices[sub.mask] < nodes.numel())


@pytest.fixture(scope="module")
def poisson_data():
    X, y, _ = make_varying_coefficients(
        900, 4, n_groups=3, family="poisson", random_state=0
    )
    return X[:700], y[:700], X[700:], y[700:]


def _fit(data, **params):
    X, y, _, _ = data
    base = dict(family="poisson", hidden_channels=16, max_epochs=25, random_state=0)
    return GraphGLMRegressor(**{**base, **params}).fit(X, y)


def test_estimator_paths_agree(poisson_data):
    fused = _fit(poisson_data, message_passing="fused", dropout=0.0)
    reference = _fit(poisson_data, message_passing="pyg", dropout=0.0)
    X_test = poisson_data[2]
    assert not fused.is_global_only_
    np.testing.assert_allclose(
        fused.predict(X_test), reference.predict(X_test), rtol=2e-3
    )


@pytest.mark.parametrize("precision", ["bf16", "fp16"])
def test_reduced_precision_on_cpu_is_finite_and_close(poisson_data, precision):
    full = _fit(poisson_data, precision="fp32")
    reduced = _fit(poisson_data, precision=precision)
    _, _, X_test, y_test = poisson_data
    pred = reduced.predict(X_test)
    assert np.all(np.isfinite(pred))
    assert reduced._fitted.precision in {precision, "fp32"}
    assert reduced.score(X_test, y_test) == pytest.approx(
        full.score(X_test, y_test), abs=0.03
    )


def test_non_finite_bf16_loss_falls_back_to_fp32(poisson_data):
    model = _fit(poisson_data, precision="bf16")
    rows = model._fitted.rows
    config = model._make_trainer(rows.design.shape[1], rows)
    trainer = TrainingState(config, config.net.build())
    trainer.precision = "bf16"
    trainer._scaler = torch.amp.GradScaler("cpu", enabled=False)
    optimizer = torch.optim.SGD(trainer.net.parameters(), lr=0.1)
    before = [p.detach().clone() for p in trainer.net.parameters()]
    with pytest.warns(RuntimeWarning, match="fp32"):
        stepped = trainer.backward_step(optimizer, torch.tensor(float("nan")))
    assert not stepped and trainer.precision == "fp32"
    for p, q in zip(trainer.net.parameters(), before, strict=True):
        assert torch.equal(p, q)


def test_bad_precision_raises():
    with pytest.raises(ValueError, match="precision"):
        GraphGLMRegressor(precision="fp8").fit(np.ones((20, 2)), np.ones(20))


def test_minibatch_reaches_full_batch_deviance(poisson_data):
    _, _, X_test, y_test = poisson_data
    full = _fit(poisson_data)
    mini = _fit(poisson_data, batch_size=128)
    glm = _fit(poisson_data, local_penalty=np.inf)
    assert not mini.is_global_only_
    full_score, mini_score = full.score(X_test, y_test), mini.score(X_test, y_test)
    # Both learn well beyond the global GLM, and land close to each other.
    assert mini_score > glm.score(X_test, y_test) + 0.05
    assert mini_score == pytest.approx(full_score, abs=0.05)


def test_csr_indices_are_int32_unless_they_overflow():
    from autoglm_graph.network.fused import _index_dtype

    assert _index_dtype(1000, 50) == torch.int32
    assert _index_dtype(2**31, 50) == torch.int64
    assert _index_dtype(10, 2**31) == torch.int64
    adjacency = FixedDegreeAdjacency(_graph(), 80)
    crow, col = adjacency.structure()
    t_crow, t_col, perm = adjacency.transpose()
    assert {t.dtype for t in (crow, col, t_crow, t_col)} == {torch.int32}
    # The transpose's gather runs 2.3x as fast with int64 indices.
    assert perm.dtype == torch.int64
    assert crow.shape == (61,) and t_crow.shape == (81,)
    crow, col = adjacency.structure(heads=4)
    t_crow, t_col, perm = adjacency.transpose(heads=4)
    assert crow.shape == (241,) and t_crow.shape == (321,)
    assert col.shape == t_col.shape == perm.shape == (60 * 6 * 4,)


@pytest.mark.parametrize(
    "message_passing, own_generator",
    [("fused", False), ("pyg", False), ("fused", True)],
)
def test_checkpointed_layers_give_the_same_gradients(message_passing, own_generator):
    # Large training passes recompute the layers in the backward pass; with
    # dropout on, the replayed pass must draw the same masks.
    torch.manual_seed(2)
    net = GraphGLMNet(
        6,
        7,
        hidden_channels=16,
        heads=4,
        target_channels=2,
        dropout=0.3,
        message_passing=message_passing,
    )
    net.train()
    context, targets = torch.randn(40, 6), torch.randn(40, 2)
    adjacency = net.adjacency(cosine_topk(context, n_neighbors=5), 40)

    def gradients(checkpoint_min_rows):
        net.policy = FitPolicy(checkpoint_min_rows=checkpoint_min_rows)
        net.zero_grad()
        torch.manual_seed(3)
        if own_generator:  # a fit's own stream (autoglm_graph.network._random)
            net.generator = torch.Generator().manual_seed(3)
        out, _ = net(context, targets, adjacency)
        (out.square().sum() + out.sum()).backward()
        return out.detach(), [p.grad.clone() for p in net.parameters()]

    out_plain, grads_plain = gradients(None)
    out_ckpt, grads_ckpt = gradients(1)
    torch.testing.assert_close(out_ckpt, out_plain)
    assert any(g.abs().sum() > 0 for g in grads_plain)
    for got, expected in zip(grads_ckpt, grads_plain, strict=True):
        torch.testing.assert_close(got, expected, atol=1e-6, rtol=1e-5)


def test_attention_weights_gradcheck():
    from autoglm_graph.network.fused import _AttentionWeights

    graph = _graph(n_dst=10, n_src=12, k=4)  # row 7 has no neighbour at all
    adjacency = FixedDegreeAdjacency(graph, 12)
    # Seeded: finite differences must not straddle leaky_relu's kink at 0.
    torch.manual_seed(0)
    inputs = (
        torch.randn(12, 3, dtype=torch.float64, requires_grad=True),
        torch.randn(10, 3, dtype=torch.float64, requires_grad=True),
        torch.randn(3, dtype=torch.float64, requires_grad=True),
    )

    def weights(src, dst, edge):
        # float32 inside by design: gradcheck through it with a loose tolerance.
        return _AttentionWeights.apply(src, dst, edge, adjacency, 0.2).double()

    alpha = weights(*inputs)  # [n, heads, k]: the aggregation's layout
    assert alpha.shape == (10, 3, 4)
    assert torch.all(alpha[7] == 0)
    assert torch.all(alpha.transpose(1, 2)[~graph.mask] == 0)
    torch.testing.assert_close(
        alpha.sum(dim=-1)[graph.mask.any(dim=1)], torch.ones(9, 3, dtype=torch.float64)
    )
    assert torch.autograd.gradcheck(weights, inputs, eps=1e-3, atol=1e-2)
