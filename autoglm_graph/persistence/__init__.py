"""Files of fitted models: one safe format (JSON, safetensors and skops,
no pickle) and its checks. Knows the estimators only through
``register_estimator``; may import ``explain``, ``network``, ``neighbors``, ``glm``,
``preprocessing``, ``utils`` and ``policy``.

The names below are this area's public face; its modules load at a name's first
use (:func:`autoglm_graph.utils.lazy_exports`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..utils import lazy_exports

#: Public name -> the module of this area that defines it.
_EXPORTS = {
    "ModelFileError": "_container",
    "TRUSTED_PREPROCESSOR_TYPES": "_skops",
    "check_save_path": "_container",
    "load_model": "_io",
    "register_estimator": "_saving",
    "save_model": "_saving",
}
__all__ = [
    "TRUSTED_PREPROCESSOR_TYPES",
    "ModelFileError",
    "check_save_path",
    "load_model",
    "register_estimator",
    "save_model",
]
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

if TYPE_CHECKING:  # static analysers (and import-linter) see the names
    from ._container import ModelFileError, check_save_path
    from ._io import load_model
    from ._saving import register_estimator, save_model
    from ._skops import TRUSTED_PREPROCESSOR_TYPES
