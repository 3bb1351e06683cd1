"""Fixed-degree fast path of torch_geometric's ``GATConv``.

The neighbour graph has a fixed layout: every destination row lists ``k``
source rows (``[n, k]`` indices plus a mask). ``GATConv`` works on an edge list:
it gathers an ``[E, heads, channels]`` message per edge, weights it and scatters
it back, which on a CPU costs more than everything else in a training step
(about 4.7 s forward + backward at 100k rows, k = 16, 4 heads x 16 channels).

Here the attention logits are computed on the ``[n, k, heads]`` layout (small:
one number per edge and head), and the weighted sum of neighbour states is a
sparse-matrix product: per head, the attention weights are the values of a CSR
matrix whose row pointers are simply ``0, k, 2k, ...``. All heads share one
CSR structure (int32 indices where they fit), so that the structure costs
``n * k`` indices whatever the number of heads. Its backward is written by
hand (:class:`_AttentionAggregate`), because autograd through a CSR product
densifies the gradient of the sparse values: the gradient of the states is the
transposed product (its structure is built once per graph) and that of the
attention weights a sampled dense-dense product (``torch.sparse.sampled_addmm``).
Nothing of size ``[E, heads, channels]`` is ever formed. Measured at 100k rows on
one CPU thread: ``spmm`` 0.08 s, its transpose 0.07 s, ``sampled_addmm`` 0.1 s.

The layer's parameters are those of the ``GATConv`` it accelerates, which stays
the reference (``tests/test_fused.py`` checks both agree to 1e-5).
"""

from __future__ import annotations

import warnings

import torch
import torch.nn.functional as F
from torch import Tensor
from torch_geometric.nn import GATConv

from ._random import dropout
from .graph import NeighborGraph

__all__ = ["FixedDegreeAdjacency", "fixed_degree_gat"]


class FixedDegreeAdjacency:
    """A :class:`NeighborGraph` prepared for :func:`fixed_degree_gat`.

    Parameters
    ----------
    graph : NeighborGraph
        ``[n_dst, k]`` neighbours; ``graph.indices`` index the source rows.
    n_src : int
        Number of source rows.

    Notes
    -----
    The CSR structures (shared by the heads) are built on first use and
    kept, so a graph reused across epochs pays for them once.
    """

    def __init__(self, graph: NeighborGraph, n_src: int) -> None:
        self.indices = graph.indices
        self.similarities = graph.similarities
        self.mask = graph.mask
        self.n_src = int(n_src)
        self._structures: dict[tuple, tuple] = {}

    @property
    def n_dst(self) -> int:
        return int(self.indices.shape[0])

    @property
    def k(self) -> int:
        return int(self.indices.shape[1])

    def structure(self) -> tuple[Tensor, Tensor]:
        """``(crow, col)`` of the ``[n_dst, n_src]`` CSR matrix, shared by all heads.

        Row ``i`` holds its ``k`` neighbours in rank order. Indices are int32
        where they fit (half the memory of int64, and faster ``spmm``).
        """
        if "forward" not in self._structures:
            n, k = self.n_dst, self.k
            dtype = _index_dtype(n * k, self.n_src)
            col = self.indices.reshape(-1).to(dtype)
            crow = torch.arange(n + 1, device=col.device, dtype=dtype) * k
            self._structures["forward"] = (crow, col)
        return self._structures["forward"]

    def transpose(self) -> tuple[Tensor, Tensor, Tensor]:
        """``(crow, col, perm)`` of the transpose; its values are ``values[perm]``.

        Only training needs it (the backward pass), so it is built on demand.
        """
        if "transpose" not in self._structures:
            _, col = self.structure()
            perm = torch.argsort(col, stable=True).to(col.dtype)
            rows = torch.arange(self.n_dst, device=col.device, dtype=col.dtype)
            t_col = rows.repeat_interleave(self.k)[perm]
            t_crow = torch.zeros(self.n_src + 1, dtype=col.dtype, device=col.device)
            t_crow[1:] = torch.bincount(col, minlength=self.n_src).cumsum(0)
            self._structures["transpose"] = (t_crow, t_col, perm)
        return self._structures["transpose"]


