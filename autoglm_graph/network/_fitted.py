"""The fitted network: everything prediction needs from training, in one object.

A :class:`FittedNetwork` owns the trained
:class:`~autoglm_graph.network.modules.GraphGLMNet`,
the graph configuration it was trained with, the training rows and their cached
per-layer states. It answers new rows (:meth:`FittedNetwork.query`), moves
between devices (:meth:`FittedNetwork.to`), and turns into plain configuration
plus named tensors and back (:meth:`FittedNetwork.state`,
:meth:`FittedNetwork.from_state`): pickling and :mod:`autoglm_graph.persistence` both go
through that pair, so a fitted tensor is declared once, here.

Adding a fitted tensor is one edit: a field of :class:`FittedNetwork` whose
``metadata`` gives its shape (``field(metadata=fitted_tensor("n", "p"))``);
:meth:`~FittedNetwork.state`, :meth:`~FittedNetwork.from_state`,
:meth:`~FittedNetwork.to`, pickling and the shape checks of a loaded file
(:meth:`~FittedNetwork.expected_shapes`) all follow from the field.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import Tensor

from ..neighbors import (
    CosineNeighbors,
    NeighborGraph,
    PredictionIndex,
    cosine_topk,
    fit_prediction_index,
)
from ..policy import FitPolicy
from .fused import FixedDegreeAdjacency, source_projection
from .modules import GraphGLMNet, NetConfig, SourceStates
from .rows import GraphConfig, RowData, autocast, query_forward

__all__ = [
    "FittedNetwork",
    "build_net",
    "fitted_tensor",
    "net_config",
]


def net_config(net: GraphGLMNet) -> dict:
    """The arguments that rebuild ``net`` (its weights aside)."""
    return dataclasses.asdict(NetConfig.of(net))


def build_net(spec: dict, policy: FitPolicy | None = None) -> GraphGLMNet:
    """A network from :func:`net_config`'s dictionary (weights to be loaded),
    reading ``policy`` (the fit's; None: the defaults).

    Building draws initial weights: the caller's torch RNG is left intact.
    """
    with torch.random.fork_rng(devices=[]):
        return NetConfig(**spec).build(policy=policy)


def fitted_tensor(*shape: str | int, numpy: bool = False) -> dict:
    """Field metadata of a fitted tensor of :class:`FittedNetwork`.

    ``shape`` is in the symbols of :func:`_dims`: ``n`` training rows, ``p``
    design columns, ``k`` outputs, ``h`` hidden channels, ``t`` target
    channels; ``numpy=True`` keeps it as a numpy array (not moved to the device).
    """
    return {"shape": shape, "numpy": numpy}


@dataclass
class FittedNetwork:
    """The trained network and what it needs to answer new rows.

    Attributes
    ----------
    net : GraphGLMNet
        The trained network (the kept epoch's weights), in eval mode.
    graph : GraphConfig
        How neighbours are found (space, k, threshold, backend).
    n_outputs : int
        Linear predictors per row (classes for multinomial, else 1).
    precision : str
        Autocast of the network at prediction (the training's final one).
    training : dict
        The scalar settings of the training that made it (a record; saved
        with the model).
    rows : RowData
        The training rows (the neighbours of every new row).
    states : SourceStates
        Their per-layer states under the kept weights.
    positions : ndarray of shape (n_train,)
        Their positions in the data ``fit`` got.
    """

    net: GraphGLMNet
    graph: GraphConfig
    n_outputs: int
    precision: str
    training: dict
    rows: RowData
    states: SourceStates
    positions: np.ndarray = field(metadata=fitted_tensor("n", numpy=True))
    #: ``(base, index)``: the search index over the training rows' vectors
    #: ``base`` (built at the first query, or handed over by the fit); not saved.
    index: tuple | None = field(default=None, repr=False, compare=False)
    #: The settings of the prediction index the fit calibrated (saved; the
    #: index is rebuilt from them), None for the exact search
    #: (:mod:`autoglm_graph.neighbors._prediction_index`).
    prediction_index: PredictionIndex | None = None
    #: ``(key, projections)``: each layer's source projection of the training
    #: rows' states (the fused path), formed at the first query and kept while
    #: ``key`` (the states and the layers' weights, their versions) holds;
    #: not saved.
    projections: tuple | None = field(default=None, repr=False, compare=False)

    # ---------------------------------------------------------------- queries
    @property
    def device(self) -> torch.device:
        return self.rows.context.device

    @property
    def policy(self) -> FitPolicy:
        """The fit's rules, which the network was built with: the prediction
        search's too (the thresholds of ``"auto"``, the indexes, the tiles)."""
        return self.net.policy

    def base_vectors(self) -> Tensor:
        """The training rows' vectors in the graph's space."""
        if self.graph.space == "input":
            return self.rows.context
        return self.states.embedding

    def search(self, queries: Tensor) -> NeighborGraph:
        """Neighbours of ``queries`` (graph-space vectors) among the training rows.

        The training rows are fixed, so their search index (an HNSW index for
        the faiss backend) is built once and kept.
        """
        base = self.base_vectors()
        if self.index is None or self.index[0] is not base:
            if self.prediction_index is not None:
                index = self.prediction_index.build(
                    base, self.graph.n_neighbors, self.policy
                )
            else:
                index = CosineNeighbors(
                    self.graph.n_neighbors,
                    device=base.device,
                    dtype=base.dtype,
                    backend=self.graph.backend,
                    policy=self.policy,
                ).fit(base)
            self.index = (base, index)
        graph = self.index[1].kneighbors(queries, self.graph.n_neighbors)
        return graph.narrowed(threshold=self.graph.threshold)

    def graph_vectors(self, context: Tensor) -> tuple[Tensor, Tensor]:
        """``(z, queries)``: the encoder's output for rows ``context`` and
        their vectors in the graph's space."""
        with autocast(self.precision, self.device.type):
            z = self.net.eval().encode(context)
        return z, context if self.graph.space == "input" else z

    @torch.no_grad()
    def fit_prediction_index(
        self, held_out: Tensor | None, policy: FitPolicy | None = None
    ) -> PredictionIndex | None:
        """Build the prediction index at the end of a fit, where it pays.

        Under ``graph_backend="auto"`` on a CPU with faiss installed, from
        ``policy.predict_index_min_rows`` training rows (None: the network's
        :attr:`policy`) and unless the fit handed over an index; ``held_out``
        (rows' context, e.g. the validation rows) calibrates it (see
        :mod:`autoglm_graph.neighbors._prediction_index`).
        """
        from ..neighbors import faiss_available

        policy = policy or self.policy
        base = self.base_vectors()
        if (
            self.graph.backend != "auto"
            or self.index is not None
            or self.device.type != "cpu"
            or base.shape[0] < max(1, policy.predict_index_min_rows)
            or not faiss_available()
        ):
            return None
        queries = None if held_out is None else self.graph_vectors(held_out)[1]
        found = fit_prediction_index(
            base.float(),
            None if queries is None else queries.float(),
            self.graph.n_neighbors,
            policy,
        )
        if found is not None:
            self.prediction_index, index = found
            self.index = (base, index)
        return self.prediction_index

    @torch.no_grad()
    def query(
        self,
        context: Tensor,
        return_graph: bool = False,
        return_attention: bool = False,
    ):
        """Coefficient deviations of new rows, each linked to training rows only.

        Returns ``delta`` ``[n, out_channels]`` (float32), with
        ``(edge_index, attention)`` when ``return_attention`` (as
        ``(delta, (edge_index, attention))``) and then the neighbour graph when
        ``return_graph`` (as ``(out, graph)``).
        """
        net = self.net.eval()
        z, queries = self.graph_vectors(context)
        graph = self.search(queries.float())
        out = query_forward(
            net,
            context,
            self.states,
            self.query_adjacency(graph),
            z=z,
            precision=self.precision,
            return_attention=return_attention,
            projected=self.source_projections(),
        )
        return (out, graph) if return_graph else out

    def query_adjacency(self, graph: NeighborGraph):
        """``graph`` (new rows' neighbours) prepared for the network's layers.

        On the fused path all heads go through one product whatever the
        number of training rows: a query only reads its sources, where one
        product per head copies each head's states out at every call (the
        same bits; ``docs/decisions/prediction_speed.md``).
        """
        n_src = self.rows.context.shape[0]
        if not self.net.fused:
            return self.net.adjacency(graph, n_src=n_src)
        return FixedDegreeAdjacency(graph, n_src, all_heads=True)

    @torch.no_grad()
    def source_projections(self) -> list[tuple[Tensor, Tensor]] | None:
        """Each layer's :func:`~autoglm_graph.network.fused.source_projection`
        of the training rows' states (None off the fused path).

        Every query reads the same ones, so they are formed once (at the
        network's precision) and kept; a change of the states or of the
        layers' weights forms them again. Memory: one ``[n_train, hidden]``
        tensor per layer.
        """
        net = self.net
        if not net.fused:
            return None
        tensors = [*self.states.layers, *net.convs.parameters()]
        key = (tensors, [t._version for t in tensors])
        if self.projections is not None:
            (kept, versions), projections = self.projections
            same = len(kept) == len(tensors) and all(
                a is b for a, b in zip(kept, tensors, strict=False)
            )
            if same and versions == key[1]:
                return projections
        with autocast(self.precision, self.device.type):
            projections = [
                source_projection(conv, x_src)
                for conv, x_src in zip(net.convs, self.states.layers, strict=True)
            ]
        self.projections = (key, projections)
        return projections

    def training_graph(self) -> NeighborGraph:
        """The training rows' neighbours among themselves under the kept
        weights (self and the own group excluded), as training builds them."""
        vectors = self.base_vectors().float()
        graph = cosine_topk(
            vectors,
            n_neighbors=self.graph.n_neighbors,
            threshold=self.graph.threshold,
            device=vectors.device,
            dtype=vectors.dtype,
            backend=self.graph.backend,
            policy=self.policy,
        )
        return graph.without_own_group(self.rows.group)

    # ----------------------------------------------------------------- device
    def to(self, device: torch.device | str) -> FittedNetwork:
        """This network on ``device`` (itself when it is there already)."""
        device = torch.device(device)
        if device == self.device:
            return self
        config, tensors = self.state()
        return FittedNetwork.from_state(config, tensors, device, self.policy)

    # ------------------------------------------------------------------ state
    def state(self) -> tuple[dict, dict[str, Tensor]]:
        """Plain configuration (JSON types) and named CPU tensors.

        :meth:`from_state` inverts it; tensors are not copied where they are
        on the CPU already (fields that share one tensor still share it).
        """
        tensors: dict[str, Tensor] = {}

        def put(key: str, value) -> None:
            tensors[key] = torch.as_tensor(value).detach().to("cpu")

        for key, value in self.net.state_dict().items():
            put(f"network.{key}", value)
        present = []
        for f in dataclasses.fields(RowData):
            value = getattr(self.rows, f.name)
            if value is not None:
                put(f"train_rows.{f.name}", value)
                present.append(f.name)
        for layer, value in enumerate(self.states.layers):
            put(f"source_states.layers.{layer}", value)
        put("source_states.pooled", self.states.pooled)
        put("source_states.embedding", self.states.embedding)
        for f in _tensor_fields():
            put(_TENSOR_NAMES.get(f.name, f.name), getattr(self, f.name))
        config = {
            "net": net_config(self.net),
            "trainer": {
                "n_outputs": self.n_outputs,
                **self.training,
                "precision": self.precision,
                "graph": dataclasses.asdict(self.graph),
            },
            "train_rows": present,
            "n_train": int(self.rows.y.shape[0]),
        }
        design = self.rows.design
        q = config["net"]["out_channels"] // self.n_outputs - 1
        if design is not None and design.shape[1] != q:
            # The network varies more coefficients than the GLM has terms (a
            # categorical column's base level: autoglm_graph.glm._terms).
            config["design_width"] = int(design.shape[1])
        if self.prediction_index is not None:
            config["prediction_index"] = self.prediction_index.to_config()
        return config, tensors

    @classmethod
    def from_state(
        cls,
        config: dict,
        tensors: dict[str, Tensor],
        device: torch.device | str = "cpu",
        policy: FitPolicy | None = None,
    ) -> FittedNetwork:
        """The fitted network of :meth:`state`'s output, on ``device``.

        ``config`` and ``tensors`` are trusted here: :mod:`autoglm_graph.persistence`
        checks a file's against :meth:`expected_shapes` first. ``policy`` is
        the fit's (the estimator's ``fit_policy``; None: the defaults): the
        network reads it (:class:`~autoglm_graph.network.modules.GraphGLMNet`),
        and so does prediction's search.
        """
        net = build_net(config["net"], policy)
        prefix = "network."
        state = {
            k[len(prefix) :]: v for k, v in tensors.items() if k.startswith(prefix)
        }
        net.load_state_dict(state, strict=True)
        net = net.to(device).eval()
        dev = torch.device(device)
        on_device = lambda key: tensors[key].to(dev)  # noqa: E731
        rows = RowData(
            **{name: on_device(f"train_rows.{name}") for name in config["train_rows"]}
        )
        states = SourceStates(
            layers=[
                on_device(f"source_states.layers.{i}") for i in range(net.num_layers)
            ],
            pooled=on_device("source_states.pooled"),
            embedding=on_device("source_states.embedding"),
        )
        trainer = dict(config["trainer"])
        graph = GraphConfig(**trainer.pop("graph"))
        n_outputs = trainer.pop("n_outputs")
        precision = trainer.pop("precision")
        fields = {}
        for f in _tensor_fields():
            value = tensors[_TENSOR_NAMES.get(f.name, f.name)]
            numpy = f.metadata["numpy"]
            fields[f.name] = value.numpy().astype(np.int64) if numpy else value.to(dev)
        prediction_index = config.get("prediction_index")
        if prediction_index is not None:
            prediction_index = PredictionIndex.from_config(prediction_index)
        return cls(
            net=net,
            graph=graph,
            n_outputs=n_outputs,
            precision=precision,
            training=trainer,
            rows=rows,
            states=states,
            prediction_index=prediction_index,
            **fields,
        )

    @staticmethod
    def expected_shapes(config: dict) -> dict[str, tuple]:
        """Name -> shape of every tensor :meth:`state` writes for ``config``.

        ``config["net"]`` must already be checked (it builds a network on the
        CPU to read the shapes of its weights).
        """
        dims = _dims(config)
        n, p, k = dims["n"], dims["p"], dims["k"]
        hidden, targets = dims["h"], dims["t"]
        net = build_net(config["net"])
        expected = {
            f"network.{key}": tuple(value.shape)
            for key, value in net.state_dict().items()
        }
        rows = {
            "context": (n, p),
            "design": (n, config.get("design_width", dims["q"])),
            "y": (n,) if k == 1 else (n, k),
            "weight": (n,),
            "eta_global": (n, k),
            "targets": (n, targets),
            "group": (n,),
        }
        for name in config["train_rows"]:
            expected[f"train_rows.{name}"] = rows[name]
        for layer in range(net.num_layers):
            last = layer == net.num_layers - 1
            expected[f"source_states.layers.{layer}"] = (
                n,
                hidden + (targets if last else 0),
            )
        expected["source_states.pooled"] = (hidden,)
        expected["source_states.embedding"] = (n, hidden)
        for f in _tensor_fields():
            shape = tuple(dims.get(s, s) for s in f.metadata["shape"])
            expected[_TENSOR_NAMES.get(f.name, f.name)] = shape
        return expected

    #: Row data fields the network cannot do without (``targets`` too when
    #: the last layer carries outcomes).
    REQUIRED_ROWS = ("context", "design", "y", "weight", "eta_global")

    # --------------------------------------------------------------- pickling
    def __getstate__(self) -> dict[str, Any]:
        # As skorch does: tensors travel on the CPU, and the unpickler maps
        # them to a device it has (the estimator's __setstate__).
        config, tensors = self.state()
        return {"config": config, "tensors": tensors, "policy": self.policy}

    def __setstate__(self, state: dict[str, Any]) -> None:
        restored = FittedNetwork.from_state(
            state["config"], state["tensors"], policy=state.get("policy")
        )
        self.__dict__.update(restored.__dict__)


# Saved names of the tensor fields that differ from the field's name.
_TENSOR_NAMES = {"positions": "train_positions"}


def _tensor_fields() -> list[dataclasses.Field]:
    return [f for f in dataclasses.fields(FittedNetwork) if "shape" in f.metadata]


def _dims(config: dict) -> dict[str, int]:
    net = config["net"]
    # The GLM's q terms (an intercept and q slopes per output) may be fewer
    # than the p context columns (a categorical column's base level).
    k = config.get("trainer", {}).get("n_outputs")
    if type(k) is not int or k < 1 or net["out_channels"] % k:
        k = net["out_channels"] // (net["in_channels"] + 1)
    return {
        "n": config["n_train"],
        "p": net["in_channels"],
        "q": net["out_channels"] // max(k, 1) - 1,
        "k": k,
        "h": net["hidden_channels"],
        "t": net["target_channels"],
    }
