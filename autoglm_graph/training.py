"""The training loop of the graph GLM: graph refresh, early stopping, callbacks.

The loop is full-batch by default: every epoch is one optimiser step over all
training rows (cheap at the sizes where that fits in memory). ``batch_size``
splits the destination rows into mini-batches; each mini-batch pulls in the
L-hop neighbourhood it needs through the fixed-degree neighbour index.
Callbacks (``on_epoch_end(trainer, logs) -> bool``) see each epoch's log; early
stopping and pruning are callbacks, not branches inside the loop.
"""

from __future__ import annotations

import contextlib
import sys
import time
import warnings
from dataclasses import dataclass, field
from functools import partial

import numpy as np
import torch
from torch import Tensor
from tqdm.auto import tqdm

from ._random import on_device
from .families import Family
from .fused import source_projection
from .graph import NeighborCache, NeighborGraph, distinct_rows, refresh_graphs
from .modules import (
    CHECKPOINT_MIN_ROWS,
    DistinctRows,
    GraphGLMNet,
    NetConfig,
    SourceStates,
)

__all__ = [
    "AMP_DTYPES",
    "CACHED_STATE_MIN_ROWS",
    "CACHED_STATE_PARTS",
    "CACHED_STATE_PART_ROWS",
    "PROGRESS_DELAY_S",
    "SCREENING_EPOCHS",
    "SCREENING_EPOCHS_BELOW_GLM",
    "CachedStates",
    "EarlyStopping",
    "EpochSelector",
    "FitResult",
    "FittedGraphState",
    "GraphConfig",
    "RowData",
    "Trainer",
    "TrainingState",
    "autocast",
    "khop_subgraph",
    "linear_predictor",
    "paired_gain",
    "progress_options",
    "query_forward",
    "weighted_mean",
]

#: Autocast dtypes of the reduced precisions.
AMP_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}

#: From this many training rows (after the validation split) an epoch is
#: several optimiser steps (:data:`CACHED_STATE_PARTS`) instead of one
#: full-batch step. Each step's destinations are one part of the training
#: rows (a random partition, drawn again at each graph refresh); the other
#: rows, as sources, are read from a cache of their layer inputs, written when
#: their own part last ran and projected by the current weights once an epoch
#: (GNNAutoScale's historical embeddings, Fey et al., ICML 2021). A step then
#: costs about its part's share of a full-batch one, and the parts need no
#: two-hop neighbourhoods (exact mini-batches did: an epoch cost 3-4 full
#: steps, ``patience.md``). At this size a full-batch gradient is far more
#: exact than the fit needs, and the extra steps reach the best epoch in
#: about half the epochs: ``scale.py``'s synthetic data, 2 threads, seed 0,
#: 100k rows 40.2 s against 75.3-82.3 s (30 epochs against 71), test
#: deviance 0.4975 against 0.4992; 50k rows 12.6 s against 19.0-20.1 s,
#: 0.3903 against 0.3929 (``benchmarks/results/scale_fit_cached_states.md``).
#: Below it the cache costs more than the steps save, or the quality (the
#: suite's 9k-19k-row training splits: an epoch 1.13-1.7x a full-batch one,
#: `cps1988` 1.49x the fit; on 3.4k rows `synthetic_gamma` +22 %):
#: ``benchmarks/results/step_count.md``. It was 40,000 until `diamonds`
#: (36,410 training rows) was measured over 6 model seeds: its full-batch fits
#: stopped at 16-36 epochs on half the seeds (an overshoot after the best
#: epoch) with test deviances 0.0152-0.0189 against 0.0104-0.0106 for the
#: others; with cached-state steps 5 of 6 seeds reach 0.0086-0.0117, the mean
#: 0.01091 against 0.01373 (-20 %), in 0.85x the seconds
#: (``benchmarks/results/cached_states_diamonds.md``). 30,000 lies between it
#: and the largest split measured worse (`cps1988`, about 19,000 rows), and
#: keeps the Belgian map's 28,800 (``insurance_map.md``) as it was.
CACHED_STATE_MIN_ROWS = 30_000
#: Whether the encoder and the layers before the last run once per distinct
#: training row where at most half of the rows are distinct and copies list
#: copies (:class:`~autoglm_graph.modules.DistinctRows`); False computes every
#: row. `cps1988` (5,581 distinct rows in 21,116): epochs 0.77x as long, mean
#: test deviance over 6 model seeds +0.05 % (se 0.27 %):
#: ``benchmarks/results/distinct_rows.md``.
DISTINCT_ROWS = True
#: Optimiser steps (parts of the training rows) per epoch from
#: :data:`CACHED_STATE_MIN_ROWS` rows: parts of about
#: :data:`CACHED_STATE_PART_ROWS` rows, at least 4 and at most 8 of them (each
#: part's step also writes ``[n, 64]`` caches and gradients over all sources,
#: so very small parts of very many rows would cost more than they save), and
#: more where a part would reach :data:`~autoglm_graph.modules.CHECKPOINT_MIN_ROWS`
#: rows (from 2M rows). At 100k rows (90k training rows) 6 parts gave 41.6 s,
#: 30 epochs and test deviance 0.4975, 4 parts 51.7-60.5 s, 41 epochs, 0.4998,
#: 8 parts 37.9 s, 27 epochs, 0.5005 (full-batch: 0.4992);
#: ``benchmarks/results/scale_fit_cached_states.md``.
CACHED_STATE_PARTS = (4, 8)
#: The part size :data:`CACHED_STATE_PARTS` aims at.
CACHED_STATE_PART_ROWS = 15_000


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
    """What cached-state steps (:data:`CACHED_STATE_MIN_ROWS`) keep between
    steps: the training graph they belong to, the partition of the training
    rows into parts (sorted positions) and every row's input to each layer
    (``SourceStates.layers``), written when the row's part last ran."""

    graph: NeighborGraph
    parts: list[Tensor]
    inputs: list[Tensor]


