"""Fixed-degree fast path of torch_geometric's ``GATConv``.

The neighbour graph has a fixed layout: every destination row lists ``k``
source rows (``[n, k]`` indices plus a mask). ``GATConv`` works on an edge list:
it gathers an ``[E, heads, channels]`` message per edge, weights it and scatters
it back, which on a CPU costs more than everything else in a training step
(about 4.7 s forward + backward at 100k rows, k = 16, 4 heads x 16 channels).

Here the attention logits are computed on the ``[n, heads, k]`` layout (small:
one number per edge and head), and the weighted sum of neighbour states is a
sparse-matrix product. The scores are products of the layer's inputs with
``[in, heads]`` matrices folded from the projections and attention vectors, so
the destinations' projection is never formed, and the logits are gathered
straight into the layout of the product's values (no transposed copy). With
the graph GLM's head taking the pool's half of its first layer as a bias, a
training step takes 0.69-0.74x the time of the ``[n, k, heads]`` version at
3.4k-40k rows (one thread, in-process A/B: ``benchmarks/results/step_ab.md``).

For all heads at once, row ``(i, h)`` of a ``[n * heads, m * heads]`` CSR
matrix holds the weights of head ``h`` of row ``i`` in the columns ``(j, h)``
of its ``k`` neighbours ``j``: the states multiply in their natural ``[m *
heads, channels]`` layout and the product comes out as ``[n, heads *
channels]``, with no per-head loop and no permuted copies. Each row still sums
its ``k`` terms in rank order, so the result is bit for bit that of one product
per head (whose CSR rows are ``0, k, 2k, ...``), which took 1.5-2x as long at
15k rows (k = 16, 4 heads x 16 channels, one thread: forward 9.1 -> 5.0 ms,
sampled product 8.2 -> 4.6 ms, transposed product 16.1 -> 11.5 ms). From
``FitPolicy.all_heads_max_src_rows`` source rows on, one product per head is faster
again, its states staying in cache, and it is used there; its structure costs
``n * k`` indices whatever the number of heads, the all-heads one ``heads``
times as many (which the logits' gather uses at any size: 256 MB of int32 at 1M
rows). Indices are int32 where they fit. The backward is written by hand
(:class:`_AttentionAggregate`), because autograd through a CSR product
densifies the gradient of the sparse values: the gradient of the states is the
transposed product (its structure is built once per graph) and that of the
attention weights a sampled dense-dense product
(``torch.sparse.sampled_addmm``). Nothing of size ``[E, heads, channels]`` is
ever formed. Measured at 100k rows on one CPU thread, per head: ``spmm`` 0.08
s, its transpose 0.07 s, ``sampled_addmm`` 0.1 s.

The layer's parameters are those of the ``GATConv`` it accelerates, which stays
the reference (``tests/test_fused.py`` checks both agree to 1e-5). They live in
:class:`FixedDegreeGATConv`, which holds them under ``GATConv``'s names and
draws them as it does, without torch_geometric: a default fit and a loaded
model's predictions never import it (its import took 2.3 s of a fresh
process's 6 s load and predict, and warns that ``torch.jit.script`` is
deprecated under torch 2.13).
"""

from __future__ import annotations

import math
import warnings
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..neighbors import NeighborGraph
from ..policy import FitPolicy
from ._random import dropout

if TYPE_CHECKING:
    from torch_geometric.nn import GATConv

__all__ = ["FixedDegreeAdjacency", "FixedDegreeGATConv", "fixed_degree_gat"]


def _glorot_(value: Tensor) -> None:
    """torch_geometric's ``glorot``: uniform on +-sqrt(6 / (rows + columns))
    of the last two dimensions, the same draws from torch's generator."""
    bound = math.sqrt(6.0 / (value.size(-2) + value.size(-1)))
    with torch.no_grad():
        value.uniform_(-bound, bound)


