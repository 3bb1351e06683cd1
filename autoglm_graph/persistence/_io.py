"""Safe persistence of fitted estimators: safetensors + JSON (+ skops), no pickle.

A saved model is four members, in a directory or in one zip file:

``model.json``
    The format name and version, the estimator class (one of an allow-list),
    its constructor parameters, the family (a name from
    :data:`autoglm_graph.glm.families.FAMILIES` and its numeric parameters), and the
    fitted state that is not a tensor (feature names, classes with their
    dtype, history, the network's and trainer's configuration, ...).
``tensors.safetensors``
    Every tensor: the global GLM, the network's ``state_dict``, the training
    rows and the cached source states that prediction needs. safetensors is a
    header plus raw buffers; reading it cannot run code.
``preprocessor.skops``
    The fitted :class:`~autoglm_graph.preprocessing.TabularPreprocessor`, in
    skops' format (a zip of JSON and ``.npy`` arrays, read without pickle;
    :mod:`._skops` reads the types a fitted preprocessor holds without
    importing skops.io, which reads any other file).
``checksums.sha256``
    The sha256 of the other three, as ``sha256sum`` writes them: a damaged
    byte anywhere is refused before anything is parsed.

A model with bootstrap members (``interval_members_``) holds each member as
a nested model: its configuration in ``model.json`` under
``interval_members`` (a list), its tensors named ``members.<i>.<name>``, and
the model's preprocessor, which the members share. Each member is checked as
the model is, and a file may hold at most :data:`MAX_MEMBERS` of them.

Loading executes nothing taken from the files: class and family names are
looked up in fixed dictionaries, the skops file may only hold scikit-learn's
own types plus the five pinned in :data:`TRUSTED_PREPROCESSOR_TYPES`, every
tensor's name and shape is checked against what the JSON configuration
implies, and anything unexpected raises :class:`ModelFileError`. Loading is
bounded: each member's size is checked before it is read
(:data:`MAX_MEMBER_BYTES`), zip members that inflate too much, duplicated or
encrypted ones are refused, ``model.json`` may nest only ``MAX_JSON_DEPTH``
levels (these checks of the container live in :mod:`._container`), and the
network's configuration must fit the stored tensors before a module is built
(the shapes of a fitted network's tensors are those of
``autoglm_graph.network.FittedNetwork.expected_shapes``).

A file holds an estimator's state (its ``to_state()``, written by
:mod:`._saving`). Loading reads each model of the file back into a state
(:func:`_state`: the parameters, then each fitted part, read and checked by
:mod:`._fitted_state`; the preprocessor by :mod:`._skops`) and builds the
estimator from it through its class's ``from_state``, the one constructor
path of a loaded estimator.

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
import importlib
import os
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ..glm import SPLINES_LOCAL, get_family
from ..network import check_constraint_params
from ..utils import resolve_device
from ._container import (
    _SCALARS,
    FORMAT_NAME,
    FORMAT_VERSION,
    JSON_NAME,
    MAX_COMPRESSION_RATIO,
    MAX_MEMBER_BYTES,
    MAX_MEMBERS,
    PREPROCESSOR_NAME,
    TENSORS_NAME,
    ModelFileError,
    _labels_from_json,
    check_save_path,
    parse_json,
    read_members,
)
from ._fitted_state import (
    read_classes,
    read_features,
    read_fit_record,
    read_glm_statistics,
    read_glm_terms,
    read_global_glm,
    read_intervals,
    read_location,
)
from ._io_checks import (
    MAX_LAYERS,
    REMOVED_PERIODIC,
    check_tensors,
    check_trainer_config,
    checked_net_spec,
    expected_shapes,
    family_from_json,
    trainer_keys,
)
from ._saving import ESTIMATORS, register_estimator, save_model
from ._skops import TRUSTED_PREPROCESSOR_TYPES, load_preprocessor

if TYPE_CHECKING:
    import torch

    from ..network import FittedNetwork

    #: A stored tensor as read: torch's with a network, else a numpy array.
    Tensor = torch.Tensor | np.ndarray

# A model with a network imports torch (its tensors, its modules) where it is
# read, and not torch_geometric on the fused path; one without (the global
# GLM, a location effect) is read into numpy arrays and loads and predicts
# without torch.

__all__ = [
    "ESTIMATORS",
    "FORMAT_NAME",
    "FORMAT_VERSION",
    "MAX_COMPRESSION_RATIO",
    "MAX_LAYERS",
    "MAX_MEMBERS",
    "MAX_MEMBER_BYTES",
    "TRUSTED_PREPROCESSOR_TYPES",
    "ModelFileError",
    "check_save_path",
    "load_model",
    "register_estimator",
    "save_model",
]


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

    Notes
    -----
    A model without a network (``is_global_only_``: the global GLM, or a
    location effect alone) is read into numpy arrays and neither this
    function nor its ``predict``, ``predict_proba``, ``predict_linear`` and
    ``score`` import torch or torch_geometric; its ``device_`` is ``"cpu"``.
    A model with a network imports torch here, and torch_geometric only for
    layers off the fused path (``conv="gatv2"``, ``message_passing="pyg"``).
    The preprocessor is read without importing skops.io.
    """
    members = read_members(Path(path))
    config = parse_json(members[JSON_NAME])
    _check_header(config)
    tensors = _read_tensors(members[TENSORS_NAME], _has_network(config))
    try:
        preprocessor = load_preprocessor(members[PREPROCESSOR_NAME])
        member_configs = _member_configs(config)
        tensors, member_tensors = _split_member_tensors(tensors, len(member_configs))
        cls = _estimator_class(config)
        state = _state(cls, config, tensors, preprocessor)
        # The members share the model's class and preprocessor.
        state["interval_members"] = [
            _state(cls, member, own, preprocessor)
            for member, own in zip(member_configs, member_tensors, strict=True)
        ]
        return cls.from_state(state)
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


