"""The preprocessor's member of a model file (``preprocessor.skops``), in
skops' format: read without pickle, with types of an allow-list only, and
without importing skops.io or torch.

Why not skops.io itself: it lists the types it trusts when it is imported
(every estimator of scikit-learn through ``all_estimators``, which imports
all of scikit-learn, and every ufunc of numpy and scipy.special), 0.4-0.65 s
of a fresh process and a third of a GLM-only model's load and predict; the
``trusted=`` argument of its loaders adds to that list and cannot shorten the
import. A fitted preprocessor is made of the nine classes and three functions
of :data:`~autoglm_graph.preprocessing.PREPROCESSOR_PARTS`, builtins, and
numpy's arrays, dtypes and scalars, which skops writes as ten kinds of node
(and references to a node met before). :func:`read_preprocessor` reads the
file's schema and builds each node of those kinds as skops builds it
(``__new__`` and ``__setstate__``; a node met again by its ``__id__`` is the
object built the first time). Every class, function and type is looked up in
fixed tables (nothing is imported by a name from the file) and arrays are
read with ``allow_pickle=False``. Storing the preprocessor as plain arrays
instead would tie the format to the private attributes of scikit-learn's
transformers (see :mod:`._io`) and need a new format version; this reader
leaves the files as they are, those of earlier versions included.

A file holding anything else (another protocol, node kind or type: a file of
another version, or a tampered one) is read by skops.io itself, with the
allow-list check as before: every file that loaded still loads, and its
types are either the reader's or pass that check.
"""

from __future__ import annotations

import importlib.abc
import io
import json
import sys
import zipfile
from typing import Any

import numpy as np

from ..preprocessing import PREPROCESSOR_PARTS, TabularPreprocessor
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

#: The skops protocols whose nodes of the reader's kinds it reads (the same
#: loaders in both; protocol 0 stored a function otherwise).
SCHEMA_PROTOCOLS = (1, 2)


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
    try:
        pre = read_preprocessor(data)
    except Exception:  # not the reader's (or damaged): skops.io decides
        pre = _load_with_skops(data)
    if type(pre) is not TabularPreprocessor:
        raise ModelFileError(
            f"{PREPROCESSOR_NAME} holds a {type(pre).__name__}, not a "
            "TabularPreprocessor."
        )
    return pre


def read_preprocessor(data: bytes) -> Any:
    """The object of a skops file made of :data:`PREPROCESSOR_PARTS`,
    builtins and numpy's arrays, dtypes and scalars (see the module's notes).

    Raises
    ------
    UnsupportedNode
        For a protocol, node kind or type outside those.
    """
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        schema = json.loads(zf.read("schema.json"))
        protocol = schema.get("protocol") if isinstance(schema, dict) else None
        if type(protocol) is not int or protocol not in SCHEMA_PROTOCOLS:
            raise UnsupportedNode(f"skops protocol {protocol!r}")
        return _SchemaReader(zf).build(schema)


class UnsupportedNode(Exception):
    """A node of a skops file that :func:`read_preprocessor` does not build."""


def _plain_types() -> dict[str, type]:
    """The types a node may name besides the parts: builtins, and numpy's
    scalar types (as skops names them, ``numpy.float64``)."""
    builtins = {f"builtins.{t.__name__}": t for t in (str, int, float, bool)}
    builtins.update({f"builtins.{t.__name__}": t for t in (list, tuple)})
    scalars = {t for t in np.sctypeDict.values() if issubclass(t, np.number | np.bool_)}
    return builtins | {f"numpy.{t.__name__}": t for t in scalars}


