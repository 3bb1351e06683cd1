"""The training loop of the graph GLM: graph refresh, validation, callbacks.

The loop is full-batch by default: every epoch is one optimiser step over all
training rows (cheap at the sizes where that fits in memory); larger fits and
``batch_size`` run their epochs otherwise (:mod:`autoglm_graph.network.epochs`).
Callbacks (``on_epoch_end(trainer, logs) -> bool``) see each epoch's log; early
stopping (:mod:`autoglm_graph.network.stopping`) and pruning are callbacks, not
branches inside the loop. The tuned rules are a
:class:`~autoglm_graph.policy.FitPolicy`.
"""

from __future__ import annotations

import contextlib
import sys
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial

import numpy as np
import torch
from torch import Tensor
from tqdm.auto import tqdm

from ..glm import Family
from ..neighbors import NeighborCache, NeighborGraph, distinct_rows, refresh_graphs
from ..policy import FitPolicy
from ..utils import PhaseTimes
from ._random import on_device
from .averaging import WeightAverage
from .constraints import CoefficientMap
from .epochs import CachedStateEpochs, full_batch_epoch, minibatch_epoch
from .modules import DistinctRows, GraphGLMNet, NetConfig, SourceStates
from .rows import (
    CachedStates,
    FittedGraphState,
    GraphConfig,
    RowData,
    autocast,
    linear_predictor,
    network_deviations,
    query_forward,
    reported_linear_predictor,
    weighted_mean,
)
from .stopping import EpochSelector

__all__ = [
    "FitResult",
    "Trainer",
    "TrainingState",
    "WeightAverage",
    "progress_options",
]


def progress_options(verbose: int, progress_delay_s: float | None = None) -> dict:
    """tqdm options: always shown when ``verbose``, else after
    ``progress_delay_s`` seconds (None: the default policy's) and on a terminal
    or in a notebook only (fits in joblib workers, CI logs and pipes stay
    quiet)."""
    if progress_delay_s is None:
        progress_delay_s = FitPolicy().progress_delay_s
    if verbose:
        return {"disable": False}
    interactive = "ipykernel" in sys.modules or (
        hasattr(sys.stderr, "isatty") and sys.stderr.isatty()
    )
    return {"disable": not interactive, "delay": progress_delay_s, "leave": False}


