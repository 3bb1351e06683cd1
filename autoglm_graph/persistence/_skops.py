"""The preprocessor's member of a model file (``preprocessor.skops``), read
with skops: without pickle, with types of an allow-list only, and without
importing torch (a model that is the global GLM loads without it)."""

from __future__ import annotations

import importlib.abc
import io
import sys
import zipfile

from ..preprocessing import TabularPreprocessor
from ._container import (
    MAX_MEMBER_BYTES,
    PREPROCESSOR_NAME,
    ModelFileError,
    checked_infos,
)

#: Types outside skops' own scikit-learn/numpy allow-list that a fitted
#: TabularPreprocessor contains: the class itself, the two module-level
#: functions of its FunctionTransformers, its imputer's median, and numpy's dtype.
TRUSTED_PREPROCESSOR_TYPES: tuple[str, ...] = (
    "autoglm_graph.preprocessing.TabularPreprocessor",
    "autoglm_graph.preprocessing._as_object_with_nan",
    "autoglm_graph.preprocessing._as_str",
    "autoglm_graph.preprocessing._column_median",
    "numpy.dtype",
)


def load_preprocessor(data: bytes) -> TabularPreprocessor:
    """The fitted preprocessor of ``preprocessor.skops``'s bytes.

    Raises :class:`ModelFileError` for a damaged file, a type outside skops'
    own allow-list and :data:`TRUSTED_PREPROCESSOR_TYPES`, or another object
    than a :class:`~autoglm_graph.preprocessing.TabularPreprocessor`.
    """
    # The skops file is a zip too: bound what skops would inflate.
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as zf:
            limit = MAX_MEMBER_BYTES[PREPROCESSOR_NAME]
            checked_infos(zf, PREPROCESSOR_NAME, None, limit)
    except (zipfile.BadZipFile, OSError, ValueError, EOFError) as exc:
        if isinstance(exc, ModelFileError):
            raise
        raise ModelFileError(f"{PREPROCESSOR_NAME} is not readable: {exc}") from exc
    sio = _skops_io()
    try:
        untrusted = sio.get_untrusted_types(data=data)
    except Exception as exc:
        raise ModelFileError(f"{PREPROCESSOR_NAME} is not readable: {exc}") from exc
    unknown = sorted(set(untrusted) - set(TRUSTED_PREPROCESSOR_TYPES))
    if unknown:
        raise ModelFileError(
            f"{PREPROCESSOR_NAME} names types outside the allow-list: "
            f"{', '.join(unknown)}."
        )
    try:
        pre = sio.loads(data, trusted=list(TRUSTED_PREPROCESSOR_TYPES))
    except Exception as exc:
        raise ModelFileError(f"{PREPROCESSOR_NAME} is not readable: {exc}") from exc
    if type(pre) is not TabularPreprocessor:
        raise ModelFileError(
            f"{PREPROCESSOR_NAME} holds a {type(pre).__name__}, not a "
            "TabularPreprocessor."
        )
    return pre


class _RefuseModules(importlib.abc.MetaPathFinder):
    """An import finder that refuses (ImportError) the modules ``names``."""

    def __init__(self, names: frozenset[str]) -> None:
        self.names = names

    def find_spec(self, name, path=None, target=None):
        if name in self.names:
            raise ImportError(f"{name} is not imported while skops is imported.")
        return None


#: The array-library adapters of scikit-learn's vendored array_api_compat
#: (numpy's aside): importing one imports its library.
_ARRAY_ADAPTERS = frozenset(
    f"sklearn.externals.array_api_compat.{name}"
    for name in ("torch", "cupy", "dask", "jax")
)


def _skops_io():
    """``skops.io``, imported without importing torch.

    skops lists scikit-learn's estimators when it is imported
    (``sklearn.utils.all_estimators``, its allow-list), and that walk imports
    every package of scikit-learn, the vendored ``array_api_compat.torch``
    included, which imports torch: a second of a GLM-only load. The walk
    skips a package that raises ImportError, and none of these adapters holds
    an estimator, so they are refused while skops is imported (its list is
    the same); scikit-learn imports them as usual afterwards.
    """
    if "skops.io" in sys.modules or "torch" in sys.modules:
        import skops.io

        return skops.io
    refuse = _RefuseModules(_ARRAY_ADAPTERS)
    sys.meta_path.insert(0, refuse)
    try:
        import skops.io
    finally:
        sys.meta_path.remove(refuse)
    return skops.io
