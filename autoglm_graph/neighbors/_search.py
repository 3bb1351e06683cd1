"""Exact cosine top-k neighbour search with a similarity threshold.

The search is exact and chunked: query rows are processed a chunk at a time, each
chunk's similarities to all base rows are written into one preallocated tile, and
only the ``k`` best of each row survive, so memory is ``O(chunk * m + n * k)`` and an
``n x m`` similarity matrix is never materialised.

The tile and its top-k selection (folded into strided buckets, ties to the lower
column) are :mod:`autoglm_graph.neighbors._topk`'s. On a CPU in float32 (without a
``chunk_size``) the same exact search runs in faiss's exhaustive inner-product
search, whose small blocks stay in cache (0.4-0.8x the time from 5,000 base
rows or 64 columns), with the same tie rule
(:func:`~autoglm_graph.neighbors._topk.faiss_topk`).

``backend="faiss"`` instead searches an approximate HNSW graph index built with
faiss (see :mod:`autoglm_graph.neighbors._faiss`), which scales as
``O(m log m)`` rather than ``O(n m)``; ``backend="ivf"`` a faiss IVF-flat index
(k-means lists), cheap to build, for rows searched once
(:func:`~autoglm_graph.neighbors.refresh.refresh_backend`: the embedding graph's
refreshes). ``backend="auto"`` picks the exact search for small inputs and on
CUDA, and :func:`recall_at_k` measures what an approximate graph missed.

Rows are L2-normalised once (a zero row has similarity 0 with every row). The
search is not differentiable: tensor inputs are detached, so it can run on
embeddings that require grad (recompute similarities on the edges found if
they must carry gradients). Memory is ``O(chunk_size * m + n * k)`` (faiss's:
blocks of 4096 x 1024 similarities per thread); no ``n x m`` matrix is ever
formed. The faiss backends drop self by position as the exact search does:
they ask for ``k + 1`` neighbours and remove row ``i`` from row ``i``'s list,
or the last one where row ``i`` was not returned. Their similarities are
faiss's float32 inner products, cast to the search's dtype; with more than
one thread an index (hence its result) may differ slightly between runs. An
HNSW index without ``ef_search`` answers a sample of up to
``IndexSettings.calibration_rows`` queries of each kind of search (the indexed
rows among themselves, or other rows; per number of neighbours) exactly and
picks the smallest efSearch whose recall@k on them reaches ``target_recall``:
easy, clustered rows get a small efSearch (fast), hard ones a large one
(``benchmarks/results/graph_build_approx.md``).
"""

from __future__ import annotations

import hashlib
from functools import partial

import numpy as np
import torch
from sklearn.base import BaseEstimator
from sklearn.utils.validation import check_is_fitted

from ..policy import FitPolicy, IndexSettings
from ..utils import check_number
from ._graph import NeighborGraph
from ._topk import faiss_topk, fill_topk

__all__ = [
    "CosineNeighbors",
    "NeighborCache",
    "cosine_topk",
    "recall_at_k",
]

_BACKENDS = ("exact", "faiss", "ivf", "auto")
#: The ``index_params`` each approximate backend takes.
_INDEX_PARAM_KEYS = {
    "faiss": ("m", "ef_construction", "ef_search", "target_recall"),
    "ivf": ("nlist", "nprobe", "target_recall"),
}


