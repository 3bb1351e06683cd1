"""The embedding graph's refreshes during training.

At a refresh the training rows are searched among themselves (self excluded)
and the validation rows among them, in the network's current embedding: one
index serves both searches and no index outlives the refresh
(:func:`refresh_backend`: an IVF index from
``FitPolicy.refresh_ivf_min_rows`` rows on a CPU). Tables with few distinct
rows search their distinct vectors only (:func:`distinct_rows`).
"""

from __future__ import annotations

from functools import partial

import torch

from ..policy import FitPolicy
from ._graph import NeighborGraph
from ._search import (
    _as_matrix,
    _build_index,
    _check_backend,
    _check_search_params,
    _normalize_rows,
    _resolve_backend,
    _search,
)

__all__ = ["distinct_rows", "refresh_backend", "refresh_graphs"]


def refresh_backend(
    backend: str, n: int, device: torch.device, policy: FitPolicy | None = None
) -> str:
    """The backend of a search of ``n`` rows among themselves whose index would
    serve that search only (an embedding-graph refresh).

    ``"auto"`` becomes ``"ivf"`` on a CPU from ``policy.refresh_ivf_min_rows``
    rows (None: the default policy) when faiss is installed: an HNSW index
    costs more to build than the exact search, an IVF index a fraction of it.
    Other backends stay as they are (``"exact"`` keeps refreshes exact).
    """
    policy = policy or FitPolicy()
    if backend != "auto" or device.type != "cpu" or n < policy.refresh_ivf_min_rows:
        return backend
    from . import _faiss

    return "ivf" if _faiss.faiss_available() else backend


def refresh_graphs(
    base: torch.Tensor,
    queries: torch.Tensor | None = None,
    *,
    n_neighbors: int = 16,
    threshold: float | None = None,
    backend: str = "auto",
    policy: FitPolicy | None = None,
) -> tuple[NeighborGraph, NeighborGraph | None]:
    """An embedding-graph refresh: ``base`` rows among themselves (self
    excluded) and ``queries`` among them, both searched in one index.

    The backend is :func:`refresh_backend`'s for the base rows (an IVF index
    from 5,000 rows on a CPU; ``"auto"`` is otherwise resolved as in
    :func:`cosine_topk`). An index built over the base rows serves both
    searches, each calibrated on a sample of its own queries (or exact where
    no setting reaches the target recall): the validation rows' search among
    the training rows was an exact one of its own at every refresh (0.17 s on
    15k training rows, 3.9 s on 90k with two threads, against their own
    search's 0.45 s and 9 s).

    ``policy`` (None: the defaults) gives the thresholds of the backend
    (``refresh_ivf_min_rows`` and those of :func:`cosine_topk`) and of the
    distinct rows' search (``refresh_distinct_max_share``).

    Returns
    -------
    (NeighborGraph, NeighborGraph or None)
        The base rows' graph and the queries' (None without queries), their
        indices into ``base``, on its device.
    """
    _check_search_params(n_neighbors, threshold, None)
    _check_backend(backend, None)
    policy = policy or FitPolicy()
    device = base.device
    Bn = _normalize_rows(_as_matrix(base, "base", device, torch.float32))
    Qn = None
    if queries is not None:
        Qn = _normalize_rows(_as_matrix(queries, "queries", device, torch.float32))
    if backend != "exact" and Bn.shape[0] > n_neighbors + 1:
        distinct = _refresh_distinct(Bn, Qn, n_neighbors, threshold, backend, policy)
        if distinct is not None:
            return distinct
    m = Bn.shape[0]
    kind = refresh_backend(backend, m, device, policy)
    kind = _resolve_backend(kind, m, m, device, policy)
    index = None
    if kind != "exact" and m >= 2:
        index = _build_index(Bn, {}, kind, policy.index)
    search = partial(_search, index=index, policy=policy)
    train = search(Bn, Bn, n_neighbors, threshold, True, None)
    if Qn is None:
        return train, None
    return train, search(Qn, Bn, n_neighbors, threshold, False, None)


