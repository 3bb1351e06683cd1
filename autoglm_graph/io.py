"""Safe persistence of fitted estimators: safetensors + JSON (+ skops), no pickle.

A saved model is three members, in a directory or in one zip file:

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

Loading executes nothing taken from the files: class and family names are
looked up in fixed dictionaries, the skops file may only hold scikit-learn's
own types plus the four pinned in :data:`TRUSTED_PREPROCESSOR_TYPES`, every
tensor's name and shape is checked against what the JSON configuration
implies, and anything unexpected raises :class:`ModelFileError`.

Why skops for the preprocessing, rather than re-creating it from JSON: the
fitted ``ColumnTransformer``/``OneHotEncoder``/``MissingIndicator`` keep much
of their state in private attributes (``_infrequent_enabled``,
``_default_to_infrequent_mappings``, ``_columns``, ``_n_features``, ...)
that change between scikit-learn releases. Re-creating them by hand would tie
the format to those internals; skops' loaders follow scikit-learn's releases
and reconstruct only allow-listed types, which is the safety we need.
"""

from __future__ import annotations

import dataclasses
import json
import os
import warnings
import zipfile
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
    "TRUSTED_PREPROCESSOR_TYPES",
    "ModelFileError",
    "load_model",
    "save_model",
]

FORMAT_NAME = "autoglm_graph.model"
FORMAT_VERSION = 1
"""Version of the layout written by :func:`save_model`; :func:`load_model`
reads exactly this version."""

JSON_NAME = "model.json"
TENSORS_NAME = "tensors.safetensors"
PREPROCESSOR_NAME = "preprocessor.skops"
_MEMBERS = (JSON_NAME, TENSORS_NAME, PREPROCESSOR_NAME)

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
        ``tensors.safetensors`` and ``preprocessor.skops``.

    Returns
    -------
    Path
        The path written.

    Notes
    -----
    ``callbacks`` cannot be saved (they are arbitrary objects): it is saved as
    None, with a warning when it was set. A ``RandomState`` instance as
    ``random_state`` is saved as None too. Tensors are saved from the CPU.

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
    path = Path(path)
    if path.suffix.lower() == ".zip":
        path.parent.mkdir(parents=True, exist_ok=True)
        with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
            for member, data in members.items():
                zf.writestr(member, data)
    else:
        path.mkdir(parents=True, exist_ok=True)
        for member, data in members.items():
            (path / member).write_bytes(data)
    return path


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
        "device_": str(model.device_),
        "global_glm": {"n_iter": int(glm.n_iter), "converged": bool(glm.converged)},
    }
    if hasattr(model, "feature_names_in_"):
        fitted["feature_names_in_"] = [str(n) for n in model.feature_names_in_]
    for key in ("best_epoch_", "validation_gain_", "validation_gain_se_"):
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
        When a member is missing, truncated or tampered with, names a class or
        family outside the allow-lists, has another format version, or holds
        tensors whose names or shapes do not fit the configuration.
    """
    members = _read_members(Path(path))
    try:
        config = json.loads(members[JSON_NAME].decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ModelFileError(f"{JSON_NAME} is not valid JSON: {exc}") from exc
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
    except (KeyError, TypeError, ValueError, IndexError, RuntimeError) as exc:
        raise ModelFileError(f"The saved model is inconsistent: {exc!r}") from exc


def _read_members(path: Path) -> dict[str, bytes]:
    if path.is_dir():
        missing = [m for m in _MEMBERS if not (path / m).is_file()]
        if missing:
            raise ModelFileError(f"{path} lacks {', '.join(missing)}.")
        return {m: (path / m).read_bytes() for m in _MEMBERS}
    if not path.exists():
        raise FileNotFoundError(f"No saved model at {path}.")
    if not zipfile.is_zipfile(path):
        raise ModelFileError(f"{path} is neither a model directory nor a zip file.")
    with zipfile.ZipFile(path) as zf:
        names = set(zf.namelist())
        if names != set(_MEMBERS):
            raise ModelFileError(
                f"{path} must hold exactly {', '.join(_MEMBERS)}; got "
                f"{', '.join(sorted(names))}."
            )
        try:
            return {m: zf.read(m) for m in _MEMBERS}
        except (zipfile.BadZipFile, OSError, EOFError) as exc:
            raise ModelFileError(f"{path} is a damaged zip file: {exc}") from exc


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
    family = _family_from_json(config.get("family"))
    try:
        device = resolve_device(model.device)
    except ValueError:  # e.g. saved on a GPU machine, loaded where there is none
        device = torch.device("cpu")
    expected = _expected_shapes(fitted, tensors, family)
    _check_tensors(tensors, expected)
    model.family_ = family
    model.device_ = device
    model.preprocessor_ = preprocessor
    model.n_features_in_ = _int(fitted["n_features_in_"], "n_features_in_")
    if "feature_names_in_" in fitted:
        model.feature_names_in_ = np.asarray(
            _str_list(fitted["feature_names_in_"]), dtype=object
        )
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
        n_iter=_int(glm_info["n_iter"], "global_glm.n_iter"),
        converged=bool(glm_info["converged"]),
    )
    model.global_glm_ = glm
    model._set_global_coefficients(glm)
    model.is_global_only_ = bool(fitted["is_global_only_"])
    reason = fitted["global_only_reason_"]
    model.global_only_reason_ = None if reason is None else str(reason)
    model.history_ = list(fitted["history_"])
    model.n_iter_ = _int(fitted["n_iter_"], "n_iter_")
    for key in ("best_epoch_", "validation_gain_", "validation_gain_se_"):
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
    return out


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
    fitted: dict, tensors: dict[str, torch.Tensor], family: Family
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
    net = _make_net(network["net"])
    if net.in_channels != p or net.out_channels != (p + 1) * n_outputs:
        raise ModelFileError(
            f"The network maps {net.in_channels} -> {net.out_channels} channels; "
            f"the design has {p} features and {n_outputs} output(s)."
        )
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


def _int(value, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ModelFileError(f"{what} must be an integer; got {value!r}.")
    return value


def _number(value, what: str):
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ModelFileError(f"{what} must be a number; got {value!r}.")
    return value


def _str_list(values) -> list[str]:
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
        raise ModelFileError("Feature names must be a list of strings.")
    return values