@dataclass
class FittedGraphState:
    """Everything prediction needs from training: weights, graph and caches."""

    state_dict: dict
    train_graph: NeighborGraph
    epoch: int


#: Seconds before a quiet (``verbose=0``) fit shows its progress bar, and then
#: only on a terminal or in a notebook: a fit of a few seconds stays silent,
#: a long one says how far it is; fits in joblib workers (GridSearchCV with
#: n_jobs), CI logs and pipes write to no terminal and stay quiet.
PROGRESS_DELAY_S = 10.0


def progress_options(verbose: int) -> dict:
    """tqdm options: always shown when ``verbose``, else late and interactive only."""
    if verbose:
        return {"disable": False}
    interactive = "ipykernel" in sys.modules or (
        hasattr(sys.stderr, "isatty") and sys.stderr.isatty()
    )
    return {"disable": not interactive, "delay": PROGRESS_DELAY_S, "leave": False}


def linear_predictor(
    delta: Tensor, rows: RowData, n_outputs: int
) -> tuple[Tensor, Tensor]:
    """eta_i = eta_global_i + delta_b_i + x_i . delta_beta_i; returns (eta, delta)."""
    delta = delta.reshape(delta.shape[0], n_outputs, -1)
    eta = rows.eta_global + delta[:, :, 0]
    eta = eta + torch.einsum("nkp,np->nk", delta[:, :, 1:], rows.design)
    return (eta[:, 0] if n_outputs == 1 else eta), delta


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
):
    """Coefficient deviations (float32) of rows whose neighbours among the
    training rows (``states``) are ``adjacency``; ``z`` their embedding when
    the caller has it."""
    net.eval()
    device_type = context.device.type
    if z is None:
        with autocast(precision, device_type):
            z = net.encode(context)
    with autocast(precision, device_type):
        out = net.forward_query(
            context, states, adjacency, z=z, return_attention=return_attention
        )
    return (out[0].float(), out[1]) if return_attention else out.float()


def weighted_mean(values: Tensor, weight: Tensor) -> Tensor:
    return (values * weight).sum() / weight.sum()


class EpochSelector:
    """Tracks the best epoch on validation and decides network vs global GLM.

    ``baseline`` is the global GLM's per-row validation deviance (epoch 0).
    """

    def __init__(self, baseline: Tensor, weight: Tensor) -> None:
        self.baseline = baseline.double()
        self.weight = weight.double()
        self.baseline_value = self._mean(self.baseline)
        self.best_value = self.baseline_value
        self.best_unit: Tensor | None = None
        self.best: FittedGraphState | None = None
        self.gain = 0.0
        self.gain_se = 0.0

    def _mean(self, values: Tensor) -> float:
        return weighted_mean(values, self.weight).item()

    def update(self, unit: Tensor, snapshot) -> float:
        """Record one epoch's per-row deviance; returns its weighted mean."""
        value = self._mean(unit.double())
        if value < self.best_value:
            self.best_value, self.best_unit, self.best = (
                value,
                unit.double(),
                snapshot(),
            )
        return value

    def ahead(self) -> bool:
        """Whether the best epoch so far beats the global GLM by more than one
        standard error (the rule :meth:`select` applies at the end)."""
        if self.best_unit is None:
            return False
        gain, gain_se = paired_gain(self.baseline, self.best_unit, self.weight)
        return gain > gain_se

    def select(self) -> FittedGraphState | None:
        """The best epoch's state if it beats the global GLM by one SE, else None."""
        if self.best is None:
            return None
        self.gain, self.gain_se = paired_gain(
            self.baseline, self.best_unit, self.weight
        )
        return self.best if self.gain > self.gain_se else None


def paired_gain(baseline: Tensor, candidate: Tensor, weight: Tensor) -> tuple:
    """Weighted mean of ``baseline - candidate`` per row, and its standard error.

    The standard error is that of a weighted mean over ``1 / sum(w_norm**2)``
    effective rows. A network is kept over the global GLM only when its gain
    exceeds one standard error, at the end (:meth:`EpochSelector.select`) and
    for the full patience (:meth:`EpochSelector.ahead`).
    """
    diff = baseline.double() - candidate.double()
    w = weight.double() / weight.double().sum()
    gain = float((w * diff).sum())
    variance = float((w * (diff - gain) ** 2).sum())
    n_effective = 1.0 / float((w**2).sum())
    return gain, float(np.sqrt(variance / n_effective))


