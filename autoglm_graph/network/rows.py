"""The rows a fit trains on and the forward passes prediction shares.

:class:`RowData` (tensors of a set of rows), the graph settings
(:class:`GraphConfig`), what training hands to prediction
(:class:`FittedGraphState`, :class:`CachedStates`), and the small functions
both use: the linear predictor, autocast and the inductive forward.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor

from ..neighbors import NeighborGraph
from .constraints import CoefficientMap
from .modules import GraphGLMNet, SourceStates

__all__ = [
    "AMP_DTYPES",
    "CachedStates",
    "FittedGraphState",
    "GraphConfig",
    "RowData",
    "autocast",
    "linear_predictor",
    "network_deviations",
    "query_forward",
    "reported_linear_predictor",
    "weighted_mean",
]

#: Autocast dtypes of the reduced precisions.
AMP_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


@dataclass
class RowData:
    """Tensors describing a set of rows, all on one device.

    ``eta_global`` is the global GLM's linear predictor including the offset,
    shape ``[n, n_outputs]``; ``targets`` the outcome features (training rows);
    ``group`` optional integer group codes (rows of one unit, e.g. a person).
    """

    context: Tensor
    design: Tensor
    y: Tensor
    weight: Tensor
    eta_global: Tensor
    targets: Tensor | None = None
    group: Tensor | None = None

    def subset(self, index: Tensor) -> RowData:
        """The rows at ``index``; fields that share one tensor still share one."""
        picked: dict[int, Tensor] = {}

        def pick(t: Tensor | None) -> Tensor | None:
            if t is None:
                return None
            if id(t) not in picked:
                picked[id(t)] = t[index]
            return picked[id(t)]

        return RowData(*(pick(getattr(self, f)) for f in self.__dataclass_fields__))


@dataclass
class GraphConfig:
    """How neighbours are found: space ("input" or "embedding"), k, threshold."""

    space: str
    n_neighbors: int
    threshold: float
    refresh: int
    backend: str = "exact"


@dataclass
class CachedStates:
    """What cached-state steps
    (:class:`~autoglm_graph.network.epochs.CachedStateEpochs`) keep between
    steps: the training graph they belong to, the partition of the training
    rows into parts (sorted positions) and every row's input to
    each layer (``SourceStates.layers``), written when the row's part last ran."""

    graph: NeighborGraph
    parts: list[Tensor]
    inputs: list[Tensor]


@dataclass
class FittedGraphState:
    """Everything prediction needs from training: weights, graph and caches."""

    state_dict: dict
    train_graph: NeighborGraph
    epoch: int


def linear_predictor(
    delta: Tensor,
    rows: RowData,
    n_outputs: int,
    coef_map: CoefficientMap | None = None,
    *,
    intercept: bool = True,
    reduce: Callable | None = None,
) -> tuple[Tensor, Tensor]:
    """eta_i = eta_global_i + delta_b_i + x_i . delta_beta_i; returns (eta, delta).

    ``coef_map`` maps the network's output to the deviations first (the
    constraints of :mod:`autoglm_graph.network.constraints`); None: they are the same.
    Without an ``intercept`` there is none to vary: ``delta_b`` is zero.
    ``reduce`` maps the network's deviations to the GLM's terms'
    (:meth:`autoglm_graph.glm._terms.GLMTerms.reduce`); None: they are the same.
    """
    varied = network_deviations(delta, n_outputs, coef_map, intercept=intercept)
    return reported_linear_predictor(varied if reduce is None else reduce(varied), rows)


def network_deviations(
    delta: Tensor,
    n_outputs: int,
    coef_map: CoefficientMap | None = None,
    *,
    intercept: bool = True,
) -> Tensor:
    """The deviations ``[n, n_outputs, 1 + q]`` of the coefficients the
    network varies, from its output (see :func:`linear_predictor`)."""
    delta = delta.reshape(delta.shape[0], n_outputs, -1)
    if coef_map is not None:
        delta = coef_map.apply(delta)
    if not intercept:
        delta = torch.cat([torch.zeros_like(delta[:, :, :1]), delta[:, :, 1:]], 2)
    return delta


def reported_linear_predictor(delta: Tensor, rows: RowData) -> tuple[Tensor, Tensor]:
    """(eta, delta) of deviations ``delta`` of the GLM's terms."""
    eta = rows.eta_global + delta[:, :, 0]
    eta = eta + torch.einsum("nkp,np->nk", delta[:, :, 1:], rows.design)
    return (eta[:, 0] if delta.shape[1] == 1 else eta), delta


def autocast(precision: str, device_type: str):
    """Autocast at ``precision`` ("fp32": off) on ``device_type``."""
    dtype = AMP_DTYPES.get(precision)
    return torch.autocast(device_type, dtype=dtype, enabled=dtype is not None)


@torch.no_grad()
def query_forward(
    net: GraphGLMNet,
    context: Tensor,
    states: SourceStates,
    adjacency,
    *,
    precision: str,
    z: Tensor | None = None,
    return_attention: bool = False,
    projected: list | None = None,
):
    """Coefficient deviations (float32) of rows whose neighbours among the
    training rows (``states``) are ``adjacency``; ``z`` their embedding when
    the caller has it. ``projected``: each layer's
    :func:`~autoglm_graph.network.fused.source_projection` of ``states``,
    where the caller keeps them (the fused path; the same bits as projecting
    the states again)."""
    net.eval()
    device_type = context.device.type
    if z is None:
        with autocast(precision, device_type):
            z = net.encode(context)
    with autocast(precision, device_type):
        if projected is None:
            out = net.forward_query(
                context, states, adjacency, z=z, return_attention=return_attention
            )
        else:
            out = _forward_projected(
                net, states, adjacency, z, projected, return_attention
            )
    return (out[0].float(), out[1]) if return_attention else out.float()


def _forward_projected(
    net: GraphGLMNet,
    states: SourceStates,
    adjacency,
    z: Tensor,
    projected: list,
    return_attention: bool,
):
    """``net.forward_query`` with the sources' projections given (its
    layers and head, in its order)."""
    h, attention = z, None
    last = net.num_layers - 1
    for layer in range(net.num_layers):
        h, attention = net._layer(
            layer,
            states.layers[layer],
            h,
            adjacency,
            return_attention=return_attention and layer == last,
            projected=projected[layer],
        )
    delta = net._head(h, states.pooled)
    return (delta, attention) if return_attention else delta


def weighted_mean(values: Tensor, weight: Tensor) -> Tensor:
    return (values * weight).sum() / weight.sum()
