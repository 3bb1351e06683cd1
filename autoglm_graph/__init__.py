"""autoglm_graph: graph-contextualized generalized linear models for tabular data.

Every row gets its own GLM coefficients, predicted by a graph attention network
over the most similar training rows, on top of an exactly fitted global GLM.
"""

from importlib.metadata import PackageNotFoundError, version

from .estimators import GraphGLMClassifier, GraphGLMRegressor
from .families import Family, get_family
from .graph import CosineNeighbors, NeighborGraph, cosine_topk
from .preprocessing import TabularPreprocessor

try:
    __version__ = version("autoglm-graph")
except PackageNotFoundError:  # running from a source tree without installation
    __version__ = "0.0.0"

__all__ = [
    "CosineNeighbors",
    "Family",
    "GraphGLMClassifier",
    "GraphGLMRegressor",
    "NeighborGraph",
    "TabularPreprocessor",
    "__version__",
    "cosine_topk",
    "get_family",
]