#: Epochs a network gets to beat the global GLM's validation deviance while its
#: validation deviance is not falling. Adam's first steps from the GLM (where
#: the mean gradient is zero) make the first epochs worse than the GLM; a
#: network that recovers keeps going, up to the full patience. Measured on the
#: benchmark suite (``benchmarks/results/suite.md``): on the 13 datasets where
#: the network was kept, its first epoch below the GLM was epoch 1 to 3; on 3
#: of the 4 where the GLM was returned, validation deviance was above the GLM's
#: and rising by epoch 5 to 7, and those fits now stop there instead of at epoch
#: 21 (the 4th falls below the GLM at epoch 7 and runs on). A small network on
#: 600 rows (``tests/test_estimators.py``) first beat the GLM at epoch 8, after
#: falling from epoch 5. 3 instead of 5 keeps the suite's networks and ends its
#: fallback fits 0-5 epochs sooner, but loses the network of the Belgian
#: insurance map (-0.45 % against the GLM instead of -0.61 %):
#: ``benchmarks/results/screening.md``.
SCREENING_EPOCHS = 5
#: Epochs without improvement after which a network whose best epoch is below
#: the GLM's validation deviance, but by less than one standard error, is given
#: up (while its deviance is not falling). Such a network has stalled short of
#: the rule that would keep it: on `nass_cds` (best epoch 3 or 4, 0.2 % below
#: the GLM, flat after) 3 ended the fit at epoch 7 instead of 10-12, 0.55x its
#: seconds. A network still above the GLM keeps ``SCREENING_EPOCHS``: slow
#: starters (the Belgian map's first falls below the GLM at epoch 4) are not
#: affected. On 12 of the suite's 13 datasets that keep a network (not
#: ``diamonds``) and its 3 other fallback ones, over two seeds, and on the
#: Belgian map, every other fit is the same epoch for epoch
#: (``benchmarks/results/screening_below_glm.md``). 2 instead of 3 (session
#: 20): `nass_cds` stops at epoch 6 (best epoch 4, then flat), 0.86x the
#: seconds, the same model (the GLM); the other 33 fits of the suite's 17
#: datasets at two seeds, and the Belgian map, are the same epoch for epoch.
SCREENING_EPOCHS_BELOW_GLM = 2
#: Consecutive epochs of falling validation deviance that hold off the
#: patience's stop: a network still recovering steadily is not stopped just
#: short of its best. On ``diamonds`` (seed 2), epoch 1 was half the GLM's
#: deviance, Adam's next steps overshot (4.6x and 7.9x the GLM), and the
#: recovery fell for seven epochs in a row to within 2 % of epoch 1 when the
#: patience stopped it at epoch 11, keeping epoch 1: a test deviance about 3x
#: that of seeds 0 and 1 (``benchmarks/results/recovery_epochs.md``). Only a
#: network that has beaten the GLM is held: one that never did is the
#: screening's to end, in its few epochs.
RECOVERY_EPOCHS = 5
#: A refresh that raises the validation deviance over the epoch before by more
#: than this share, and by more than the best value fell in the
#: ``REFRESH_GAIN_EPOCHS`` epochs before it, ends the fit (the best epoch lies
#: before it). The jump comes from the validation rows' new lists (searched in
#: the current embedding, as ``predict`` searches new rows), and late in a fit
#: they score worse than the lists of the refresh before
#: (``benchmarks/results/refresh_bumps.md``): the patience then ran out inside
#: the jump on the same best epoch. A network still improving faster than the
#: jump (``synthetic_negative_binomial`` seed 1 at epoch 11: +0.6 % after 4 %
#: in five epochs) recovers and is left to the patience. The rule applies when
#: the patience would run out before the next refresh (the default 10 and 10),
#: not under a patience that outlasts the graph period.
REFRESH_JUMP_STOP = 0.005
REFRESH_GAIN_EPOCHS = 5
#: Standard errors by which the best validation deviance must have fallen over
#: the last ``patience`` epochs for a network that has beaten the GLM to train
#: on (the fall paired over the validation rows, :func:`paired_gain`: the same
#: test as the one-standard-error rule that keeps a network at all). A best
#: value that creeps down by less is mostly the validation rows' noise being
#: fitted, and waiting for the patience to run out on it costs a quarter of a
#: fit. Over 6 model seeds on run.py's split: 19 % fewer epochs on 78 fits,
#: `hi` 33 epochs instead of 49 (mean test deviance -0.05 %),
#: `synthetic_poisson` 30 instead of 52 (-0.32 %), `cps1988` 39 instead of 54
#: (+0.01 %), no other mean moved by more than its standard error but
#: `tuna`'s: +0.73 % (se 0.47 %; its validation deviance falls in plateaus of
#: 10-18 epochs for 180 epochs, and each plateau looks like a stall).
#: 0 gives the patience alone. Record, the trace of `tuna`'s windows and the
#: windows and thresholds tried: ``benchmarks/results/stall_stop.md``.
STALL_STANDARD_ERRORS = 1.0


