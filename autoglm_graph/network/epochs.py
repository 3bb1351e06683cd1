"""The three ways an epoch runs: full batch, cached-state parts, mini-batches.

Each is one entry point over a :class:`~autoglm_graph.network.training.TrainingState`
(``state``: its network, loss, forward and optimiser step) that returns the
epoch's ``(loss, train deviance)``:

- :func:`full_batch_epoch`: one optimiser step over all training rows (the
  default);
- :class:`CachedStateEpochs`: from ``FitPolicy.cached_state_min_rows`` rows on
  the fused path, one step per part of the training rows, the other rows' layer
  inputs read from a cache (GNNAutoScale's historical embeddings, Fey et al.,
  ICML 2021; ``docs/decisions/cached_states.md``);
- :func:`minibatch_epoch`: ``batch_size`` destinations a step, each with the
  L-hop neighbourhood it needs (:func:`khop_subgraph`).
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

from ..neighbors import NeighborGraph
from ..policy import FitPolicy
from .fused import source_projection
from .rows import CachedStates, RowData

__all__ = [
    "CachedStateEpochs",
    "full_batch_epoch",
    "khop_subgraph",
    "minibatch_epoch",
]


def full_batch_epoch(
    state, optimizer, train: RowData, graph: NeighborGraph, before_step=None
) -> tuple[float, float]:
    """One optimiser step over all training rows.

    ``before_step(states)``, if given, sees the forward's source states before
    the weights change (validation reuses them when dropout is off, saving a
    forward pass). A bf16 loss that was not finite reruns the step in fp32.
    """
    delta, states = state.forward(
        train.context, train.targets, state.adjacency(graph, train.context)
    )
    loss, deviance = state.loss(delta, train)
    if before_step is not None:
        before_step(states)
        state.net.train()
    if not state.backward_step(optimizer, loss):
        return full_batch_epoch(state, optimizer, train, graph)
    return loss.item(), deviance.item()


def minibatch_epoch(
    state, optimizer, train: RowData, graph: NeighborGraph, batch_size: int
) -> tuple[float, float]:
    """Steps over ``batch_size`` destinations each, in a random order."""
    net = state.net
    n = train.y.shape[0]
    order = torch.randperm(n, device=train.y.device, generator=net.generator)
    steps = []  # (loss, deviance, weight) of each step
    for start in range(0, n, batch_size):
        batch = order[start : start + batch_size]
        nodes, sub_graph, position = khop_subgraph(graph, batch, net.num_layers)
        sub = train.subset(nodes)
        adjacency = net.adjacency(sub_graph, n_src=nodes.numel())
        delta, _ = state.forward(sub.context, sub.targets, adjacency)
        rows = sub.subset(position)
        loss, deviance = state.loss(delta[position], rows)
        if not state.backward_step(optimizer, loss):
            continue  # this batch is skipped; the next ones run in fp32
        steps.append((loss.item(), deviance.item(), rows.weight.sum().item()))
    return weighted_epoch_means(steps)


class CachedStateEpochs:
    """Epochs of cached-state steps, one part of the training rows each.

    Each step's destinations are one part of the training rows (a random
    partition, drawn again at each graph refresh); the other rows, as
    sources, are read from a cache of their layer inputs, written when their
    own part last ran and projected by the current weights once an epoch.

    Parameters
    ----------
    policy : FitPolicy
        Its ``cached_state_min_rows`` (from when the epochs run),
        ``cached_state_parts`` and ``cached_state_part_rows`` (how many
        parts), and ``checkpoint_min_rows`` (parts stay below it).

    Attributes
    ----------
    cache : CachedStates or None
        The graph the cache belongs to, the parts and every row's layer
        inputs (what a checkpoint keeps).
    """

    def __init__(self, policy: FitPolicy) -> None:
        self.policy = policy
        self.cache: CachedStates | None = None
        #: Per part of ``cache``: (positions, adjacency, rows), rebuilt from
        #: it (not checkpointed).
        self._parts: tuple | None = None

    def applies(self, net, n_rows: int, batch_size: int | None) -> bool:
        """Whether full-batch epochs of ``net`` over ``n_rows`` rows run as
        cached-state steps: the fused attention path from
        ``cached_state_min_rows`` rows."""
        return (
            batch_size is None
            and net.fused
            and n_rows >= self.policy.cached_state_min_rows
        )

    def n_parts(self, n: int) -> int:
        """Parts of ``n`` rows: about ``cached_state_part_rows`` each, within
        ``cached_state_parts``, and below ``checkpoint_min_rows`` rows where
        that is at least ``cached_state_part_rows``."""
        policy = self.policy
        fewest, most = policy.cached_state_parts
        n_parts = min(max(fewest, round(n / policy.cached_state_part_rows)), most)
        # Parts stay below the size whose activations a full-batch pass
        # would recompute rather than keep. A smaller checkpoint_min_rows
        # checkpoints within the parts instead (as parts of that size, one
        # row each at 1, an epoch would take n optimiser steps).
        min_rows = policy.checkpoint_min_rows
        if min_rows is not None and min_rows >= policy.cached_state_part_rows:
            n_parts = max(n_parts, -(-n // min_rows))
        return n_parts

    def clear(self) -> None:
        self.cache = self._parts = None

    def run(
        self, state, optimizer, train: RowData, graph: NeighborGraph
    ) -> tuple[float, float]:
        """One epoch of cached-state steps; returns (loss, train deviance)."""
        net = state.net
        parts = self._parts_of(state, train, graph)
        inputs = self.cache.inputs
        # The other parts' sources, projected by this epoch's first weights.
        with torch.no_grad(), state.amp():
            projected = [
                [p.float() for p in source_projection(net.convs[layer], x)]
                for layer, x in enumerate(inputs)
            ]
        steps = []  # (loss, deviance, weight) of each step
        order = torch.randperm(
            len(parts), generator=net.generator, device=train.y.device
        )
        for positions, adjacency, rows in (parts[i] for i in order.tolist()):
            with state.amp():
                delta, own_inputs, own_projected = net.forward_cached(
                    rows.context, rows.targets, adjacency, positions, inputs, projected
                )
            loss, deviance = state.loss(delta.float(), rows)
            if not state.backward_step(optimizer, loss):
                continue  # the next parts run in fp32 (see backward_step)
            with torch.no_grad():
                for layer in range(net.num_layers):
                    inputs[layer][positions] = own_inputs[layer].float()
                    pairs = zip(projected[layer], own_projected[layer], strict=True)
                    for full, part in pairs:
                        full[positions] = part.float()
            steps.append((loss.item(), deviance.item(), rows.weight.sum().item()))
        return weighted_epoch_means(steps)

    def _parts_of(self, state, train: RowData, graph: NeighborGraph) -> tuple:
        """The parts of the cached states for ``graph`` (new ones at a refresh)."""
        net = state.net
        n = train.y.shape[0]
        if self.cache is None or self.cache.graph is not graph:
            # The caches start as the full-batch pass's layer inputs.
            with torch.no_grad(), state.amp():
                states = net.source_states(
                    train.context, train.targets, state.adjacency(graph, train.context)
                )
            order = torch.randperm(n, generator=net.generator, device=train.y.device)
            n_parts = self.n_parts(n)
            parts = [order[i::n_parts].sort().values for i in range(n_parts)]
            inputs = [x.float() for x in states.layers]
            self.cache = CachedStates(graph, parts, inputs)
            self._parts = None
        if self._parts is None:
            self._parts = tuple(
                (
                    rows,
                    net.adjacency(graph.query_rows(rows), n_src=n),
                    train.subset(rows),
                )
                for rows in self.cache.parts
            )
        return self._parts


def weighted_epoch_means(steps: list[tuple]) -> tuple[float, float]:
    """An epoch's (loss, deviance) from its steps' ``(loss, deviance,
    weight)``: their means weighted by the rows' total weight."""
    loss, deviance, weight = np.asarray(steps, dtype=float).T
    return float(loss @ weight / weight.sum()), float(deviance @ weight / weight.sum())