class _GlorotLinear(nn.Module):
    """torch_geometric's ``Linear(in, out, bias=False,
    weight_initializer="glorot")``: a ``weight`` of ``[out, in]``, drawn when
    built and at each :meth:`reset_parameters`."""

    def __init__(self, in_channels: int, out_channels: int) -> None:
        super().__init__()
        self.in_channels, self.out_channels = in_channels, out_channels
        self.weight = nn.Parameter(torch.empty(out_channels, in_channels))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        _glorot_(self.weight)

    def forward(self, x: Tensor) -> Tensor:
        return F.linear(x, self.weight)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.in_channels}, {self.out_channels})"


class FixedDegreeGATConv(nn.Module):
    """The weights of a ``GATConv`` for the fixed-degree fast path.

    ``GATConv((in_src, in_dst), out_channels, heads, dropout=dropout,
    add_self_loops=False, edge_dim=1)`` is the layer the graph GLM builds;
    this module holds its parameters under the same names and shapes (a
    state dict of one loads into the other, and files written with either
    load into both) and draws them from torch's generator as it does, in the
    same order, so that a network built with either at one seed holds the
    same bits (``tests/test_fused.py``). It runs :func:`fixed_degree_gat`
    only; the edge-list path is ``GATConv`` itself.

    Parameters
    ----------
    in_channels : (int, int)
        Widths of the source and destination states.
    out_channels : int
        Channels per head.
    heads : int, default=1
        Attention heads (their outputs are concatenated).
    dropout : float, default=0.0
        Dropout on the attention weights.

    Shapes
    ------
    - input: source states ``[n_src, in_src]``, destination states ``[n_dst,
      in_dst]`` and a :class:`FixedDegreeAdjacency` of ``n_dst`` rows.
    - output: ``[n_dst, heads * out_channels]``.
    """

    #: ``GATConv``'s settings that the fast path assumes.
    negative_slope = 0.2
    concat = True
    add_self_loops = False
    edge_dim = 1

    def __init__(
        self,
        in_channels: tuple[int, int],
        out_channels: int,
        heads: int = 1,
        dropout: float = 0.0,
    ) -> None:
        super().__init__()
        self.in_channels = tuple(in_channels)
        self.out_channels, self.heads, self.dropout = out_channels, heads, dropout
        width = heads * out_channels
        # GATConv's order: the projections (each drawn when built), the
        # attention vectors and the bias, then one reset of them all.
        self.lin_src = _GlorotLinear(self.in_channels[0], width)
        self.lin_dst = _GlorotLinear(self.in_channels[1], width)
        self.att_src = nn.Parameter(torch.empty(1, heads, out_channels))
        self.att_dst = nn.Parameter(torch.empty(1, heads, out_channels))
        self.lin_edge = _GlorotLinear(self.edge_dim, width)
        self.att_edge = nn.Parameter(torch.empty(1, heads, out_channels))
        self.bias = nn.Parameter(torch.empty(width))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """GATConv's initialisation: glorot weights, a zero bias."""
        self.lin_src.reset_parameters()
        self.lin_dst.reset_parameters()
        self.lin_edge.reset_parameters()
        for att in (self.att_src, self.att_dst, self.att_edge):
            _glorot_(att)
        nn.init.zeros_(self.bias)

    def forward(
        self,
        x: tuple[Tensor, Tensor],
        adjacency: FixedDegreeAdjacency,
        return_attention: bool = False,
        generator: torch.Generator | None = None,
        projected: tuple[Tensor, Tensor] | None = None,
    ):
        """:func:`fixed_degree_gat` of this layer."""
        return fixed_degree_gat(
            self, x, adjacency, return_attention, generator, projected
        )

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}({self.in_channels}, {self.out_channels}, "
            f"heads={self.heads})"
        )