class EarlyStopping:
    """Stop when validation deviance has not improved for ``patience`` epochs.

    An improvement must beat the best value by ``tol`` (relative). The count
    starts from the global GLM's validation deviance (epoch 0 of the history),
    and until the best epoch beats it by more than one standard error (the
    trainer's ``selector``, the rule that keeps a network at the end),
    training stops after ``screening`` epochs without improvement
    (``screening_below_glm`` once the best epoch is below the GLM) as soon as
    the validation deviance does not fall: a network that cannot beat the GLM
    is found out in a few epochs, while one that is clearly ahead, or closing
    in, gets the full patience. A refresh of the graphs that raises the
    validation deviance by more than :data:`REFRESH_JUMP_STOP`, and by more
    than the best value fell over the :data:`REFRESH_GAIN_EPOCHS` epochs
    before, ends training when the patience would run out before the next
    refresh. A network that has beaten the GLM stops as soon as its best
    epoch of the last ``patience`` epochs beats the best epoch before them by
    no more than :data:`STALL_STANDARD_ERRORS` standard errors (paired over
    the validation rows; the trainer's ``selector`` holds their deviances).
    A network that has beaten the GLM and whose validation deviance has
    fallen for :data:`RECOVERY_EPOCHS` epochs in a row is not stopped by the
    patience, nor by the stall, until it stops falling. The best epoch itself
    is tracked by the trainer regardless of ``tol``.
    """

    def __init__(
        self,
        patience: int = 10,
        tol: float = 1e-4,
        screening: int | None = None,
        screening_below_glm: int | None = None,
    ) -> None:
        self.patience = patience
        self.tol = tol
        # Read at construction, so that a benchmark can set the module's values.
        self.screening = SCREENING_EPOCHS if screening is None else screening
        if screening_below_glm is None:
            screening_below_glm = SCREENING_EPOCHS_BELOW_GLM
        self.screening_below_glm = min(self.screening, screening_below_glm)
        self._best = np.inf
        self._last = np.inf
        self._bad_epochs = 0
        self._beaten_glm = False
        self._falls = 0  # consecutive epochs of falling validation deviance
        self._bests: list[float] = []  # the best value after each recent epoch
        # The selector's best per-row deviances after each of the last
        # patience + 1 epochs (None before a best epoch).
        self._best_units: list[Tensor | None] = []

    _STATE = (
        "_best",
        "_last",
        "_bad_epochs",
        "_beaten_glm",
        "_falls",
        "_bests",
        "_best_units",
    )

    def state_dict(self) -> dict:
        """The counters a resumed fit continues from (:class:`Checkpoint`)."""
        return {name: getattr(self, name) for name in self._STATE}

    def load_state_dict(self, state: dict) -> None:
        # Older records have none of these.
        state = {"_falls": 0, "_bests": [], "_best_units": [], **state}
        for name in self._STATE:
            setattr(self, name, state[name])

    def _recent_gain(self) -> float:
        """How much the best value fell over the last ``REFRESH_GAIN_EPOCHS``
        epochs (relative; infinite before that many epochs)."""
        if len(self._bests) <= REFRESH_GAIN_EPOCHS or self._bests[-1] <= 0:
            return np.inf
        return self._bests[0] / self._bests[-1] - 1

    def _recovering(self) -> bool:
        """A network that has beaten the GLM and is still falling steadily."""
        return self._beaten_glm and self._falls >= RECOVERY_EPOCHS

    def _stalled(self, trainer) -> bool:
        """Whether the best epoch of the last ``patience`` epochs beats the
        best one before them by no more than :data:`STALL_STANDARD_ERRORS`
        standard errors (False before a best epoch that far back, and while
        the network recovers)."""
        before, now = self._best_units[0], self._best_units[-1]
        if (
            len(self._best_units) <= self.patience
            or not self._beaten_glm
            or before is None
            or now is None
            or self._recovering()
        ):
            return False
        gain, gain_se = paired_gain(before, now, trainer.selector.weight)
        return gain <= STALL_STANDARD_ERRORS * gain_se

    def _patience_ends_before_next_refresh(self, trainer) -> bool:
        """Whether the patience runs out before the graphs are refreshed again
        (the jump rule's premise: a jump not recovered within this graph
        period ends the fit anyway). False when the trainer has no graph
        schedule; a long patience (``n_iter_no_change`` beyond the refresh
        period) keeps its meaning."""
        config = getattr(trainer, "config", None)
        period = getattr(getattr(config, "graph", None), "refresh", None)
        return period is not None and self.patience - self._bad_epochs < period

    def on_epoch_end(self, trainer: Trainer, logs: dict) -> bool:
        value = logs.get("val_deviance")
        if value is None:
            return False
        if not np.isfinite(self._best):
            start = trainer.history[0] if trainer.history else {}
            if start.get("epoch") == 0:
                self._best = start.get("val_deviance", np.inf)
            else:  # no global GLM to beat: count from the first epoch
                self._beaten_glm = True
        last = self._last
        jump = value / last - 1 if np.isfinite(last) and last > 0 else 0.0
        falling, self._last = value < self._last, value
        self._falls = self._falls + 1 if falling else 0
        if not np.isfinite(self._best) or value < self._best * (1 - self.tol):
            self._best = value
            self._bad_epochs = 0
            self._beaten_glm = True
        else:
            self._bad_epochs += 1
            refreshed = logs.get("graph_refreshed") and logs.get("epoch", 1) > 1
            if (
                refreshed
                and self._patience_ends_before_next_refresh(trainer)
                and jump > max(REFRESH_JUMP_STOP, self._recent_gain())
            ):
                return True
        self._bests = [*self._bests, self._best][-(REFRESH_GAIN_EPOCHS + 1) :]
        best_unit = getattr(getattr(trainer, "selector", None), "best_unit", None)
        self._best_units = [*self._best_units, best_unit][-(self.patience + 1) :]
        if self._stalled(trainer):
            return True
        if self._bad_epochs >= self.patience:
            return not self._recovering()
        screening = self.screening_below_glm if self._beaten_glm else self.screening
        screened_out = self._bad_epochs >= screening and not falling
        if not screened_out:
            return False
        # Full patience only for a network that would be kept now: ahead of
        # the GLM by more than one standard error. One merely below it was
        # given up at the end anyway (nass_cds: best epoch 9, ran to 19).
        selector = getattr(trainer, "selector", None)
        not_ahead = selector is not None and not selector.ahead()
        return not self._beaten_glm or not_ahead


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
    ) -> FitResult:
        """Build the network on the rows' device and train it.

        With validation rows, the kept epoch is the one of lowest validation
        deviance, and the network is kept only if it beats the global GLM (epoch
        0) by more than one standard error of the paired per-row difference
        (the one-standard-error rule: on small or noisy data the simpler model
        is kept).

        ``neighbor_cache`` shares input-space searches between fits (a
        hyperparameter search passes one to every trial); None gives this fit
        its own. ``seed`` gives the fit its own random stream (initial weights
        and dropout masks, :mod:`autoglm_graph._random`): the same seed, the
        same model, whatever other threads draw meanwhile; None draws from
        torch's global generator.
        """
        device = train.context.device
        net = self.net.build(seed).to(device)
        if net.generator is not None:
            net.generator = on_device(net.generator, device)
            if not net.fused:  # torch_geometric's layers draw from the global one
                torch.set_rng_state(net.generator.get_state())
        state = TrainingState(self, net, neighbor_cache)
        try:
            best = state.run(train, val)
        finally:
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
            result.states = state.source_states(train, best.train_graph)
        return result