def khop_subgraph(
    graph: NeighborGraph, batch: Tensor, num_layers: int
) -> tuple[Tensor, NeighborGraph, Tensor]:
    """The rows a mini-batch needs through ``num_layers`` hops, and their graph.

    Returns the needed rows (``nodes``, positions in the training rows), their
    neighbour lists restricted to ``nodes`` and relabelled to positions in
    ``nodes`` (neighbours outside are masked out), and the positions of
    ``batch`` within ``nodes``. Rows outside the batch get states that only the
    batch's loss reads, so only the neighbours inside ``nodes`` matter.
    """
    n = graph.indices.shape[0]
    needed = batch
    frontier = batch
    for _ in range(num_layers):
        neighbours = graph.indices[frontier][graph.mask[frontier]]
        needed = torch.unique(torch.cat([needed, neighbours]))
        frontier = needed
    relabel = torch.full((n,), -1, dtype=torch.long, device=batch.device)
    relabel[needed] = torch.arange(needed.numel(), device=batch.device)
    indices = relabel[graph.indices[needed]]
    sub_graph = NeighborGraph(
        indices=indices.clamp(min=0),
        similarities=graph.similarities[needed],
        mask=graph.mask[needed] & (indices >= 0),
    )
    return needed, sub_graph, relabel[batch]