class FixedDegreeAdjacency:
    """A :class:`NeighborGraph` prepared for :func:`fixed_degree_gat`.

    Parameters
    ----------
    graph : NeighborGraph
        ``[n_dst, k]`` neighbours; ``graph.indices`` index the source rows.
    n_src : int
        Number of source rows.
    all_heads_max_src_rows : int, default=None
        Source rows below which the attention aggregates all heads in one
        sparse product, one product per head from there
        (:attr:`~autoglm_graph.policy.FitPolicy.all_heads_max_src_rows`;
        None: the default policy's).
    all_heads : bool, default=None
        Whether the attention aggregates all heads in one product whatever
        ``n_src`` (None: by ``all_heads_max_src_rows``). Both give the same
        bits. New rows' queries pass True: they only read their sources, and
        one product per head copies every head's states out at each call
        (2.3x the time of the layers at 90k sources and 8,192 queries, one
        process, 2 threads: ``docs/decisions/prediction_speed.md``).

    Notes
    -----
    The CSR structures (shared by the heads) are built on first use and
    kept, so a graph reused across epochs pays for them once.
    """

    def __init__(
        self,
        graph: NeighborGraph,
        n_src: int,
        all_heads_max_src_rows: int | None = None,
        all_heads: bool | None = None,
    ) -> None:
        if all_heads_max_src_rows is None:
            all_heads_max_src_rows = FitPolicy().all_heads_max_src_rows
        self.mask = graph.mask
        #: Every neighbour is real (no threshold cut, no padding): the
        #: attention skips its masking (3 % of a training step in the
        #: profile at 15k rows; A/B steps 0.90-1.02x, within the noise).
        self.unmasked = bool(graph.mask.all())
        self.indices, self.similarities = graph.indices, graph.similarities
        #: ``[n_dst, 1, k]``: 0 at a real neighbour, -inf at a slot that is
        #: not one, added to the attention logits. An addition broadcast over
        #: the heads: ``masked_fill_`` with the same broadcast took 2.9 ms
        #: against 0.4 ms at 19.7k rows x 4 heads x k = 16 (one thread).
        self.mask_bias = None
        #: Destinations without any real neighbour (their softmax is NaN).
        self.empty_rows = None
        if not self.unmasked:
            outside = ~graph.mask
            # A slot that is not a neighbour (index -1 and similarity -inf
            # where an approximate search found fewer than k rows) points at
            # row 0 with similarity 0: finite logits and gradients, weight 0.
            self.indices = graph.indices.masked_fill(outside, 0)
            self.similarities = graph.similarities.masked_fill(outside, 0.0)
            bias = torch.zeros(outside.shape, device=outside.device)
            self.mask_bias = bias.masked_fill_(outside, float("-inf")).unsqueeze(1)
            self.empty_rows = torch.nonzero(outside.all(dim=1)).flatten()
        self.n_src = int(n_src)
        #: Whether all heads go through one CSR product (:func:`_split`).
        self.all_heads = (
            self.n_src < all_heads_max_src_rows if all_heads is None else all_heads
        )
        self._structures: dict[tuple, tuple] = {}
        #: The destinations' copies, where training found them
        #: (:class:`~autoglm_graph.network.modules.DistinctRows`); None: every row
        #: is computed.
        self.distinct = None

    @property
    def n_dst(self) -> int:
        return int(self.indices.shape[0])

    @property
    def k(self) -> int:
        return int(self.indices.shape[1])

    def structure(self, heads: int = 1) -> tuple[Tensor, Tensor]:
        """``(crow, col)`` of the ``[n_dst * heads, n_src * heads]`` CSR matrix.

        Row ``i * heads + h`` holds head ``h`` of row ``i``: its ``k``
        neighbours ``j`` in rank order, in the columns ``j * heads + h``.
        Indices are int32 where they fit (half the memory of int64, and faster
        ``spmm``).
        """
        key = ("forward", heads)
        if key not in self._structures:
            n, k = self.n_dst, self.k
            dtype = _index_dtype(n * k * heads, self.n_src * heads)
            col = self.indices.to(dtype).unsqueeze(1) * heads  # [n, 1, k]
            col = col + torch.arange(heads, dtype=dtype, device=col.device)[:, None]
            crow = torch.arange(n * heads + 1, device=col.device, dtype=dtype) * k
            self._structures[key] = (crow, col.reshape(-1))
        return self._structures[key]

    def transpose(self, heads: int = 1) -> tuple[Tensor, Tensor, Tensor]:
        """``(crow, col, perm)`` of the transpose; its values are ``values[perm]``.

        Only training needs it (the backward pass), so it is built on demand.
        """
        key = ("transpose", heads)
        if key not in self._structures:
            _, col = self.structure(heads)
            rows = self.n_dst * heads
            # int64, not int32: gathering the values with it is 2.3x as fast
            # (1.05 ms against 2.41 ms for 1.07M entries, one thread).
            perm = torch.argsort(col, stable=True)
            t_col = torch.arange(rows, device=col.device, dtype=col.dtype)
            t_col = t_col.repeat_interleave(self.k)[perm]
            t_crow = torch.zeros(
                self.n_src * heads + 1, dtype=col.dtype, device=col.device
            )
            t_crow[1:] = torch.bincount(col, minlength=self.n_src * heads).cumsum(0)
            self._structures[key] = (t_crow, t_col, perm)
        return self._structures[key]


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
    """``out[i, h] = sum_r alpha[i, h, r] * x[index[i, r], h]``.

    ``alpha`` is ``[n_dst, heads, k]`` and ``x`` ``[n_src, heads, channels]``:
    with ``adjacency.all_heads`` both are the operands of one CSR product as
    they lie in memory; otherwise each head is one product.
    """

    @staticmethod
    def forward(ctx, alpha: Tensor, x: Tensor, adjacency) -> Tensor:
        ctx.save_for_backward(alpha, x)
        ctx.adjacency = adjacency
        # Sparse products exist in float32 only (no bf16/fp16 CSR kernels).
        with torch.autocast(x.device.type, enabled=False):
            return _join(
                [
                    _product(adjacency, a, xh)
                    for a, xh in zip(*_split(adjacency, alpha, x), strict=True)
                ]
            )

    @staticmethod
    def backward(ctx, grad_out: Tensor):
        # Unpacked once: activation checkpointing allows a single unpack.
        alpha, x = ctx.saved_tensors
        adjacency = ctx.adjacency
        needs = ctx.needs_input_grad[:2]
        with torch.autocast(x.device.type, enabled=False):
            parts = zip(*_split(adjacency, alpha, x, grad_out.float()), strict=True)
            grads = zip(
                *[_product_grads(adjacency, *part, needs) for part in parts],
                strict=True,
            )
            grad_alpha, grad_x = (
                _join(list(g)) if need else None
                for need, g in zip(needs, grads, strict=True)
            )
        return grad_alpha, grad_x, None