def _refresh_distinct(
    Bn: torch.Tensor,
    Qn: torch.Tensor | None,
    n_neighbors: int,
    threshold: float | None,
    backend: str,
    policy: FitPolicy,
) -> tuple[NeighborGraph, NeighborGraph | None] | None:
    """:func:`refresh_graphs` over the distinct base rows, or None when at
    least half of them are distinct.

    Tables with few distinct rows are common (``tuna``: 327 distinct rows in
    10,273; ``cps1988``: 5,581 in 21,116; motor portfolios with a few rating
    factors), and identical rows have identical embeddings. Their search is
    then one of the distinct vectors among themselves, and each row's list is
    expanded from its vector's: first the other rows of its own vector
    (similarity 1), then the rows of each neighbouring vector in rank order,
    each vector's rows by position, as the exact search orders ties. A
    refresh of ``tuna`` (and of ``cps1988``) cost 13 % (20 %) of the fit.
    """
    m = Bn.shape[0]
    found = distinct_rows(Bn, policy)
    if found is None:
        return None
    first, inverse = found
    distinct = Bn[first]  # equal rows: torch.unique's values, in its order
    n_distinct = distinct.shape[0]
    counts = torch.bincount(inverse, minlength=n_distinct)
    device = Bn.device
    k = min(n_neighbors, m - 1)
    # The distinct vectors' own neighbours (exact: ties to the lower vector).
    kind = refresh_backend(backend, n_distinct, device, policy)
    kind = _resolve_backend(kind, n_distinct, n_distinct, device, policy)
    index = None
    if kind != "exact" and n_distinct >= 2:
        index = _build_index(distinct, {}, kind, policy.index)
    width = min(k, n_distinct - 1)
    search = partial(_search, index=index, policy=policy)
    near = search(distinct, distinct, width, None, True, None)
    # Rows of each vector by position: rows[offsets[u] : offsets[u] + counts[u]].
    rows = torch.argsort(inverse, stable=True)
    offsets = torch.cumsum(counts, 0) - counts
    self_similarity = (distinct * distinct).sum(dim=1)
    own = torch.arange(n_distinct, device=device).unsqueeze(1)
    groups = torch.cat([own, near.indices.clamp(min=0)], dim=1)
    group_sims = torch.cat([self_similarity.unsqueeze(1), near.similarities], dim=1)
    group_ok = torch.cat(
        [torch.ones_like(own, dtype=torch.bool), near.mask & (near.indices >= 0)],
        dim=1,
    )
    # k + 1 candidates per vector (its own rows first): one of them may be the
    # query row itself, which a training row drops.
    candidates, sims, valid = _expand(
        groups, group_sims, group_ok, rows, offsets, counts, k + 1
    )
    picked = candidates[inverse]  # [m, k + 1]
    is_self = picked == torch.arange(m, device=device).unsqueeze(1)
    keep = valid[inverse] & ~is_self
    # The first k kept slots of each row, in order.
    order = torch.argsort((~keep).to(torch.int8), dim=1, stable=True)[:, :k]
    train = NeighborGraph(
        indices=picked.gather(1, order),
        similarities=sims[inverse].gather(1, order),
        mask=keep.gather(1, order),
    ).narrowed(threshold=threshold)
    if Qn is None:
        return train, None
    width = min(k, n_distinct)
    found = search(Qn, distinct, width, None, False, None)
    q_candidates, q_sims, q_valid = _expand(
        found.indices.clamp(min=0),
        found.similarities,
        found.mask & (found.indices >= 0),
        rows,
        offsets,
        counts,
        min(n_neighbors, m),
    )
    val = NeighborGraph(indices=q_candidates, similarities=q_sims, mask=q_valid)
    return train, val.narrowed(threshold=threshold)


def distinct_rows(
    rows: torch.Tensor, policy: FitPolicy | None = None
) -> tuple[torch.Tensor, torch.Tensor] | None:
    """``(first, inverse)``: the first row of each distinct value of ``rows``
    (in the order of ``torch.unique``) and each row's position among them;
    None when more than ``policy.refresh_distinct_max_share`` of the rows are
    distinct (then sharing work between copies saves little; None: the
    default policy)."""
    max_share = (policy or FitPolicy()).refresh_distinct_max_share
    n = rows.shape[0]
    if n == 0 or _distinct_lower_bound(rows) > max_share * n:
        return None
    _, inverse = torch.unique(rows, dim=0, return_inverse=True)
    n_distinct = int(inverse.max()) + 1
    if n_distinct > max_share * n:
        return None
    positions = torch.arange(n, device=rows.device)
    first = torch.full((n_distinct,), n, device=rows.device, dtype=positions.dtype)
    first = first.scatter_reduce(0, inverse, positions, "amin")
    return first, inverse


def _distinct_lower_bound(rows: torch.Tensor) -> int:
    """At most the number of distinct ``rows``: that of their projections on a
    fixed random direction (equal rows project equally; distinct ones may
    collide, which only lowers the count).

    Sorting whole rows (``torch.unique(dim=0)``) costs 29-37 ms at 15k x 64
    (one thread), the projection and its sort 2 ms, and tables with mostly
    distinct rows stop there: about 0.2 s of a 14 s fit on ``hi`` (7
    refreshes), within the noise of whole fits in an in-process A/B.
    """
    generator = torch.Generator().manual_seed(0)
    direction = torch.rand(rows.shape[1], generator=generator, dtype=rows.dtype)
    return int(torch.unique(rows @ direction.to(rows.device)).numel())


def _expand(groups, group_sims, group_ok, rows, offsets, counts, width: int):
    """The first ``width`` rows of the vectors ``groups`` (``[n, g]``, in rank
    order, each vector's rows by position), with their similarities and
    validity (a masked vector contributes no row)."""
    n, g = groups.shape
    slot = torch.arange(width, device=groups.device)
    sizes = torch.where(group_ok, counts[groups], 0)  # [n, g]
    # Row r of group j is slot r of it; all groups' slots flattened in order.
    within = slot.view(1, 1, width).expand(n, g, width)
    present = within < sizes.unsqueeze(2)
    where = offsets[groups].unsqueeze(2) + within
    where = torch.where(present, where, 0)
    flat_rows = rows[where].reshape(n, g * width)
    flat_sims = group_sims.unsqueeze(2).expand(n, g, width).reshape(n, g * width)
    flat_ok = present.reshape(n, g * width)
    order = torch.argsort((~flat_ok).to(torch.int8), dim=1, stable=True)[:, :width]
    return (
        flat_rows.gather(1, order),
        flat_sims.gather(1, order),
        flat_ok.gather(1, order),
    )