def cosine_topk(
    X: torch.Tensor | np.ndarray,
    Y: torch.Tensor | np.ndarray | None = None,
    *,
    n_neighbors: int = 16,
    threshold: float | None = None,
    exclude_self: bool | None = None,
    chunk_size: int | None = None,
    device: str | torch.device | None = None,
    dtype: torch.dtype = torch.float32,
    backend: str = "exact",
    index_params: dict | None = None,
    policy: FitPolicy | None = None,
) -> NeighborGraph:
    """Top-k cosine neighbours of each query row among base rows.

    Parameters
    ----------
    X : array-like or torch.Tensor of shape (n, d)
        Query rows.
    Y : array-like or torch.Tensor of shape (m, d), default=None
        Base rows. ``None`` searches among the rows of ``X`` themselves.
    n_neighbors : int, default=16
        Neighbours wanted per query row. The result has width
        ``k = min(n_neighbors, m - 1 if exclude_self else m)``, possibly 0.
    threshold : float, default=None
        Minimum similarity of a real neighbour. ``None`` keeps every neighbour
        found; otherwise ``mask = similarities >= threshold``.
    exclude_self : bool, default=None
        Whether query row ``i`` may not list base row ``i`` (by position, so
        duplicates of a row remain valid neighbours). Requires ``n == m``.
        ``None`` means ``Y is None``.
    chunk_size : int, default=None
        Query rows per tile of the tiled exact search; None: ``policy.tiles``'
        size, or faiss's exhaustive search on a CPU in float32 (module notes).
        The result does not depend on it, float rounding aside.
    device : str or torch.device, default=None
        Where to compute and return the result. ``None`` means the device of
        ``X`` when it is a tensor, else the CPU.
    dtype : torch.dtype, default=torch.float32
        Floating dtype of the computation and of the returned similarities.
    backend : {"exact", "faiss", "ivf", "auto"}, default="exact"
        The exact search; an approximate one in a faiss HNSW index, or in an
        IVF-flat one (cheap to build: for rows searched once); ``"auto"``:
        exact on CUDA up to 10M base rows, elsewhere while ``n`` or ``m`` is
        below 150k (or faiss is missing), HNSW otherwise.
    index_params : dict, default=None
        HNSW's ``"m"``, ``"ef_construction"``, ``"ef_search"`` (None:
        calibrated to ``"target_recall"``) and ``"target_recall"``, or IVF's
        ``"nlist"``, ``"nprobe"`` and ``"target_recall"``; the rest from
        ``policy.index``.
    policy : FitPolicy, default=None
        The thresholds of ``"auto"`` and of faiss's exact search, the
        indexes' ``index`` and the tiles' ``tiles``; None: the defaults.

    Returns
    -------
    NeighborGraph
        Indices into ``Y`` (or ``X``) sorted by similarity descending, their
        similarities and the threshold mask, each ``(n, k)``; where an
        approximate search found fewer, index -1, ``-inf`` and mask False.

    Examples
    --------
    >>> import numpy as np
    >>> X = np.array([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0]])
    >>> graph = cosine_topk(X, n_neighbors=1)
    >>> graph.indices.ravel().tolist()
    [1, 0, 1]
    """
    _check_search_params(n_neighbors, threshold, chunk_size)
    _check_backend(backend, index_params)
    Xn, Yn = _query_and_base_rows(X, Y, device, dtype)
    exclude_self = Y is None if exclude_self is None else bool(exclude_self)
    policy = policy or FitPolicy()
    kind = _resolve_backend(backend, Xn.shape[0], Yn.shape[0], Xn.device, policy)
    params = None if kind == "exact" else (index_params or {})
    search = partial(_search, index_params=params, index_kind=kind, policy=policy)
    return search(Xn, Yn, n_neighbors, threshold, exclude_self, chunk_size)


def _query_and_base_rows(
    X: object, Y: object, device: str | torch.device | None, dtype: torch.dtype
) -> tuple[torch.Tensor, torch.Tensor]:
    """``X`` and ``Y`` (None: ``X``) checked and L2-normalised, in ``dtype`` on
    the search's device (:func:`_resolve_device`)."""
    device = _resolve_device(X, device)
    _check_dtype(dtype)
    Xn = _normalize_rows(_as_matrix(X, "X", device, dtype))
    Yn = Xn if Y is None else _normalize_rows(_as_matrix(Y, "Y", device, dtype))
    return Xn, Yn


