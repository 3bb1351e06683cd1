"""The head's members (``FitPolicy.head_members``, TabM's BatchEnsemble)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from autoglm_graph import FitPolicy, GraphGLMRegressor, load
from autoglm_graph.datasets import make_varying_coefficients
from autoglm_graph.neighbors import cosine_topk
from autoglm_graph.network.modules import GraphGLMNet, MemberLinear


def _net(members: int) -> GraphGLMNet:
    torch.manual_seed(0)
    return GraphGLMNet(
        5, 6, hidden_channels=16, heads=2, policy=FitPolicy(head_members=members)
    ).eval()


def _graph(n_dst: int, n_src: int = 20, k: int = 3):
    generator = torch.Generator().manual_seed(n_dst)
    queries = torch.randn(n_dst, 4, generator=generator)
    base = torch.randn(n_src, 4, generator=torch.Generator().manual_seed(0))
    return cosine_topk(queries, base, n_neighbors=k, threshold=-1.0)


def _perturb(net: GraphGLMNet) -> None:
    """Weights away from the zero start, so that the members differ."""
    with torch.no_grad():
        for parameter in net.head[-1].parameters():
            parameter.normal_()


def test_members_start_at_zero_and_the_model_is_their_mean():
    net = _net(4)
    x = torch.randn(20, 5)
    adjacency = net.adjacency(_graph(20), n_src=20)
    start, _ = net(x, None, adjacency)
    assert torch.equal(start, torch.zeros(20, 6))  # the untrained net is the GLM
    _perturb(net)
    each, _ = net(x, None, adjacency, members=True)
    mean, _ = net(x, None, adjacency)
    assert each.shape == (20, 4, 6)
    torch.testing.assert_close(mean, each.mean(dim=1))
    # The members differ: their random-sign scales and their own last layers.
    assert not torch.allclose(each[:, 0], each[:, 1])
    # Inductive rows read the same head.
    states = net.source_states(x, None, adjacency)
    query = net.forward_query(x[:7], states, net.adjacency(_graph(7), n_src=20))
    assert query.shape == (7, 6)


def test_each_member_is_the_single_head_with_its_scales_and_last_layer():
    """Member k computes what a one-member head computes on
    ``cat([h, pooled]) * scales[k]`` with the k-th last layer."""
    net = _net(3)
    _perturb(net)
    h, pooled = torch.randn(9, 16), torch.randn(16)
    each = net._head(h, pooled, members=True)
    first, last = net.head[0], net.head[2]
    for k in range(3):
        x = torch.cat([h, pooled.expand(9, -1)], dim=1) * net.head_scales[k]
        hidden = torch.nn.functional.gelu(first(x))
        expected = hidden @ last.weight[k].T + last.bias[k]
        torch.testing.assert_close(each[:, k], expected, rtol=1e-5, atol=1e-5)


def test_a_single_member_keeps_the_former_weights():
    net = _net(1)
    assert isinstance(net.head[-1], torch.nn.Linear)
    assert not any("head_scales" in name for name in net.state_dict())
    assert isinstance(_net(2).head[-1], MemberLinear)


def test_head_members_must_be_a_positive_count():
    with pytest.raises(ValueError, match="head_members"):
        FitPolicy(head_members=0)


@pytest.mark.parametrize(
    "policy",
    [FitPolicy(head_members=3), FitPolicy(embedding_keep_values=True)],
    ids=["head_members", "keep_values"],
)
def test_a_policy_that_shapes_the_network_fits_saves_and_loads(policy, tmp_path):
    X, y, _ = make_varying_coefficients(800, 3, family="poisson", random_state=0)
    model = GraphGLMRegressor(
        family="poisson",
        fit_policy=policy,
        local_penalty=1e-6,
        max_epochs=6,
        random_state=0,
    )
    with pytest.warns(Warning):  # stopped at max_epochs
        model.fit(X, y)
    assert not model.is_global_only_
    loaded = load(model.save(tmp_path / "m"))
    np.testing.assert_array_equal(loaded.predict(X), model.predict(X))