def _split(adjacency, *tensors: Tensor) -> list[list[Tensor]]:
    """Each ``[n, heads, ...]`` tensor as the operands of its CSR products:
    whole with ``adjacency.all_heads``, else one contiguous ``[n, 1, ...]``
    slice per head."""
    if adjacency.all_heads:
        return [[t.contiguous()] for t in tensors]
    return [[t[:, h : h + 1].contiguous() for h in range(t.shape[1])] for t in tensors]


def _join(parts: list[Tensor]) -> Tensor:
    """The heads of :func:`_split`'s parts side by side again."""
    return parts[0] if len(parts) == 1 else torch.cat(parts, dim=1)


def _product(adjacency, alpha: Tensor, x: Tensor) -> Tensor:
    """The aggregation of :class:`_AttentionAggregate` as one CSR product."""
    n, heads, _ = alpha.shape
    crow, col = adjacency.structure(heads)
    shape = (n * heads, x.shape[0] * heads)
    matrix = _csr(crow, col, alpha.reshape(-1), shape)
    return _spmm(matrix, x.reshape(shape[1], -1)).view(n, heads, -1)


def _spmm(matrix: Tensor, dense: Tensor) -> Tensor:
    """``matrix @ dense``, written into a new tensor instead of a zeroed one.

    ``matrix @ dense`` zero-fills its result and copies it once more around
    the sparse kernel; ``addmm`` with ``beta=0`` into an uninitialised
    output skips both (its input is never read, NaN or not) and gives the
    same bits: 1.9 ms against 3.6 ms at 16.7k rows x 4 heads, k = 16, one
    thread (median of 30 alternating calls).
    """
    out = dense.new_empty(matrix.shape[0], dense.shape[1])
    return torch.addmm(out, matrix, dense, beta=0, out=out)


