"""The estimators: GraphGLMRegressor and GraphGLMClassifier, composed of the
areas below them (the GLM, the network, the readers), and the Predictor, a fitted
model's arithmetic. May import every area but ``search``.

Imported eagerly (not name by name, as the other areas): importing the classes
registers them with :mod:`autoglm_graph.persistence`, which loads files by the
class name they give.
"""

from __future__ import annotations

from ._base import BaseGraphGLM
from ._estimators import GraphGLMClassifier, GraphGLMRegressor
from .predictor import Predictor

__all__ = [
    "BaseGraphGLM",
    "GraphGLMClassifier",
    "GraphGLMRegressor",
    "Predictor",
]
