"""Safe persistence of fitted estimators: safetensors + JSON (+ skops), no pickle.

A saved model is four members, in a directory or in one zip file:

``model.json``
    The format name and version, the estimator class (one of an allow-list),
    its constructor parameters, the family (a name from
    :data:`autoglm_graph.families.FAMILIES` and its numeric parameters), and the
    fitted state that is not a tensor (feature names, classes with their
    dtype, history, the network's and trainer's configuration, ...).
``tensors.safetensors``
    Every tensor: the global GLM, the network's ``state_dict``, the training
    rows and the cached source states that prediction needs. safetensors is a
    header plus raw buffers; reading it cannot run code.
``preprocessor.skops``
    The fitted :class:`~autoglm_graph.preprocessing.TabularPreprocessor`, in
    skops' format (a zip of JSON and ``.npy`` arrays, read without pickle).
``checksums.sha256``
    The sha256 of the other three, as ``sha256sum`` writes them: a damaged
    byte anywhere is refused before anything is parsed.

Loading executes nothing taken from the files: class and family names are
looked up in fixed dictionaries, the skops file may only hold scikit-learn's
own types plus the four pinned in :data:`TRUSTED_PREPROCESSOR_TYPES`, every
tensor's name and shape is checked against what the JSON configuration
implies, and anything unexpected raises :class:`ModelFileError`. Loading is
bounded: each member's size is checked before it is read
(:data:`MAX_MEMBER_BYTES`), zip members that inflate too much, duplicated or
encrypted ones are refused, ``model.json`` may nest only :data:`MAX_JSON_DEPTH`
levels, and the network's configuration must fit the stored tensors before a
module is built.

Why skops for the preprocessing, rather than re-creating it from JSON: the
fitted ``ColumnTransformer``/``OneHotEncoder``/``MissingIndicator`` keep much
of their state in private attributes (``_infrequent_enabled``,
``_default_to_infrequent_mappings``, ``_columns``, ``_n_features``, ...)
that change between scikit-learn releases. Re-creating them by hand would tie
the format to those internals; skops' loaders follow scikit-learn's releases
and reconstruct only allow-listed types, which is the safety we need.
"""

from __future__ import annotations

import ctypes
import dataclasses
import errno
import hashlib
import hmac
import io
import json
import os
import secrets
import shutil
import warnings
import zipfile
import zlib
from pathlib import Path
from typing import Any

import numpy as np
import skops.io as sio
import torch
from safetensors.torch import load as st_load
from safetensors.torch import save as st_save
from sklearn.preprocessing import LabelEncoder
from sklearn.utils.validation import check_is_fitted

from . import modules
from ._glm import GlobalGLM
from ._validation import resolve_device
from .estimators import GraphGLMClassifier, GraphGLMRegressor
from .families import FAMILIES, Family, get_family
from .modules import CONVS, GraphGLMNet, SourceStates
from .preprocessing import TabularPreprocessor
from .training import GraphConfig, RowData, Trainer

__all__ = [
    "FORMAT_NAME",
    "FORMAT_VERSION",
    "MAX_COMPRESSION_RATIO",
    "MAX_MEMBER_BYTES",
    "TRUSTED_PREPROCESSOR_TYPES",
    "ModelFileError",
    "check_save_path",
    "load_model",
    "save_model",
]

FORMAT_NAME = "autoglm_graph.model"
FORMAT_VERSION = 2
"""Version of the layout written by :func:`save_model`; :func:`load_model`
reads exactly this version (2 added ``checksums.sha256`` and
``fitted.offset_used_``)."""

JSON_NAME = "model.json"
TENSORS_NAME = "tensors.safetensors"
PREPROCESSOR_NAME = "preprocessor.skops"
CHECKSUMS_NAME = "checksums.sha256"
_MEMBERS = (JSON_NAME, TENSORS_NAME, PREPROCESSOR_NAME)
_ALL_MEMBERS = (*_MEMBERS, CHECKSUMS_NAME)
# What a directory that save() may replace can hold (format 1 had no checksums).
_MEMBERS_WRITTEN = frozenset(_ALL_MEMBERS)

#: Largest size in bytes of each member that :func:`load_model` reads; a
#: larger (or larger-claimed) member is refused before it is read. Change the
#: entries to load bigger models.
MAX_MEMBER_BYTES: dict[str, int] = {
    JSON_NAME: 256 * 2**20,  # string row labels of a few million rows
    TENSORS_NAME: 64 * 2**30,
    PREPROCESSOR_NAME: 256 * 2**20,
    CHECKSUMS_NAME: 4096,
}
#: A zip member that inflates more than this many times is refused (a zip
#: bomb); the model's own members compress at most ~10 times.
MAX_COMPRESSION_RATIO = 200
#: Deepest nesting of lists and objects in ``model.json`` (its own is ~5).
MAX_JSON_DEPTH = 32
#: Largest ``num_layers`` and ``heads`` a file may ask for (the tensors bound
#: the widths; these bound the modules built before the tensors are checked).
MAX_LAYERS = 256

#: The estimator classes a file may name (the allow-list; nothing is imported).
ESTIMATORS: dict[str, type] = {
    "GraphGLMRegressor": GraphGLMRegressor,
    "GraphGLMClassifier": GraphGLMClassifier,
}

#: Types outside skops' own scikit-learn/numpy allow-list that a fitted
#: TabularPreprocessor contains: the class itself, the two module-level
#: functions of its FunctionTransformers, and numpy's dtype.
TRUSTED_PREPROCESSOR_TYPES: tuple[str, ...] = (
    "autoglm_graph.preprocessing.TabularPreprocessor",
    "autoglm_graph.preprocessing._as_object_with_nan",
    "autoglm_graph.preprocessing._as_str",
    "numpy.dtype",
)

_SCALARS = (type(None), bool, int, float, str)
# Trainer fields that are not configuration: rebuilt on load.
_TRAINER_SKIP = {"net", "family", "callbacks", "history", "neighbor_cache", "graph"}
# dtype kinds of classes_ and row labels that a file may ask for.
_LABEL_KINDS = set("biufUO")


class ModelFileError(ValueError):
    """A saved model that cannot be loaded: wrong format or version, a
    tampered or truncated member, or a tensor that does not fit the
    configuration."""