class _SchemaReader:
    """Builds the nodes of one skops file (its zip holds the arrays)."""

    def __init__(self, zf: zipfile.ZipFile) -> None:
        self.zf = zf
        self.memo: dict[int, Any] = {}  # __id__ -> the object built for it
        self.types = _plain_types()
        self.classes = {
            n: p for n, p in PREPROCESSOR_PARTS.items() if isinstance(p, type)
        }
        self.functions = {
            n: p for n, p in PREPROCESSOR_PARTS.items() if not isinstance(p, type)
        }

    def build(self, state: Any) -> Any:
        if not isinstance(state, dict):
            raise UnsupportedNode(f"a node that is a {type(state).__name__}")
        saved_id = state.get("__id__")
        if saved_id in self.memo:  # skops: the same object (its CachedNode too)
            return self.memo[saved_id]
        loader = _LOADERS.get(state.get("__loader__"))
        if loader is None:
            raise UnsupportedNode(f"the loader {state.get('__loader__')!r}")
        value = loader(self, state, f"{state['__module__']}.{state['__class__']}")
        if saved_id is not None:
            self.memo[saved_id] = value
        return value

    def _named(self, table: dict[str, Any], name: str) -> Any:
        if name not in table:
            raise UnsupportedNode(name)
        return table[name]

    def read_json(self, state: dict, name: str) -> Any:
        return json.loads(state["content"])

    def read_list(self, state: dict, name: str) -> list:
        self._named({"builtins.list": list}, name)
        return [self.build(item) for item in state["content"]]

    def read_tuple(self, state: dict, name: str) -> tuple:
        self._named({"builtins.tuple": tuple}, name)
        return tuple(self.build(item) for item in state["content"])

    def read_dict(self, state: dict, name: str) -> dict:
        self._named({"builtins.dict": dict}, name)
        key_types = self.build(state["key_types"])
        items = [(key, self.build(value)) for key, value in state["content"].items()]
        if not isinstance(key_types, list) or len(key_types) != len(items):
            raise UnsupportedNode("a dict whose key types do not fit its keys")
        pairs = zip(key_types, items, strict=True)
        return {kind(key): value for kind, (key, value) in pairs}

    def read_slice(self, state: dict, name: str) -> slice:
        self._named({"builtins.slice": slice}, name)
        bounds = [state["content"][k] for k in ("start", "stop", "step")]
        if not all(b is None or type(b) is int for b in bounds):
            raise UnsupportedNode("a slice of other bounds than integers")
        return slice(*bounds)

    def read_type(self, state: dict, name: str) -> type:
        return self._named(self.types, name)

    def read_function(self, state: dict, name: str) -> Any:
        return self._named(self.functions, name)

    def read_object(self, state: dict, name: str) -> Any:
        cls = self._named(self.classes, name)
        instance = cls.__new__(cls)  # as skops: no __init__, then the state
        attrs = None if state.get("content") is None else self.build(state["content"])
        if attrs is not None:
            if hasattr(instance, "__setstate__"):
                instance.__setstate__(attrs)
            else:
                instance.__dict__.update(attrs)
        return instance

    def read_ndarray(self, state: dict, name: str) -> Any:
        if state["type"] == "numpy":
            buffer = io.BytesIO(self.zf.read(state["file"]))
            array = np.load(buffer, allow_pickle=False)
            if name == "numpy.ndarray":
                return array
            scalar = self._named(self.types, name)  # a numpy scalar: 0-d array
            if not issubclass(scalar, np.generic):
                raise UnsupportedNode(name)
            return scalar(array)
        if state["type"] != "json" or name != "numpy.ndarray":
            raise UnsupportedNode(f"an array of type {state['type']!r}")
        items = [self.build(item) for item in state["content"]]
        shape = self.build(state["shape"])
        if len(shape) == 1:  # as skops: items that are sequences stay items
            array = np.ndarray(shape=len(items), dtype=object)
            for i, item in enumerate(items):
                array[i] = item
            return array
        return np.array(items, dtype=object)

    def read_dtype(self, state: dict, name: str) -> np.dtype:
        self._named({"numpy.dtype": np.dtype}, name)
        array = self.build(state["content"])
        if not isinstance(array, np.ndarray):
            raise UnsupportedNode("a dtype not read from an array")
        return array.dtype


#: skops' node kinds (``__loader__``) -> the reader's method.
_LOADERS = {
    "JsonNode": _SchemaReader.read_json,
    "ListNode": _SchemaReader.read_list,
    "TupleNode": _SchemaReader.read_tuple,
    "DictNode": _SchemaReader.read_dict,
    "SliceNode": _SchemaReader.read_slice,
    "TypeNode": _SchemaReader.read_type,
    "FunctionNode": _SchemaReader.read_function,
    "ObjectNode": _SchemaReader.read_object,
    "NdArrayNode": _SchemaReader.read_ndarray,
    "DTypeNode": _SchemaReader.read_dtype,
}


# ------------------------------------------------- any other file: skops.io
def _load_with_skops(data: bytes) -> Any:
    """``data`` read by skops.io, its types checked against skops' own
    allow-list and :data:`TRUSTED_PREPROCESSOR_TYPES`."""
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
        return sio.loads(data, trusted=list(TRUSTED_PREPROCESSOR_TYPES))
    except Exception as exc:
        raise ModelFileError(f"{PREPROCESSOR_NAME} is not readable: {exc}") from exc


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