@dataclass
class Trainer:
    """How a :class:`GraphGLMNet` is trained: the configuration of a fit.

    :meth:`fit` builds the network from ``net``, trains it in a
    :class:`TrainingState` (the per-fit state) and returns a
    :class:`FitResult`. Parameters mirror the estimator's; see
    :class:`GraphGLMRegressor`.
    """

    net: NetConfig
    family: Family
    n_outputs: int
    graph: GraphConfig
    learning_rate: float
    weight_decay: float
    local_penalty: float
    max_epochs: int
    batch_size: int | None = None
    callbacks: list = field(default_factory=list)
    verbose: int = 0
    #: "fp32", "bf16" or "fp16": autocast of the network (the loss stays fp32).
    precision: str = "fp32"
    #: Decay of the exponential moving average of the weights that validation
    #: (hence the kept snapshot and prediction) uses; 0: the raw weights.
    ema_decay: float = 0.0
    #: The tuned rules of the loop, the search and the network.
    policy: FitPolicy = field(default_factory=FitPolicy)
    #: Whether the model has an intercept for the network to vary.
    fit_intercept: bool = True
    #: The constraints on the deviations (terms held global, signs kept);
    #: None: the network's output is the deviation.
    coef_map: CoefficientMap | None = None
    #: The network's deviations -> the GLM's terms' (a varied base level's
    #: moved into the intercept's: :meth:`autoglm_graph.glm._terms.GLMTerms.reduce`);
    #: None: the network varies the GLM's terms.
    reduce: Callable | None = None

    #: The scalar settings that :meth:`settings` records.
    SETTINGS = (
        "learning_rate",
        "weight_decay",
        "local_penalty",
        "max_epochs",
        "batch_size",
        "verbose",
        "ema_decay",
    )

    def settings(self) -> dict:
        """The scalar training settings (a record kept with the fitted network)."""
        return {name: getattr(self, name) for name in self.SETTINGS}

    def fit(
        self,
        train: RowData,
        val: RowData | None,
        *,
        neighbor_cache: NeighborCache | None = None,
        seed: int | None = None,
        times: PhaseTimes | None = None,
    ) -> FitResult:
        """Build the network on the rows' device and train it.

        With validation rows, the kept epoch is the one of lowest validation
        deviance, and the network is kept only if it beats the global GLM (epoch
        0) by more than ``FitPolicy.keep_standard_errors`` standard errors of
        the paired per-row difference (on small or noisy data the simpler
        model is kept).

        ``neighbor_cache`` shares input-space searches between fits (a
        hyperparameter search passes one to every trial); None gives this fit
        its own. ``seed`` gives the fit its own random stream (initial weights
        and dropout masks, :mod:`autoglm_graph.network._random`): the same seed, the
        same model, whatever other threads draw meanwhile; None draws from
        torch's global generator. ``times`` adds the loop's phases to a
        fit's :class:`~autoglm_graph.utils._timing.PhaseTimes`.
        """
        device = train.context.device
        times = PhaseTimes(device) if times is None else times
        net = self.net.build(seed, self.policy).to(device)
        if net.generator is not None:
            net.generator = on_device(net.generator, device)
            if not net.fused:  # torch_geometric's layers draw from the global one
                seed_global_generator(net.generator)
        state = TrainingState(self, net, neighbor_cache, times)
        try:
            best = state.run(train, val)
        finally:
            with times.phase("prediction_index"):
                index = state.finish(train)
            net.generator = None  # a fitted network draws nothing
        selector = state.selector
        result = FitResult(
            history=state.history,
            best=best,
            gain=None if selector is None else selector.gain,
            gain_se=None if selector is None else selector.gain_se,
            net=net,
            precision=state.precision,
            index=index,
        )
        if best is not None:
            net.load_state_dict(best.state_dict)
            net.eval()
            with times.phase("prediction_index"):
                result.states = state.source_states(train, best.train_graph)
        return result


@dataclass
class FitResult:
    """What :meth:`Trainer.fit` returns.

    ``best`` is the kept epoch's state (None when the global GLM wins), with
    its weights loaded in ``net`` and the training rows' ``states`` under
    them; ``gain`` and ``gain_se`` the validation deviance of the global GLM
    minus the kept epoch's and its standard error; ``precision`` the
    training's final one; ``index`` an input-space search index over the
    training rows that prediction can reuse.
    """

    history: list
    best: FittedGraphState | None
    gain: float | None
    gain_se: float | None
    net: GraphGLMNet
    precision: str
    index: tuple | None = None
    states: SourceStates | None = None