# ---------------------------------------------------------------------- save
def save_model(model, path: str | os.PathLike) -> Path:
    """Save a fitted GraphGLM estimator without pickle.

    Parameters
    ----------
    model : GraphGLMRegressor or GraphGLMClassifier
        A fitted estimator.
    path : str or path-like
        A path ending in ``.zip`` gives one zip file; any other path is a
        directory (created if needed) holding ``model.json``,
        ``tensors.safetensors``, ``preprocessor.skops`` and
        ``checksums.sha256``.

    Returns
    -------
    Path
        The path written.

    Notes
    -----
    ``callbacks`` cannot be saved (they are arbitrary objects): it is saved as
    None, with a warning when it was set. A ``RandomState`` instance as
    ``random_state`` is saved as None too. Tensors are saved from the CPU.

    Saving over an existing model is atomic: the new model is written beside
    it under a hidden temporary name, flushed to disk (fsync), then renamed
    over it (a directory is swapped in one step where the system can: Linux
    ``renameat2``, macOS ``renamex_np``). A process killed at any moment
    leaves the old model or the new one, whole; at worst a hidden
    ``.NAME.*.tmp`` beside it, which can be deleted. An existing directory is
    replaced only if it holds nothing but a model's members. ``checksums.sha256``
    records the sha256 of every member (``sha256sum -c`` checks a directory);
    loading verifies them. Nothing is written through a symbolic link: a link
    as the path, or as a member of the directory, raises ``ValueError``.

    Examples
    --------
    >>> import tempfile, numpy as np
    >>> from autoglm_graph import GraphGLMRegressor, load
    >>> X = np.random.default_rng(0).normal(size=(50, 2)); y = X[:, 0]
    >>> model = GraphGLMRegressor(local_penalty=np.inf).fit(X, y)
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     same = load(model.save(f"{tmp}/model.zip"))
    >>> bool(np.array_equal(same.predict(X), model.predict(X)))
    True
    """
    name = type(model).__name__
    if ESTIMATORS.get(name) is not type(model):
        raise TypeError(
            f"save_model saves GraphGLMRegressor and GraphGLMClassifier; got {name}."
        )
    check_is_fitted(model, "global_glm_")
    config, tensors = _model_state(model)
    members = {
        JSON_NAME: json.dumps(config, indent=1).encode("utf-8"),
        TENSORS_NAME: st_save(tensors),
        PREPROCESSOR_NAME: sio.dumps(model.preprocessor_),
    }
    members[CHECKSUMS_NAME] = _checksums(members).encode("ascii")
    path = Path(path)
    if path.suffix.lower() == ".zip":
        _replace_zip(path, members)
    else:
        _replace_directory(path, members)
    return path


def _checksums(members: dict[str, bytes]) -> str:
    """``sha256sum`` lines of the members (``sha256sum -c`` checks a directory)."""
    return "".join(
        f"{hashlib.sha256(members[name]).hexdigest()}  {name}\n" for name in _MEMBERS
    )


# Saving over a model is atomic: the new model is written beside the old one (a
# temporary name in the same directory, so on the same file system), flushed to
# disk, then renamed over it in one step. A kill at any moment leaves the old
# model or the new one, never a mix; at worst a hidden ``.NAME.*.tmp`` is left.
def _refuse_link(path: Path, what: str) -> None:
    if path.is_symlink():
        raise ValueError(
            f"{what} {path} is a symbolic link; save() never writes through a "
            "link (it could overwrite a file outside the model). Remove the "
            "link or save to another path."
        )


def _temp_name(path: Path) -> Path:
    return path.with_name(f".{path.name}.{secrets.token_hex(6)}.tmp")