def _has_network(config: dict) -> bool:
    """Whether the model or one of its bootstrap members has a fitted network
    (then its tensors are read as torch tensors, else as numpy arrays)."""
    members = config.get("interval_members", [])
    models = [config, *(members if isinstance(members, list) else [])]
    return any(
        isinstance(m, dict)
        and isinstance(m.get("fitted"), dict)
        and "network" in m["fitted"]
        for m in models
    )


def _read_tensors(data: bytes, network: bool) -> dict:
    """The tensors of ``tensors.safetensors`` by name: torch tensors for a
    model with a ``network``, else numpy arrays (safetensors' numpy reader:
    the global GLM loads without torch)."""
    try:
        if network:
            from safetensors.torch import load
        else:
            from safetensors.numpy import load
        return load(data)
    except Exception as exc:  # safetensors' own error type is not a ValueError
        raise ModelFileError(
            f"{TENSORS_NAME} is not a readable safetensors file (truncated or "
            f"corrupted?): {exc}"
        ) from exc


def _check_header(config) -> None:
    if not isinstance(config, dict) or config.get("format") != FORMAT_NAME:
        raise ModelFileError(f"{JSON_NAME} is not an {FORMAT_NAME} file.")
    version = config.get("format_version")
    if type(version) is not int or version != FORMAT_VERSION:
        raise ModelFileError(
            f"The model file has format version {version!r}; this version of "
            f"autoglm_graph reads version {FORMAT_VERSION}."
        )


# The keys of a bootstrap member's configuration (its class is the model's).
_MEMBER_KEYS = frozenset({"estimator", "params", "family", "fitted"})


def _member_configs(config: dict) -> list[dict]:
    """The bootstrap members' configurations (none in a file without them),
    at most :data:`MAX_MEMBERS`, each of the model's class."""
    configs = config.get("interval_members", [])
    if not isinstance(configs, list) or len(configs) > MAX_MEMBERS:
        raise ModelFileError(
            f"interval_members must be a list of at most {MAX_MEMBERS} models."
        )
    for i, member in enumerate(configs):
        if not isinstance(member, dict) or not set(member) <= _MEMBER_KEYS:
            raise ModelFileError(
                f"interval_members[{i}] must be an object of "
                f"{', '.join(sorted(_MEMBER_KEYS))}."
            )
        if member.get("estimator", config.get("estimator")) != config.get("estimator"):
            raise ModelFileError(f"interval_members[{i}] is not of the model's class.")
    return configs


def _split_member_tensors(
    tensors: dict[str, Tensor], n_members: int
) -> tuple[dict[str, Tensor], list[dict[str, Tensor]]]:
    """The model's own tensors, and each member's (stored as
    ``members.<i>.<name>``) under its plain names."""
    own: dict[str, Tensor] = {}
    members: list[dict[str, Tensor]] = [{} for _ in range(n_members)]
    for key, tensor in tensors.items():
        if not key.startswith("members."):
            own[key] = tensor
            continue
        index, _, name = key.removeprefix("members.").partition(".")
        if not (index.isascii() and index.isdecimal()) or not name:
            raise ModelFileError(f"The tensor {key!r} names no member.")
        if str(int(index)) != index or int(index) >= n_members:
            raise ModelFileError(
                f"The tensor {key!r} names a member beyond the {n_members} of "
                f"{JSON_NAME}."
            )
        members[int(index)][name] = tensor
    return own, members


