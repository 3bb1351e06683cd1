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
encrypted ones are refused, ``model.json`` may nest only ``MAX_JSON_DEPTH``
levels (these checks of the container live in :mod:`autoglm_graph._container`),
and the network's configuration must fit the stored tensors before a module is
built (the shapes of a fitted network's tensors are those of
``autoglm_graph._fitted.FittedNetwork.expected_shapes``).

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
import io
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
from sklearn.utils.validation import check_is_fitted

from ._container import (
    _SCALARS,
    FORMAT_NAME,
    FORMAT_VERSION,
    JSON_NAME,
    MAX_COMPRESSION_RATIO,
    MAX_MEMBER_BYTES,
    PREPROCESSOR_NAME,
    TENSORS_NAME,
    ModelFileError,
    _bool,
    _history,
    _int,
    _labels_from_json,
    _labels_to_json,
    _number,
    _plain,
    _str_list,
    check_save_path,
    checked_infos,
    parse_json,
    read_members,
    write_members,
)
from ._fitted import FittedNetwork
from ._glm import GlobalGLM
from ._validation import resolve_device
from .estimators import GraphGLMClassifier, GraphGLMRegressor
from .families import FAMILIES, Family, get_family
from .location import LocationEffect
from .modules import CONVS, MESSAGE_PASSING
from .preprocessing import TabularPreprocessor
from .rows import GraphConfig, RowData
from .training import Trainer

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

# The settings of a fitted network's "trainer" record besides "graph".
_TRAINER_KEYS = frozenset({"n_outputs", "precision", *Trainer.SETTINGS})
# The training rows' fields a file may store.
_ROW_FIELDS = frozenset(f.name for f in dataclasses.fields(RowData))


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
    path = Path(path)
    write_members(path, members)
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
    train_index = model._train_index
    if train_index is not None:
        fitted["train_index"] = _labels_to_json(train_index, "train_index", put)
    if model._fitted is not None:
        fitted["network"] = _network_state(model._fitted, put)
    if getattr(model, "location_report_", None) is not None:
        fitted["location_report_"] = _plain(model.location_report_)
    effect = getattr(model, "location_effect_", None)
    if effect is not None:
        fitted["location_effect"] = {
            "columns": [int(c) for c in effect.columns],
            "n_neighbors": int(effect.n_neighbors),
            "coefficient": float(effect.coefficient),
        }
        for name in _LOCATION_ARRAYS:
            put(f"location.{name}", np.asarray(getattr(effect, name), np.float64))
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


def _network_state(network: FittedNetwork, put) -> dict:
    config, tensors = network.state()
    for key, value in tensors.items():
        put(key, value)
    trainer = {}
    for key, value in config["trainer"].items():
        if key == "graph" or isinstance(value, _SCALARS):
            trainer[key] = value
        else:
            warnings.warn(
                f"The trainer's {key}={value!r} is not saved; the loaded model "
                "does not record it.",
                UserWarning,
                stacklevel=5,
            )
    return {**config, "trainer": trainer}


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
        scalar_list = isinstance(value, list) and all(
            isinstance(v, _SCALARS) for v in value
        )
        if not (isinstance(value, (*_SCALARS, dict)) or scalar_list):
            raise TypeError(f"The parameter {key}={value!r} cannot be saved.")
        out[key] = value
    return out


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
    members = read_members(Path(path))
    config = parse_json(members[JSON_NAME])
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
            checked_infos(zf, PREPROCESSOR_NAME, None, limit)
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
    train_index = (
        _labels_from_json(fitted["train_index"], tensors, "train_index")
        if "train_index" in fitted
        else None
    )
    network = None
    if "network" in fitted:
        if train_index is None:
            raise ModelFileError("train_positions do not index the training rows.")
        n_outputs = int(tensors["global_glm.coef"].shape[0])
        network = _restore_network(
            model, fitted["network"], tensors, device, n_outputs, len(train_index)
        )
    model.location_effect_ = _location_effect(fitted, tensors, model)
    model.location_report_ = None
    if "location_report_" in fitted:
        report = fitted["location_report_"]
        if not isinstance(report, dict) or not all(
            isinstance(v, (int, float)) and not isinstance(v, bool)
            for v in report.values()
        ):
            raise ModelFileError("location_report_ must be an object of numbers.")
        model.location_report_ = report
    if network is None and model.location_effect_ is None and not model.is_global_only_:
        raise ModelFileError(
            "A model that is not global-only needs its network or location effect."
        )
    model._restore(glm, train_index, network)
    return model


#: The location effect's arrays, stored as ``location.<name>`` tensors.
_LOCATION_ARRAYS = ("points", "counts", "score", "info")


