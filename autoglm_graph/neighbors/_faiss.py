"""Approximate cosine top-k with faiss indexes (private).

Two indexes, for two uses. An HNSW graph (:class:`HNSWIndex`, backend
``"faiss"``) is slow to build and fast to search: for fixed rows searched again
and again (prediction against the training rows). An IVF-flat index
(:class:`IVFIndex`, backend ``"ivf"``) is a k-means partition whose queries scan
only the rows of the nearest lists: cheap to build, so it suits rows that change
between searches (the embedding graph's refreshes during training).

:mod:`autoglm_graph.neighbors` imports this module only when a faiss backend is
used, and faiss itself is imported only when an index is built, so that faiss stays
an optional dependency. Rows arrive here already L2-normalised, so the inner
product that the index ranks by (``METRIC_INNER_PRODUCT``) is the cosine
similarity. Both indexes take their defaults and their calibration's ladders
from :class:`~autoglm_graph.policy.IndexSettings` (``FitPolicy.index``).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from typing import Any

import numpy as np
import torch

from ..policy import IndexSettings

#: Similarities this close to the k-th exact one count as ties (float32 sums).
_TIE_TOLERANCE = 1e-5

INSTALL_HINT = (
    "backend='faiss' or 'ivf' needs the faiss package; install it with "
    "`pip install faiss-cpu` (or `pip install autoglm-graph[faiss]`)."
)


def import_faiss() -> Any:
    """Import faiss, or raise ``ImportError`` with the command that installs it."""
    try:
        import faiss
    except ImportError as exc:
        raise ImportError(INSTALL_HINT) from exc
    return faiss


def faiss_available() -> bool:
    """Whether faiss can be imported."""
    try:
        import_faiss()
    except ImportError:
        return False
    return True


@contextlib.contextmanager
def _faiss_threads(faiss: Any) -> Iterator[None]:
    """Run faiss with torch's thread count, restoring faiss's own afterwards.

    torch and faiss keep separate OpenMP pools; letting both use every core at
    once oversubscribes the machine, so faiss follows ``torch.get_num_threads``.
    """
    previous = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(torch.get_num_threads())
    try:
        yield
    finally:
        faiss.omp_set_num_threads(previous)


def _as_faiss_array(A: torch.Tensor) -> np.ndarray:
    """C-contiguous float32 NumPy copy of ``A`` on the CPU, as faiss wants it."""
    return np.ascontiguousarray(A.detach().to("cpu", torch.float32).numpy())


class _Index:
    """The search both indexes share: a setting (HNSW's efSearch, IVF's
    nprobe), given or calibrated, then faiss's search and the self-drop."""

    def __getstate__(self) -> dict:
        # SWIG index objects do not pickle; faiss serialises them to bytes (an
        # IVF index with its quantizer, which the copy then owns).
        state = self.__dict__.copy()
        state["index"] = import_faiss().serialize_index(self.index)
        state.pop("quantizer", None)
        return state

    def __setstate__(self, state: dict) -> None:
        state["index"] = import_faiss().deserialize_index(state["index"])
        state.setdefault("settings", IndexSettings())  # pickled before it was kept
        self.__dict__.update(state)

    def _setting(self, data: np.ndarray, k_searched: int, exclude_self: bool):
        raise NotImplementedError

    def _search_at(self, data: np.ndarray, k: int, setting: int):
        raise NotImplementedError

    def search(
        self, queries: torch.Tensor, k: int, exclude_self: bool
    ) -> tuple[torch.Tensor, torch.Tensor] | None:
        """Approximate top-k of each (normalised) query row.

        Parameters
        ----------
        queries : torch.Tensor of shape (n, d)
            L2-normalised query rows; with ``exclude_self``, query ``i`` is base
            row ``i``.
        k : int
            Neighbours per row, at most ``m - exclude_self``.
        exclude_self : bool
            Whether to drop base row ``i`` from the neighbours of query ``i``.

        Returns
        -------
        (similarities, indices) or None
            ``similarities`` ``[n, k]`` sorted descending, on the device and in
            the dtype of ``queries``, ``-inf`` where fewer than ``k``
            neighbours were found; ``indices`` ``[n, k]`` int64 base-row
            positions, ``-1`` where fewer than ``k`` were found. None when the
            index finds no setting cheap enough for its target recall (IVF;
            the caller searches exactly).
        """
        faiss = import_faiss()
        k_searched = k + int(exclude_self)
        data = _as_faiss_array(queries)
        setting = self._setting(data, k_searched, exclude_self)
        if setting is None:
            return None
        with _faiss_threads(faiss):
            distances, ids = self._search_at(data, k_searched, setting)
        if exclude_self:
            distances, ids = drop_self(distances, ids, k)
        return finish(distances, ids, queries.device, queries.dtype)