def _device(model, network: bool):
    """The loaded model's ``device_``: the device its ``device`` parameter
    resolves to here (the CPU when that one is not available) for a model
    with a network; ``"cpu"`` for one without, whose arithmetic is numpy's
    (resolving a device would import torch)."""
    if not network:
        return "cpu"
    try:
        return resolve_device(model.device)
    except ValueError:  # e.g. saved on a GPU machine, loaded where there is none
        from ..utils import torch

        return torch.device("cpu")


def _estimator_class(config: dict) -> type:
    """The registered estimator class that ``config`` names."""
    # The classes register themselves (``register_estimator``) when their
    # module is imported; by name, as a plug-in: persistence sits below them.
    importlib.import_module("autoglm_graph.estimators")
    name = config.get("estimator")
    if not isinstance(name, str) or name not in ESTIMATORS:
        raise ModelFileError(
            f"Unknown estimator {name!r}; expected one of {', '.join(ESTIMATORS)}."
        )
    return ESTIMATORS[name]


def _state(cls, config: dict, tensors: dict[str, Tensor], preprocessor) -> dict:
    """The state (``cls.from_state``'s) of one model of the file: its
    parameters validated as ``fit`` validates them, its tensors checked
    against its configuration, then each fitted part read and checked."""
    params = _params_from_json(cls, config.get("params"))
    model = cls.from_state({"params": params})  # unfitted: checks read it
    fitted = config["fitted"]
    if not isinstance(fitted, dict):
        raise ModelFileError("fitted must be a JSON object.")
    family = family_from_json(config.get("family"))
    device = _device(model, "network" in fitted)
    check_tensors(tensors, expected_shapes(fitted, tensors, family, model))
    attributes = {"family_": family, "device_": device, "preprocessor_": preprocessor}
    attributes.update(read_features(fitted, preprocessor))
    terms, attributes["base_levels_"] = read_glm_terms(
        fitted, preprocessor, attributes, model.fit_intercept
    )
    attributes.update(read_classes(fitted, tensors, model))
    glm = attributes["global_glm_"] = read_global_glm(fitted, tensors)
    attributes.update(read_fit_record(fitted))
    attributes.update(read_intervals(fitted, glm.coef.shape[0], model.fit_intercept))
    attributes.update(read_glm_statistics(fitted, tensors))
    train_index, network = _training_rows(model, fitted, tensors, device)
    n_terms = len(attributes["feature_names_out_"])
    attributes.update(read_location(fitted, tensors, n_terms))
    if (
        network is None
        and attributes["location_effect_"] is None
        and not attributes["is_global_only_"]
    ):
        raise ModelFileError(
            "A model that is not global-only needs its network or location effect."
        )
    return {
        "estimator": cls.__name__,
        "params": params,
        "fitted": attributes,
        "glm_terms": terms,
        "train_index": train_index,
        "network": network,
    }


def _training_rows(model, fitted: dict, tensors, device):
    """The training rows' labels (None: not saved) and the fitted network
    (None: none)."""
    train_index = None
    if "train_index" in fitted:
        train_index = _labels_from_json(fitted["train_index"], tensors, "train_index")
    if "network" not in fitted:
        return train_index, None
    if train_index is None:
        raise ModelFileError("train_positions do not index the training rows.")
    n_outputs = int(tensors["global_glm.coef"].shape[0])
    network = _restore_network(
        model, fitted["network"], tensors, device, n_outputs, len(train_index)
    )
    return train_index, network


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
            value = family_from_json(value)
        elif key == "fit_policy" and isinstance(value, dict):
            value = _fit_policy_from_json(value)
        elif key == "interval_settings" and isinstance(value, dict):
            value = _interval_settings_from_json(value)
        elif key == "splines" and isinstance(value, list):
            if not all(isinstance(v, str) for v in value):
                raise ModelFileError(f"splines must list names; got {value!r}.")
        elif key == "splines_local" and value not in SPLINES_LOCAL:
            raise ModelFileError(
                f"splines_local must be one of {SPLINES_LOCAL!r}; got {value!r}."
            )
        elif key == "location_columns" and isinstance(value, list):
            if not all(isinstance(v, (str, int)) for v in value):
                raise ModelFileError(
                    f"location_columns must list names or indices; got {value!r}."
                )
        elif key == "base_levels" and isinstance(value, dict):
            if not all(isinstance(v, _SCALARS) for v in value.values()):
                raise ModelFileError(
                    f"base_levels must map columns to levels; got {value!r}."
                )
        elif key in _CONSTRAINT_PARAMS and value is not None:
            value = _constraint_from_json(key, value)
        elif not isinstance(value, _SCALARS):
            raise ModelFileError(
                f"The parameter {key!r} must be a number, string, bool or null; "
                f"got {value!r}."
            )
        out[key] = value
    if "splines_local" not in out and out.get("splines", False) is not False:
        out["splines_local"] = "all"  # a file from before it: every term varied
    if "min_frequency" not in out:  # a file from before it grouped rare levels
        out.update(min_frequency=0.01, max_categories=50)
    if "numeric_embedding" not in out:  # a file from before it: linear
        out["numeric_embedding"] = "linear"
    if out["numeric_embedding"] == "periodic":  # a file from before its removal
        raise ModelFileError(REMOVED_PERIODIC)
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