def _location_effect(fitted: dict, tensors, model) -> LocationEffect | None:
    """The stored location effect, its numbers checked (shapes already are)."""
    spec = fitted.get("location_effect")
    if spec is None:
        return None
    p = len(model.feature_names_out_)
    columns = [
        _int(c, "location_effect.columns", low=0, high=p - 1) for c in spec["columns"]
    ]
    if not columns or len(set(columns)) != len(columns):
        raise ModelFileError("location_effect.columns must be distinct design columns.")
    arrays = {
        name: tensors[f"location.{name}"].numpy().astype(np.float64)
        for name in _LOCATION_ARRAYS
    }
    if (
        not all(np.isfinite(a).all() for a in arrays.values())
        or not (arrays["counts"] >= 1).all()
    ):
        raise ModelFileError(
            "The location effect's arrays must be finite, counts >= 1."
        )
    coefficient = _number(spec.get("coefficient"), "location_effect.coefficient")
    if not np.isfinite(coefficient):
        raise ModelFileError("location_effect.coefficient must be finite.")
    return LocationEffect(
        columns=columns,
        n_neighbors=_int(spec.get("n_neighbors"), "location_effect.n_neighbors", low=1),
        coefficient=float(coefficient),
        **arrays,
    )


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
        elif key == "location_columns" and isinstance(value, list):
            if not all(isinstance(v, (str, int)) for v in value):
                raise ModelFileError(
                    f"location_columns must list names or indices; got {value!r}."
                )
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
    if family.multi_output != (n_outputs > 1):
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
    location = fitted.get("location_effect")
    if location is not None:
        if not isinstance(location, dict) or not isinstance(
            location.get("columns"), list
        ):
            raise ModelFileError("fitted.location_effect must be a JSON object.")
        points = tensors.get("location.points")
        n_points = None if points is None or points.ndim != 2 else points.shape[0]
        expected["location.points"] = (n_points, len(location["columns"]))
        for name in _LOCATION_ARRAYS[1:]:
            expected[f"location.{name}"] = (n_points,)
    network = fitted.get("network")
    if network is None:
        return expected
    if not isinstance(network, dict):
        raise ModelFileError("fitted.network must be a JSON object.")
    _check_net_config(network["net"], model, tensors)
    spec = _checked_net_spec(network["net"])
    if spec["in_channels"] != p or spec["out_channels"] != (p + 1) * n_outputs:
        raise ModelFileError(
            f"The network maps {spec['in_channels']} -> {spec['out_channels']} "
            f"channels; the design has {p} features and {n_outputs} output(s)."
        )
    _int(network["n_train"], "n_train")
    present = network["train_rows"]
    required = set(FittedNetwork.REQUIRED_ROWS)
    if spec["target_channels"]:
        required.add("targets")
    if (
        not isinstance(present, list)
        or not required <= set(present)
        or not set(present) <= _ROW_FIELDS
    ):
        raise ModelFileError(f"train_rows lists {present!r}.")
    expected.update(FittedNetwork.expected_shapes({**network, "net": spec}))
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


def _check_trainer_config(config: dict, graph: dict, model, n_outputs: int) -> None:
    """The trainer's settings are the estimator's parameters, as ``fit`` passes
    them (so they passed its validation): a file cannot change the threshold
    or slip a string into a number."""
    params = model.get_params(deep=False)
    pairs = [(f"trainer.{k}", v, k) for k, v in config.items()]
    pairs += [(f"graph.{k}", v, _GRAPH_PARAMS.get(k)) for k, v in graph.items()]
    for what, value, param in pairs:
        if what == "trainer.n_outputs":
            ok = type(value) is int and value == n_outputs
        elif what == "trainer.precision":
            ok = value in ("fp32", "bf16", "fp16") and (
                model.precision in ("auto", value)
            )
        elif what == "graph.backend" and model.graph_backend == "auto":
            ok = value in ("auto", "exact", "faiss")
        elif param in params:
            expected = params[param]
            ok = value == expected and (type(value) is bool) == (type(expected) is bool)
        else:  # every recorded setting comes from a parameter
            ok = False
        if not ok:
            raise ModelFileError(
                f"The saved {what}={value!r} is not what fit makes of the "
                "estimator's parameters."
            )


def _checked_net_spec(spec) -> dict:
    """The network's configuration, its types checked (``build_net``'s input)."""
    if not isinstance(spec, dict):
        raise ModelFileError("network.net must be a JSON object.")
    if spec.get("conv") not in CONVS:
        raise ModelFileError(
            f"Unknown conv {spec.get('conv')!r}; expected one of {', '.join(CONVS)}."
        )
    ints = ("in_channels", "out_channels", "hidden_channels", "heads", "num_layers")
    out = {k: _int(spec[k], k) for k in (*ints, "target_channels")}
    out["dropout"] = _number(spec["dropout"], "dropout")
    out["conv"] = spec["conv"]
    if "message_passing" in spec:
        if spec["message_passing"] not in MESSAGE_PASSING:
            raise ModelFileError(
                f"Unknown message_passing {spec['message_passing']!r}; expected "
                f"one of {', '.join(MESSAGE_PASSING)}."
            )
        out["message_passing"] = spec["message_passing"]
    return out


def _restore_network(
    model, network: dict, tensors, device: torch.device, n_outputs: int, n_rows: int
) -> FittedNetwork:
    """The fitted network of a file whose tensors fit ``network`` (checked)."""
    trainer_config = dict(network["trainer"])
    unknown = set(trainer_config) - _TRAINER_KEYS - {"graph"}
    if unknown or not all(
        isinstance(trainer_config[k], _SCALARS) for k in set(trainer_config) - {"graph"}
    ):
        raise ModelFileError(f"Bad trainer configuration: {sorted(trainer_config)}.")
    graph = trainer_config["graph"]
    graph_fields = {f.name for f in dataclasses.fields(GraphConfig)}
    if not isinstance(graph, dict) or set(graph) != graph_fields:
        raise ModelFileError(f"Bad graph configuration: {graph!r}.")
    _check_trainer_config(
        {k: v for k, v in trainer_config.items() if k != "graph"},
        graph,
        model,
        n_outputs,
    )
    positions = tensors["train_positions"]
    if positions.numel() and not (
        0 <= int(positions.min()) <= int(positions.max()) < n_rows
    ):
        raise ModelFileError("train_positions do not index the training rows.")
    config = {**network, "net": _checked_net_spec(network["net"])}
    return FittedNetwork.from_state(config, tensors, device)