class TrainingState:
    """The state of one fit: the network, its optimiser's helpers, the caches
    of the graph and the history. Callbacks get it as their ``trainer``
    (``history``, ``net``, ``config``)."""

    def __init__(
        self,
        config: Trainer,
        net: GraphGLMNet,
        neighbor_cache: NeighborCache | None = None,
        times: PhaseTimes | None = None,
    ) -> None:
        self.config = config
        self.net = net
        #: Wall seconds by phase (:class:`~autoglm_graph.utils._timing.PhaseTimes`).
        self.times = PhaseTimes(net.head[-1].weight.device) if times is None else times
        #: Starts at the configured precision; bf16 may fall back to fp32.
        self.precision = config.precision
        self.history: list[dict] = []
        self.neighbor_cache = neighbor_cache or NeighborCache(
            backend=config.graph.backend, policy=config.policy
        )
        #: Where the network's weights live ("cpu", "cuda", ...).
        self._device_type = net.head[-1].weight.device.type
        self._scaler = torch.amp.GradScaler(
            self._device_type, enabled=self.precision == "fp16"
        )
        self.selector: EpochSelector | None = None
        #: The weights' moving average (``ema_decay > 0``), from :meth:`run`.
        self.weight_average: WeightAverage | None = None
        self._adjacency_cache: tuple | None = None
        #: (context, distinct_rows(context)) of the training rows.
        self._distinct: tuple | None = None
        self._val_adjacency = None
        #: The cached-state epochs and their cache (large fits).
        self.cached_epochs = CachedStateEpochs(config.policy)
        #: The graphs of the last refresh, the optimiser and the last epoch
        #: run: with the above, what a checkpoint holds (:class:`Checkpoint`).
        self.train_graph: NeighborGraph | None = None
        self._val_graph: NeighborGraph | None = None
        self.optimizer = None
        self.epoch = 0

    def finish(self, train: RowData) -> tuple | None:
        """Drop the loop's scratch; the ``(base, index)`` prediction may reuse.

        Prediction searches the same training rows: an input-space index the
        fit built over them is kept for it (at 1M rows it takes minutes).
        """
        index = None
        if self.config.graph.space == "input":
            built = self.neighbor_cache.index_for(train.context)
            if built is not None:
                index = (train.context, built)
        self.neighbor_cache = None
        self.weight_average = self._adjacency_cache = self._val_adjacency = None
        self.cached_epochs.clear()
        self.train_graph = self._val_graph = self.optimizer = None
        return index

    # ------------------------------------------------------------- checkpoint
    def state_dict(self) -> dict:
        """Everything the next epoch depends on, as tensors and plain values.

        Loading it into a new state for the same rows and settings
        (:meth:`load_state_dict`) continues the fit exactly where it was: on
        the CPU the finished model is bit-identical to an uninterrupted one.
        """
        selector = self.selector
        best = None if selector is None else selector.best
        average = self.weight_average
        cache = self.cached_epochs.cache
        return {
            "epoch": self.epoch,
            "net": self.net.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "ema": None if average is None else average.averages,
            "ema_steps": 0 if average is None else average.steps,
            "history": self.history,
            "graph": _graph_dict(self.train_graph),
            "val_graph": _graph_dict(self._val_graph),
            "generator": None
            if self.net.generator is None
            else self.net.generator.get_state(),
            "global_rng": _global_rng_state(self.net),
            "precision": self.precision,
            "scaler": self._scaler.state_dict(),
            "best_value": None if selector is None else selector.best_value,
            "best_unit": None if selector is None else selector.best_unit,
            "best": None
            if best is None
            else {
                "state_dict": best.state_dict,
                "graph": _graph_dict(best.train_graph),
                "epoch": best.epoch,
            },
            "callbacks": [cb.state_dict() for cb in self.stateful_callbacks()],
            "cached_states": None
            if cache is None
            else {"parts": cache.parts, "inputs": cache.inputs},
        }

    def load_state_dict(self, state: dict) -> None:
        """Continue from :meth:`state_dict`'s record (see there)."""
        self.epoch = state["epoch"]
        self.net.load_state_dict(state["net"])
        self.optimizer.load_state_dict(state["optimizer"])
        if state["ema"] is not None:
            self.weight_average.averages = state["ema"]
            self.weight_average.steps = state["ema_steps"]
        self.history[:] = state["history"]
        self.train_graph = _graph_of(state["graph"])
        self._val_graph = _graph_of(state["val_graph"])
        if state["generator"] is not None:
            self.net.generator.set_state(state["generator"])
        if not self.net.fused:  # torch_geometric's layers draw from it
            _set_global_rng_state(self.net, state["global_rng"])
        self.precision = state["precision"]
        self._scaler.load_state_dict(state["scaler"])
        if self.selector is not None:
            self.selector.best_value = state["best_value"]
            self.selector.best_unit = state["best_unit"]
            best = state["best"]
            if best is not None:
                self.selector.best = FittedGraphState(
                    state_dict=best["state_dict"],
                    train_graph=_graph_of(best["graph"]),
                    epoch=best["epoch"],
                )
        for callback, saved in zip(
            self.stateful_callbacks(), state["callbacks"], strict=True
        ):
            callback.load_state_dict(saved)
        cached = state.get("cached_states")  # older records have none
        if cached is not None:
            self.cached_epochs.cache = CachedStates(self.train_graph, **cached)

    def stateful_callbacks(self) -> list:
        """The callbacks whose state a checkpoint keeps (``state_dict``)."""
        return [cb for cb in self.config.callbacks if hasattr(cb, "state_dict")]

    # ------------------------------------------------------------------ graph
    def graph_vectors(self, context: Tensor, z: Tensor | None = None) -> Tensor:
        if self.config.graph.space == "input":
            return context
        return self.net.encode(context) if z is None else z

    def build_graphs(
        self, train: RowData, val: RowData | None
    ) -> tuple[NeighborGraph, NeighborGraph | None]:
        """The training rows' neighbours among themselves (self excluded) and
        the validation rows' among the training rows, at a refresh.

        Input-space graphs are fixed during a fit: both are searched once,
        through the neighbour cache (a search's, shared by its trials). An
        embedding-space refresh searches both in one index over the training
        rows' current embedding
        (:func:`~autoglm_graph.neighbors.refresh.refresh_graphs`;
        approximate from 5,000 rows on a CPU): its rows change at every step,
        so the index serves one refresh only. Validation rows are searched at
        each refresh, in the same space and with the same weights, and kept
        until the next one: scored as new rows would have been at that
        refresh. Searching them every epoch cost as much as the training step
        itself (30 % of an epoch at 15k rows on one CPU thread).

        With groups, a row's neighbours from its own group are masked out too
        (:meth:`~autoglm_graph.neighbors._graph.NeighborGraph.without_own_group`).
        """
        config = self.config.graph
        # One encoding of the training rows serves both searches.
        base = self.graph_vectors(train.context)
        queries = None if val is None else self.graph_vectors(val.context)
        if config.space == "input":
            search = partial(
                self.neighbor_cache.search,
                n_neighbors=config.n_neighbors,
                threshold=config.threshold,
            )
            graph = search(base)
            val_graph = None if val is None else search(queries, base)
        else:
            graph, val_graph = refresh_graphs(
                base,
                queries,
                n_neighbors=config.n_neighbors,
                threshold=config.threshold,
                backend=config.backend,
                policy=self.config.policy,
            )
        return graph.without_own_group(train.group), val_graph

    def adjacency(self, graph: NeighborGraph, context: Tensor):
        """The training graph prepared for the network (and the copies
        among the rows, :meth:`_distinct_rows`)."""
        # The training graph changes only at a refresh; its prepared form is
        # reused by every epoch's forward and validation pass until then.
        cached = self._adjacency_cache
        if cached is None or cached[0] is not graph:
            n_src = graph.indices.shape[0]
            adjacency = self.net.adjacency(graph, n_src)
            adjacency.distinct = self._distinct_rows(graph, context)
            self._adjacency_cache = (graph, adjacency)
        return self._adjacency_cache[1]

    def _distinct_rows(self, graph: NeighborGraph, context: Tensor):
        """The training rows' :class:`DistinctRows` for ``graph``, or None
        (most rows distinct, copies with different lists, or no fast path)."""
        policy = self.config.policy
        if not (self.net.fused and policy.distinct_rows):
            return None
        if self._distinct is None or self._distinct[0] is not context:
            found = distinct_rows(context, policy)
            self._distinct = (context, found)
        found = self._distinct[1]
        if found is None or not graph.shared_by_duplicates(*found):
            return None
        first, inverse = found
        adjacency = self.net.adjacency(graph.query_rows(first), graph.indices.shape[0])
        return DistinctRows(first, inverse, adjacency)

    # -------------------------------------------------------------- inference
    @torch.no_grad()
    def source_states(self, train: RowData, train_graph: NeighborGraph) -> SourceStates:
        """Per-layer states of the training rows, as new rows will see them."""
        self.net.eval()
        adjacency = self.adjacency(train_graph, train.context)
        with self.amp():
            return self.net.source_states(train.context, train.targets, adjacency)

    @torch.no_grad()
    def query_delta(self, context: Tensor, states: SourceStates, adjacency) -> Tensor:
        """Coefficient deviations of rows linked to training rows by ``adjacency``
        (the validation rows' prepared neighbour lists of the last refresh)."""
        return query_forward(
            self.net, context, states, adjacency, precision=self.precision
        )

    # ---------------------------------------------------------------- fitting
    def loss(self, delta: Tensor, rows: RowData) -> tuple[Tensor, Tensor]:
        """Half the weighted deviance plus the local penalty, and the deviance."""
        config = self.config
        delta = network_deviations(
            delta, config.n_outputs, config.coef_map, intercept=config.fit_intercept
        )
        reduced = delta if config.reduce is None else config.reduce(delta)
        eta, _ = reported_linear_predictor(reduced, rows)
        deviance = config.family.deviance(rows.y, eta, rows.weight)
        # The penalty is on the deviations the network varies (a varied base
        # level's too, as with categorical_coding="all_levels").
        penalty = weighted_mean(delta.pow(2).sum(dim=(1, 2)), rows.weight)
        return 0.5 * deviance + self.config.local_penalty * penalty, deviance

    def amp(self):
        """Autocast of the network's forward at ``precision`` (off for fp32)."""
        return autocast(self.precision, self._device_type)

    def forward(self, context: Tensor, targets, adjacency):
        """The network's transductive pass at the training's precision."""
        with self.amp():
            delta, states = self.net(context, targets, adjacency)
        return delta.float(), states

    def backward_step(self, optimizer, loss: Tensor) -> bool:
        """Backward and optimizer step; False when a bf16 loss was not finite.

        fp16 goes through the gradient scaler, which skips a step whose
        gradients overflowed and lowers its scale. A non-finite bf16 loss
        switches the rest of training to fp32 (with a warning) and skips the
        step: the weights never take a non-finite update.
        """
        optimizer.zero_grad(set_to_none=True)
        if self.precision == "bf16" and not torch.isfinite(loss):
            warnings.warn(
                "The bf16 training loss was not finite; training continues in "
                "fp32 (precision='fp32' avoids this).",
                RuntimeWarning,
                stacklevel=4,
            )
            self.precision = "fp32"
            return False
        scaler = self._scaler
        scaler.scale(loss).backward()
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(self.net.parameters(), 1.0)
        scaler.step(optimizer)
        scaler.update()
        return True

    def _train_step(
        self, optimizer, train: RowData, graph: NeighborGraph, before_step=None
    ) -> tuple:
        """One epoch of optimisation; returns (loss, train deviance).

        ``before_step(states)``, if given, sees the full-batch forward's source
        states before the weights change (validation reuses them when dropout
        is off, saving a forward pass).
        """
        self.net.train()
        config = self.config
        n = train.y.shape[0]
        if self.cached_epochs.applies(self.net, n, config.batch_size):
            return self.cached_epochs.run(self, optimizer, train, graph)
        if config.batch_size is None or config.batch_size >= n:
            return full_batch_epoch(self, optimizer, train, graph, before_step)
        return minibatch_epoch(self, optimizer, train, graph, config.batch_size)

    def run(self, train: RowData, val: RowData | None) -> FittedGraphState | None:
        """The epochs; the selected state, or None when the global GLM wins."""
        optimizer, selector = self._begin(train, val)
        graph = self.train_graph  # None unless resumed from a checkpoint
        epoch = self.epoch
        bar = tqdm(
            range(self.epoch + 1, self.config.max_epochs + 1),
            desc="epochs",
            **progress_options(
                self.config.verbose, self.config.policy.progress_delay_s
            ),
        )
        for epoch in bar:
            graph, logs = self._epoch(epoch, optimizer, selector, train, val, graph)
            bar.set_postfix({k: f"{v:.4g}" for k, v in logs.items() if "deviance" in k})
            if any(cb.on_epoch_end(self, logs) for cb in self.config.callbacks):
                break
        self.selector = selector
        if selector is None:  # the last epoch, as validation would read it
            with self._ema_weights():
                return self._snapshot(graph, epoch)
        return selector.select()

    def _begin(self, train: RowData, val: RowData | None) -> tuple:
        """The optimiser, the epoch selector (None without validation rows),
        the weights' average and the callbacks' start: ``(optimizer,
        selector)``."""
        config = self.config
        # The fused update: one kernel over all parameters, where the default
        # loops over them (0.39 vs 1.0 ms a step on one CPU thread, 2-3 % of a
        # step on 3.4k rows).
        optimizer = torch.optim.AdamW(
            self.net.parameters(),
            lr=config.learning_rate,
            weight_decay=config.weight_decay,
            fused=self._device_type in ("cpu", "cuda"),
        )
        self.optimizer = optimizer
        selector = None
        if val is not None:
            zero = val.y.new_zeros(val.y.shape[0], self.net.out_channels)
            keep = config.policy.keep_standard_errors
            selector = EpochSelector(self._unit_deviance(zero, val), val.weight, keep)
            self.history.append({"epoch": 0, "val_deviance": selector.baseline_value})
        self.selector = selector  # early stopping asks it how far ahead the best is
        if config.ema_decay > 0:
            self.weight_average = WeightAverage(self.net, config.ema_decay)
        for callback in config.callbacks:
            if hasattr(callback, "on_train_begin"):
                callback.on_train_begin(self, train, val)
        if self.train_graph is not None and val is not None:  # resumed
            self._val_adjacency = self.net.adjacency(
                self._val_graph, n_src=train.context.shape[0]
            )
        return optimizer, selector

    def _epoch(
        self,
        epoch: int,
        optimizer,
        selector: EpochSelector | None,
        train: RowData,
        val: RowData | None,
        graph: NeighborGraph | None,
    ) -> tuple[NeighborGraph, dict]:
        """One epoch: the graphs' refresh where due, the step, the validation;
        ``(graph, logs)``, the log appended to the history."""
        config = self.config
        start = time.perf_counter()
        refresh = graph is None or (
            config.graph.space == "embedding"
            and (epoch - 1) % config.graph.refresh == 0
        )
        if refresh:
            graph = self._refresh_graphs(train, val)
        logs = {"epoch": epoch, "graph_refreshed": refresh}
        validate = None
        if selector is not None:
            validate = partial(self._validate, train, val, selector, graph, logs)
        # Without dropout the training forward *is* the evaluation forward:
        # validate on its states (the weights before this epoch's step).
        # (With weight averaging validation needs the averaged weights.)
        reuse = validate is not None and self.net.dropout == 0 and config.ema_decay <= 0
        # (Reused, the validation counts among the steps.)
        with self.times.phase("steps"):
            loss, train_dev = self._train_step(
                optimizer, train, graph, before_step=validate if reuse else None
            )
        # fp16 overflow is the gradient scaler's to handle (it skipped
        # the step); in fp32 a non-finite loss is a real divergence.
        if not np.isfinite(loss) and self.precision != "fp16":
            raise _divergence(loss, epoch, train)
        logs.update(train_loss=loss, train_deviance=train_dev)
        if self.weight_average is not None:
            with self.times.phase("steps"):
                self.weight_average.update()
        if validate is not None and "val_deviance" not in logs:
            with self._ema_weights(), self.times.phase("validation"):
                validate(self.source_states(train, graph))
        logs["seconds"] = time.perf_counter() - start
        self.history.append(logs)
        self.epoch = epoch
        return graph, logs

    def _refresh_graphs(self, train: RowData, val: RowData | None) -> NeighborGraph:
        """New graphs (:meth:`build_graphs`) and the validation rows' prepared
        lists; the training rows' graph."""
        with torch.no_grad(), self.times.phase("graphs"):
            self.net.eval()
            graph, self._val_graph = self.build_graphs(train, val)
            self.train_graph = graph
            if val is not None:
                self._val_adjacency = self.net.adjacency(
                    self._val_graph, n_src=train.context.shape[0]
                )
        return graph

    def _ema_weights(self):
        """The averaged weights in place of the raw ones, inside the block
        (:meth:`WeightAverage.applied`; the raw ones without averaging)."""
        if self.weight_average is None:
            return contextlib.nullcontext()
        return self.weight_average.applied()

    @torch.no_grad()
    def _validate(self, train, val, selector, graph, logs, states) -> None:
        delta = self.query_delta(val.context, states, self._val_adjacency)
        unit = self._unit_deviance(delta, val)
        epoch = logs["epoch"]
        logs["val_deviance"] = selector.update(
            unit, partial(self._snapshot, graph, epoch)
        )

    def _unit_deviance(self, delta: Tensor, rows: RowData) -> Tensor:
        eta, _ = linear_predictor(
            delta,
            rows,
            self.config.n_outputs,
            self.config.coef_map,
            intercept=self.config.fit_intercept,
            reduce=self.config.reduce,
        )
        return self.config.family.unit_deviance(rows.y, eta)

    def _snapshot(self, graph: NeighborGraph, epoch: int) -> FittedGraphState:
        state = {k: v.detach().clone() for k, v in self.net.state_dict().items()}
        return FittedGraphState(state_dict=state, train_graph=graph, epoch=epoch)