def recall_at_k(approx: NeighborGraph, exact: NeighborGraph) -> float:
    """Fraction of the exact neighbours that an approximate search found.

    Parameters
    ----------
    approx : NeighborGraph
        Result of an approximate search (e.g. ``backend="faiss"``).
    exact : NeighborGraph
        Exact result for the same query rows; its masked-in neighbours are the
        ones to find.

    Returns
    -------
    float
        Masked-in exact neighbours that are also masked-in neighbours of the
        same row in ``approx``, over all masked-in exact neighbours (1.0 when
        there are none). Order within a row does not matter; the widths may
        differ. Exact ties at the k-th place may be broken differently, which
        counts as a miss.

    Examples
    --------
    >>> import torch
    >>> X = torch.randn(200, 8)
    >>> exact = cosine_topk(X, n_neighbors=5)
    >>> recall_at_k(exact, exact)
    1.0
    """
    if approx.indices.shape[0] != exact.indices.shape[0]:
        raise ValueError(
            "approx and exact must have the same number of query rows; got "
            f"{approx.indices.shape[0]} and {exact.indices.shape[0]}."
        )
    device = exact.indices.device
    found = total = 0
    # Row chunks bound the (rows, k_exact, k_approx) comparison tensor.
    step = max(1, 2**24 // max(1, exact.n_neighbors * approx.n_neighbors))
    for start in range(0, exact.indices.shape[0], step):
        stop = start + step
        truth, wanted = exact.indices[start:stop], exact.mask[start:stop]
        got = approx.indices[start:stop].to(device)
        got_mask = approx.mask[start:stop].to(device)
        hits = (truth.unsqueeze(2) == got.unsqueeze(1)) & got_mask.unsqueeze(1)
        found += int((hits.any(dim=2) & wanted).sum())
        total += int(wanted.sum())
    return 1.0 if total == 0 else found / total


class NeighborCache:
    """Reuses exact searches among fixed rows across calls that differ in k or τ.

    A graph in *input* space depends only on the rows, so fits that differ only
    in ``n_neighbors`` or ``threshold`` (a hyperparameter search, or the
    validation rows of one fit, searched every epoch) need one search: the
    cache keeps the widest top-k found per pair of row sets (keyed by content)
    and answers narrower requests by slicing its columns, which are sorted by
    similarity, and re-applying the threshold.

    Parameters
    ----------
    max_entries : int, default=8
        Row-set pairs kept, and approximate indexes kept; the oldest is dropped
        first.
    backend : {"exact", "faiss", "ivf", "auto"}, default="exact"
        Search backend, as in :func:`cosine_topk`. An approximate (faiss) index
        over a set of base rows is built once and kept: later searches among
        the same rows (validation rows among the training rows after the
        training rows among themselves) reuse it, and :meth:`index_for` hands
        it on (to prediction).
    index_params : dict, default=None
        HNSW parameters of the faiss backend, as in :func:`cosine_topk`.
    policy : FitPolicy, default=None
        The search thresholds, as in :func:`cosine_topk`.

    Examples
    --------
    >>> import torch
    >>> cache = NeighborCache()
    >>> X = torch.randn(50, 4)
    >>> wide = cache.search(X, n_neighbors=8, threshold=None)
    >>> narrow = cache.search(X, n_neighbors=3, threshold=0.5)
    >>> cache.n_searches, narrow.n_neighbors
    (1, 3)
    """

    def __init__(
        self,
        max_entries: int = 8,
        *,
        backend: str = "exact",
        index_params: dict | None = None,
        policy: FitPolicy | None = None,
    ) -> None:
        _check_backend(backend, index_params)
        self.max_entries = max_entries
        self.backend = backend
        self.index_params = index_params
        self.policy = policy or FitPolicy()
        self.n_searches = 0
        self._entries: dict = {}
        self._indexes: dict = {}

    @staticmethod
    def _key(X: torch.Tensor) -> tuple:
        data = X.detach().to("cpu", torch.float32).contiguous().numpy()
        digest = hashlib.blake2b(data.tobytes(), digest_size=16).hexdigest()
        return (tuple(X.shape), str(X.device), digest)

    def search(
        self,
        X: torch.Tensor,
        Y: torch.Tensor | None = None,
        *,
        n_neighbors: int,
        threshold: float | None,
    ) -> NeighborGraph:
        """:func:`cosine_topk` of ``X`` among ``Y`` (``None``: among ``X``, no self)."""
        key = (self._key(X), None if Y is None else self._key(Y))
        graph = self._entries.get(key)
        if graph is None or graph.n_neighbors < n_neighbors:
            graph = self._search(X, Y, n_neighbors, key[1] or key[0])
            self.n_searches += 1
            _put_bounded(self._entries, key, graph, self.max_entries)
        return graph.narrowed(n_neighbors, threshold)

    def index_for(self, Y: torch.Tensor) -> CosineNeighbors | None:
        """The approximate index a search built over rows ``Y``, if any.

        It is a fitted :class:`CosineNeighbors` without threshold.
        """
        return self._indexes.get(self._key(Y))

    def _search(self, X, Y, n_neighbors: int, base_key: tuple) -> NeighborGraph:
        base = X if Y is None else Y
        index = self._indexes.get(base_key)
        if index is None:
            backend = _resolve_backend(
                self.backend, X.shape[0], base.shape[0], X.device, self.policy
            )
            if backend != "exact":
                index = CosineNeighbors(
                    n_neighbors,
                    device=X.device,
                    dtype=X.dtype,
                    backend=backend,
                    index_params=self.index_params,
                    policy=self.policy,
                ).fit(base)
                _put_bounded(self._indexes, base_key, index, self.max_entries)
        if index is not None:
            return index.kneighbors(None if Y is None else X, n_neighbors)
        return cosine_topk(
            X,
            Y,
            n_neighbors=n_neighbors,
            device=X.device,
            dtype=X.dtype,
            policy=self.policy,
        )


def _put_bounded(entries: dict, key, value, max_entries: int) -> None:
    """Insert ``entries[key] = value`` as the newest; drop the oldest beyond max."""
    entries.pop(key, None)
    entries[key] = value
    while len(entries) > max_entries:
        entries.pop(next(iter(entries)))


class CosineNeighbors(BaseEstimator):
    """Cosine top-k neighbours among fitted rows, exact or approximate.

    A fitted counterpart of :func:`cosine_topk`, as scikit-learn's
    ``KNeighborsTransformer`` is of ``kneighbors_graph``: ``fit`` normalises and
    stores the base rows once (and, for the faiss backend, builds the HNSW index
    once); ``kneighbors`` searches them.

    Parameters
    ----------
    n_neighbors : int, default=16
        Neighbours wanted per query row.
    threshold : float, default=None
        Minimum similarity of a real neighbour; ``None`` keeps all.
    chunk_size : int, default=None
        Query rows per similarity tile; ``None`` chooses automatically (on a
        CPU in float32: faiss's exhaustive search, as in :func:`cosine_topk`).
    device : str or torch.device, default=None
        Where the base rows live and the search runs. ``None`` means the device
        of the fitted tensor, or the CPU for other inputs.
    dtype : torch.dtype, default=torch.float32
        Floating dtype of the stored rows and of the search.
    backend : {"exact", "faiss", "ivf", "auto"}, default="exact"
        Search backend, as in :func:`cosine_topk`; ``"auto"`` decides in ``fit``
        from the number of fitted rows alone.
    index_params : dict, default=None
        Parameters of the faiss (HNSW) or IVF index, as in :func:`cosine_topk`.
    policy : FitPolicy, default=None
        The search thresholds, as in :func:`cosine_topk`; None: the defaults.

    Attributes
    ----------
    base_ : torch.Tensor of shape (n_samples_fit, n_features_in)
        The fitted rows, L2-normalised.
    backend_ : str
        The backend used, ``"exact"``, ``"faiss"`` or ``"ivf"``.
    index_ : object or None
        The faiss index over ``base_`` (``None`` for the exact backend).
    n_samples_fit_ : int
        Number of fitted rows.
    n_features_in_ : int
        Number of columns of the fitted rows.

    Examples
    --------
    >>> import numpy as np
    >>> X = np.array([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0]])
    >>> nn = CosineNeighbors(n_neighbors=1).fit(X)
    >>> nn.kneighbors().indices.ravel().tolist()
    [1, 0, 1]
    >>> nn.kneighbors(np.array([[0.1, 1.0]])).indices.ravel().tolist()
    [2]
    """

    def __init__(
        self,
        n_neighbors: int = 16,
        threshold: float | None = None,
        *,
        chunk_size: int | None = None,
        device: str | torch.device | None = None,
        dtype: torch.dtype = torch.float32,
        backend: str = "exact",
        index_params: dict | None = None,
        policy: FitPolicy | None = None,
    ) -> None:
        self.n_neighbors = n_neighbors
        self.threshold = threshold
        self.chunk_size = chunk_size
        self.device = device
        self.dtype = dtype
        self.backend = backend
        self.index_params = index_params
        self.policy = policy

    def fit(self, X: torch.Tensor | np.ndarray, y: object = None) -> CosineNeighbors:
        """Normalise and store the base rows.

        Parameters
        ----------
        X : array-like or torch.Tensor of shape (m, d)
            Base rows.
        y : None
            Ignored; present for scikit-learn compatibility.

        Returns
        -------
        CosineNeighbors
            The fitted estimator.
        """
        _check_search_params(self.n_neighbors, self.threshold, self.chunk_size)
        _check_backend(self.backend, self.index_params)
        _check_dtype(self.dtype)
        device = _resolve_device(X, self.device)
        self.base_ = _normalize_rows(_as_matrix(X, "X", device, self.dtype))
        self.n_samples_fit_, self.n_features_in_ = (int(s) for s in self.base_.shape)
        m = self.n_samples_fit_
        # The index serves every later query set, so only m decides.
        policy = self.policy or FitPolicy()
        self.backend_ = _resolve_backend(self.backend, m, m, device, policy)
        self.index_ = None
        if self.backend_ != "exact" and m > 0:
            self.index_ = _build_index(
                self.base_, self.index_params, self.backend_, policy.index
            )
        return self

    def kneighbors(
        self,
        X: torch.Tensor | np.ndarray | None = None,
        n_neighbors: int | None = None,
    ) -> NeighborGraph:
        """Top-k neighbours among the fitted rows.

        Parameters
        ----------
        X : array-like or torch.Tensor of shape (n, d), default=None
            Query rows. ``None`` queries the fitted rows themselves, each one
            excluded from its own neighbours.
        n_neighbors : int, default=None
            Neighbours wanted per query row; ``None`` uses ``self.n_neighbors``.

        Returns
        -------
        NeighborGraph
            Indices into the fitted rows, similarities and threshold mask.
        """
        check_is_fitted(self, "base_")
        if n_neighbors is None:
            n_neighbors = self.n_neighbors
        _check_search_params(n_neighbors, self.threshold, self.chunk_size)
        if X is None:
            queries, exclude_self = self.base_, True
        else:
            queries = _as_matrix(X, "X", self.base_.device, self.base_.dtype)
            if queries.shape[1] != self.n_features_in_:
                raise ValueError(
                    f"X has {queries.shape[1]} features, but CosineNeighbors was "
                    f"fitted with {self.n_features_in_}."
                )
            queries, exclude_self = _normalize_rows(queries), False
        return _search(
            queries,
            self.base_,
            n_neighbors,
            self.threshold,
            exclude_self,
            self.chunk_size,
            index=self.index_,
            policy=self.policy or FitPolicy(),
        )


def _check_search_params(
    n_neighbors: object, threshold: object, chunk_size: object
) -> None:
    """Raise ``ValueError`` for an invalid search parameter.

    Any threshold is a valid search (below -1 nothing is masked, above 1
    everything); the estimators narrow theirs to [-1, 1].
    """
    check_number("n_neighbors", n_neighbors, integer=True, low=1)
    check_number("threshold", threshold, allow_none=True, allow_inf=True)
    check_number("chunk_size", chunk_size, integer=True, low=1, allow_none=True)


def _is_int(value: object) -> bool:
    """Whether ``value`` is an integer (and not a bool)."""
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


def _check_dtype(dtype: object) -> None:
    """Raise ``ValueError`` unless ``dtype`` is a floating torch dtype."""
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise ValueError(
            f"The 'dtype' parameter must be a floating torch.dtype; got {dtype!r}."
        )


def _check_backend(backend: object, index_params: object) -> None:
    """Raise ``ValueError`` for an unknown backend or malformed index parameters."""
    if not isinstance(backend, str) or backend not in _BACKENDS:
        raise ValueError(
            "The 'backend' parameter must be one of "
            f"{', '.join(map(repr, _BACKENDS))}; got {backend!r}."
        )
    if index_params is None:
        return
    if not isinstance(index_params, dict):
        raise ValueError(
            "The 'index_params' parameter must be None or a dict; "
            f"got {index_params!r}."
        )
    known = _INDEX_PARAM_KEYS.get(backend, _INDEX_PARAM_KEYS["faiss"])
    for key, value in index_params.items():
        if key not in known:
            raise ValueError(
                f"Unknown key {key!r} in the 'index_params' parameter; expected "
                f"some of {', '.join(map(repr, known))}."
            )
        if key == "target_recall":
            if not (
                isinstance(value, (int, float, np.floating))
                and not isinstance(value, bool)
                and 0 < value <= 1
            ):
                raise ValueError(
                    "index_params['target_recall'] must be a number in (0, 1]; "
                    f"got {value!r}."
                )
        elif not (value is None and key in ("ef_search", "nprobe")) and (
            not _is_int(value) or value < 1
        ):
            raise ValueError(
                f"index_params[{key!r}] must be an int >= 1; got {value!r}."
            )


def _resolve_backend(
    backend: str, n: int, m: int, device: torch.device, policy: FitPolicy
) -> str:
    """``"exact"`` or ``"faiss"`` for ``n`` query rows among ``m`` base rows
    (``"exact"``, ``"faiss"`` and ``"ivf"`` stay as they are)."""
    if backend != "auto":
        return backend
    if device.type == "cuda":
        exact = m <= policy.auto_cuda_exact_max_rows
    else:
        exact = min(n, m) < policy.auto_faiss_min_rows
    if exact:
        return "exact"
    from . import _faiss

    return "faiss" if _faiss.faiss_available() else "exact"


def _build_index(
    Yn: torch.Tensor, index_params: dict | None, kind: str, settings: IndexSettings
) -> object:
    """A faiss index over the normalised rows ``Yn``: HNSW (``"faiss"``), or
    IVF (``"ivf"``); what ``index_params`` leaves out is ``settings``'."""
    from . import _faiss  # lazily: faiss is optional

    index_class = _faiss.IVFIndex if kind == "ivf" else _faiss.HNSWIndex
    return index_class(Yn, settings, **(index_params or {}))


def _resolve_device(X: object, device: str | torch.device | None) -> torch.device:
    """The device to search on: ``device``, else that of tensor ``X``, else CPU."""
    if device is not None:
        return torch.device(device)
    if isinstance(X, torch.Tensor):
        return X.device
    return torch.device("cpu")


def _as_matrix(
    A: object, name: str, device: torch.device, dtype: torch.dtype
) -> torch.Tensor:
    """Convert ``A`` to a finite, detached 2-D tensor of ``dtype`` on ``device``."""
    if isinstance(A, torch.Tensor):
        A = A.detach()  # the search is not differentiable
    else:
        A = torch.as_tensor(np.asarray(A))
    if A.dim() != 2:
        raise ValueError(
            f"{name} must be a 2-D array of shape (n_rows, n_features); "
            f"got shape {tuple(A.shape)}."
        )
    A = A.to(device=device, dtype=dtype)
    if not bool(torch.isfinite(A).all()):
        raise ValueError(f"{name} contains NaN or infinity.")
    return A


def _normalize_rows(A: torch.Tensor) -> torch.Tensor:
    """Scale each row to unit L2 norm; a zero row stays zero.

    Rows are first divided by their largest absolute entry so that the norm
    neither underflows (tiny rows) nor overflows (huge rows); after that every
    non-zero row has norm >= 1 and the clamp only touches zero rows.
    """
    tiny = torch.finfo(A.dtype).tiny
    A = A / A.abs().amax(dim=1, keepdim=True).clamp_min(tiny)
    return A / torch.linalg.vector_norm(A, dim=1, keepdim=True).clamp_min(1.0)


def _faiss_exact(
    Xn: torch.Tensor, Yn: torch.Tensor, chunk_size: int | None, policy: FitPolicy
) -> bool:
    """Whether an exact search runs in faiss (:func:`~._topk.faiss_topk`):
    float32 rows on a CPU, no ``chunk_size`` asked for, enough base rows or
    columns for it to pay, faiss installed."""
    if Xn.device.type != "cpu" or Xn.dtype != torch.float32 or chunk_size is not None:
        return False
    few_rows = Yn.shape[0] < policy.faiss_exact_min_rows
    if few_rows and Yn.shape[1] < policy.faiss_exact_min_dim:
        return False
    from . import _faiss

    return _faiss.faiss_available()


def _search(
    Xn: torch.Tensor,
    Yn: torch.Tensor,
    n_neighbors: int,
    threshold: float | None,
    exclude_self: bool,
    chunk_size: int | None,
    *,
    index_params: dict | None = None,
    index: object | None = None,
    index_kind: str = "faiss",
    policy: FitPolicy,
) -> NeighborGraph:
    """Top-k of normalised rows ``Xn`` among normalised ``Yn``.

    Exact (faiss's exhaustive search or the tiles, see :func:`_faiss_exact`),
    unless ``index`` (a faiss index over ``Yn``) is given or
    ``index_params`` is (then such an index is built here, with those
    parameters; ``{}`` for the defaults).
    """
    n, m = Xn.shape[0], Yn.shape[0]
    if Xn.shape[1] != Yn.shape[1]:
        raise ValueError(
            f"X and Y must have the same number of columns; got {Xn.shape[1]} "
            f"and {Yn.shape[1]}."
        )
    if exclude_self and n != m:
        raise ValueError(
            f"exclude_self=True needs as many query rows as base rows; got {n} and {m}."
        )
    k = max(0, min(n_neighbors, m - int(exclude_self)))
    similarities = torch.empty((n, k), dtype=Xn.dtype, device=Xn.device)
    indices = torch.empty((n, k), dtype=torch.int64, device=Xn.device)
    if n > 0 and k > 0:
        if index is None and index_params is not None:
            index = _build_index(Yn, index_params, index_kind, policy.index)
        found = None if index is None else index.search(Xn, k, exclude_self)
        if found is None:  # exact, or an IVF index that would miss too much
            tiles = policy.tiles
            if _faiss_exact(Xn, Yn, chunk_size, policy):
                faiss_topk(Xn, Yn, k, exclude_self, similarities, indices, tiles)
            else:
                fill_topk(
                    Xn, Yn, k, exclude_self, chunk_size, similarities, indices, tiles
                )
        else:
            similarities, indices = found
    # Approximate search may find fewer than k rows; those slots hold index -1.
    graph = NeighborGraph(indices=indices, similarities=similarities, mask=indices >= 0)
    return graph.narrowed(threshold=threshold)
