"""Hyperparameter search with Optuna: ``GraphGLMSearchCV``, ``auto_fit``, the
default search space, pruning and storages. May import every area below it.

The names below are this area's public face; its modules load at a name's first
use (:func:`autoglm_graph.utils.lazy_exports`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..utils import lazy_exports

#: Public name -> the module of this area that defines it.
_EXPORTS = {
    "GraphGLMSearchCV": "_search",
    "OptunaPruningCallback": "_optuna",
    "auto_fit": "_search",
    "make_storage": "_optuna",
}
__all__ = [
    "GraphGLMSearchCV",
    "OptunaPruningCallback",
    "auto_fit",
    "make_storage",
]
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

if TYPE_CHECKING:  # static analysers (and import-linter) see the names
    from ._optuna import OptunaPruningCallback, make_storage
    from ._search import GraphGLMSearchCV, auto_fit
