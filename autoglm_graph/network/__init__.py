"""The network of per-row deviations: torch modules, the fused attention
layer, the training loop (epochs, early stopping, checkpoints), the fitted network,
the constraints on local coefficients and the location effect. May import
``neighbors``, ``glm``, ``preprocessing``, ``utils`` and ``policy``.

The names below are this area's public face; its modules load at a name's first
use (:func:`autoglm_graph.utils.lazy_exports`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..utils import lazy_exports

#: Public name -> the module of this area that defines it.
_EXPORTS = {
    "CONVS": "modules",
    "Checkpoint": "checkpoint",
    "CoefficientMap": "constraints",
    "EarlyStopping": "stopping",
    "FittedNetwork": "_fitted",
    "GraphConfig": "rows",
    "LocationEffect": "location",
    "NetConfig": "modules",
    "RowData": "rows",
    "Trainer": "training",
    "check_constraint_params": "constraints",
    "coefficient_map": "constraints",
    "constrained_positions": "constraints",
    "fit_location_effect": "location",
    "linear_predictor": "rows",
    "numeric_columns": "embeddings",
    "paired_gain": "stopping",
    "quantile_edges": "embeddings",
}
__all__ = [
    "CONVS",
    "Checkpoint",
    "CoefficientMap",
    "EarlyStopping",
    "FittedNetwork",
    "GraphConfig",
    "LocationEffect",
    "NetConfig",
    "RowData",
    "Trainer",
    "check_constraint_params",
    "coefficient_map",
    "constrained_positions",
    "fit_location_effect",
    "linear_predictor",
    "numeric_columns",
    "paired_gain",
    "quantile_edges",
]
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

if TYPE_CHECKING:  # static analysers (and import-linter) see the names
    from ._fitted import FittedNetwork
    from .checkpoint import Checkpoint
    from .constraints import (
        CoefficientMap,
        check_constraint_params,
        coefficient_map,
        constrained_positions,
    )
    from .embeddings import numeric_columns, quantile_edges
    from .location import LocationEffect, fit_location_effect
    from .modules import CONVS, NetConfig
    from .rows import GraphConfig, RowData, linear_predictor
    from .stopping import EarlyStopping, paired_gain
    from .training import Trainer