def _product_grads(adjacency, alpha, x, grad_out, needs) -> list:
    """Gradients of :func:`_product`: a sampled dense-dense product for the
    weights, the transposed product for the states."""
    n, heads, k = alpha.shape
    rows, cols = n * heads, x.shape[0] * heads
    states, grad_out = x.reshape(cols, -1), grad_out.reshape(rows, -1)
    grad_alpha = grad_x = None
    if needs[0]:
        crow, col = adjacency.structure(heads)
        pattern = _csr(crow, col, alpha.new_zeros(rows * k), (rows, cols))
        # Written into the zero pattern itself: without ``out`` the kernel
        # copies the pattern first (3.5 ms against 5.9 ms at 16.7k rows x 4
        # heads, same bits). Its values must be zeros: ``beta=0`` does not
        # mask a NaN there.
        torch.sparse.sampled_addmm(pattern, grad_out, states.t(), out=pattern)
        grad_alpha = pattern.values().view_as(alpha)
    if needs[1]:
        t_crow, t_col, t_perm = adjacency.transpose(heads)
        values = alpha.reshape(-1).index_select(0, t_perm)
        grad_x = _spmm(_csr(t_crow, t_col, values, (cols, rows)), grad_out).view_as(x)
    return [grad_alpha, grad_x]


class _AttentionWeights(torch.autograd.Function):
    """GATConv's attention weights on the ``[n, heads, k]`` layout, fused.

    ``alpha = softmax_k(leaky_relu(score_src[index] + score_dst + sim * w_edge))``
    over each row's unmasked neighbours (zero where masked, and on a row
    without neighbours). The layout is the aggregation's (row ``(i, h)`` of its
    CSR matrix), so ``alpha`` is its values as they lie, and the softmax runs
    over contiguous entries; the source scores are gathered with the CSR
    column indices. Autograd through the unfused expression keeps five
    ``[n, heads, k]`` tensors per layer; this keeps ``alpha`` and the
    activated logits (whose sign is the slope's), and writes the backward by
    hand.
    """

    @staticmethod
    def forward(ctx, score_src, score_dst, edge_weight, adjacency, negative_slope):
        n, heads, k = adjacency.n_dst, score_src.shape[1], adjacency.k
        with torch.autocast(score_src.device.type, enabled=False):
            _, col = adjacency.structure(heads)
            logits = score_src.float().reshape(-1).index_select(0, col)
            logits = logits.view(n, heads, k)
            logits += score_dst.float().unsqueeze(-1)
            # In place: the [n, heads, k] product is never formed.
            logits.addcmul_(
                adjacency.similarities.unsqueeze(1).float(),
                edge_weight.float().unsqueeze(-1),
            )
            logits = F.leaky_relu(logits, negative_slope)
            if adjacency.unmasked:
                alpha = torch.softmax(logits, dim=-1)
            else:
                logits += adjacency.mask_bias
                # A masked slot's weight is exp(-inf) = 0. A row without real
                # neighbours has only -inf logits, whose softmax is NaN: it is
                # zeroed (GATConv sends such a row no message).
                alpha = torch.softmax(logits, dim=-1)
                if adjacency.empty_rows.numel():
                    alpha.index_fill_(0, adjacency.empty_rows, 0.0)
        ctx.save_for_backward(alpha, logits)
        ctx.adjacency, ctx.negative_slope = adjacency, negative_slope
        ctx.dtypes = (score_src.dtype, score_dst.dtype, edge_weight.dtype)
        ctx.n_src = score_src.shape[0]
        return alpha

    @staticmethod
    def backward(ctx, grad_alpha: Tensor):
        alpha, activated = ctx.saved_tensors
        adjacency = ctx.adjacency
        grad_alpha = grad_alpha.float()
        # Softmax backward, then leaky_relu's slope (masked entries have alpha
        # 0), each one kernel: the expression ``alpha * (g - (alpha * g).sum())``
        # is four passes, and ``torch.where(positive, g, g * slope)`` runs at a
        # tenth of the speed of a product on a CPU (4.8 ms against 0.5 ms at
        # 16.7k rows x 4 heads x k = 16, one thread).
        grad = torch._softmax_backward_data(grad_alpha, alpha, -1, alpha.dtype)
        grad = torch.ops.aten.leaky_relu_backward(
            grad, activated, ctx.negative_slope, True
        )
        heads = grad.shape[1]
        _, col = adjacency.structure(heads)
        grad_src = grad.new_zeros(ctx.n_src * heads).index_add_(
            0, col, grad.reshape(-1)
        )
        grad_dst = grad.sum(dim=-1)
        similarities = adjacency.similarities.unsqueeze(1).float()
        grad_edge = (grad * similarities).sum(dim=(0, 2))
        src_dtype, dst_dtype, edge_dtype = ctx.dtypes
        return (
            grad_src.view(ctx.n_src, heads).to(src_dtype),
            grad_dst.to(dst_dtype),
            grad_edge.to(edge_dtype),
            None,
            None,
        )