@dataclass
class FitResult:
    """What :meth:`Trainer.fit` returns.

    ``best`` is the kept epoch's state (None when the global GLM wins), with
    its weights loaded in ``net`` and the training rows' ``states`` under
    them; ``gain`` and ``gain_se`` the validation deviance of the global GLM
    minus the kept epoch's and its standard error (None without validation
    rows); ``precision`` the training's final one; ``index`` an input-space
    search index over the training rows that prediction can reuse.
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
    ) -> None:
        self.config = config
        self.net = net
        #: Starts at the configured precision; bf16 may fall back to fp32.
        self.precision = config.precision
        self.history: list[dict] = []
        self.neighbor_cache = neighbor_cache or NeighborCache(
            backend=config.graph.backend
        )
        #: Where the network's weights live ("cpu", "cuda", ...).
        self._device_type = net.head[-1].weight.device.type
        self._scaler = torch.amp.GradScaler(
            self._device_type, enabled=self.precision == "fp16"
        )
        self.selector: EpochSelector | None = None
        self._ema: dict | None = None
        self._ema_steps = 0
        self._adjacency_cache: tuple | None = None
        #: (context, distinct_rows(context)) of the training rows.
        self._distinct: tuple | None = None
        self._val_adjacency = None
        self._cached: CachedStates | None = None
        #: Per part of ``_cached``: (positions, adjacency, rows), rebuilt
        #: from it (not checkpointed).
        self._cached_parts: tuple | None = None
        #: The graphs of the last refresh, the optimiser and the last epoch
        #: run: with the above, what a checkpoint holds (:class:`Checkpoint`).
        self.train_graph: NeighborGraph | None = None
        self._val_graph: NeighborGraph | None = None
        self.optimizer = None
        self.epoch = 0

    def finish(self, train: RowData) -> tuple | None:
        """Drop the loop's scratch; the ``(base, index)`` prediction may reuse.

        Prediction searches the same training rows: an approximate input-space
        index the fit built over them is kept for it (at 1M rows its build
        takes minutes).
        """
        index = None
        if self.config.graph.space == "input":
            built = self.neighbor_cache.index_for(train.context)
            if built is not None:
                index = (train.context, built)
        self.neighbor_cache = None
        self._ema = self._adjacency_cache = self._val_adjacency = None
        self._cached = self._cached_parts = None
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
        return {
            "epoch": self.epoch,
            "net": self.net.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "ema": self._ema,
            "ema_steps": self._ema_steps,
            "history": self.history,
            "graph": _graph_dict(self.train_graph),
            "val_graph": _graph_dict(self._val_graph),
            "generator": None
            if self.net.generator is None
            else self.net.generator.get_state(),
            "global_rng": torch.get_rng_state(),
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
            if self._cached is None
            else {"parts": self._cached.parts, "inputs": self._cached.inputs},
        }

    def load_state_dict(self, state: dict) -> None:
        """Continue from :meth:`state_dict`'s record (see there)."""
        self.epoch = state["epoch"]
        self.net.load_state_dict(state["net"])
        self.optimizer.load_state_dict(state["optimizer"])
        self._ema, self._ema_steps = state["ema"], state["ema_steps"]
        self.history[:] = state["history"]
        self.train_graph = _graph_of(state["graph"])
        self._val_graph = _graph_of(state["val_graph"])
        if state["generator"] is not None:
            self.net.generator.set_state(state["generator"])
        if not self.net.fused:  # torch_geometric's layers draw from it
            torch.set_rng_state(state["global_rng"])
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
            self._cached = CachedStates(self.train_graph, **cached)

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
        rows' current embedding (:func:`~autoglm_graph.graph.refresh_graphs`;
        approximate from 5,000 rows on a CPU): its rows change at every step,
        so the index serves one refresh only. Validation rows are searched at
        each refresh, in the same space and with the same weights, and kept
        until the next one: scored as new rows would have been at that
        refresh. Searching them every epoch cost as much as the training step
        itself (30 % of an epoch at 15k rows on one CPU thread).

        With groups, a row's neighbours from its own group are masked out too
        (:meth:`~autoglm_graph.graph.NeighborGraph.without_own_group`).
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
            )
        return graph.without_own_group(train.group), val_graph

    def _adjacency(self, graph: NeighborGraph, context: Tensor):
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
        if not (self.net.fused and DISTINCT_ROWS):
            return None
        if self._distinct is None or self._distinct[0] is not context:
            self._distinct = (context, distinct_rows(context))
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
        adjacency = self._adjacency(train_graph, train.context)
        with self._autocast():
            return self.net.source_states(train.context, train.targets, adjacency)

    @torch.no_grad()
    def query_delta(self, context: Tensor, states: SourceStates, adjacency) -> Tensor:
        """Coefficient deviations of rows linked to training rows by ``adjacency``
        (the validation rows' prepared neighbour lists of the last refresh)."""
        return query_forward(
            self.net, context, states, adjacency, precision=self.precision
        )

    # ---------------------------------------------------------------- fitting
    def _loss(self, delta: Tensor, rows: RowData) -> tuple[Tensor, Tensor]:
        eta, delta = linear_predictor(delta, rows, self.config.n_outputs)
        deviance = self.config.family.deviance(rows.y, eta, rows.weight)
        penalty = weighted_mean(delta.pow(2).sum(dim=(1, 2)), rows.weight)
        return 0.5 * deviance + self.config.local_penalty * penalty, deviance

    def _autocast(self):
        """Autocast of the network's forward at ``precision`` (off for fp32)."""
        return autocast(self.precision, self._device_type)

    def _forward(self, context: Tensor, targets, adjacency):
        with self._autocast():
            delta, states = self.net(context, targets, adjacency)
        return delta.float(), states

    def _backward_step(self, optimizer, loss: Tensor) -> bool:
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
        if self._uses_cached_states(train):
            return self._cached_state_epoch(optimizer, train, graph)
        if self.config.batch_size is None or self.config.batch_size >= train.y.shape[0]:
            delta, states = self._forward(
                train.context, train.targets, self._adjacency(graph, train.context)
            )
            loss, deviance = self._loss(delta, train)
            if before_step is not None:
                before_step(states)
                self.net.train()
            if not self._backward_step(optimizer, loss):
                return self._train_step(optimizer, train, graph)
            return loss.item(), deviance.item()
        return self._minibatch_epoch(optimizer, train, graph)

    def _uses_cached_states(self, train: RowData) -> bool:
        """Whether an epoch is cached-state steps (:data:`CACHED_STATE_MIN_ROWS`):
        full-batch fits of the fused attention path from that size."""
        return (
            self.config.batch_size is None
            and self.net.fused
            and train.y.shape[0] >= CACHED_STATE_MIN_ROWS
        )

    def _cached_parts_of(self, train: RowData, graph: NeighborGraph) -> tuple:
        """The parts of the cached states for ``graph`` (new ones at a refresh)."""
        net = self.net
        n = train.y.shape[0]
        if self._cached is None or self._cached.graph is not graph:
            # The caches start as the full-batch pass's layer inputs.
            with torch.no_grad(), self._autocast():
                states = net.source_states(
                    train.context, train.targets, self._adjacency(graph, train.context)
                )
            order = torch.randperm(n, generator=net.generator, device=train.y.device)
            fewest, most = CACHED_STATE_PARTS
            n_parts = min(max(fewest, round(n / CACHED_STATE_PART_ROWS)), most)
            # Parts stay below the size whose activations a full-batch pass
            # would recompute rather than keep (CHECKPOINT_MIN_ROWS).
            n_parts = max(n_parts, -(-n // CHECKPOINT_MIN_ROWS))
            parts = [order[i::n_parts].sort().values for i in range(n_parts)]
            inputs = [x.float() for x in states.layers]
            self._cached = CachedStates(graph, parts, inputs)
            self._cached_parts = None
        if self._cached_parts is None:
            self._cached_parts = tuple(
                (
                    rows,
                    net.adjacency(graph.query_rows(rows), n_src=n),
                    train.subset(rows),
                )
                for rows in self._cached.parts
            )
        return self._cached_parts

    def _cached_state_epoch(self, optimizer, train: RowData, graph: NeighborGraph):
        """One epoch of cached-state steps, a part of the rows each (see
        :data:`CACHED_STATE_MIN_ROWS`); returns (loss, train deviance)."""
        net = self.net
        n = train.y.shape[0]
        parts = self._cached_parts_of(train, graph)
        inputs = self._cached.inputs
        last = net.num_layers - 1
        hidden = net.hidden_channels
        # The other parts' sources, projected by this epoch's first weights.
        with torch.no_grad(), self._autocast():
            projected = [
                [p.float() for p in source_projection(net.convs[layer], x)]
                for layer, x in enumerate(inputs)
            ]
        steps = []  # (loss, deviance, weight) of each step
        order = torch.randperm(
            len(parts), generator=net.generator, device=train.y.device
        )
        for positions, adjacency, rows in (parts[i] for i in order.tolist()):
            own_inputs, own_projected = [], []
            with self._autocast():
                h = net.encode(rows.context)
                for layer in range(net.num_layers):
                    if layer == last:  # the pool of every row, this part fresh
                        held = inputs[last][:, :hidden]
                        pooled = (
                            held.sum(dim=0) - held[positions].sum(dim=0) + h.sum(dim=0)
                        ) / n
                    x_src = net._source_input(layer, h, rows.targets)
                    own = source_projection(net.convs[layer], x_src)
                    sources = tuple(
                        full.index_put((positions,), part.to(full.dtype))
                        for full, part in zip(projected[layer], own, strict=True)
                    )
                    own_inputs.append(x_src)
                    own_projected.append(own)
                    h, _ = net._layer(layer, None, h, adjacency, projected=sources)
                delta = net._head(h, pooled)
            loss, deviance = self._loss(delta.float(), rows)
            if not self._backward_step(optimizer, loss):
                continue  # the next parts run in fp32 (see _backward_step)
            with torch.no_grad():
                for layer in range(net.num_layers):
                    inputs[layer][positions] = own_inputs[layer].float()
                    pairs = zip(projected[layer], own_projected[layer], strict=True)
                    for full, part in pairs:
                        full[positions] = part.float()
            steps.append((loss.item(), deviance.item(), rows.weight.sum().item()))
        return _weighted_epoch_means(steps)

    def _minibatch_epoch(self, optimizer, train: RowData, graph: NeighborGraph):
        n = train.y.shape[0]
        order = torch.randperm(n, device=train.y.device, generator=self.net.generator)
        steps = []  # (loss, deviance, weight) of each step
        for start in range(0, n, self.config.batch_size):
            batch = order[start : start + self.config.batch_size]
            nodes, sub_graph, position = khop_subgraph(
                graph, batch, self.net.num_layers
            )
            sub = train.subset(nodes)
            adjacency = self.net.adjacency(sub_graph, n_src=nodes.numel())
            delta, _ = self._forward(sub.context, sub.targets, adjacency)
            rows = sub.subset(position)
            loss, deviance = self._loss(delta[position], rows)
            if not self._backward_step(optimizer, loss):
                continue  # this batch is skipped; the next ones run in fp32
            steps.append((loss.item(), deviance.item(), rows.weight.sum().item()))
        return _weighted_epoch_means(steps)

    def run(self, train: RowData, val: RowData | None) -> FittedGraphState | None:
        """The epochs; the selected state, or None when the global GLM wins."""
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
            zero = torch.zeros(
                val.y.shape[0], self.net.out_channels, device=val.y.device
            )
            selector = EpochSelector(self._unit_deviance(zero, val), val.weight)
            self.history.append({"epoch": 0, "val_deviance": selector.baseline_value})
        self.selector = selector  # early stopping asks it how far ahead the best is
        if self.config.ema_decay > 0:
            self._ema = {
                k: torch.zeros_like(v) for k, v in self.net.state_dict().items()
            }
        for callback in self.config.callbacks:
            if hasattr(callback, "on_train_begin"):
                callback.on_train_begin(self, train, val)
        graph = self.train_graph  # None unless resumed from a checkpoint
        if graph is not None and val is not None:
            self._val_adjacency = self.net.adjacency(
                self._val_graph, n_src=train.context.shape[0]
            )
        epoch = self.epoch
        bar = tqdm(
            range(self.epoch + 1, self.config.max_epochs + 1),
            desc="epochs",
            **progress_options(self.config.verbose),
        )
        for epoch in bar:
            start = time.perf_counter()
            refresh = graph is None or (
                self.config.graph.space == "embedding"
                and (epoch - 1) % self.config.graph.refresh == 0
            )
            if refresh:
                with torch.no_grad():
                    self.net.eval()
                    graph, self._val_graph = self.build_graphs(train, val)
                    self.train_graph = graph
                    if val is not None:
                        self._val_adjacency = self.net.adjacency(
                            self._val_graph, n_src=train.context.shape[0]
                        )
            logs = {"epoch": epoch, "graph_refreshed": refresh}
            validate = None
            if selector is not None:
                validate = partial(self._validate, train, val, selector, graph, logs)
            # Without dropout the training forward *is* the evaluation forward:
            # validate on its states (the weights before this epoch's step).
            # (With weight averaging validation needs the averaged weights.)
            reuse = (
                validate is not None and self.net.dropout == 0 and config.ema_decay <= 0
            )
            loss, train_dev = self._train_step(
                optimizer, train, graph, before_step=validate if reuse else None
            )
            # fp16 overflow is the gradient scaler's to handle (it skipped
            # the step); in fp32 a non-finite loss is a real divergence.
            if not np.isfinite(loss) and self.precision != "fp16":
                if epoch == 1:
                    # The head starts at zero: this loss is the global GLM's
                    # deviance in float32, so the data's scale is the cause.
                    largest = float(train.y.abs().max())
                    largest = (
                        f"largest |y| {largest:.3g}"
                        if np.isfinite(largest)
                        else "some |y| exceed float32's largest number, 3.4e38"
                    )
                    raise FloatingPointError(
                        f"The training loss is {loss} at the first epoch, where "
                        "the network still predicts the global GLM: the targets "
                        "are too large for the network's float32 arithmetic "
                        f"({largest}). Rescale "
                        "y (the deviance scales with it), or fit the global GLM "
                        "alone with local_penalty=numpy.inf."
                    )
                raise FloatingPointError(
                    f"The training loss became {loss} at epoch {epoch}; lower "
                    "learning_rate or raise local_penalty."
                )
            logs.update(train_loss=loss, train_deviance=train_dev)
            if self.config.ema_decay > 0:
                self._update_ema()
            if validate is not None and "val_deviance" not in logs:
                with self._ema_weights():
                    validate(self.source_states(train, graph))
            logs["seconds"] = time.perf_counter() - start
            self.history.append(logs)
            self.epoch = epoch
            bar.set_postfix({k: f"{v:.4g}" for k, v in logs.items() if "deviance" in k})
            if any(cb.on_epoch_end(self, logs) for cb in self.config.callbacks):
                break
        self.selector = selector
        if selector is None:
            return self._snapshot(graph, epoch)
        return selector.select()

    @torch.no_grad()
    def _update_ema(self) -> None:
        decay = self.config.ema_decay
        # One call per operation over all tensors, where a loop makes two per
        # tensor: the same arithmetic, so the same values to the bit (125 vs
        # 161 us an epoch for the default network's 28 tensors, one thread).
        current = self.net.state_dict()
        averages = list(self._ema.values())
        torch._foreach_mul_(averages, decay)
        torch._foreach_add_(averages, [current[k] for k in self._ema], alpha=1 - decay)
        self._ema_steps += 1

    @contextlib.contextmanager
    def _ema_weights(self):
        """The averaged weights in place of the raw ones, inside the block.

        The average starts from zero and is divided by ``1 - decay**t`` (as
        Adam's moments are), so it averages the weights after each step only,
        not the initial ones: short trainings are not pulled back to the start.
        """
        if self.config.ema_decay <= 0:
            yield
            return
        correction = 1.0 - self.config.ema_decay**self._ema_steps
        # The averages are swapped in as the tensors' data and the raw ones
        # back: no copies, where two load_state_dict calls and a clone cost
        # 1.2 ms an epoch (3 % of one on 3,400 rows).
        held = self.net.state_dict(keep_vars=True)
        raw = {k: held[k].data for k in self._ema}
        unbiased = torch._foreach_div(list(self._ema.values()), correction)
        for key, value in zip(self._ema, unbiased, strict=True):
            held[key].data = value
        try:
            yield
        finally:
            for key, value in raw.items():
                held[key].data = value

    @torch.no_grad()
    def _validate(self, train, val, selector, graph, logs, states) -> None:
        delta = self.query_delta(val.context, states, self._val_adjacency)
        unit = self._unit_deviance(delta, val)
        epoch = logs["epoch"]
        logs["val_deviance"] = selector.update(
            unit, partial(self._snapshot, graph, epoch)
        )

    def _unit_deviance(self, delta: Tensor, rows: RowData) -> Tensor:
        eta, _ = linear_predictor(delta, rows, self.config.n_outputs)
        return self.config.family.unit_deviance(rows.y, eta)

    def _snapshot(self, graph: NeighborGraph, epoch: int) -> FittedGraphState:
        state = {k: v.detach().clone() for k, v in self.net.state_dict().items()}
        return FittedGraphState(state_dict=state, train_graph=graph, epoch=epoch)


def _weighted_epoch_means(steps: list[tuple]) -> tuple[float, float]:
    """An epoch's (loss, deviance) from its steps' ``(loss, deviance,
    weight)``: their means weighted by the rows' total weight."""
    loss, deviance, weight = np.asarray(steps, dtype=float).T
    return float(loss @ weight / weight.sum()), float(deviance @ weight / weight.sum())


def _graph_dict(graph: NeighborGraph | None) -> dict | None:
    if graph is None:
        return None
    return {f: getattr(graph, f) for f in ("indices", "similarities", "mask")}


def _graph_of(record: dict | None) -> NeighborGraph | None:
    return None if record is None else NeighborGraph(**record)


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
