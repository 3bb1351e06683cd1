"""Approximate cosine top-k with a faiss HNSW index (private).

:mod:`autoglm_graph.graph` imports this module only when the ``"faiss"`` backend is
used, and faiss itself is imported only when an index is built, so that faiss stays
an optional dependency. Rows arrive here already L2-normalised, so the inner
product that the index ranks by (``METRIC_INNER_PRODUCT``) is the cosine
similarity.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from typing import Any

import numpy as np
import torch

#: HNSW parameters measured on isotropic Gaussian rows, the hard case (100k x 32,
#: k = 16, one thread, recall@16 of a 2k-query sample against exact search):
#: M = 32 with efConstruction = 80 and efSearch = 51 reaches 0.978 in ~25 s;
#: efConstruction = 40 stays at 0.92-0.95 whatever efSearch, M = 16 or 24 lose
#: 2-5 points at equal efSearch, and efConstruction = 100-128 buys ~0.5 point for
#: 30 % more build time.
DEFAULT_M = 32
DEFAULT_EF_CONSTRUCTION = 80
#: efSearch defaults to max(_MIN_EF_SEARCH, _EF_SEARCH_PER_NEIGHBOR * k_searched),
#: times (m / _EF_SEARCH_BASE_ROWS) ** _EF_SEARCH_ROWS_POWER above that many base
#: rows: recall at a fixed efSearch falls as k grows and as the index grows. On
#: isotropic rows (d = 32, k = 16, efSearch = 51) recall@16 falls from 0.978 at
#: 100k rows to 0.966 at 200k and 0.920 at 1M, where efSearch = 96, 128 and 160
#: give 0.948, 0.966 and 0.978; the power 0.4 gives 129 at 1M.
_MIN_EF_SEARCH = 48
_EF_SEARCH_PER_NEIGHBOR = 3
_EF_SEARCH_BASE_ROWS = 100_000
_EF_SEARCH_ROWS_POWER = 0.4

INSTALL_HINT = (
    "backend='faiss' needs the faiss package; install it with "
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


def default_ef_search(k_searched: int, n_rows: int) -> int:
    """efSearch used when none is given: ``k_searched`` results among ``n_rows``."""
    ef = max(_MIN_EF_SEARCH, _EF_SEARCH_PER_NEIGHBOR * k_searched)
    growth = max(1.0, n_rows / _EF_SEARCH_BASE_ROWS) ** _EF_SEARCH_ROWS_POWER
    return math.ceil(ef * growth)


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


class HNSWIndex:
    """An HNSW inner-product index over L2-normalised base rows.

    Parameters
    ----------
    base : torch.Tensor of shape (m, d)
        L2-normalised base rows (any device and floating dtype).
    m : int
        Graph degree ``M`` (links per node and layer; twice that on layer 0).
    ef_construction : int
        Candidate-list size while inserting rows.
    ef_search : int or None
        Candidate-list size while searching; ``None`` uses
        :func:`default_ef_search`. Raised to at least the number of results
        asked for.
    """

    def __init__(
        self,
        base: torch.Tensor,
        m: int = DEFAULT_M,
        ef_construction: int = DEFAULT_EF_CONSTRUCTION,
        ef_search: int | None = None,
    ) -> None:
        faiss = import_faiss()
        self.ef_search = ef_search
        self.n_rows, self.dim = (int(s) for s in base.shape)
        index = faiss.IndexHNSWFlat(self.dim, m, faiss.METRIC_INNER_PRODUCT)
        index.hnsw.efConstruction = ef_construction
        data = _as_faiss_array(base)
        with _faiss_threads(faiss):
            index.add(data)
        self.index = index

    def __getstate__(self) -> dict:
        # SWIG index objects do not pickle; faiss serialises them to bytes.
        state = self.__dict__.copy()
        state["index"] = import_faiss().serialize_index(self.index)
        return state

    def __setstate__(self, state: dict) -> None:
        state["index"] = import_faiss().deserialize_index(state["index"])
        self.__dict__.update(state)

    def search(
        self, queries: torch.Tensor, k: int, exclude_self: bool
    ) -> tuple[torch.Tensor, torch.Tensor]:
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
        similarities : torch.Tensor of shape (n, k)
            Sorted descending, on the device and in the dtype of ``queries``;
            ``-inf`` where fewer than ``k`` neighbours were found.
        indices : torch.Tensor of shape (n, k), int64
            Base-row positions; ``-1`` where fewer than ``k`` were found.
        """
        faiss = import_faiss()
        k_searched = k + int(exclude_self)
        ef = self.ef_search
        if ef is None:
            ef = default_ef_search(k_searched, self.n_rows)
        params = faiss.SearchParametersHNSW()
        # Passed per call rather than set on the index, so that concurrent
        # searches with different k do not race on shared state.
        params.efSearch = max(int(ef), k_searched)
        data = _as_faiss_array(queries)
        with _faiss_threads(faiss):
            distances, ids = self.index.search(data, k_searched, params=params)
        if exclude_self:
            distances, ids = drop_self(distances, ids, k)
        return finish(distances, ids, queries.device, queries.dtype)


def drop_self(
    distances: np.ndarray, ids: np.ndarray, k: int
) -> tuple[np.ndarray, np.ndarray]:
    """Keep ``k`` of each row's ``k + 1`` results, never the row's own position.

    Row ``i`` drops the result equal to ``i``; a row whose own position was not
    returned (an approximate miss, or duplicates crowding it out) drops its last,
    worst result instead.
    """
    n = ids.shape[0]
    drop = ids == np.arange(n)[:, None]
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