#: The constraint parameters (a list of names; a dict of names to signs).
_CONSTRAINT_PARAMS = ("global_terms", "local_sign")


def _constraint_from_json(key: str, value):
    """``global_terms`` or ``local_sign`` as saved, checked as ``fit`` checks it."""
    try:
        if key == "global_terms" and isinstance(value, list):
            check_constraint_params(value, None)
            return value
        if key == "local_sign" and isinstance(value, dict):
            check_constraint_params(None, value)
            return value
    except ValueError as error:
        raise ModelFileError(str(error)) from None
    raise ModelFileError(f"The parameter {key!r} has the wrong type; got {value!r}.")


def _fit_policy_from_json(spec: dict):
    """The ``fit_policy`` dataclass saved as ``{"__dataclass__", "fields"}``."""
    from ..policy import FitPolicy  # policy.py imports nothing of the package

    fields = spec.get("fields")
    if spec.get("__dataclass__") != "FitPolicy" or not isinstance(fields, dict):
        raise ModelFileError(f"fit_policy must be a saved FitPolicy; got {spec!r}.")
    try:  # unknown and removed fields, its fields' own checks (nested settings' too)
        return FitPolicy.from_dict(fields)
    except (TypeError, ValueError) as error:
        raise ModelFileError(str(error)) from None


def _interval_settings_from_json(spec: dict):
    """The ``interval_settings`` dataclass saved as ``{"__dataclass__", "fields"}``."""
    from ..explain import settings_from_fields

    fields = spec.get("fields")
    if spec.get("__dataclass__") != "IntervalSettings" or not isinstance(fields, dict):
        raise ModelFileError(
            f"interval_settings must be a saved IntervalSettings; got {spec!r}."
        )
    if not all(isinstance(v, _SCALARS) for v in fields.values()):
        raise ModelFileError("interval_settings' fields must be numbers or strings.")
    try:
        return settings_from_fields(fields)
    except (TypeError, ValueError) as error:
        raise ModelFileError(str(error)) from None


# Parameters whose size the machine pays at prediction, beyond what fit
# checks: n_jobs threads are allocated (1e9 of them: a 216 GB allocation).
_PARAM_BOUNDS = {"n_jobs": 4096}


def _restore_network(
    model, network: dict, tensors, device: torch.device, n_outputs: int, n_rows: int
) -> FittedNetwork:
    """The fitted network of a file whose tensors fit ``network`` (checked)."""
    from ..neighbors import PredictionIndex
    from ..network import FittedNetwork, GraphConfig

    trainer_config = dict(network["trainer"])
    unknown = set(trainer_config) - trainer_keys() - {"graph"}
    if unknown or not all(
        isinstance(trainer_config[k], _SCALARS) for k in set(trainer_config) - {"graph"}
    ):
        raise ModelFileError(f"Bad trainer configuration: {sorted(trainer_config)}.")
    graph = trainer_config["graph"]
    graph_fields = {f.name for f in dataclasses.fields(GraphConfig)}
    if not isinstance(graph, dict) or set(graph) != graph_fields:
        raise ModelFileError(f"Bad graph configuration: {graph!r}.")
    check_trainer_config(
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
    if network.get("prediction_index") is not None:
        try:
            PredictionIndex.from_config(network["prediction_index"])
        except ValueError as exc:
            raise ModelFileError(str(exc)) from None
    config = {**network, "net": checked_net_spec(network["net"])}
    return FittedNetwork.from_state(config, tensors, device, model.fit_policy)