def _index_dtype(n_entries: int, n_cols: int) -> torch.dtype:
    """int32 for CSR indices when every index fits in it, else int64."""
    limit = torch.iinfo(torch.int32).max
    return torch.int32 if max(n_entries, n_cols) < limit else torch.int64


def _csr(crow: Tensor, col: Tensor, values: Tensor, shape: tuple[int, int]) -> Tensor:
    with warnings.catch_warnings():
        # "Sparse CSR tensor support is in beta": the operations used here are
        # covered by tests/test_fused.py.
        warnings.simplefilter("ignore", UserWarning)
        return torch.sparse_csr_tensor(crow, col, values, shape, check_invariants=False)


class _AttentionAggregate(torch.autograd.Function):
    """``out[h, i] = sum_r alpha[h, i, r] * x[h, index[i, r]]``, per head."""

    @staticmethod
    def forward(ctx, alpha: Tensor, x: Tensor, adjacency) -> Tensor:
        crow, col = adjacency.structure()
        shape = (adjacency.n_dst, adjacency.n_src)
        ctx.save_for_backward(alpha, x)
        ctx.adjacency = adjacency
        # Sparse products exist in float32 only (no bf16/fp16 CSR kernels).
        with torch.autocast(x.device.type, enabled=False):
            return torch.stack(
                [
                    _csr(crow, col, a.reshape(-1), shape) @ xh
                    for a, xh in zip(alpha, x, strict=True)
                ]
            )

    @staticmethod
    def backward(ctx, grad_out: Tensor):
        # Unpacked once: activation checkpointing allows a single unpack.
        alpha, x = ctx.saved_tensors
        with torch.autocast(x.device.type, enabled=False):
            return _AttentionAggregate._grads(
                ctx, alpha, x, grad_out.contiguous().float()
            )

    @staticmethod
    def _grads(ctx, alpha: Tensor, x: Tensor, grad_out: Tensor):
        adjacency = ctx.adjacency
        crow, col = adjacency.structure()
        n, m = adjacency.n_dst, adjacency.n_src
        grad_alpha = grad_x = None
        if ctx.needs_input_grad[0]:
            pattern = _csr(crow, col, alpha.new_zeros(n * adjacency.k), (n, m))
            grad_alpha = torch.stack(
                [
                    torch.sparse.sampled_addmm(pattern, g, xh.t()).values()
                    for g, xh in zip(grad_out, x, strict=True)
                ]
            ).view_as(alpha)
        if ctx.needs_input_grad[1]:
            t_crow, t_col, t_perm = adjacency.transpose()
            grad_x = torch.stack(
                [
                    _csr(t_crow, t_col, a.reshape(-1)[t_perm], (m, n)) @ g
                    for a, g in zip(alpha, grad_out, strict=True)
                ]
            )
        return grad_alpha, grad_x, None


