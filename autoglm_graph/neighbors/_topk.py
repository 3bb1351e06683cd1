"""Exact top-k of each row of a similarity tile, ties to the lower column.

:func:`fill_topk` fills one preallocated tile per chunk of query rows with their
similarities to all base rows and keeps the ``k`` best of each row.

Selecting the top ``k`` of a long row is the expensive part on a CPU (``torch.topk``
over a whole tile costs more than the matrix product that fills it). The selection
here first splits each tile row into ``g`` contiguous slabs and takes the
element-wise maximum across them, which gives the maximum of each of ``m / g``
*strided buckets* (bucket ``j`` holds columns ``j, j + m/g, j + 2m/g, ...``). The
``k`` best entries of a row always lie in the ``k`` buckets with the largest maxima
(were an entry in another bucket, those ``k`` buckets would each hold a larger
one), so a ``topk`` over the bucket maxima followed by a ``topk`` over the
``k * g`` surviving candidates is exact, and reads the tile only once. The bucket
maxima of a long row are themselves folded the same way.

:func:`faiss_topk` is the same search by faiss's exhaustive inner-product
search (``faiss.knn``: BLAS products of small query and base blocks, each
result kept in a heap while its block is in cache), with the same tie rule.
On a CPU it takes 0.73-0.81x the time of the tiled search at 16.7k base rows
and 0.38-0.51x at 90k (d = 8-64, k = 16, one thread), but more below 5,000 rows
unless d >= 64 (``benchmarks/results/exact_search.md``); it is what a CPU
search uses there unless a ``chunk_size`` is given (``_search._faiss_exact``).

Both take the tiles' settings (:class:`~autoglm_graph.policy.TileSettings`,
``FitPolicy.tiles``): the search's time and memory, never its result.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from ..policy import TileSettings

__all__ = ["faiss_topk", "fill_topk"]


#: Similarities closer than this may be one tie that faiss's rounding split
#: (it differs in the last bit or two, 1.2e-7 near 1).
_FAISS_TIE_TOLERANCE = 1e-6


def fill_topk(
    Xn: torch.Tensor,
    Yn: torch.Tensor,
    k: int,
    exclude_self: bool,
    chunk_size: int | None,
    similarities: torch.Tensor,
    indices: torch.Tensor,
    tiles: TileSettings,
) -> None:
    """Write the top-k of every query row into ``similarities`` and ``indices``."""
    n, m = Xn.shape[0], Yn.shape[0]
    n_folds = _n_folds(m, k, tiles)
    # Pad the tile width so that every fold divides it exactly.
    width = tiles.n_slabs**n_folds * math.ceil(m / tiles.n_slabs**n_folds)
    if chunk_size is None:
        chunk_size = _auto_chunk_size(width, Xn.element_size(), Xn.device, tiles)
    chunk_size = min(chunk_size, n)
    # One tile for all chunks; the padding columns past m stay -inf throughout.
    tile_buffer = torch.empty((chunk_size, width), dtype=Xn.dtype, device=Xn.device)
    tile_buffer[:, m:] = -math.inf
    base_t = Yn.T
    for start in range(0, n, chunk_size):
        stop = min(start + chunk_size, n)
        tile = tile_buffer[: stop - start]
        torch.mm(Xn[start:stop], base_t, out=tile[:, :m])
        if exclude_self:
            # Query row start + i is base row start + i: entry (i, start + i).
            tile.diagonal(start).fill_(-math.inf)
        values, columns = _folded_topk(tile, k, n_folds, tiles.n_slabs)
        similarities[start:stop] = values
        indices[start:stop] = columns


def faiss_topk(
    Xn: torch.Tensor,
    Yn: torch.Tensor,
    k: int,
    exclude_self: bool,
    similarities: torch.Tensor,
    indices: torch.Tensor,
    tiles: TileSettings,
) -> None:
    """:func:`fill_topk`'s result (``chunk_size=None``) from faiss's exact search.

    CPU float32 rows only. faiss returns ``k`` (+1 for the row itself, + a
    margin) results; in a row where two of them are within
    ``_FAISS_TIE_TOLERANCE``, their similarities are computed again (so that
    duplicated base rows tie exactly) and sorted by similarity, then index,
    and a row whose tie at the k-th value may continue past them
    is searched by :func:`fill_topk` (with ``k + 1`` results, its own position
    then dropped: the same rule as the diagonal's exclusion).
    """
    from ._faiss import _as_faiss_array, _faiss_threads, drop_self, import_faiss

    faiss = import_faiss()
    m = Yn.shape[0]
    own = int(exclude_self)
    width = min(m, k + own + tiles.faiss_tie_margin)
    with _faiss_threads(faiss):
        found, ids = faiss.knn(
            _as_faiss_array(Xn), _as_faiss_array(Yn), width, faiss.METRIC_INNER_PRODUCT
        )
    if exclude_self:
        found, ids = drop_self(found, ids, width - 1)
    values, columns = torch.from_numpy(found), torch.from_numpy(ids)
    # faiss's products of duplicated base rows may differ in their last bit
    # (the BLAS blocks' edges round differently), which would break their
    # ties: where two results are that close, their row's similarities are
    # computed again, the same way for every column, and sorted by value,
    # then index. Elsewhere faiss's order stands (strictly decreasing).
    close = (values[:, :-1] - values[:, 1:] <= _FAISS_TIE_TOLERANCE).any(dim=1)
    close = torch.nonzero(close).flatten()
    if close.numel():
        again = _row_products(Xn[close], Yn, columns[close], tiles.product_rows)
        values[close], columns[close] = _sorted_by_value_then_column(
            again, columns[close], again.shape[1]
        )
    similarities.copy_(values[:, :k])
    indices.copy_(columns[:, :k])
    if values.shape[1] == m - own:
        return  # every other row was returned: nothing was left out of a tie
    open_rows = torch.nonzero(values[:, -1] >= values[:, k - 1]).flatten()
    if open_rows.numel():
        sub_values = torch.empty((open_rows.numel(), k + own), dtype=Xn.dtype)
        sub_columns = torch.empty((open_rows.numel(), k + own), dtype=torch.int64)
        fill_topk(
            Xn[open_rows], Yn, k + own, False, None, sub_values, sub_columns, tiles
        )
        if exclude_self:
            kept = drop_self(
                sub_values.numpy(), sub_columns.numpy(), k, open_rows.numpy()
            )
            sub_values, sub_columns = (torch.from_numpy(a) for a in kept)
        similarities[open_rows] = sub_values
        indices[open_rows] = sub_columns


def _row_products(
    Xn: torch.Tensor, Yn: torch.Tensor, columns: torch.Tensor, block_rows: int
) -> Tensor:
    """``values[i, j] = Xn[i] . Yn[columns[i, j]]``, each as the same
    contiguous reduction, so that equal base rows give equal values
    (``block_rows`` query rows at a time: ``TileSettings.product_rows``)."""
    values = torch.empty(columns.shape, dtype=Xn.dtype)
    for start in range(0, columns.shape[0], block_rows):
        block = slice(start, start + block_rows)
        picked = Yn[columns[block]]  # [rows, width, d]
        values[block] = (picked * Xn[block].unsqueeze(1)).sum(dim=-1)
    return values


def _n_folds(m: int, k: int, tiles: TileSettings) -> int:
    """How many times a row of length ``m`` is folded before the plain top-k.

    A fold pays off while the row is much longer than the ``k * n_slabs``
    candidates it leaves.
    """
    n_folds, length = 0, m
    while length >= tiles.min_row_factor * tiles.n_slabs * k:
        n_folds, length = n_folds + 1, math.ceil(length / tiles.n_slabs)
    return n_folds


def _auto_chunk_size(
    width: int, itemsize: int, device: torch.device, tiles: TileSettings
) -> int:
    """Query rows per tile so that one tile is about the device's target size.

    On CUDA the target is a share of the device's free memory: a tile's
    kernels cost a launch and a synchronisation (the tie checks read a count
    on the host) whatever their size, so small tiles leave the device idle (a
    1M-row refresh searched in 74-row tiles took 14.5 s on an H200).
    """
    if device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
        target = min(free // tiles.cuda_free_share, tiles.cuda_max_tile_bytes)
    elif device.type == "cpu":
        target = tiles.cpu_tile_bytes
    else:
        target = tiles.other_tile_bytes
    return max(1, target // (width * itemsize))


def _folded_topk(
    tile: torch.Tensor,
    k: int,
    n_folds: int,
    n_slabs: int,
    lower_column_first: bool = True,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Sorted top-k values and columns of each row of ``tile``; equal values are
    ordered (and chosen, at the k-th) by the lower column.

    Each fold splits the row into ``n_slabs`` slabs and takes their element-wise
    maximum: the maxima of the strided buckets. The top-k buckets (found by the
    same method, one fold fewer) hold the row's top ``k`` (see the module
    docstring), so only their ``k * n_slabs`` entries are ranked.

    Ties: ``torch.topk`` breaks them by the other values of the row, and those
    move in their last bits with the batch a query row came in (the network's
    forward is not bitwise batch-invariant). With duplicated training rows,
    common in tabular data, a row's neighbours and so its prediction depended on
    the other rows of the call; the rule here depends on the row alone. Only
    rows with a tie are re-ranked: by their candidates, or whole when a tie at
    the k-th value may lie in a bucket that was not ranked (the (k+1)-th
    bucket maximum reaches it). Measured on 16k x 16k (k = 10, one thread,
    against the plain top-k): no difference beyond noise without duplicates
    (0.92-0.98x at d = 8 and 64); 1.16x with every row 40 times.
    """
    if n_folds == 0:
        values, columns = torch.topk(tile, k, dim=1)
        if lower_column_first:
            tied = _tied_rows(tile, values)
            if tied.numel():
                values[tied], columns[tied] = _topk_lower_column_first(tile[tied], k)
        return values, columns
    rows, width = tile.shape
    slab = width // n_slabs
    slabs = tile.view(rows, n_slabs, slab)  # bucket j = column j of every slab
    maxima = slabs.amax(dim=1)
    # Which bucket wins a tie does not matter: the check below catches a miss.
    # The (k+1)-th bucket maximum reaches the k-th value only through a tie.
    bucket_maxima, buckets = _folded_topk(
        maxima, k + 1, n_folds - 1, n_slabs, lower_column_first=False
    )
    buckets = buckets[:, :k].contiguous()
    candidates = slabs.gather(2, buckets.unsqueeze(1).expand(rows, n_slabs, k))
    candidates = candidates.view(rows, n_slabs * k)
    values, best = torch.topk(candidates, k, dim=1)
    # Flat candidate position s * k + j is slab s, bucket buckets[:, j].
    columns = (best // k) * slab + torch.gather(buckets, 1, best % k)
    if lower_column_first:
        unranked = bucket_maxima[:, k] >= values[:, -1]
        tied = _tied_rows(candidates, values, exclude=unranked)
        if tied.numel():
            # Re-rank the candidates by value, then column.
            offsets = torch.arange(n_slabs, device=tile.device).view(1, -1, 1)
            cand_columns = offsets * slab + buckets[tied].unsqueeze(1)
            values[tied], columns[tied] = _sorted_by_value_then_column(
                candidates[tied], cand_columns.view(tied.numel(), -1), k
            )
        unranked = torch.nonzero(unranked).flatten()
        if unranked.numel():
            values[unranked], columns[unranked] = _topk_lower_column_first(
                tile[unranked], k
            )
    return values, columns


def _tied_rows(
    entries: torch.Tensor, top: torch.Tensor, exclude: torch.Tensor | None = None
) -> torch.Tensor:
    """Rows whose sorted ``top`` values hold a tie, among themselves or with
    another of the row's ``entries`` at the k-th value."""
    tied = (entries >= top[:, -1:]).sum(dim=1) > top.shape[1]
    tied |= (top[:, 1:] == top[:, :-1]).any(dim=1)
    if exclude is not None:
        tied &= ~exclude
    return torch.nonzero(tied).flatten()


def _sorted_by_value_then_column(
    values: torch.Tensor, columns: torch.Tensor, k: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """The first ``k`` of each row by descending value, then ascending column."""
    by_column = torch.argsort(columns, dim=1)
    values, columns = values.gather(1, by_column), columns.gather(1, by_column)
    by_value = torch.sort(values, dim=1, descending=True, stable=True).indices[:, :k]
    return values.gather(1, by_value), columns.gather(1, by_value)


def _topk_lower_column_first(
    tile: torch.Tensor, k: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Exact top-k of each row of ``tile`` with ties taken by the lower column."""
    kth = torch.topk(tile, k, dim=1).values[:, -1:]
    row, column = torch.nonzero(tile >= kth, as_tuple=True)  # columns ascending
    value = tile[row, column]
    # Descending value (stable: columns stay ascending), then grouped by row.
    order = torch.sort(value, descending=True, stable=True).indices
    order = order[torch.sort(row[order], stable=True).indices]
    row, column, value = row[order], column[order], value[order]
    counts = torch.bincount(row, minlength=tile.shape[0])
    first = torch.cumsum(counts, 0) - counts
    keep = torch.arange(row.numel(), device=tile.device) - first[row] < k
    return value[keep].view(-1, k), column[keep].view(-1, k)