class HNSWIndex(_Index):
    """An HNSW inner-product index over L2-normalised base rows.

    Parameters
    ----------
    base : torch.Tensor of shape (m, d)
        L2-normalised base rows (any device and floating dtype).
    settings : IndexSettings
        The defaults of the parameters below and the calibration's ladder
        (``ef_ladder``, ``max_ef_search``, ``calibration_rows``).
    m : int or None
        Graph degree ``M`` (links per node and layer; twice that on layer 0);
        None: ``settings.m``.
    ef_construction : int or None
        Candidate-list size while inserting rows; None:
        ``settings.ef_construction``.
    ef_search : int or None
        Candidate-list size while searching; ``None`` calibrates one per number
        of results asked for. Raised to at least the number of results asked
        for.
    target_recall : float or None
        Recall@k that the calibration aims for (ignored with ``ef_search``);
        None: ``settings.target_recall``.
    """

    def __init__(
        self,
        base: torch.Tensor,
        settings: IndexSettings,
        m: int | None = None,
        ef_construction: int | None = None,
        ef_search: int | None = None,
        target_recall: float | None = None,
    ) -> None:
        faiss = import_faiss()
        self.settings = settings
        self.ef_search = ef_search
        self.target_recall = _given(target_recall, settings.target_recall)
        m = _given(m, settings.m)
        ef_construction = _given(ef_construction, settings.ef_construction)
        #: (k', exclude_self) -> (efSearch, recall@k on the calibration sample)
        self.calibration: dict[tuple[int, bool], tuple[int, float]] = {}
        self.n_rows, self.dim = (int(s) for s in base.shape)
        index = faiss.IndexHNSWFlat(self.dim, m, faiss.METRIC_INNER_PRODUCT)
        index.hnsw.efConstruction = ef_construction
        data = _as_faiss_array(base)
        with _faiss_threads(faiss):
            index.add(data)
        self.index = index

    def calibrated_ef_search(
        self, data: np.ndarray, k_searched: int, exclude_self: bool
    ) -> int:
        """efSearch for ``k_searched`` results, calibrated on the first queries.

        Searches of the indexed rows themselves (``exclude_self``) and of other
        rows are calibrated apart: an indexed row is far easier to search for
        (the walk ends at the row itself, next to its neighbours).
        """
        key = (k_searched, exclude_self)
        if key not in self.calibration:
            faiss = import_faiss()
            settings = self.settings
            ladder = list(
                dict.fromkeys(
                    min(settings.max_ef_search, math.ceil(f * k_searched))
                    for f in settings.ef_ladder
                )
            )
            with _faiss_threads(faiss):
                ef, recall = _calibrate(
                    lambda sample, k: faiss.downcast_index(self.index.storage).search(
                        sample, k
                    ),
                    self._search_at,
                    ladder,
                    data,
                    k_searched,
                    exclude_self,
                    self.target_recall,
                    settings.calibration_rows,
                )
            # No setting reached the target: the largest one tried.
            self.calibration[key] = (ladder[-1] if ef is None else ef, recall)
        return self.calibration[key][0]

    def _setting(self, data: np.ndarray, k_searched: int, exclude_self: bool) -> int:
        if self.ef_search is not None:
            return self.ef_search
        return self.calibrated_ef_search(data, k_searched, exclude_self)

    def _search_at(self, data: np.ndarray, k: int, ef: int):
        return _search_at(self.index, data, k, ef)


#: faiss's k-means wants at least 39 training rows per list (it warns below).
_MIN_ROWS_PER_LIST = 39


