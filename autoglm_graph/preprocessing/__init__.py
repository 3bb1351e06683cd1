"""From a DataFrame or array to the float design: ``TabularPreprocessor``,
its column checks and its matching of categorical levels. May import ``utils``
only.

The names below are this area's public face; its modules load at a name's first
use (:func:`autoglm_graph.utils.lazy_exports`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..utils import lazy_exports

# The functions a saved preprocessor names (skops looks them up here).
from ._preprocessor import _as_object_with_nan, _as_str, _column_median  # noqa: F401

#: Public name -> the module of this area that defines it.
_EXPORTS = {
    "DroppedColumnsWarning": "_checks",
    "MISSING_LEVEL": "_preprocessor",
    "NewMissingValuesWarning": "_checks",
    "PREPROCESSOR_PARTS": "_preprocessor",
    "TabularPreprocessor": "_preprocessor",
    "UnseenCategoryWarning": "_checks",
}
__all__ = [
    "MISSING_LEVEL",
    "PREPROCESSOR_PARTS",
    "DroppedColumnsWarning",
    "NewMissingValuesWarning",
    "TabularPreprocessor",
    "UnseenCategoryWarning",
]
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

if TYPE_CHECKING:  # static analysers (and import-linter) see the names
    from ._checks import (
        DroppedColumnsWarning,
        NewMissingValuesWarning,
        UnseenCategoryWarning,
    )
    from ._preprocessor import MISSING_LEVEL, PREPROCESSOR_PARTS, TabularPreprocessor
