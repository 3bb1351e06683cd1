"""The tuned rules of a fit, in one frozen object (:class:`FitPolicy`).

Each field is a default chosen by measurement; its record in
``docs/decisions/`` gives the comparison behind it. An estimator takes one as
``fit_policy`` (None: the defaults), so that a benchmark or a test changes a
rule through a parameter instead of a module's global.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass, fields

__all__ = ["FitPolicy"]


@dataclass(frozen=True, repr=False)
class FitPolicy:
    """Rules of the training loop, the neighbour search and the network.

    Frozen (hashable, picklable, compared by value): set a field by building a
    new one, ``dataclasses.replace(FitPolicy(), screening_epochs=3)``. The
    defaults are the library's; changing one changes fits.

    Parameters
    ----------
    cached_state_min_rows : int, default=30_000
        Training rows from which a full-batch fit of the fused path takes
        several optimiser steps an epoch, each over one part of the rows with
        the others' layer inputs read from a cache: fewer epochs to the best
        one at this size (``docs/decisions/cached_states.md``).
    cached_state_parts : (int, int), default=(4, 8)
        Fewest and most parts of those steps: smaller parts of many rows cost
        more than they save (``docs/decisions/cached_states.md``).
    cached_state_part_rows : int, default=15_000
        The part size the number of parts aims at
        (``docs/decisions/cached_states.md``).
    distinct_rows : bool, default=True
        Run the encoder and the layers before the last once per distinct
        training row where at most ``refresh_distinct_max_share`` of the rows
        are distinct and copies list copies; False computes every row
        (``docs/decisions/distinct_rows.md``).
    screening_epochs : int, default=5
        Epochs without improvement after which a network that has not beaten
        the global GLM's validation deviance stops, while that deviance does
        not fall: one that cannot beat it is found out early
        (``docs/decisions/screening.md``).
    screening_epochs_below_glm : int, default=2
        The same for a network below the GLM by less than one standard error:
        it has stalled short of the rule that would keep it
        (``docs/decisions/screening.md``). At most ``screening_epochs`` applies.
    recovery_epochs : int, default=5
        Consecutive epochs of falling validation deviance that hold off the
        patience's (and the stall's) stop of a network that has beaten the GLM:
        one still recovering is not stopped short of its best
        (``docs/decisions/recovery_epochs.md``).
    refresh_jump_stop : float, default=0.005
        A graph refresh that raises the validation deviance by more than this
        share (and more than the recent gain) ends the fit when the patience
        would run out before the next refresh
        (``docs/decisions/refresh_jump_stop.md``).
    refresh_gain_epochs : int, default=5
        Epochs over which that recent gain of the best value is measured
        (``docs/decisions/refresh_jump_stop.md``).
    stall_standard_errors : float, default=1.0
        Standard errors by which the best validation deviance must have fallen
        over the last ``patience`` epochs for a network that has beaten the GLM
        to train on; 0 leaves the patience alone (``docs/decisions/stall_stop.md``).
    progress_delay_s : float, default=10.0
        Seconds before a quiet (``verbose=0``) fit on a terminal or in a
        notebook shows its progress bar: short fits stay silent.
    auto_faiss_min_rows : int, default=150_000
        ``backend="auto"`` on a CPU searches exactly while the query or the
        base rows number fewer than this, faiss's HNSW index beyond: near the
        measured crossover (``docs/decisions/neighbor_search.md``).
    auto_cuda_exact_max_rows : int, default=10_000_000
        On CUDA the exact tiled search serves up to this many base rows
        (``docs/decisions/neighbor_search.md``).
    refresh_ivf_min_rows : int, default=5_000
        An embedding-graph refresh searches an IVF index from this many rows on
        a CPU (``graph_backend="auto"``, faiss installed): below, the exact
        search is cheap (``docs/decisions/neighbor_search.md``).
    refresh_distinct_max_share : float, default=0.5
        Work is shared between copies of a row (the refresh's search, and
        ``distinct_rows``) only where at most this share of the rows are
        distinct (``docs/decisions/distinct_rows.md``).
    faiss_exact_min_rows : int, default=5_000
        An exact search on a CPU runs in faiss's exhaustive search from this
        many base rows, where its blocks beat the tiles
        (``docs/decisions/neighbor_search.md``).
    faiss_exact_min_dim : int, default=64
        ... or from this many columns (``docs/decisions/neighbor_search.md``).
    checkpoint_min_rows : int or None, default=250_000
        Training passes over at least this many rows recompute activations in
        the backward pass instead of keeping them (memory for time); None
        never does (``docs/decisions/checkpointing.md``).
    all_heads_max_src_rows : int, default=60_000
        Source rows below which the fused attention aggregates all heads in
        one sparse product; beyond, one product per head stays in cache
        (``docs/decisions/fused_attention.md``).
    min_rows_for_network : int, default=10
        Below this many rows there is no graph worth learning: the model is
        the global GLM.
    predict_chunk : int, default=8192
        Rows per chunk at prediction: bounds memory; results do not depend
        on it.
    predict_index_min_rows : int, default=50_000
        Training rows from which a fit (``graph_backend="auto"``, on a CPU,
        faiss installed) builds an HNSW index over their graph-space vectors
        for prediction, calibrated to ``predict_index_recall``; below, or where
        no setting reaches it, prediction searches exactly
        (``docs/decisions/prediction_index.md``).
    predict_index_recall : float, default=0.99
        Recall@k against the exact search that the prediction index reaches
        on held-out rows (``docs/decisions/prediction_index.md``).

    Examples
    --------
    >>> from autoglm_graph import FitPolicy
    >>> FitPolicy(screening_epochs=3).screening_epochs
    3
    """

    cached_state_min_rows: int = 30_000
    cached_state_parts: tuple[int, int] = (4, 8)
    cached_state_part_rows: int = 15_000
    distinct_rows: bool = True
    screening_epochs: int = 5
    screening_epochs_below_glm: int = 2
    recovery_epochs: int = 5
    refresh_jump_stop: float = 0.005
    refresh_gain_epochs: int = 5
    stall_standard_errors: float = 1.0
    progress_delay_s: float = 10.0
    auto_faiss_min_rows: int = 150_000
    auto_cuda_exact_max_rows: int = 10_000_000
    refresh_ivf_min_rows: int = 5_000
    refresh_distinct_max_share: float = 0.5
    faiss_exact_min_rows: int = 5_000
    faiss_exact_min_dim: int = 64
    checkpoint_min_rows: int | None = 250_000
    all_heads_max_src_rows: int = 60_000
    min_rows_for_network: int = 10
    predict_chunk: int = 8192
    predict_index_min_rows: int = 50_000
    predict_index_recall: float = 0.99

    #: The fields that are counts of at least one (rows, epochs, parts).
    _POSITIVE = (
        "cached_state_min_rows",
        "cached_state_part_rows",
        "screening_epochs",
        "screening_epochs_below_glm",
        "recovery_epochs",
        "refresh_gain_epochs",
        "min_rows_for_network",
        "predict_chunk",
    )
    #: The fields that are row or column counts that may be 0.
    _NON_NEGATIVE = (
        "auto_faiss_min_rows",
        "auto_cuda_exact_max_rows",
        "refresh_ivf_min_rows",
        "faiss_exact_min_rows",
        "faiss_exact_min_dim",
        "all_heads_max_src_rows",
        "predict_index_min_rows",
    )

    def __post_init__(self) -> None:
        for name in self._POSITIVE:
            _check_int(name, getattr(self, name), low=1)
        for name in self._NON_NEGATIVE:
            _check_int(name, getattr(self, name), low=0)
        if self.checkpoint_min_rows is not None:
            _check_int("checkpoint_min_rows", self.checkpoint_min_rows, low=1)
        parts = self.cached_state_parts
        if not (
            isinstance(parts, tuple)
            and len(parts) == 2
            and all(_is_int(p) for p in parts)
            and 1 <= parts[0] <= parts[1]
        ):
            raise ValueError(
                "The FitPolicy field 'cached_state_parts' must be a tuple of two "
                f"ints (fewest, most) with 1 <= fewest <= most; got {parts!r}."
            )
        if not isinstance(self.distinct_rows, bool):
            raise ValueError(
                "The FitPolicy field 'distinct_rows' must be a bool; got "
                f"{self.distinct_rows!r}."
            )
        for name in ("refresh_jump_stop", "stall_standard_errors", "progress_delay_s"):
            _check_real(name, getattr(self, name), low=0.0, high=float("inf"))
        for name in ("refresh_distinct_max_share", "predict_index_recall"):
            _check_real(name, getattr(self, name), 0.0, 1.0)

    def __repr__(self) -> str:
        # The fields that differ from the defaults, as scikit-learn's reprs.
        changed = [
            f"{f.name}={getattr(self, f.name)!r}"
            for f in fields(self)
            if getattr(self, f.name) != f.default
        ]
        return f"{type(self).__name__}({', '.join(changed)})"

    def to_dict(self) -> dict:
        """The fields as plain values (a tuple as a list): JSON-ready."""
        return {
            f.name: list(v) if isinstance(v := getattr(self, f.name), tuple) else v
            for f in fields(self)
        }

    @classmethod
    def from_dict(cls, values: dict) -> FitPolicy:
        """The inverse of :meth:`to_dict`; missing fields take their defaults."""
        values = dict(values)
        if "cached_state_parts" in values:
            values["cached_state_parts"] = tuple(values["cached_state_parts"])
        return cls(**values)


def _is_int(value: object) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _check_int(name: str, value: object, low: int) -> None:
    if not _is_int(value) or value < low:
        raise ValueError(
            f"The FitPolicy field {name!r} must be an int >= {low}; got {value!r}."
        )


def _check_real(name: str, value: object, low: float, high: float) -> None:
    ok = isinstance(value, numbers.Real) and not isinstance(value, bool)
    if not ok or not low <= value <= high:
        bounds = f">= {low}" if high == float("inf") else f"in [{low}, {high}]"
        raise ValueError(
            f"The FitPolicy field {name!r} must be a real number {bounds}; "
            f"got {value!r}."
        )
