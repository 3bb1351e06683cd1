"""autoglm_graph: graph-contextualized generalized linear models for tabular data.

Every row gets its own GLM coefficients, predicted by a graph attention network
over the most similar training rows, on top of an exactly fitted global GLM.
"""

from importlib.metadata import PackageNotFoundError, version

from .estimators import GraphGLMClassifier, GraphGLMRegressor
from .families import Family, get_family
from .graph import CosineNeighbors, NeighborGraph, cosine_topk, recall_at_k
from .io import load_model as load
from .preprocessing import TabularPreprocessor
from .search import GraphGLMSearchCV, OptunaPruningCallback, auto_fit

try:
    __version__ = version("autoglm-graph")
except PackageNotFoundError:  # running from a source tree without installation
    __version__ = "0.0.0"

__all__ = [
    "CosineNeighbors",
    "Family",
    "GraphGLMClassifier",
    "GraphGLMRegressor",
    "GraphGLMSearchCV",
    "NeighborGraph",
    "OptunaPruningCallback",
    "TabularPreprocessor",
    "__version__",
    "auto_fit",
    "cosine_topk",
    "get_family",
    "load",
    "recall_at_k",
]
