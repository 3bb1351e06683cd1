"""autoglm_graph: graph-contextualized generalized linear models for tabular data.

Every row gets its own GLM coefficients, predicted by a graph attention network
over the most similar training rows, on top of an exactly fitted global GLM.

The public names are imported on first use (PEP 562 ``__getattr__``):
``from autoglm_graph import GraphGLMRegressor`` works as usual, while the
``autoglm-graph`` command line can show its help without loading torch.
"""

from __future__ import annotations

import importlib
from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING

try:
    __version__ = version("autoglm-graph")
except PackageNotFoundError:  # running from a source tree without installation
    __version__ = "0.0.0"

#: Public name -> (area or module, attribute in it).
_EXPORTS = {
    "Checkpoint": ("network", "Checkpoint"),
    "CosineNeighbors": ("neighbors", "CosineNeighbors"),
    "Family": ("glm", "Family"),
    "FitPolicy": ("policy", "FitPolicy"),
    "GraphGLMClassifier": ("estimators", "GraphGLMClassifier"),
    "GraphGLMRegressor": ("estimators", "GraphGLMRegressor"),
    "GraphGLMSearchCV": ("search", "GraphGLMSearchCV"),
    "IndexSettings": ("policy", "IndexSettings"),
    "IntervalSettings": ("explain", "IntervalSettings"),
    "NeighborGraph": ("neighbors", "NeighborGraph"),
    "OptunaPruningCallback": ("search", "OptunaPruningCallback"),
    "TabularPreprocessor": ("preprocessing", "TabularPreprocessor"),
    "TileSettings": ("policy", "TileSettings"),
    "auto_fit": ("search", "auto_fit"),
    "cosine_topk": ("neighbors", "cosine_topk"),
    "get_family": ("glm", "get_family"),
    "gini": ("metrics", "gini"),
    "heterogeneity_test": ("explain", "heterogeneity_test"),
    "load": ("persistence", "load_model"),
    "lorenz_curve": ("metrics", "lorenz_curve"),
    "recall_at_k": ("neighbors", "recall_at_k"),
}
#: The areas and modules reachable as attributes after ``import autoglm_graph``.
_SUBMODULES = (
    "cli",
    "datasets",
    "estimators",
    "explain",
    "glm",
    "metrics",
    "neighbors",
    "network",
    "persistence",
    "policy",
    "preprocessing",
    "search",
    "utils",
)

__all__ = [
    "Checkpoint",
    "CosineNeighbors",
    "Family",
    "FitPolicy",
    "GraphGLMClassifier",
    "GraphGLMRegressor",
    "GraphGLMSearchCV",
    "IndexSettings",
    "IntervalSettings",
    "NeighborGraph",
    "OptunaPruningCallback",
    "TabularPreprocessor",
    "TileSettings",
    "__version__",
    "auto_fit",
    "cosine_topk",
    "get_family",
    "gini",
    "heterogeneity_test",
    "load",
    "lorenz_curve",
    "recall_at_k",
]


def __getattr__(name: str):
    if name in _EXPORTS:
        module, attribute = _EXPORTS[name]
        value = getattr(importlib.import_module(f".{module}", __name__), attribute)
        globals()[name] = value  # later look-ups skip this function
        return value
    if name in _SUBMODULES:
        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS, *_SUBMODULES})


if TYPE_CHECKING:  # static analysers and IDEs see the names directly
    from .estimators import GraphGLMClassifier, GraphGLMRegressor
    from .explain import IntervalSettings, heterogeneity_test
    from .glm import Family, get_family
    from .metrics import gini, lorenz_curve
    from .neighbors import CosineNeighbors, NeighborGraph, cosine_topk, recall_at_k
    from .network import Checkpoint
    from .persistence import load_model as load
    from .policy import FitPolicy, IndexSettings, TileSettings
    from .preprocessing import TabularPreprocessor
    from .search import GraphGLMSearchCV, OptunaPruningCallback, auto_fit
