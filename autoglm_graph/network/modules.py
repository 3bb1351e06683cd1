"""Torch modules of the graph GLM: encoder, GAT stack with neighbour outcomes, head.

The network maps each row's context to a deviation ``delta_i`` of its GLM
coefficients from the global GLM. Messages flow from *source* rows (the
training rows) to *destination* rows (training rows during training, new rows
at prediction). Only the last layer's messages carry the sources' outcomes:
earlier layers see features only, so a training row can never receive its own
target through a two-hop path (i -> j -> i).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields

import torch
from torch import Tensor, nn
from torch.utils.checkpoint import checkpoint

from ..neighbors import NeighborGraph
from ..policy import FitPolicy
from ..utils import MESSAGE_PASSING
from ._random import BUILD_LOCK, dropout, replay_context
from .embeddings import PiecewiseLinearEncoding
from .fused import (
    FixedDegreeAdjacency,
    FixedDegreeGATConv,
    fixed_degree_gat,
    source_projection,
)

__all__ = [
    "CONVS",
    "MESSAGE_PASSING",
    "DistinctRows",
    "EdgeListAdjacency",
    "GraphGLMNet",
    "NetConfig",
    "SourceStates",
    "attention_layer",
    "edge_list",
]

#: The attention layers, by ``conv`` name: torch_geometric's class of each.
CONVS = {"gat": "GATConv", "gatv2": "GATv2Conv"}
# Message-passing implementations (MESSAGE_PASSING, defined with the checks of
# the parameters): the fixed-degree fast path exists for GAT.


def attention_layer(
    conv: str,
    in_channels: tuple[int, int],
    hidden: int,
    heads: int,
    dropout: float,
    fused: bool,
) -> nn.Module:
    """One attention layer of the graph GLM: ``hidden // heads`` channels per
    head, the similarity as a one-number edge feature, no self-loops.

    On the fused path, a :class:`~.fused.FixedDegreeGATConv` (the same
    weights and draws as ``GATConv``, without importing torch_geometric);
    otherwise torch_geometric's layer, imported here.
    """
    if fused:
        return FixedDegreeGATConv(in_channels, hidden // heads, heads, dropout)
    import torch_geometric.nn

    layer = getattr(torch_geometric.nn, CONVS[conv])
    return layer(
        in_channels,
        hidden // heads,
        heads=heads,
        dropout=dropout,
        add_self_loops=False,
        edge_dim=1,
    )


class EdgeListAdjacency:
    """A :class:`NeighborGraph` as torch_geometric's edge list (the reference path).

    Attributes
    ----------
    edge_index : Tensor of shape (2, E)
        Source (neighbour) and destination rows.
    edge_attr : Tensor of shape (E, 1)
        Cosine similarity of each edge.
    """

    def __init__(self, graph: NeighborGraph) -> None:
        self.edge_index, weight = graph.to_edge_index()
        self.edge_attr = weight.unsqueeze(1)
        self.distinct = None  # the copies' shortcut is the fused path's


def edge_list(adjacency) -> Tensor:
    """``edge_index [2, E]`` of an adjacency, in ``to_edge_index`` order."""
    if isinstance(adjacency, EdgeListAdjacency):
        return adjacency.edge_index
    rows = torch.arange(adjacency.n_dst, device=adjacency.indices.device)
    rows = rows.unsqueeze(1).expand_as(adjacency.mask)
    return torch.stack([adjacency.indices[adjacency.mask], rows[adjacency.mask]])


@dataclass
class DistinctRows:
    """Training rows that share their context and their neighbours' contexts.

    Such rows get the same encoder output and, in the layers before the last
    (which see features only), the same states: a transductive pass computes
    those once per distinct row and copies them out. ``tuna`` has 327
    distinct rows in 10,273, ``cps1988`` 5,581 in 21,116: the encoder and the
    first layer are about half of a training step there, and ``cps1988``'s
    epochs take 0.77x as long (``benchmarks/results/distinct_rows.md``;
    ``tuna``'s groups give copies other lists). Dropout masks are then drawn
    per distinct row, so copies share them.

    Attributes
    ----------
    rows : Tensor of shape (d,)
        One row of each distinct context.
    inverse : Tensor of shape (n,)
        Each row's position in ``rows``.
    adjacency : FixedDegreeAdjacency
        The neighbour lists of ``rows`` (destinations) among all ``n`` rows.
    """

    rows: Tensor
    inverse: Tensor
    adjacency: FixedDegreeAdjacency


@dataclass
class SourceStates:
    """What new rows need of the training rows: per-layer inputs and the pool.

    Attributes
    ----------
    layers : list of Tensor
        ``layers[l]`` holds the source features fed to layer ``l`` (for the last
        layer, with the outcome features appended), each ``[n_train, *]``.
    pooled : Tensor
        ``[hidden_channels]``, the global pooled representation.
    embedding : Tensor
        ``[n_train, hidden_channels]``, encoder output of the training rows.
    """

    layers: list[Tensor]
    pooled: Tensor
    embedding: Tensor


@dataclass
class NetConfig:
    """The constructor arguments of :class:`GraphGLMNet` (its weights aside)."""

    in_channels: int
    out_channels: int
    hidden_channels: int = 64
    heads: int = 4
    num_layers: int = 2
    target_channels: int = 0
    dropout: float = 0.0
    conv: str = "gat"
    message_passing: str = "auto"
    numeric_embedding: str = "linear"
    numeric_columns: tuple[int, ...] = ()
    numeric_edges: tuple[tuple[float, ...], ...] = ()

    @classmethod
    def of(cls, net: GraphGLMNet) -> NetConfig:
        """The configuration ``net`` was built from."""
        return cls(**{f.name: getattr(net, f.name) for f in fields(cls)})

    def build(
        self, seed: int | None = None, policy: FitPolicy | None = None
    ) -> GraphGLMNet:
        """A new network, initial weights drawn from torch's global generator.

        With ``seed``, the weights are those of ``torch.manual_seed(seed)``,
        the global generator is left as it was, and the network's
        ``generator`` (its dropout masks, see :mod:`autoglm_graph.network._random`)
        continues that seed's stream: a fit owns its randomness. ``policy``
        is the fit's (None: the defaults), which the network reads
        (:class:`GraphGLMNet`).
        """
        kwargs = asdict(self)
        kwargs["policy"] = policy
        n_in, n_out = kwargs.pop("in_channels"), kwargs.pop("out_channels")
        if seed is None:
            with BUILD_LOCK:
                return GraphGLMNet(n_in, n_out, **kwargs)
        with BUILD_LOCK, torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            net = GraphGLMNet(n_in, n_out, **kwargs)
            net.generator = torch.Generator().set_state(torch.get_rng_state())
        return net


class _Dropout(nn.Module):
    """``nn.Dropout`` drawing from the owning network's ``generator``."""

    def __init__(self, p: float, owner: GraphGLMNet) -> None:
        super().__init__()
        self.p = p
        # A plain reference, not a submodule (that would be a cycle).
        object.__setattr__(self, "_owner", owner)

    def forward(self, x: Tensor) -> Tensor:
        return dropout(x, self.p, self.training, self._owner.generator)


class GraphGLMNet(nn.Module):
    r"""Per-row GLM coefficient deviations from a graph attention network.

    Parameters
    ----------
    in_channels : int
        Width of the context vectors.
    out_channels : int
        Number of coefficient deviations per row, ``(n_features + 1) * n_outputs``.
    hidden_channels : int
        Width of the hidden states; must be divisible by ``heads``.
    heads : int
        Attention heads per layer.
    num_layers : int
        Number of attention layers (>= 1).
    target_channels : int
        Width of the outcome features carried by last-layer messages (0: none).
    dropout : float
        Dropout on hidden states and attention coefficients.
    conv : {"gat", "gatv2"}
        torch_geometric attention layer (on the fused path, GAT's weights in a
        :class:`~autoglm_graph.network.fused.FixedDegreeGATConv`).
    message_passing : {"auto", "fused", "pyg"}
        How the attention layers run: ``"fused"`` is the fixed-degree fast path
        (:mod:`autoglm_graph.network.fused`, GAT only) with the layer's own weights,
        ``"pyg"`` the torch_geometric layer itself; ``"auto"`` is the fast path
        where it exists.
    numeric_embedding : {"linear", "piecewise_linear"}
        ``"piecewise_linear"``: the ``numeric_columns`` of the context get
        piecewise-linear encodings on the bins ``numeric_edges``
        (:class:`~autoglm_graph.network.embeddings.PiecewiseLinearEncoding`)
        before the encoder's first layer; ``"linear"``: every column enters
        that layer as it is.
    numeric_columns : tuple of int
        The context's numeric columns (see
        :func:`~autoglm_graph.network.embeddings.numeric_columns`).
    numeric_edges : tuple of tuple of float
        The bin edges of each numeric column under ``"piecewise_linear"``
        (:func:`~autoglm_graph.network.embeddings.quantile_edges` of the
        training rows).
    policy : FitPolicy or None
        The rules of the fit the network reads (None: the defaults):
        ``checkpoint_min_rows``, the rows from which training passes
        recompute the encoder's, the layers' and the head's activations in the
        backward pass, and ``all_heads_max_src_rows``, the source rows below
        which the fused attention aggregates all heads in one product
        (:class:`~autoglm_graph.network.fused.FixedDegreeAdjacency`).

    Shapes
    ------
    - context: ``[n, in_channels]``; targets ``[n_src, target_channels]``;
      adjacency: from :meth:`adjacency` of a ``[n_dst, k]`` :class:`NeighborGraph`
      whose indices point at the ``n_src`` source rows.
    - output: ``[n, out_channels]``; zero at initialisation.
    """

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        *,
        hidden_channels: int = 64,
        heads: int = 4,
        num_layers: int = 2,
        target_channels: int = 0,
        dropout: float = 0.0,
        conv: str = "gat",
        message_passing: str = "auto",
        numeric_embedding: str = "linear",
        numeric_columns: tuple[int, ...] = (),
        numeric_edges: tuple[tuple[float, ...], ...] = (),
        policy: FitPolicy | None = None,
    ) -> None:
        super().__init__()
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.hidden_channels = hidden_channels
        self.heads = heads
        self.num_layers = num_layers
        self.target_channels = target_channels
        self.dropout = dropout
        self.conv = conv
        self.message_passing = message_passing
        self.numeric_embedding = numeric_embedding
        self.numeric_columns = tuple(int(j) for j in numeric_columns)
        self.numeric_edges = tuple(
            tuple(float(v) for v in edges) for edges in numeric_edges
        )
        self.fused = message_passing != "pyg" and conv == "gat"
        #: The fit's rules (saved with the model as the estimator's
        #: ``fit_policy``; a loaded network gets them back).
        self.policy = policy or FitPolicy()
        if message_passing == "fused" and conv != "gat":
            raise ValueError(
                "message_passing='fused' exists for conv='gat' only; got "
                f"conv={conv!r}."
            )
        #: Where dropout masks come from (None: torch's global generator);
        #: see :mod:`autoglm_graph.network._random`.
        self.generator: torch.Generator | None = None
        embedding = self._numeric_embedding()
        width = in_channels if embedding is None else embedding.out_channels
        self.encoder = nn.Sequential(
            *([] if embedding is None else [embedding]),
            nn.Linear(width, hidden_channels),
            nn.GELU(),
            _Dropout(dropout, self),
            nn.Linear(hidden_channels, hidden_channels),
            nn.LayerNorm(hidden_channels),
        )
        self.convs = nn.ModuleList()
        self.norms = nn.ModuleList()
        for layer in range(num_layers):
            src = hidden_channels + (target_channels if layer == num_layers - 1 else 0)
            self.convs.append(
                attention_layer(
                    conv,
                    (src, hidden_channels),
                    hidden_channels,
                    heads,
                    dropout,
                    self.fused,
                )
            )
            self.norms.append(nn.LayerNorm(hidden_channels))
        self.head = nn.Sequential(
            nn.Linear(2 * hidden_channels, hidden_channels),
            nn.GELU(),
            nn.Linear(hidden_channels, out_channels),
        )
        self.reset_parameters()

    def _numeric_embedding(self) -> PiecewiseLinearEncoding | None:
        """The embedding of the numeric columns, first in the encoder (None
        under ``numeric_embedding="linear"``: the encoder's first layer reads
        every column as it is, and its weights keep the names of files saved
        before the option)."""
        if self.numeric_embedding == "linear" or not self.numeric_columns:
            return None
        if self.numeric_embedding != "piecewise_linear":
            raise ValueError(
                "numeric_embedding must be 'linear' or 'piecewise_linear'; got "
                f"{self.numeric_embedding!r}."
            )
        return PiecewiseLinearEncoding(
            self.in_channels, self.numeric_columns, self.numeric_edges
        )

    def reset_parameters(self) -> None:
        """Re-initialise all weights; the last head layer starts at zero."""
        for module in self.modules():
            if module is not self and hasattr(module, "reset_parameters"):
                module.reset_parameters()
        if isinstance(self.encoder[0], PiecewiseLinearEncoding):
            self.encoder[0].start_as_linear(self.encoder[1])
        # Delta = 0 at the start: the untrained network *is* the global GLM.
        nn.init.zeros_(self.head[-1].weight)
        nn.init.zeros_(self.head[-1].bias)

    def adjacency(self, graph: NeighborGraph, n_src: int):
        """``graph`` prepared for this network's layers (build once, reuse)."""
        if self.fused:
            return FixedDegreeAdjacency(
                graph, n_src, self.policy.all_heads_max_src_rows
            )
        return EdgeListAdjacency(graph)

    def encode(self, context: Tensor) -> Tensor:
        """Encoder output ``z``, shape ``[n, hidden_channels]``.

        Without gradients the rows go through in chunks of about
        ``FitPolicy.predict_chunk``: the numeric embedding's ``[n, columns,
        bins]`` intermediates over all training rows were a fit's peak memory
        (``benchmarks/results/scale_fit_300k.md``). The encoder is row-wise,
        and a chunk is a multiple of 4 rows so that its dropout masks are the
        same bits as the whole pass's (:func:`~._random.keep_mask` draws four
        entries per 64-bit word, in row order).
        """
        chunk = max(4, self.policy.predict_chunk // 4 * 4)
        if torch.is_grad_enabled() or context.shape[0] <= chunk:
            return self.encoder(context)
        return torch.cat([self.encoder(part) for part in context.split(chunk)])

    def _layer(
        self,
        layer: int,
        x_src: Tensor,
        h_dst: Tensor,
        adjacency,
        return_attention: bool = False,
        projected: tuple[Tensor, Tensor] | None = None,
    ):
        conv = self.convs[layer]
        attention = None
        if isinstance(adjacency, FixedDegreeAdjacency):
            out = fixed_degree_gat(
                conv,
                (x_src, h_dst),
                adjacency,
                return_attention,
                self.generator,
                projected=projected,
            )
            if return_attention:
                out, alpha = out  # [n, k, heads]
                attention = (edge_list(adjacency), alpha[adjacency.mask])
        else:
            out = conv(
                (x_src, h_dst),
                adjacency.edge_index,
                edge_attr=adjacency.edge_attr,
                return_attention_weights=True if return_attention else None,
            )
            if return_attention:
                out, attention = out
        out = dropout(
            nn.functional.gelu(out), self.dropout, self.training, self.generator
        )
        return self.norms[layer](h_dst + out), attention

    def _source_input(self, layer: int, h: Tensor, targets: Tensor | None) -> Tensor:
        if layer == self.num_layers - 1 and self.target_channels:
            return torch.cat([h, targets], dim=1)
        return h

    def forward(
        self,
        context: Tensor,
        targets: Tensor | None,
        adjacency,
        z: Tensor | None = None,
    ) -> tuple[Tensor, SourceStates]:
        """Transductive pass over the training rows (sources = destinations).

        Returns the coefficient deviations of every row and the states that new
        rows need (:class:`SourceStates`). ``z`` may pass a precomputed encoding.
        """
        return self._transductive(context, targets, adjacency, z, head=True)

    def source_states(
        self,
        context: Tensor,
        targets: Tensor | None,
        adjacency,
        z: Tensor | None = None,
    ) -> SourceStates:
        """The states of :meth:`forward` alone: the training rows' inputs to
        each layer and the pool, without the last layer and the head.

        New rows read only these, so validation and prediction skip the last
        layer and the head over the training rows (about half of a pass with
        two layers).
        """
        return self._transductive(context, targets, adjacency, z, head=False)

    def _transductive(self, context, targets, adjacency, z, head: bool):
        min_rows = self.policy.checkpoint_min_rows
        recompute = (
            torch.is_grad_enabled()
            and min_rows is not None
            and context.shape[0] >= min_rows
        )

        def run(function, *args):
            if not recompute:
                return function(*args)
            # Dropout masks are replayed: the recomputation is the same pass.
            return checkpoint(
                function,
                *args,
                use_reentrant=False,
                context_fn=lambda: replay_context(self.generator),
            )

        distinct = getattr(adjacency, "distinct", None)
        first_layer = 0
        if distinct is not None and z is None and not recompute:
            h, layers = self._distinct_feature_layers(context, distinct)
            first_layer = self.num_layers - 1
        else:
            h = run(self.encode, context) if z is None else z
            layers = []
        embedding = layers[0] if layers else h
        for layer in range(first_layer, self.num_layers):
            if layer == self.num_layers - 1:
                # Pool before the outcome layer: the pool must not carry targets.
                pooled = h.mean(dim=0)
            x_src = self._source_input(layer, h, targets)
            layers.append(x_src)
            if layer == self.num_layers - 1 and not head:
                break
            h, _ = run(self._layer, layer, x_src, h, adjacency)
        states = SourceStates(layers=layers, pooled=pooled, embedding=embedding)
        if not head:
            return states
        return run(self._head, h, pooled), states

    def _distinct_feature_layers(
        self, context: Tensor, distinct: DistinctRows
    ) -> tuple[Tensor, list[Tensor]]:
        """The encoder and the layers before the last over ``distinct.rows``
        only, copied out to every row: the last layer's input ``h`` and the
        earlier layers' source inputs (``[n, hidden]`` each)."""
        inverse = distinct.inverse
        h = self.encode(context[distinct.rows])
        layers = []
        for layer in range(self.num_layers - 1):
            layers.append(h[inverse])
            # Projection is linear: project the distinct rows, then copy.
            projected = tuple(
                p[inverse] for p in source_projection(self.convs[layer], h)
            )
            h, _ = self._layer(layer, None, h, distinct.adjacency, projected=projected)
        return h[inverse], layers

    def forward_query(
        self,
        context: Tensor,
        states: SourceStates,
        adjacency,
        z: Tensor | None = None,
        return_attention: bool = False,
    ):
        """Inductive pass: new rows attend to training rows' cached states only.

        ``adjacency`` links query rows (destinations) to training rows. With
        ``return_attention`` also returns the last layer's attention
        ``(edge_index, weights [E, heads])``, edges in
        :meth:`NeighborGraph.to_edge_index` order.
        """
        h = self.encode(context) if z is None else z
        attention = None
        for layer in range(self.num_layers):
            h, attention = self._layer(
                layer,
                states.layers[layer],
                h,
                adjacency,
                return_attention=return_attention and layer == self.num_layers - 1,
            )
        delta = self._head(h, states.pooled)
        return (delta, attention) if return_attention else delta

    def forward_cached(
        self,
        context: Tensor,
        targets: Tensor | None,
        adjacency,
        positions: Tensor,
        inputs: list[Tensor],
        projected: list[tuple[Tensor, ...]],
    ) -> tuple[Tensor, list[Tensor], list[tuple[Tensor, ...]]]:
        """Pass over one part of the training rows, the others read from caches.

        ``positions`` are the part's rows among all ``n`` training rows,
        ``adjacency`` their neighbour lists among them, ``inputs[l]`` every
        row's cached input to layer ``l`` and ``projected[l]`` its projection
        (:func:`~autoglm_graph.network.fused.source_projection`), whose part rows are
        replaced by this pass's. The pool is that of every row with this
        part's fresh (GNNAutoScale's historical embeddings).

        Returns the part's coefficient deviations, and its inputs to each
        layer and their projections (for the caller to write back).
        """
        n = inputs[0].shape[0]
        last = self.num_layers - 1
        own_inputs, own_projected = [], []
        h = self.encode(context)
        for layer in range(self.num_layers):
            if layer == last:  # the pool of every row, this part fresh
                held = inputs[last][:, : self.hidden_channels]
                pooled = (
                    held.sum(dim=0) - held[positions].sum(dim=0) + h.sum(dim=0)
                ) / n
            x_src = self._source_input(layer, h, targets)
            own = source_projection(self.convs[layer], x_src)
            sources = tuple(
                full.index_put((positions,), part.to(full.dtype))
                for full, part in zip(projected[layer], own, strict=True)
            )
            own_inputs.append(x_src)
            own_projected.append(own)
            h, _ = self._layer(layer, None, h, adjacency, projected=sources)
        return self._head(h, pooled), own_inputs, own_projected

    def _head(self, h: Tensor, pooled: Tensor) -> Tensor:
        # head(cat([h, pooled])) with the pool's half of the first layer
        # folded into its bias: every row shares the pool, so its product is
        # one vector, and the [n, 2 * hidden] concatenation is never formed.
        first = self.head[0]
        hidden = h.shape[1]
        bias = first.bias + nn.functional.linear(pooled, first.weight[:, hidden:])
        out = nn.functional.linear(h, first.weight[:, :hidden], bias)
        return self.head[2](self.head[1](out))

    def __repr__(self) -> str:
        return (
            f"{self.__class__.__name__}({self.in_channels}, {self.out_channels}, "
            f"hidden_channels={self.hidden_channels}, heads={self.heads}, "
            f"num_layers={self.num_layers}, target_channels={self.target_channels}, "
            f"conv={self.conv!r}, message_passing={self.message_passing!r})"
        )