def _score_weights(lin: torch.nn.Module, att: Tensor) -> Tensor:
    """``[heads, in]``: a row's attention score per head is its input times
    this, ``((x @ W.T).view(heads, channels) * att).sum(-1)`` folded into one
    small product (the destinations' projection is needed for nothing else)."""
    heads, channels = att.shape[-2:]
    weight = lin.weight.view(heads, channels, -1)
    return (weight * att.view(heads, channels, 1)).sum(dim=1)


def source_projection(
    conv: GATConv | FixedDegreeGATConv, x_src: Tensor
) -> tuple[Tensor, Tensor]:
    """What a layer reads of its sources: ``lin_src(x_src)`` ``[m, heads *
    channels]`` and the attention scores ``[m, heads]`` (the arguments
    :func:`fixed_degree_gat` takes as ``projected``)."""
    # The projection first, as before this function existed: the other order
    # moved the fits' last bits (and with them some trajectories).
    h_src = conv.lin_src(x_src)
    return h_src, x_src @ _score_weights(conv.lin_src, conv.att_src).t()


def fixed_degree_gat(
    conv: GATConv | FixedDegreeGATConv,
    x: tuple[Tensor, Tensor],
    adjacency: FixedDegreeAdjacency,
    return_attention: bool = False,
    generator: torch.Generator | None = None,
    projected: tuple[Tensor, Tensor] | None = None,
):
    """``conv((x_src, x_dst), edge_index, edge_attr=similarity)`` on a fixed layout.

    Parameters
    ----------
    conv : GATConv or FixedDegreeGATConv
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
    projected : (Tensor, Tensor), default=None
        The sources' :func:`source_projection`, when the caller has it (then
        ``x_src`` is not read): cached-state mini-batches project most sources
        once an epoch, not at every step.

    Returns
    -------
    Tensor of shape (n_dst, heads * out_channels)
        Equal to the ``GATConv`` output up to float rounding; a destination
        without real neighbours gets the bias only, as in ``GATConv``.
    """
    x_src, x_dst = x
    heads, channels = conv.heads, conv.out_channels
    n, m = adjacency.n_dst, adjacency.n_src
    # Scores as [in, heads] products of the inputs: the destinations'
    # projection lin_dst(x_dst) is never formed (a [n, heads * channels]
    # product, and two element-wise passes over it and their backward).
    h_src, score_src = projected or source_projection(conv, x_src)
    h_src = h_src.view(m, heads, channels)
    score_dst = x_dst @ _score_weights(conv.lin_dst, conv.att_dst).t()  # [n, heads]
    # lin_edge has no bias and the edge feature is one number, so its score is
    # the similarity times one weight per head.
    edge_weight = conv.lin_edge.weight.view(heads, channels) * conv.att_edge[0]
    edge_weight = edge_weight.sum(dim=-1)
    alpha = _AttentionWeights.apply(
        score_src, score_dst, edge_weight, adjacency, conv.negative_slope
    )
    alpha = dropout(alpha, conv.dropout, conv.training, generator)
    aggregated = _AttentionAggregate.apply(alpha.float(), h_src.float(), adjacency)
    out = aggregated.to(h_src.dtype).reshape(n, -1)
    if conv.bias is not None:
        out = out + conv.bias
    if return_attention:
        return out, alpha.transpose(1, 2)
    return out
