"""Neighbour search and the graph: exact and faiss cosine top-k, the
neighbour graph, the prediction index and the embedding graph's refreshes during
training. May import ``utils`` and ``policy``.

The names below are this area's public face; its modules load at a name's first
use (:func:`autoglm_graph.utils.lazy_exports`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..utils import lazy_exports

#: Public name -> the module of this area that defines it.
_EXPORTS = {
    "CosineNeighbors": "_search",
    "NeighborCache": "_search",
    "NeighborGraph": "_graph",
    "PredictionIndex": "_prediction_index",
    "cosine_topk": "_search",
    "distinct_rows": "refresh",
    "faiss_available": "_faiss",
    "fit_prediction_index": "_prediction_index",
    "recall_at_k": "_search",
    "refresh_graphs": "refresh",
}
__all__ = [
    "CosineNeighbors",
    "NeighborCache",
    "NeighborGraph",
    "PredictionIndex",
    "cosine_topk",
    "distinct_rows",
    "faiss_available",
    "fit_prediction_index",
    "recall_at_k",
    "refresh_graphs",
]
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

if TYPE_CHECKING:  # static analysers (and import-linter) see the names
    from ._faiss import faiss_available
    from ._graph import NeighborGraph
    from ._prediction_index import PredictionIndex, fit_prediction_index
    from ._search import CosineNeighbors, NeighborCache, cosine_topk, recall_at_k
    from .refresh import distinct_rows, refresh_graphs