class _AttentionWeights(torch.autograd.Function):
    """GATConv's attention weights on the ``[n, k, heads]`` layout, fused.

    ``alpha = softmax_k(leaky_relu(score_src[index] + score_dst + sim * w_edge))``
    over each row's unmasked neighbours (zero where masked, and on a row
    without neighbours). Autograd through the unfused expression keeps five
    ``[n, k, heads]`` tensors per layer; this keeps ``alpha`` and one sign bit
    per entry, and writes the backward by hand.
    """

    @staticmethod
    def forward(ctx, score_src, score_dst, edge_weight, adjacency, negative_slope):
        with torch.autocast(score_src.device.type, enabled=False):
            logits = score_src.float()[adjacency.indices]
            logits += score_dst.float().unsqueeze(1)
            logits += adjacency.similarities.unsqueeze(-1).float() * edge_weight.float()
            positive = logits > 0
            logits = F.leaky_relu(logits, negative_slope)
            mask = adjacency.mask.unsqueeze(-1)
            logits.masked_fill_(~mask, float("-inf"))
            # A row without real neighbours has only -inf logits, whose softmax
            # is NaN; the fill zeroes it (GATConv sends such a row no message).
            alpha = torch.softmax(logits, dim=1).masked_fill_(~mask, 0.0)
        ctx.save_for_backward(alpha, positive)
        ctx.adjacency, ctx.negative_slope = adjacency, negative_slope
        ctx.dtypes = (score_src.dtype, score_dst.dtype, edge_weight.dtype)
        ctx.n_src = score_src.shape[0]
        return alpha

    @staticmethod
    def backward(ctx, grad_alpha: Tensor):
        alpha, positive = ctx.saved_tensors
        adjacency = ctx.adjacency
        grad_alpha = grad_alpha.float()
        # Softmax backward, then leaky_relu's slope (masked entries have alpha 0).
        grad = alpha * (grad_alpha - (alpha * grad_alpha).sum(dim=1, keepdim=True))
        grad = torch.where(positive, grad, grad * ctx.negative_slope)
        heads = grad.shape[-1]
        grad_src = grad.new_zeros(ctx.n_src, heads).index_add_(
            0, adjacency.indices.reshape(-1), grad.reshape(-1, heads)
        )
        grad_dst = grad.sum(dim=1)
        similarities = adjacency.similarities.unsqueeze(-1).float()
        grad_edge = (grad * similarities).sum(dim=(0, 1))
        src_dtype, dst_dtype, edge_dtype = ctx.dtypes
        return (
            grad_src.to(src_dtype),
            grad_dst.to(dst_dtype),
            grad_edge.to(edge_dtype),
            None,
            None,
        )


def fixed_degree_gat(
    conv: GATConv,
    x: tuple[Tensor, Tensor],
    adjacency: FixedDegreeAdjacency,
    return_attention: bool = False,
    generator: torch.Generator | None = None,
):
    """``conv((x_src, x_dst), edge_index, edge_attr=similarity)`` on a fixed layout.

    Parameters
    ----------
    conv : GATConv
        A bipartite layer (``in_channels`` a tuple) with ``edge_dim=1``,
        ``add_self_loops=False``, ``concat=True`` and no residual: the layout
        the graph GLM builds. Its weights are used as they are.
    x : (Tensor, Tensor)
        Source states ``[n_src, in_src]`` and destination states ``[n_dst, in_dst]``.
    adjacency : FixedDegreeAdjacency
    return_attention : bool, default=False
        Also return the attention weights ``[n_dst, k, heads]`` (zero where
        masked).
    generator : torch.Generator, default=None
        Source of the attention dropout's mask (None: torch's global one).

    Returns
    -------
    Tensor of shape (n_dst, heads * out_channels)
        Equal to the ``GATConv`` output up to float rounding; a destination
        without real neighbours gets the bias only, as in ``GATConv``.
    """
    x_src, x_dst = x
    heads, channels = conv.heads, conv.out_channels
    n, m = adjacency.n_dst, adjacency.n_src
    h_src = conv.lin_src(x_src).view(m, heads, channels)
    h_dst = conv.lin_dst(x_dst).view(n, heads, channels)
    score_src = (h_src * conv.att_src).sum(dim=-1)  # [m, heads]
    score_dst = (h_dst * conv.att_dst).sum(dim=-1)  # [n, heads]
    # lin_edge has no bias and the edge feature is one number, so its score is
    # the similarity times one weight per head.
    edge_weight = conv.lin_edge.weight.view(heads, channels) * conv.att_edge[0]
    edge_weight = edge_weight.sum(dim=-1)
    alpha = _AttentionWeights.apply(
        score_src, score_dst, edge_weight, adjacency, conv.negative_slope
    )
    alpha = dropout(alpha, conv.dropout, conv.training, generator)
    states = h_src.permute(1, 0, 2).contiguous()  # [heads, m, channels]
    aggregated = _AttentionAggregate.apply(
        alpha.permute(2, 0, 1).contiguous().float(), states.float(), adjacency
    ).to(h_src.dtype)
    out = aggregated.permute(1, 0, 2).reshape(n, -1)
    if conv.bias is not None:
        out = out + conv.bias
    if return_attention:
        return out, alpha
    return out
