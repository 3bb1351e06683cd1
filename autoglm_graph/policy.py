"""The tuned rules of a fit, in one frozen object (:class:`FitPolicy`).

Each field is a default chosen by measurement; its record in
``docs/decisions/`` gives the comparison behind it. An estimator takes one as
``fit_policy`` (None: the defaults), so that a benchmark or a test changes a
rule through a parameter instead of a module's global. The settings of the
faiss indexes (:class:`IndexSettings`) and of the exact search's tiles
(:class:`TileSettings`) are two of its fields, ``index`` and ``tiles``.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, fields
from typing import ClassVar

__all__ = ["FitPolicy", "IndexSettings", "TileSettings"]


def _is_int(value: object) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _is_real(value: object) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _check_int(name: str, value: object, low: int, owner: str = "FitPolicy") -> None:
    if not _is_int(value) or value < low:
        raise ValueError(
            f"The {owner} field {name!r} must be an int >= {low}; got {value!r}."
        )


def _check_real(
    name: str, value: object, low: float, high: float, owner: str = "FitPolicy"
) -> None:
    if not _is_real(value) or not low <= value <= high:
        bounds = f">= {low}" if high == float("inf") else f"in [{low}, {high}]"
        raise ValueError(
            f"The {owner} field {name!r} must be a real number {bounds}; got {value!r}."
        )


def _check_ladder(name: str, value: object, integer: bool, owner: str) -> None:
    """A non-empty tuple of finite numbers >= 1 (ints where ``integer``)."""
    is_number = _is_int if integer else _is_real
    if not (
        isinstance(value, tuple)
        and value
        and all(is_number(v) and 1 <= v < math.inf for v in value)
    ):
        kind = "ints" if integer else "numbers"
        raise ValueError(
            f"The {owner} field {name!r} must be a non-empty tuple of {kind} "
            f">= 1; got {value!r}."
        )


class _AnyValue:
    """The former default, in ``_REMOVED``, of a removed field that was a rule
    of the fit alone (which network it kept, when it stopped training, which
    GLM the network trained on top of), not of what a saved model reads: the
    file holds what the fit made, the model predicts the same without the rule
    whatever its value, and every value loads."""

    def __repr__(self) -> str:
        return "_ANY_VALUE"


_ANY_VALUE = _AnyValue()


class _Settings:
    """What the frozen settings classes share: a repr of the fields that
    differ from the defaults (as scikit-learn's reprs), and plain dicts (JSON
    types) both ways."""

    #: Fields that earlier versions had, each with the value it held by
    #: default: a saved policy (a model file's) that holds one still loads
    #: where the value is that default (or where it is ``_ANY_VALUE``), and is
    #: refused otherwise.
    _REMOVED: ClassVar[dict[str, object]] = {}

    def __repr__(self) -> str:
        changed = [
            f"{f.name}={getattr(self, f.name)!r}"
            for f in fields(self)
            if getattr(self, f.name) != f.default
        ]
        return f"{type(self).__name__}({', '.join(changed)})"

    def to_dict(self) -> dict:
        """The fields as plain values (a tuple as a list, settings as a dict):
        JSON-ready."""
        return {f.name: _plain(getattr(self, f.name)) for f in fields(self)}

    @classmethod
    def from_dict(cls, values: dict):
        """The inverse of :meth:`to_dict`; missing fields take their defaults.

        Raises ``ValueError`` for an unknown field, a bad value (the fields'
        own checks) or a removed field that does not hold its former default:
        a loaded model file is not trusted.
        """
        if not isinstance(values, dict):
            raise ValueError(f"{cls.__name__} needs a dict of fields; got {values!r}.")
        values = cls._without_removed(values)
        defaults = {f.name: f.default for f in fields(cls)}
        unknown = sorted(set(values) - set(defaults))
        if unknown:
            raise ValueError(
                f"Unknown field(s) of {cls.__name__}: {', '.join(unknown)}."
            )
        out = {}
        for name, value in values.items():
            if isinstance(defaults[name], _Settings) and isinstance(value, dict):
                value = type(defaults[name]).from_dict(value)
            elif isinstance(value, list):
                value = tuple(value)
            out[name] = value
        return cls(**out)

    @classmethod
    def _without_removed(cls, values: dict) -> dict:
        """``values`` less the removed fields that hold their former default
        (any value where that is ``_ANY_VALUE``)."""
        for name, default in cls._REMOVED.items():
            if default is _ANY_VALUE:
                continue
            if name in values and values[name] != default:
                raise ValueError(
                    f"The {cls.__name__} field {name!r} was removed in this version "
                    f"of autoglm_graph (issue #59); got {name}={values[name]!r}, "
                    f"which only an earlier version can fit or load (the former "
                    f"default, {default!r}, loads here)."
                )
        return {k: v for k, v in values.items() if k not in cls._REMOVED}


def _plain(value: object) -> object:
    if isinstance(value, _Settings):
        return value.to_dict()
    return list(value) if isinstance(value, tuple) else value


@dataclass(frozen=True, repr=False)
class IndexSettings(_Settings):
    """The approximate (faiss) indexes and their recall calibration.

    Measured on the suite's embeddings and on synthetic rows
    (``docs/decisions/neighbor_search.md``). The field ``index`` of
    :class:`FitPolicy`; ``index_params`` of a search overrides ``m``,
    ``ef_construction`` and ``target_recall``.

    Parameters
    ----------
    m : int, default=32
        HNSW graph degree (M = 16 or 24 lost 2-5 points of recall at equal
        efSearch on isotropic rows).
    ef_construction : int, default=80
        HNSW candidate list while inserting (40 stayed at recall 0.92-0.95
        whatever efSearch; 100-128 bought ~0.5 point for 30 % more build time).
    target_recall : float, default=0.95
        Recall@k that an index without an explicit efSearch or nprobe
        calibrates for, per kind of search (a fixed efSearch wastes time on
        clustered rows or loses recall on isotropic ones).
    calibration_rows : int, default=1000
        Queries answered exactly to measure an HNSW setting's recall.
    ivf_calibration_rows : int, default=250
        The same for IVF, calibrated at every embedding refresh (250 rows chose
        the same nprobe as 1000 on 20k clustered rows, 0.6x the refresh time).
    ef_ladder : tuple of float, default=(1, 1.5, 2, 3, 4, 6, 8, 12, 16, 24, 32)
        efSearch candidates, as multiples of the results asked for.
    max_ef_search : int, default=1024
        The largest efSearch tried.
    nprobe_ladder : tuple of int, default=(8, 12, 16, 24, 32, 48, 64)
        IVF lists scanned per query, tried in order (of ``sqrt(n)`` lists; at
        90k isotropic rows recall@16 is 0.80 at 8, 0.98 at 32; a ladder from
        4 was measured and not kept, ``docs/decisions/neighbor_search.md``).
    max_nprobe_fraction : float, default=0.25
        The ladder stops at this share of the lists: where it does not reach
        the target, the exact search is cheaper and is used instead.
    prediction_m : int, default=32
        HNSW degree of the prediction index
        (``docs/decisions/prediction_index.md``).
    prediction_ef_construction : int, default=40
        Its insertion candidates: on a trained 64-dimensional embedding of
        45k-90k clustered rows, efConstruction 40 reaches recall@16 0.99 at
        the same efSearch as 80 in half the build
        (``docs/decisions/prediction_index.md``).
    """

    m: int = 32
    ef_construction: int = 80
    target_recall: float = 0.95
    calibration_rows: int = 1000
    ivf_calibration_rows: int = 250
    ef_ladder: tuple[float, ...] = (1, 1.5, 2, 3, 4, 6, 8, 12, 16, 24, 32)
    max_ef_search: int = 1024
    nprobe_ladder: tuple[int, ...] = (8, 12, 16, 24, 32, 48, 64)
    max_nprobe_fraction: float = 0.25
    prediction_m: int = 32
    prediction_ef_construction: int = 40

    def __post_init__(self) -> None:
        owner = type(self).__name__
        for name in (
            "m",
            "ef_construction",
            "calibration_rows",
            "ivf_calibration_rows",
            "max_ef_search",
            "prediction_m",
            "prediction_ef_construction",
        ):
            _check_int(name, getattr(self, name), low=1, owner=owner)
        for name in ("target_recall", "max_nprobe_fraction"):
            _check_real(name, getattr(self, name), 0.0, 1.0, owner=owner)
        _check_ladder("ef_ladder", self.ef_ladder, integer=False, owner=owner)
        _check_ladder("nprobe_ladder", self.nprobe_ladder, integer=True, owner=owner)


@dataclass(frozen=True, repr=False)
class TileSettings(_Settings):
    """How the exact search tiles and folds its similarity matrix.

    Defaults measured on a 2-core CPU (d = 32, k = 16) and an H200
    (``docs/decisions/neighbor_search.md``). The results do not depend on
    them, only the time and the memory. The field ``tiles`` of
    :class:`FitPolicy`.

    Parameters
    ----------
    n_slabs : int, default=8
        Slabs a row is folded into by one step of the bucket pre-selection (8
        beat 16 by ~10 % at 10k rows and tied at 50k; 24 and 32 were slower).
        At least 2 (one slab folds nothing).
    min_row_factor : int, default=8
        Fold a row only while it is at least this many times ``k * n_slabs``
        long.
    cpu_tile_bytes : int, default=32 MiB
        Target size of one tile on a CPU (16-32 MB were the fastest; 4 MB and
        64-256 MB 10-40 % slower: the tile leaves the cache).
    other_tile_bytes : int, default=64 MiB
        Target size of one tile on a device that is neither a CPU nor CUDA.
    cuda_free_share : int, default=4
        On CUDA a tile takes at most 1 / ``cuda_free_share`` of the free memory
        (the folds, the tie re-ranks and the caller's tensors need the rest).
    cuda_max_tile_bytes : int, default=8 GiB
        And at most this many bytes.
    faiss_tie_margin : int, default=8
        Results asked of faiss beyond the ``k`` kept: faiss does not choose
        among rows tied at the k-th value by their index, so a row whose tie
        reaches its last result is searched again in the tiles.
    product_rows : int, default=8192
        Query rows per block of the tie re-ranks' products (their gather is
        ``[rows, width, d]``: 8192 x 25 x 64 floats are 52 MB).
    """

    n_slabs: int = 8
    min_row_factor: int = 8
    cpu_tile_bytes: int = 32 * 2**20
    other_tile_bytes: int = 64 * 2**20
    cuda_free_share: int = 4
    cuda_max_tile_bytes: int = 8 * 2**30
    faiss_tie_margin: int = 8
    product_rows: int = 8192

    def __post_init__(self) -> None:
        owner = type(self).__name__
        _check_int("n_slabs", self.n_slabs, low=2, owner=owner)
        _check_int("faiss_tie_margin", self.faiss_tie_margin, low=0, owner=owner)
        for name in (
            "min_row_factor",
            "cpu_tile_bytes",
            "other_tile_bytes",
            "cuda_free_share",
            "cuda_max_tile_bytes",
            "product_rows",
        ):
            _check_int(name, getattr(self, name), low=1, owner=owner)


@dataclass(frozen=True, repr=False)
class FitPolicy(_Settings):
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
    keep_standard_errors : float, default=1.0
        Standard errors of the paired per-row differences by which the best
        epoch's validation deviance must beat the global GLM's for the
        network to be kept (and, during training, for the patience rather
        than the screening to apply). 0.5 kept two better networks on the
        suite and two worse ones on two small datasets outside it
        (``docs/decisions/keep_rule.md``).
    fallback : {"gam", "glm"}, default="gam"
        What a fit whose network is dropped returns. "gam": the GLM with a
        penalised cubic B-spline basis on each of its numeric columns
        (``splines=True``'s model, its smoothing penalty chosen on all rows)
        where, cross-fitted over ``fallback_folds`` folds of all the fit's
        rows, it beats the GLM cross-fitted on the same folds by more than
        ``fallback_standard_errors``, else the global GLM; it applies without
        ``formula``, ``splines``, ``global_terms`` and ``local_sign``. "glm":
        the global GLM. "gam" gave ``wa_churn`` -1.43 % and no suite dataset
        worse (``docs/decisions/gam_fallback.md``).
    fallback_folds : int, default=5
        Folds of the cross-fitting that decides ``fallback="gam"`` (whole
        groups with ``groups``, stratified by class for classifiers): every
        row is held out once, where the fit's validation split holds out a
        tenth, too few rows to tell a GAM's gain of 1 % from noise.
    fallback_standard_errors : float, default=2.0
        Standard errors of the cross-fitted paired per-row differences by
        which the GAM must beat the GLM under ``fallback="gam"``: one let a
        GAM worse on the test rows through on one fold draw of ``nass_cds``
        (``docs/decisions/gam_fallback.md``).
    screening_epochs : int, default=5
        Epochs without improvement after which a network that has not beaten
        the global GLM's validation deviance stops, while that deviance does
        not fall: one that cannot beat it is found out early
        (``docs/decisions/screening.md``).
    screening_epochs_below_glm : int, default=2
        The same for a network below the GLM by less than
        ``keep_standard_errors``:
        it has stalled short of the rule that would keep it
        (``docs/decisions/screening.md``). At most ``screening_epochs`` applies.
    recovery_epochs : int, default=5
        Consecutive epochs of falling validation deviance that hold off the
        patience's (and the stall's) stop of a network that has beaten the GLM:
        one still recovering is not stopped short of its best
        (``docs/decisions/recovery_epochs.md``).
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
        never does (``docs/decisions/checkpointing.md``). Cached-state steps
        split the rows into parts below it, where it is at least
        ``cached_state_part_rows``; a smaller one checkpoints within the parts.
    all_heads_max_src_rows : int, default=60_000
        Source rows below which the fused attention aggregates all heads in
        one sparse product; beyond, one product per head stays in cache
        (``docs/decisions/fused_attention.md``).
    min_rows_for_network : int, default=10
        Below this many rows there is no graph worth learning: the model is
        the global GLM.
    embedding_bins : int, default=16
        Quantile bins per numeric column of
        ``numeric_embedding="piecewise_linear"``
        (:class:`~autoglm_graph.network.embeddings.PiecewiseLinearEncoding`).
    predict_chunk : int, default=8192
        Rows per chunk at prediction and in the encoder's passes without
        gradients (validation, the training rows' states): bounds memory;
        results do not depend on it.
    predict_index_min_rows : int, default=50_000
        Training rows from which a fit (``graph_backend="auto"``, on a CPU,
        faiss installed) builds an HNSW index over their graph-space vectors
        for prediction, calibrated to ``predict_index_recall``; below, or where
        no setting reaches it, prediction searches exactly
        (``docs/decisions/prediction_index.md``).
    predict_index_recall : float, default=0.99
        Recall@k against the exact search that the prediction index reaches
        on held-out rows (``docs/decisions/prediction_index.md``).
    index : IndexSettings, default=IndexSettings()
        The faiss indexes (HNSW, IVF, the prediction index) and their recall
        calibration (``docs/decisions/neighbor_search.md``,
        ``docs/decisions/prediction_index.md``).
    tiles : TileSettings, default=TileSettings()
        How the exact search tiles its similarity matrix: its time and
        memory, never its result (``docs/decisions/neighbor_search.md``).

    Examples
    --------
    >>> from autoglm_graph import FitPolicy
    >>> FitPolicy(screening_epochs=3).screening_epochs
    3
    >>> from autoglm_graph.policy import IndexSettings
    >>> FitPolicy(index=IndexSettings(m=16))
    FitPolicy(index=IndexSettings(m=16))
    """

    cached_state_min_rows: int = 30_000
    cached_state_parts: tuple[int, int] = (4, 8)
    cached_state_part_rows: int = 15_000
    distinct_rows: bool = True
    keep_standard_errors: float = 1.0
    fallback: str = "gam"
    fallback_folds: int = 5
    fallback_standard_errors: float = 2.0
    screening_epochs: int = 5
    screening_epochs_below_glm: int = 2
    recovery_epochs: int = 5
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
    embedding_bins: int = 16
    predict_chunk: int = 8192
    predict_index_min_rows: int = 50_000
    predict_index_recall: float = 0.99
    index: IndexSettings = IndexSettings()
    tiles: TileSettings = TileSettings()

    #: Fields of earlier versions and their former defaults (issue #59; their
    #: records stay in ``docs/decisions/``).
    _REMOVED: ClassVar[dict[str, object]] = {
        "edge_difference_channels": 0,  # docs/decisions/edge_difference.md
        "head_members": 1,  # docs/decisions/head_members.md
        "refit_all_rows": False,  # docs/decisions/refit_all_rows.md
        "plateau_lr_factor": 1.0,  # docs/decisions/plateau_learning_rate.md
        "plateau_lr_epochs": 3,
        "warmup_epochs": 0,  # docs/decisions/numeric_embedding.md
        "embedding_frequencies": 16,  # numeric_embedding="periodic", the same record
        "embedding_channels": 8,
        "embedding_sigma": 0.1,
        # The keep check chose only whether the fit kept its network: default
        # 5 until 2026-12-07, then 0 (off). docs/decisions/keep_check.md
        "keep_check_folds": _ANY_VALUE,
        "keep_check_max_rows": _ANY_VALUE,
        "keep_check_standard_errors": _ANY_VALUE,
        # When a fit stopped at a jump of a graph refresh: default 0.005 until
        # 2026-12-06, then inf (off). docs/decisions/refresh_jump_stop.md
        "refresh_jump_stop": _ANY_VALUE,
        "refresh_gain_epochs": _ANY_VALUE,
        # The GLM the network trained on top of and was judged against: the
        # fitted one ("all_rows", the default) or, measured and not adopted,
        # the GLM refitted on the training rows ("training_rows"). Either way
        # the file holds the training rows' linear predictor and the global
        # GLM fitted on all rows. docs/decisions/network_baseline.md
        "network_baseline": _ANY_VALUE,
        # True widened the network's input (each value beside its bins): a
        # model fitted so is refused. docs/decisions/numeric_embedding.md
        "embedding_keep_values": False,
    }
    #: The fields that are counts of at least one (rows, epochs, parts).
    _POSITIVE = (
        "cached_state_min_rows",
        "cached_state_part_rows",
        "screening_epochs",
        "screening_epochs_below_glm",
        "recovery_epochs",
        "min_rows_for_network",
        "embedding_bins",
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
        _check_int("fallback_folds", self.fallback_folds, low=2)
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
        for name in (
            "stall_standard_errors",
            "keep_standard_errors",
            "fallback_standard_errors",
            "progress_delay_s",
        ):
            _check_real(name, getattr(self, name), low=0.0, high=float("inf"))
        for name in ("refresh_distinct_max_share", "predict_index_recall"):
            _check_real(name, getattr(self, name), 0.0, 1.0)
        if self.fallback not in ("glm", "gam"):
            raise ValueError(
                "The FitPolicy field 'fallback' must be 'glm' or 'gam'; got "
                f"{self.fallback!r}."
            )
        for name, kind in (("index", IndexSettings), ("tiles", TileSettings)):
            if not isinstance(getattr(self, name), kind):
                raise ValueError(
                    f"The FitPolicy field {name!r} must be of type "
                    f"{kind.__name__}; got {getattr(self, name)!r}."
                )