def _divergence(loss: float, epoch: int, train: RowData) -> FloatingPointError:
    """The error of a training loss that is not finite at ``epoch``."""
    if epoch == 1:
        # The head starts at zero: this loss is the global GLM's
        # deviance in float32, so the data's scale is the cause.
        largest = float(train.y.abs().max())
        largest = (
            f"largest |y| {largest:.3g}"
            if np.isfinite(largest)
            else "some |y| exceed float32's largest number, 3.4e38"
        )
        return FloatingPointError(
            f"The training loss is {loss} at the first epoch, where "
            "the network still predicts the global GLM: the targets "
            "are too large for the network's float32 arithmetic "
            f"({largest}). Rescale "
            "y (the deviance scales with it), or fit the global GLM "
            "alone with local_penalty=numpy.inf."
        )
    return FloatingPointError(
        f"The training loss became {loss} at epoch {epoch}; lower "
        "learning_rate or raise local_penalty."
    )


def seed_global_generator(generator: torch.Generator) -> None:
    """Put ``generator``'s state into torch's global generator of its device
    (torch_geometric's layers draw their dropout masks from that one).

    A CUDA generator's state seeds the device's CUDA generator: the CPU
    generator takes CPU states only.
    """
    if generator.device.type == "cuda":
        torch.cuda.set_rng_state(generator.get_state(), generator.device)
    else:
        torch.set_rng_state(generator.get_state())


def _device_of(net: GraphGLMNet) -> torch.device:
    return net.head[-1].weight.device


def _global_rng_state(net: GraphGLMNet) -> Tensor:
    """The state of the global generator ``net``'s torch_geometric layers
    draw from (the CUDA one of its device on CUDA)."""
    device = _device_of(net)
    if device.type == "cuda":
        return torch.cuda.get_rng_state(device)
    return torch.get_rng_state()


def _set_global_rng_state(net: GraphGLMNet, state: Tensor) -> None:
    device = _device_of(net)
    if device.type == "cuda":
        torch.cuda.set_rng_state(state, device)
    else:
        torch.set_rng_state(state)


def _graph_dict(graph: NeighborGraph | None) -> dict | None:
    if graph is None:
        return None
    return {f: getattr(graph, f) for f in ("indices", "similarities", "mask")}


def _graph_of(record: dict | None) -> NeighborGraph | None:
    return None if record is None else NeighborGraph(**record)