class IVFIndex(_Index):
    """An IVF-flat inner-product index over L2-normalised base rows.

    Parameters
    ----------
    base : torch.Tensor of shape (m, d)
        L2-normalised base rows (any device and floating dtype).
    settings : IndexSettings
        The calibration's ladder (``nprobe_ladder``, ``max_nprobe_fraction``,
        ``ivf_calibration_rows``) and the default ``target_recall``.
    nlist : int or None
        Number of k-means lists; ``None``: ``sqrt(m)`` (at most ``m / 39``).
    nprobe : int or None
        Lists whose rows each query scans (the ``nprobe`` nearest centroids);
        ``None`` calibrates it per search to ``target_recall``.
    target_recall : float or None
        Recall@k that the calibration aims for; None:
        ``settings.target_recall``.

    Notes
    -----
    faiss's k-means is seeded (its default seed), so one set of rows gives one
    index, hence one result, on one thread.
    """

    def __init__(
        self,
        base: torch.Tensor,
        settings: IndexSettings,
        nlist: int | None = None,
        nprobe: int | None = None,
        target_recall: float | None = None,
    ) -> None:
        faiss = import_faiss()
        self.settings = settings
        self.n_rows, self.dim = (int(s) for s in base.shape)
        if nlist is None:
            nlist = round(math.sqrt(self.n_rows))
            nlist = min(nlist, self.n_rows // _MIN_ROWS_PER_LIST)
        self.nlist = max(1, min(int(nlist), self.n_rows))
        self.nprobe = None if nprobe is None else min(int(nprobe), self.nlist)
        self.target_recall = _given(target_recall, settings.target_recall)
        #: The last calibration: (nprobe or None for "search exactly", recall).
        self.calibration: tuple[int | None, float] | None = None
        # The index keeps a pointer to its quantizer: both must stay alive.
        self.quantizer = faiss.IndexFlatIP(self.dim)
        index = faiss.IndexIVFFlat(
            self.quantizer, self.dim, self.nlist, faiss.METRIC_INNER_PRODUCT
        )
        self.data = _as_faiss_array(base)
        with _faiss_threads(faiss):
            index.train(self.data)
            index.add(self.data)
        self.index = index

    def _setting(
        self, data: np.ndarray, k_searched: int, exclude_self: bool
    ) -> int | None:
        """nprobe: the given one, or the calibrated one (None: search exactly)."""
        if self.nprobe is not None:
            return self.nprobe
        faiss = import_faiss()
        settings = self.settings
        most = max(1, int(settings.max_nprobe_fraction * self.nlist))
        ladder = [p for p in settings.nprobe_ladder if p <= most] or [most]
        with _faiss_threads(faiss):
            self.calibration = _calibrate(
                lambda sample, k: _sample_topk(sample, self.data, k),
                self._search_at,
                ladder,
                data,
                k_searched,
                exclude_self,
                self.target_recall,
                settings.ivf_calibration_rows,
            )
        return self.calibration[0]

    def _search_at(self, data: np.ndarray, k: int, nprobe: int):
        params = import_faiss().SearchParametersIVF()
        params.nprobe = nprobe
        return self.index.search(data, k, params=params)


def _given(value, default):
    """``value``, or ``default`` where it is None (a parameter not given)."""
    return default if value is None else value


def _sample_topk(
    sample: np.ndarray, data: np.ndarray, k: int
) -> tuple[np.ndarray, np.ndarray]:
    """Exact inner-product top-k of a calibration sample: ``(values, ids)``.

    One product and ``torch.topk``: for the 250 sampled queries of an IVF
    calibration this is a third of the time of ``faiss.knn``, whose blocked
    search is made for many queries (one thread, 64 dimensions: 9.3 against
    32.0 ms over 15k rows, 12.4 against 38.5 ms over 17.7k, 34 against 80 ms
    over 36k; the same neighbours). A refresh calibrates twice (the training
    rows' search and the validation rows').
    """
    products = torch.from_numpy(sample) @ torch.from_numpy(data).T
    values, ids = torch.topk(products, min(k, data.shape[0]), dim=1)
    values, ids = values.numpy(), ids.numpy()
    missing = k - ids.shape[1]
    if missing > 0:  # fewer rows than asked for: faiss's padding
        values = np.pad(values, ((0, 0), (0, missing)), constant_values=-np.inf)
        ids = np.pad(ids, ((0, 0), (0, missing)), constant_values=-1)
    return values, ids


def _search_at(index: Any, data: np.ndarray, k: int, ef: int):
    faiss = import_faiss()
    params = faiss.SearchParametersHNSW()
    # Passed per call rather than set on the index, so that concurrent
    # searches with different k do not race on shared state.
    params.efSearch = max(int(ef), k)
    return index.search(data, k, params=params)


def _calibrate(
    exact_search,
    search_at,
    ladder: list[int],
    queries: np.ndarray,
    k_searched: int,
    exclude_self: bool,
    target_recall: float,
    sample_rows: int,
) -> tuple[int | None, float]:
    """The first setting on ``ladder`` whose recall on ``queries`` reaches the target.

    A sample of ``sample_rows`` queries is answered exactly
    (``exact_search(sample, k)``, a brute-force scan for the sample only) and
    approximately at each setting
    (``search_at(sample, k, setting)``: efSearch of an HNSW index, nprobe of an
    IVF one). With ``exclude_self``, query ``i`` is indexed row ``i``. Recall
    counts ties with the k-th exact neighbour as found. Returns ``(setting,
    recall)``, or ``(None, recall)`` when no setting of the ladder reaches the
    target (the recall of the last one).
    """
    n = queries.shape[0]
    if n == 0 or k_searched <= int(exclude_self):
        return ladder[0], 1.0
    rng = np.random.default_rng(0)
    rows = np.sort(rng.choice(n, size=min(sample_rows, n), replace=False))
    sample = np.ascontiguousarray(queries[rows])
    k = k_searched - int(exclude_self)

    def neighbours(result: tuple[np.ndarray, np.ndarray]):
        if exclude_self:
            return drop_self(*result, k, rows)
        return result

    similarities, truth = neighbours(exact_search(sample, k_searched))
    # Tie-aware: a found row counts when it is as similar as the k-th exact
    # one. With duplicate rows, many rows tie and any k of them are right.
    kth = np.where(truth >= 0, similarities, np.inf).min(axis=1, keepdims=True)
    wanted = max(1, int((truth >= 0).sum()))
    recall = 0.0
    for setting in ladder:
        found_sim, found = neighbours(search_at(sample, k_searched, setting))
        hits = (found >= 0) & (found_sim >= kth - _TIE_TOLERANCE)
        hits = np.minimum(hits.sum(axis=1), (truth >= 0).sum(axis=1))
        recall = float(hits.sum() / wanted)
        if recall >= target_recall:
            return setting, recall
    return None, recall


def drop_self(
    distances: np.ndarray,
    ids: np.ndarray,
    k: int,
    own: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Keep ``k`` of each row's ``k + 1`` results, never the row's own position.

    Row ``i`` drops the result equal to its own position ``own[i]`` (default
    ``i``); a row whose own position was not returned (an approximate miss, or
    duplicates crowding it out) drops its last, worst result instead.
    """
    n = ids.shape[0]
    own = np.arange(n) if own is None else own
    drop = ids == own[:, None]
    drop[~drop.any(axis=1), -1] = True
    keep = ~drop  # exactly k per row; boolean indexing keeps row-major order
    return distances[keep].reshape(n, k), ids[keep].reshape(n, k)


def finish(
    distances: np.ndarray,
    ids: np.ndarray,
    device: torch.device,
    dtype: torch.dtype,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Tensors sorted by similarity, missing results (id -1) last at ``-inf``."""
    similarities = torch.from_numpy(np.ascontiguousarray(distances))
    indices = torch.from_numpy(np.ascontiguousarray(ids)).to(torch.int64)
    similarities = similarities.masked_fill(indices < 0, -np.inf)
    # faiss returns results sorted already; the stable sort only guards that.
    similarities, order = torch.sort(similarities, dim=1, descending=True, stable=True)
    indices = indices.gather(1, order)
    return similarities.to(device=device, dtype=dtype), indices.to(device)