def _write_new_file(path: Path, data: bytes) -> None:
    # O_EXCL | O_NOFOLLOW: a fresh file, never an existing one or a link's target.
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    fd = os.open(path, flags | getattr(os, "O_BINARY", 0), 0o666)
    with open(fd, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def _fsync_directory(path: Path) -> None:
    """Make a rename in ``path`` durable (not possible on every platform)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def check_save_path(path: str | os.PathLike) -> Path:
    """Refuse now a path that :func:`save_model` would refuse after the work.

    Parameters
    ----------
    path : str or path-like
        Where a model is to be saved.

    Returns
    -------
    Path

    Raises
    ------
    ValueError
        When the path (or a member of the directory) is a symbolic link, a
        ``.zip`` path is a directory, or a directory path is a file or a
        directory holding anything but a saved model.
    """
    path = Path(path)
    if path.suffix.lower() == ".zip":
        _refuse_link(path, "The model file")
        if path.is_dir():
            raise ValueError(
                f"{path} is a directory; a .zip model path must be a file."
            )
    else:
        _refuse_link(path, "The model directory")
        if path.exists():
            _check_replaceable(path)
    return path


def _replace_zip(path: Path, members: dict[str, bytes]) -> None:
    check_save_path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for member, data in members.items():
            zf.writestr(member, data)
    tmp = _temp_name(path)
    try:
        _write_new_file(tmp, buffer.getvalue())
        os.replace(tmp, path)  # atomic on POSIX and Windows
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _fsync_directory(path.parent)


def _replace_directory(path: Path, members: dict[str, bytes]) -> None:
    check_save_path(path)
    exists = path.exists()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = _temp_name(path)
    os.mkdir(tmp, 0o777)  # the umask applies, as it does to a plain mkdir
    try:
        for member, data in members.items():
            _write_new_file(tmp / member, data)
        _fsync_directory(tmp)
        if exists:
            _exchange(tmp, path)  # tmp now holds the old model
            shutil.rmtree(tmp)
        else:
            os.rename(tmp, path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    _fsync_directory(path.parent)


def _check_replaceable(path: Path) -> None:
    """Saving replaces the directory whole: it may hold a model and nothing else."""
    if not path.is_dir():
        raise ValueError(
            f"{path} exists and is not a directory; a model directory cannot "
            "replace it (a path ending in .zip saves one file)."
        )
    for entry in os.scandir(path):
        if entry.is_symlink():
            raise ValueError(
                f"The model directory member {entry.path} is a symbolic link; "
                "save() never writes through a link. Remove it first."
            )
        if entry.name not in _MEMBERS_WRITTEN or not entry.is_file():
            raise ValueError(
                f"{path} holds {entry.name!r}, which is not part of a saved model; "
                "save() replaces the directory whole and would delete it. Save "
                "to a new or empty directory."
            )


def _exchange(a: Path, b: Path) -> None:
    """Swap two directories in one atomic step (Linux renameat2, macOS
    renamex_np); elsewhere two renames, with a short window without ``b``."""
    swap = _atomic_swap()
    if swap is not None:
        if swap(os.fsencode(a), os.fsencode(b)) == 0:
            return
        err = ctypes.get_errno()
        if err not in (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP):
            raise OSError(err, os.strerror(err), str(a), None, str(b))
    # A file system without an atomic swap: the old model is renamed aside
    # first, so a kill in between leaves it whole under that name.
    aside = _temp_name(b)
    os.rename(b, aside)
    os.rename(a, b)
    os.rename(aside, a)


def _atomic_swap():
    try:
        libc = ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None
    renameat2 = getattr(libc, "renameat2", None)  # glibc >= 2.28
    if renameat2 is not None:
        at_fdcwd, rename_exchange = -100, 2
        return lambda a, b: renameat2(at_fdcwd, a, at_fdcwd, b, rename_exchange)
    renamex_np = getattr(libc, "renamex_np", None)
    if renamex_np is not None:
        rename_swap = 2
        return lambda a, b: renamex_np(a, b, rename_swap)
    return None


def _model_state(model) -> tuple[dict, dict[str, torch.Tensor]]:
    tensors: dict[str, torch.Tensor] = {}

    def put(key: str, value) -> None:
        tensor = torch.as_tensor(value).detach().to("cpu")
        tensors[key] = tensor.contiguous().clone()  # no shared storage

    glm = model.global_glm_
    put("global_glm.coef", np.asarray(glm.coef, dtype=np.float64))
    put("global_glm.intercept", np.asarray(glm.intercept, dtype=np.float64))
    fitted: dict[str, Any] = {
        "n_features_in_": int(model.n_features_in_),
        "feature_names_out_": [str(n) for n in model.feature_names_out_],
        "is_global_only_": bool(model.is_global_only_),
        "global_only_reason_": model.global_only_reason_,
        "history_": _plain(model.history_),
        "n_iter_": int(model.n_iter_),
        "offset_used_": bool(getattr(model, "offset_used_", False)),
        "device_": str(model.device_),
        "global_glm": {"n_iter": int(glm.n_iter), "converged": bool(glm.converged)},
    }
    if hasattr(model, "feature_names_in_"):
        fitted["feature_names_in_"] = [str(n) for n in model.feature_names_in_]
    for key in (
        "best_epoch_",
        "validation_gain_",
        "validation_gain_se_",
        "balance_correction_",
    ):
        if hasattr(model, key):
            fitted[key] = _plain(getattr(model, key))
    if hasattr(model, "classes_"):
        fitted["classes_"] = _labels_to_json(model.classes_, "classes_")
    train_index = getattr(model, "_train_index", None)
    if train_index is not None:
        fitted["train_index"] = _labels_to_json(train_index, "train_index", put)
    if model.network_ is not None:
        fitted["network"] = _network_state(model, put)
    config = {
        "format": FORMAT_NAME,
        "format_version": FORMAT_VERSION,
        "estimator": type(model).__name__,
        "versions": _versions(),
        "params": _params_to_json(model),
        "family": {"name": model.family_.name, "params": model.family_._params()},
        "fitted": fitted,
    }
    return config, tensors


def _network_state(model, put) -> dict:
    net, trainer, rows = model.network_, model._trainer, model._train_rows
    for key, value in net.state_dict().items():
        put(f"network.{key}", value)
    present = []
    for field in dataclasses.fields(RowData):
        value = getattr(rows, field.name)
        if value is not None:
            put(f"train_rows.{field.name}", value)
            present.append(field.name)
    states = model._source_states
    for layer, value in enumerate(states.layers):
        put(f"source_states.layers.{layer}", value)
    put("source_states.pooled", states.pooled)
    put("source_states.embedding", states.embedding)
    put("train_positions", np.asarray(model._train_positions, dtype=np.int64))
    trainer_config = {}
    for f in dataclasses.fields(Trainer):
        value = getattr(trainer, f.name)
        if f.name in _TRAINER_SKIP:
            continue
        if isinstance(value, _SCALARS):
            trainer_config[f.name] = value
        else:
            warnings.warn(
                f"The trainer's {f.name}={value!r} is not saved; the loaded model "
                "uses its default.",
                UserWarning,
                stacklevel=5,
            )
    trainer_config["graph"] = dataclasses.asdict(trainer.graph)
    net_config = {
        "in_channels": net.in_channels,
        "out_channels": net.out_channels,
        "hidden_channels": net.hidden_channels,
        "heads": net.heads,
        "num_layers": net.num_layers,
        "target_channels": net.target_channels,
        "dropout": net.dropout,
        "conv": net.conv,
    }
    if hasattr(net, "message_passing"):
        net_config["message_passing"] = net.message_passing
    return {
        "net": net_config,
        "trainer": trainer_config,
        "train_rows": present,
        "n_train": int(rows.y.shape[0]),
    }


def _params_to_json(model) -> dict:
    params = model.get_params(deep=False)
    if params.get("callbacks"):
        warnings.warn(
            "callbacks cannot be saved (they are arbitrary objects); the saved "
            "model has callbacks=None.",
            UserWarning,
            stacklevel=4,
        )
    params["callbacks"] = None
    if not isinstance(params.get("random_state"), (type(None), int, np.integer)):
        warnings.warn(
            "A RandomState instance cannot be saved; the saved model has "
            "random_state=None.",
            UserWarning,
            stacklevel=4,
        )
        params["random_state"] = None
    if isinstance(params.get("family"), Family):
        family = params["family"]
        params["family"] = {"name": family.name, "params": family._params()}
    out = {}
    for key, value in params.items():
        value = _plain(value)
        if not isinstance(value, (*_SCALARS, dict)):
            raise TypeError(f"The parameter {key}={value!r} cannot be saved.")
        out[key] = value
    return out


def _labels_to_json(values, what: str, put=None) -> dict:
    """Class labels or row labels with their dtype (numbers as a tensor when
    ``put`` is given and the labels are many)."""
    values = np.asarray(values)
    kind = values.dtype.kind
    if kind in "biuf":
        if put is not None:
            put(what, values)
            return {"dtype": values.dtype.str, "tensor": what}
        return {"dtype": values.dtype.str, "values": values.tolist()}
    if kind in "mM":  # datetimes as integers of their unit
        if put is not None:
            put(what, values.view(np.int64))
            return {"dtype": values.dtype.str, "tensor": what}
        return {"dtype": values.dtype.str, "values": values.view(np.int64).tolist()}
    items = values.tolist()
    if kind == "U" or all(isinstance(v, (str, int, float, bool)) for v in items):
        dtype = values.dtype.str if kind == "U" else "|O"
        return {"dtype": dtype, "values": [_plain(v) for v in items]}
    warnings.warn(
        f"The {what} labels of type {type(items[0]).__name__} are saved as strings.",
        UserWarning,
        stacklevel=4,
    )
    return {"dtype": "|O", "values": [str(v) for v in items]}


def _plain(value):
    """numpy scalars and containers -> JSON types (inf and NaN stay floats)."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, torch.Tensor) and value.numel() == 1:
        return value.item()
    if isinstance(value, _SCALARS):
        return value
    return str(value)


def _versions() -> dict:
    import sklearn
    import skops

    from . import __version__

    return {
        "autoglm_graph": __version__,
        "scikit-learn": sklearn.__version__,
        "torch": torch.__version__,
        "skops": skops.__version__,
    }


# ---------------------------------------------------------------------- load
def load_model(path: str | os.PathLike):
    """Load a model written by :func:`save_model` (or ``model.save``).

    Parameters
    ----------
    path : str or path-like
        The directory or zip file written by :func:`save_model`.

    Returns
    -------
    GraphGLMRegressor or GraphGLMClassifier
        The fitted estimator, on the device its ``device`` parameter resolves
        to (the CPU when that device is not available here).

    Raises
    ------
    ModelFileError
        For any bad file: a member missing, larger than its limit, damaged
        (its sha256 differs) or tampered with, a damaged or suspicious zip
        (duplicate, encrypted or zip-bomb members), a class or family outside
        the allow-lists, another format version, a setting ``fit`` would
        refuse or would not have made from the parameters, or tensors whose
        names or shapes do not fit the configuration.
    FileNotFoundError
        When nothing is at ``path``.
    """
    members = _read_members(Path(path))
    _verify_checksums(members)
    config = _parse_json(members[JSON_NAME])
    _check_header(config)
    try:
        tensors = st_load(members[TENSORS_NAME])
    except Exception as exc:  # safetensors' own error type is not a ValueError
        raise ModelFileError(
            f"{TENSORS_NAME} is not a readable safetensors file (truncated or "
            f"corrupted?): {exc}"
        ) from exc
    try:
        return _build(config, tensors, _load_preprocessor(members[PREPROCESSOR_NAME]))
    except ModelFileError:
        raise
    except (
        KeyError,
        TypeError,
        ValueError,
        IndexError,
        AttributeError,
        RuntimeError,  # RecursionError included
        OverflowError,
        MemoryError,
    ) as exc:
        raise ModelFileError(f"The saved model is inconsistent: {exc!r}") from exc


def _read_members(path: Path) -> dict[str, bytes]:
    """The members' bytes, each bounded by :data:`MAX_MEMBER_BYTES` before it
    is read."""
    if path.is_dir():
        missing = [m for m in _ALL_MEMBERS if not (path / m).is_file()]
        if missing == [CHECKSUMS_NAME]:
            raise ModelFileError(
                f"{path} lacks {CHECKSUMS_NAME}: it was saved in format version 1 "
                f"(autoglm_graph 0.1 before checksums) or damaged; this version "
                f"reads format version {FORMAT_VERSION}."
            )
        if missing:
            raise ModelFileError(f"{path} lacks {', '.join(missing)}.")
        return {m: _read_file(path / m, m) for m in _ALL_MEMBERS}
    if not path.exists():
        raise FileNotFoundError(f"No saved model at {path}.")
    limit = sum(MAX_MEMBER_BYTES[m] for m in _ALL_MEMBERS)
    if path.stat().st_size > limit:
        raise ModelFileError(f"{path} is larger than a model may be ({limit} bytes).")
    try:
        if not zipfile.is_zipfile(path):
            raise ModelFileError(f"{path} is neither a model directory nor a zip file.")
        with zipfile.ZipFile(path) as zf:
            infos = _checked_infos(zf, f"{path}", _ALL_MEMBERS, limit)
            return {m: _read_zip_member(zf, infos[m]) for m in _ALL_MEMBERS}
    except ModelFileError:
        raise
    except (
        zipfile.BadZipFile,
        zlib.error,
        NotImplementedError,  # an unsupported compression method
        RuntimeError,  # an encrypted member
        OSError,
        EOFError,
        ValueError,
        OverflowError,
    ) as exc:
        raise ModelFileError(f"{path} is a damaged zip file: {exc!r}") from exc


def _read_file(path: Path, member: str) -> bytes:
    limit = MAX_MEMBER_BYTES[member]
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size > limit:
            raise ModelFileError(
                f"{path} has {size} bytes; {member} may have at most {limit} "
                "(autoglm_graph.io.MAX_MEMBER_BYTES)."
            )
        data = f.read(size + 1)  # +1: notice a file that grew meanwhile
    if len(data) > limit:
        raise ModelFileError(f"{path} is larger than {limit} bytes.")
    return data


def _checked_infos(
    zf: zipfile.ZipFile, where: str, expected: tuple[str, ...] | None, total: int
) -> dict[str, zipfile.ZipInfo]:
    """The members of a zip, refused if duplicated, unexpected, encrypted,
    compressed by an unknown method, too large (a model member beyond its
    :data:`MAX_MEMBER_BYTES`, all together beyond ``total``) or inflating too
    much."""
    infos = zf.infolist()
    names = [info.filename for info in infos]
    if len(names) != len(set(names)):
        duplicated = sorted({n for n in names if names.count(n) > 1})
        raise ModelFileError(f"{where} holds duplicate members: {duplicated}.")
    if expected is not None and set(names) != set(expected):
        raise ModelFileError(
            f"{where} must hold exactly {', '.join(expected)}; got "
            f"{', '.join(sorted(names))}."
        )
    inflated = 0
    for info in infos:
        limit = MAX_MEMBER_BYTES.get(info.filename, total) if expected else total
        if info.flag_bits & 0x1:
            raise ModelFileError(f"{where}: {info.filename} is encrypted.")
        if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
            raise ModelFileError(
                f"{where}: {info.filename} uses compression method "
                f"{info.compress_type}; only stored and deflated are read."
            )
        if info.file_size > limit:
            raise ModelFileError(
                f"{where}: {info.filename} claims {info.file_size} bytes; at most "
                f"{limit} are read (autoglm_graph.io.MAX_MEMBER_BYTES)."
            )
        if info.file_size > 2**20 and (
            info.file_size > MAX_COMPRESSION_RATIO * max(info.compress_size, 1)
        ):
            raise ModelFileError(
                f"{where}: {info.filename} inflates {info.compress_size} bytes to "
                f"{info.file_size} (more than {MAX_COMPRESSION_RATIO} times): a "
                "zip bomb?"
            )
        inflated += info.file_size
        if inflated > total:
            raise ModelFileError(f"{where} inflates to more than {total} bytes.")
    return {info.filename: info for info in infos}


def _read_zip_member(zf: zipfile.ZipFile, info: zipfile.ZipInfo) -> bytes:
    # Read at most the size checked above, whatever the stream holds.
    with zf.open(info) as f:
        data = f.read(info.file_size + 1)
    if len(data) != info.file_size:
        raise ModelFileError(
            f"{info.filename} holds {len(data)} bytes, not the {info.file_size} "
            "its zip header says."
        )
    return data


def _verify_checksums(members: dict[str, bytes]) -> None:
    """Every member's sha256 against ``checksums.sha256``: a damaged byte
    anywhere is refused before anything is parsed."""
    try:
        lines = members[CHECKSUMS_NAME].decode("ascii").splitlines()
    except UnicodeDecodeError as exc:
        raise ModelFileError(f"{CHECKSUMS_NAME} is damaged: {exc}") from exc
    recorded = {}
    for line in lines:
        digest, sep, name = line.partition("  ")
        if not sep or len(digest) != 64 or name not in _MEMBERS or name in recorded:
            raise ModelFileError(f"{CHECKSUMS_NAME} has a bad line: {line!r}.")
        recorded[name] = digest
    if set(recorded) != set(_MEMBERS):
        raise ModelFileError(
            f"{CHECKSUMS_NAME} must list {', '.join(_MEMBERS)}; got "
            f"{', '.join(sorted(recorded)) or 'nothing'}."
        )
    for name in _MEMBERS:
        actual = hashlib.sha256(members[name]).hexdigest()
        if not hmac.compare_digest(actual, recorded[name]):
            raise ModelFileError(
                f"{name} does not match its sha256 in {CHECKSUMS_NAME}: the model "
                "file is damaged (or was edited)."
            )


def _parse_json(data: bytes) -> dict:
    try:
        config = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        # ValueError: bad JSON, or an integer of more than 4300 digits.
        raise ModelFileError(f"{JSON_NAME} is not valid JSON: {exc!r}") from exc
    _check_depth(config, MAX_JSON_DEPTH)
    return config


def _check_depth(value, limit: int) -> None:
    """Refuse JSON nested deeper than ``limit`` (iteratively: no recursion)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            if depth > limit:
                raise ModelFileError(
                    f"{JSON_NAME} is nested more than {limit} levels deep."
                )
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in children)


def _check_header(config) -> None:
    if not isinstance(config, dict) or config.get("format") != FORMAT_NAME:
        raise ModelFileError(f"{JSON_NAME} is not an {FORMAT_NAME} file.")
    version = config.get("format_version")
    if type(version) is not int or version != FORMAT_VERSION:
        raise ModelFileError(
            f"The model file has format version {version!r}; this version of "
            f"autoglm_graph reads version {FORMAT_VERSION}."
        )


def _load_preprocessor(data: bytes) -> TabularPreprocessor:
    # The skops file is a zip too: bound what skops would inflate.
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as zf:
            limit = MAX_MEMBER_BYTES[PREPROCESSOR_NAME]
            _checked_infos(zf, PREPROCESSOR_NAME, None, limit)
    except (zipfile.BadZipFile, OSError, ValueError, EOFError) as exc:
        if isinstance(exc, ModelFileError):
            raise
        raise ModelFileError(f"{PREPROCESSOR_NAME} is not readable: {exc}") from exc
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


def _build(config: dict, tensors: dict[str, torch.Tensor], preprocessor):
    name = config.get("estimator")
    if not isinstance(name, str) or name not in ESTIMATORS:
        raise ModelFileError(
            f"Unknown estimator {name!r}; expected one of {', '.join(ESTIMATORS)}."
        )
    cls = ESTIMATORS[name]
    model = cls(**_params_from_json(cls, config.get("params")))
    model._validate_params()
    fitted = config["fitted"]
    if not isinstance(fitted, dict):
        raise ModelFileError("fitted must be a JSON object.")
    family = _family_from_json(config.get("family"))
    try:
        device = resolve_device(model.device)
    except ValueError:  # e.g. saved on a GPU machine, loaded where there is none
        device = torch.device("cpu")
    expected = _expected_shapes(fitted, tensors, family, model)
    _check_tensors(tensors, expected)
    model.family_ = family
    model.device_ = device
    model.preprocessor_ = preprocessor
    model.n_features_in_ = _int(fitted["n_features_in_"], "n_features_in_", low=1)
    if model.n_features_in_ != getattr(preprocessor, "n_features_in_", None):
        raise ModelFileError(
            f"n_features_in_={model.n_features_in_} is not the preprocessor's "
            f"{getattr(preprocessor, 'n_features_in_', None)}."
        )
    if "feature_names_in_" in fitted:
        model.feature_names_in_ = np.asarray(
            _str_list(fitted["feature_names_in_"]), dtype=object
        )
        if len(model.feature_names_in_) != model.n_features_in_:
            raise ModelFileError("feature_names_in_ has n_features_in_ names.")
    model.feature_names_out_ = np.asarray(
        _str_list(fitted["feature_names_out_"]), dtype=object
    )
    if list(preprocessor.get_feature_names_out()) != list(model.feature_names_out_):
        raise ModelFileError(
            f"{PREPROCESSOR_NAME} does not produce the features of {JSON_NAME}."
        )
    if "classes_" in fitted:
        if cls is not GraphGLMClassifier:
            raise ModelFileError("Only a classifier has classes_.")
        model.classes_ = _labels_from_json(fitted["classes_"], tensors, "classes_")
        model._label_encoder = LabelEncoder()
        model._label_encoder.classes_ = model.classes_
        n_classes = len(model.classes_)
        n_outputs = tensors["global_glm.coef"].shape[0]
        if n_classes < 2 or n_outputs != (1 if n_classes == 2 else n_classes):
            raise ModelFileError(
                f"{n_classes} classes do not fit {n_outputs} linear predictor(s)."
            )
    elif cls is GraphGLMClassifier:
        raise ModelFileError("A saved classifier must have classes_.")
    glm_info = fitted["global_glm"]
    glm = GlobalGLM(
        coef=tensors["global_glm.coef"].numpy().copy(),
        intercept=tensors["global_glm.intercept"].numpy().copy(),
        n_iter=_int(glm_info["n_iter"], "global_glm.n_iter", low=0),
        converged=_bool(glm_info["converged"], "global_glm.converged"),
    )
    model.global_glm_ = glm
    model._set_global_coefficients(glm)
    model.is_global_only_ = _bool(fitted["is_global_only_"], "is_global_only_")
    reason = fitted["global_only_reason_"]
    if reason is not None and not isinstance(reason, str):
        raise ModelFileError(f"global_only_reason_ must be a string; got {reason!r}.")
    model.global_only_reason_ = reason
    model.history_ = _history(fitted["history_"])
    model.n_iter_ = _int(fitted["n_iter_"], "n_iter_", low=0)
    model.offset_used_ = _bool(fitted["offset_used_"], "offset_used_")
    if "best_epoch_" in fitted:
        model.best_epoch_ = _int(fitted["best_epoch_"], "best_epoch_", low=0)
    for key in ("validation_gain_", "validation_gain_se_", "balance_correction_"):
        if key in fitted:
            setattr(model, key, _number(fitted[key], key))
    model._train_index = (
        _labels_from_json(fitted["train_index"], tensors, "train_index")
        if "train_index" in fitted
        else None
    )
    model.network_ = None
    model._train_positions = None
    if "network" in fitted:
        _restore_network(model, fitted["network"], tensors, device)
    elif not model.is_global_only_:
        raise ModelFileError("A model that is not global-only needs its network.")
    return model


def _params_from_json(cls, params) -> dict:
    if not isinstance(params, dict):
        raise ModelFileError("params must be a JSON object.")
    allowed = cls().get_params(deep=False)
    unknown = sorted(set(params) - set(allowed))
    if unknown:
        raise ModelFileError(
            f"Unknown parameter(s) of {cls.__name__}: {', '.join(unknown)}."
        )
    out = {}
    for key, value in params.items():
        if key == "family" and isinstance(value, dict):
            value = _family_from_json(value)
        elif not isinstance(value, _SCALARS):
            raise ModelFileError(
                f"The parameter {key!r} must be a number, string, bool or null; "
                f"got {value!r}."
            )
        out[key] = value
    if isinstance(out.get("family"), str):
        get_family(out["family"])  # a registry lookup; unknown names raise
    if out.get("callbacks") is not None:
        raise ModelFileError("callbacks cannot be loaded; it must be null.")
    for key, high in _PARAM_BOUNDS.items():
        value = out.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > high:
            raise ModelFileError(
                f"The parameter {key}={value} is beyond what a model file may ask "
                f"for ({high})."
            )
    return out


# Parameters whose size the machine pays at prediction, beyond what fit
# checks: n_jobs threads are allocated (1e9 of them: a 216 GB allocation).
_PARAM_BOUNDS = {"n_jobs": 4096}


def _family_from_json(spec) -> Family:
    """A family from the fixed registry; its parameters must be plain numbers."""
    if not isinstance(spec, dict) or not isinstance(spec.get("name"), str):
        raise ModelFileError(
            f"A family must be {{'name': ..., 'params': ...}}; got {spec!r}."
        )
    name, params = spec["name"], spec.get("params", {})
    if name not in FAMILIES:
        raise ModelFileError(
            f"Unknown family {name!r}; expected one of {', '.join(sorted(FAMILIES))}."
        )
    if not isinstance(params, dict) or not all(
        isinstance(v, (int, float)) and not isinstance(v, bool) for v in params.values()
    ):
        raise ModelFileError(f"Family parameters must be numbers; got {params!r}.")
    try:
        family = FAMILIES[name](**params)
    except TypeError as exc:
        raise ModelFileError(f"Bad parameters of the {name} family: {exc}") from exc
    return family


def _expected_shapes(
    fitted: dict, tensors: dict[str, torch.Tensor], family: Family, model
) -> dict[str, tuple]:
    """Name -> shape (None: any size) of every tensor the configuration implies."""
    p = len(fitted["feature_names_out_"])
    coef = tensors.get("global_glm.coef")
    n_outputs = 1 if coef is None or coef.ndim != 2 else int(coef.shape[0])
    if (family.name == "multinomial") != (n_outputs > 1):
        raise ModelFileError(
            f"The {family.name} family does not fit {n_outputs} linear predictors."
        )
    expected: dict[str, tuple] = {
        "global_glm.coef": (n_outputs, p),
        "global_glm.intercept": (n_outputs,),
    }
    for key in ("classes_", "train_index"):
        spec = fitted.get(key)
        if isinstance(spec, dict) and "tensor" in spec:
            if spec["tensor"] != key:
                raise ModelFileError(f"{key} must be stored in the tensor {key!r}.")
            expected[key] = (None,)
    network = fitted.get("network")
    if network is None:
        return expected
    if not isinstance(network, dict):
        raise ModelFileError("fitted.network must be a JSON object.")
    _check_net_config(network["net"], model, tensors)
    spec = network["net"]
    if spec["in_channels"] != p or spec["out_channels"] != (p + 1) * n_outputs:
        raise ModelFileError(
            f"The network maps {spec['in_channels']} -> {spec['out_channels']} "
            f"channels; the design has {p} features and {n_outputs} output(s)."
        )
    net = _make_net(spec)
    for key, value in net.state_dict().items():
        expected[f"network.{key}"] = tuple(value.shape)
    n = _int(network["n_train"], "n_train")
    y_shape = (n,) if n_outputs == 1 else (n, n_outputs)
    rows = {
        "context": (n, p),
        "design": (n, p),
        "y": y_shape,
        "weight": (n,),
        "eta_global": (n, n_outputs),
        "targets": (n, net.target_channels),
        "group": (n,),
    }
    present = network["train_rows"]
    required = {"context", "design", "y", "weight", "eta_global"}
    if net.target_channels:
        required.add("targets")
    if not required <= set(present) or not set(present) <= set(rows):
        raise ModelFileError(f"train_rows lists {present!r}.")
    for field in present:
        expected[f"train_rows.{field}"] = rows[field]
    hidden = net.hidden_channels
    for layer in range(net.num_layers):
        width = hidden + (net.target_channels if layer == net.num_layers - 1 else 0)
        expected[f"source_states.layers.{layer}"] = (n, width)
    expected["source_states.pooled"] = (hidden,)
    expected["source_states.embedding"] = (n, hidden)
    expected["train_positions"] = (n,)
    return expected


def _check_tensors(tensors: dict[str, torch.Tensor], expected: dict) -> None:
    missing = sorted(set(expected) - set(tensors))
    extra = sorted(set(tensors) - set(expected))
    if missing or extra:
        raise ModelFileError(
            f"{TENSORS_NAME} does not match model.json: missing "
            f"{missing or 'none'}, unexpected {extra or 'none'}."
        )
    for key, shape in expected.items():
        got = tuple(tensors[key].shape)
        if len(got) != len(shape) or any(
            s is not None and s != g for s, g in zip(shape, got, strict=True)
        ):
            raise ModelFileError(
                f"The tensor {key!r} has shape {got}; the configuration implies "
                f"{tuple('*' if s is None else s for s in shape)}."
            )
    for key in ("train_positions", "train_rows.group"):
        if key in tensors and tensors[key].is_floating_point():
            raise ModelFileError(f"The tensor {key!r} must hold integers.")


def _check_net_config(spec, model, tensors: dict[str, torch.Tensor]) -> None:
    """The network's configuration is the estimator's (as ``fit`` builds it)
    and fits the stored tensors, checked before any module is built: a file
    cannot make loading build a huge network."""
    if not isinstance(spec, dict):
        raise ModelFileError("network.net must be a JSON object.")
    for key in ("hidden_channels", "heads", "num_layers", "conv", "dropout"):
        if spec.get(key) != getattr(model, key) or type(spec.get(key)) is bool:
            raise ModelFileError(
                f"The network's {key}={spec.get(key)!r} is not the estimator's "
                f"{key}={getattr(model, key)!r}."
            )
    if spec.get("message_passing", model.message_passing) != model.message_passing:
        raise ModelFileError(
            "The network's message_passing is not the estimator's "
            f"{model.message_passing!r}."
        )
    _int(spec["num_layers"], "num_layers", low=1, high=MAX_LAYERS)
    layers = sum(key.startswith("source_states.layers.") for key in tensors)
    pooled = tensors.get("source_states.pooled")
    if (
        layers != spec["num_layers"]
        or pooled is None
        or (tuple(pooled.shape) != (spec["hidden_channels"],))
    ):
        raise ModelFileError(
            f"The network (num_layers={spec['num_layers']}, hidden_channels="
            f"{spec['hidden_channels']}) does not fit the shapes of the stored "
            f"source states ({layers} layers, pooled of shape "
            f"{None if pooled is None else tuple(pooled.shape)})."
        )
    hidden = _int(spec["hidden_channels"], "hidden_channels", low=1)
    last = tensors.get(f"source_states.layers.{layers - 1}")
    width = int(last.shape[-1]) if last is not None and last.ndim == 2 else -1
    if _int(spec["target_channels"], "target_channels", low=0) != width - hidden:
        raise ModelFileError(
            f"target_channels={spec['target_channels']} does not fit the last "
            f"source state's width {width}."
        )
    n_in = _int(spec["in_channels"], "in_channels", low=1)
    n_out = _int(spec["out_channels"], "out_channels", low=1)
    # The weight matrices the network must have (a lower bound of its size)
    # against the network tensors really stored: the file pays for what it asks.
    needed = hidden * (n_in + hidden) + spec["num_layers"] * hidden * hidden
    needed += hidden * (2 * hidden + n_out)
    stored = sum(t.numel() for k, t in tensors.items() if k.startswith("network."))
    if stored < needed:
        raise ModelFileError(
            f"The network's configuration implies at least {needed} weights; "
            f"{TENSORS_NAME} stores {stored}."
        )
    if hidden % _int(spec["heads"], "heads", low=1, high=hidden):
        raise ModelFileError("heads must divide hidden_channels.")


# GraphConfig field -> the estimator parameter fit takes it from.
_GRAPH_PARAMS = {
    "space": "graph_space",
    "n_neighbors": "n_neighbors",
    "threshold": "threshold",
    "refresh": "graph_refresh",
    "backend": "graph_backend",
}


def _check_trainer_config(config: dict, graph: dict, model) -> None:
    """The trainer's settings are the estimator's parameters, as ``fit`` passes
    them (so they passed its validation): a file cannot change the threshold
    or slip a string into a number."""
    params = model.get_params(deep=False)
    pairs = [(f"trainer.{k}", v, k) for k, v in config.items()]
    pairs += [(f"graph.{k}", v, _GRAPH_PARAMS.get(k)) for k, v in graph.items()]
    defaults = {
        f.name: f.default for f in dataclasses.fields(Trainer) if f.name in config
    }
    for what, value, param in pairs:
        if what == "trainer.n_outputs":
            ok = type(value) is int and value == model._n_outputs
        elif what == "trainer.precision":
            ok = value in ("fp32", "bf16", "fp16") and (
                model.precision in ("auto", value)
            )
        elif what == "graph.backend" and model.graph_backend == "auto":
            ok = value in ("auto", "exact", "faiss")
        elif param in params:
            expected = params[param]
            ok = value == expected and (type(value) is bool) == (type(expected) is bool)
        else:  # a setting without a parameter: its default's type
            default = defaults.get(what.removeprefix("trainer."))
            ok = isinstance(default, _SCALARS) and type(value) is type(default)
        if not ok:
            raise ModelFileError(
                f"The saved {what}={value!r} is not what fit makes of the "
                "estimator's parameters."
            )


def _make_net(spec: dict) -> GraphGLMNet:
    if not isinstance(spec, dict):
        raise ModelFileError("network.net must be a JSON object.")
    if spec.get("conv") not in CONVS:
        raise ModelFileError(
            f"Unknown conv {spec.get('conv')!r}; expected one of {', '.join(CONVS)}."
        )
    ints = ("in_channels", "out_channels", "hidden_channels", "heads", "num_layers")
    kwargs = {k: _int(spec[k], k) for k in (*ints, "target_channels")}
    in_channels, out_channels = kwargs.pop("in_channels"), kwargs.pop("out_channels")
    if "message_passing" in spec:
        allowed = getattr(modules, "MESSAGE_PASSING", ())
        if spec["message_passing"] not in allowed:
            raise ModelFileError(
                f"Unknown message_passing {spec['message_passing']!r}; expected "
                f"one of {', '.join(allowed)}."
            )
        kwargs["message_passing"] = spec["message_passing"]
    # Building the net draws initial weights: keep the caller's torch RNG intact.
    with torch.random.fork_rng(devices=[]):
        return GraphGLMNet(
            in_channels,
            out_channels,
            dropout=_number(spec["dropout"], "dropout"),
            conv=spec["conv"],
            **kwargs,
        )


def _restore_network(model, network: dict, tensors, device: torch.device) -> None:
    net = _make_net(network["net"])
    state = {
        key[len("network.") :]: value
        for key, value in tensors.items()
        if key.startswith("network.")
    }
    net.load_state_dict(state, strict=True)
    net = net.to(device).eval()
    trainer_config = dict(network["trainer"])
    fields = {f.name for f in dataclasses.fields(Trainer)} - _TRAINER_SKIP
    unknown = set(trainer_config) - fields - {"graph"}
    if unknown or not all(
        isinstance(trainer_config[k], _SCALARS) for k in set(trainer_config) - {"graph"}
    ):
        raise ModelFileError(f"Bad trainer configuration: {sorted(trainer_config)}.")
    graph = trainer_config.pop("graph")
    graph_fields = {f.name for f in dataclasses.fields(GraphConfig)}
    if not isinstance(graph, dict) or set(graph) != graph_fields:
        raise ModelFileError(f"Bad graph configuration: {graph!r}.")
    _check_trainer_config(trainer_config, graph, model)
    trainer = Trainer(
        net=net,
        family=model.family_,
        graph=GraphConfig(**graph),
        callbacks=[],
        history=model.history_,
        neighbor_cache=None,
        **trainer_config,
    )
    trainer.selector = None
    on_device = lambda key: tensors[key].to(device)  # noqa: E731
    rows = {field: on_device(f"train_rows.{field}") for field in network["train_rows"]}
    n_layers = net.num_layers
    positions = tensors["train_positions"].numpy().astype(np.int64)
    if model._train_index is None or (
        len(positions)
        and not 0 <= positions.min() <= positions.max() < len(model._train_index)
    ):
        raise ModelFileError("train_positions do not index the training rows.")
    model.network_ = net
    model._trainer = trainer
    model._train_rows = RowData(**rows)
    model._source_states = SourceStates(
        layers=[on_device(f"source_states.layers.{i}") for i in range(n_layers)],
        pooled=on_device("source_states.pooled"),
        embedding=on_device("source_states.embedding"),
    )
    model._train_positions = positions


def _labels_from_json(spec, tensors, what: str) -> np.ndarray:
    if not isinstance(spec, dict) or not isinstance(spec.get("dtype"), str):
        raise ModelFileError(f"{what} must be {{'dtype': ..., 'values': ...}}.")
    try:
        dtype = np.dtype(spec["dtype"])
    except TypeError as exc:
        raise ModelFileError(f"Bad dtype of {what}: {spec['dtype']!r}.") from exc
    if dtype.kind not in _LABEL_KINDS | {"m", "M"}:
        raise ModelFileError(f"{what} may not have dtype {dtype}.")
    if "tensor" in spec:
        values = tensors[what].numpy()
    else:
        values = spec.get("values")
        if not isinstance(values, list) or not all(
            isinstance(v, (str, int, float, bool)) for v in values
        ):
            raise ModelFileError(f"{what} values must be a list of scalars.")
    if dtype.kind in "mM":
        return np.asarray(values, dtype=np.int64).view(dtype)
    if dtype.kind == "O":
        out = np.empty(len(values), dtype=object)
        out[:] = values
        return out
    return np.asarray(values, dtype=dtype)


def _int(value, what: str, low: int | None = None, high: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ModelFileError(f"{what} must be an integer; got {value!r}.")
    if (low is not None and value < low) or (high is not None and value > high):
        raise ModelFileError(
            f"{what} must be in [{low}, {'inf' if high is None else high}]; "
            f"got {value!r}."
        )
    return value


def _bool(value, what: str) -> bool:
    if not isinstance(value, bool):
        raise ModelFileError(f"{what} must be true or false; got {value!r}.")
    return value


def _history(history) -> list[dict]:
    """Per-epoch logs: a list of objects of scalars, as the training loop writes."""
    if not isinstance(history, list) or not all(
        isinstance(entry, dict) and all(isinstance(v, _SCALARS) for v in entry.values())
        for entry in history
    ):
        raise ModelFileError("history_ must be a list of objects of scalars.")
    return history


def _number(value, what: str):
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ModelFileError(f"{what} must be a number; got {value!r}.")
    return value


def _str_list(values) -> list[str]:
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
        raise ModelFileError("Feature names must be a list of strings.")
    return values
