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
import importlib
import importlib.abc
import io
import os
import sys
import zipfile
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from sklearn.base import is_classifier

from ..glm import (
    SPLINES_LOCAL,
    FormulaDesign,
    GLMTerms,
    GlobalGLM,
    SplineDesign,
    get_family,
)
from ..network import LocationEffect, check_constraint_params
from ..preprocessing import TabularPreprocessor
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
    _bool,
    _fit_times,
    _history,
    _int,
    _labels_from_json,
    _number,
    _str_list,
    check_save_path,
    checked_infos,
    parse_json,
    read_members,
)
from ._io_checks import (
    LOCATION_ARRAYS,
    MAX_LAYERS,
    check_tensors,
    check_trainer_config,
    checked_net_spec,
    expected_shapes,
    family_from_json,
    trainer_keys,
)
from ._saving import ESTIMATORS, register_estimator, save_model

if TYPE_CHECKING:
    import torch

    from ..network import FittedNetwork

    #: A stored tensor as read: torch's with a network, else a numpy array.
    Tensor = torch.Tensor | np.ndarray

# A model with a network imports torch (its tensors, its modules) where it is
# read; one without (the global GLM, a location effect) is read into numpy
# arrays and loads and predicts without torch and torch_geometric.

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
    A model with a network imports them here.
    """
    members = read_members(Path(path))
    config = parse_json(members[JSON_NAME])
    _check_header(config)
    tensors = _read_tensors(members[TENSORS_NAME], _has_network(config))
    try:
        preprocessor = _load_preprocessor(members[PREPROCESSOR_NAME])
        member_configs = _member_configs(config)
        tensors, member_tensors = _split_member_tensors(tensors, len(member_configs))
        model = _build(config, tensors, preprocessor)
        model.interval_members_ = [
            _build({**member, "estimator": config["estimator"]}, own, preprocessor)
            for member, own in zip(member_configs, member_tensors, strict=True)
        ]
        return model
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


def _build(config: dict, tensors: dict[str, Tensor], preprocessor):
    # The classes register themselves (``register_estimator``) when their
    # module is imported; by name, as a plug-in: persistence sits below them.
    importlib.import_module("autoglm_graph.estimators")
    name = config.get("estimator")
    if not isinstance(name, str) or name not in ESTIMATORS:
        raise ModelFileError(
            f"Unknown estimator {name!r}; expected one of {', '.join(ESTIMATORS)}."
        )
    cls = ESTIMATORS[name]
    model = cls._from_params(_params_from_json(cls, config.get("params")))
    fitted = config["fitted"]
    if not isinstance(fitted, dict):
        raise ModelFileError("fitted must be a JSON object.")
    family = family_from_json(config.get("family"))
    device = _device(model, "network" in fitted)
    expected = expected_shapes(fitted, tensors, family, model)
    check_tensors(tensors, expected)
    model.family_ = family
    model.device_ = device
    model.preprocessor_ = preprocessor
    model.n_features_in_ = _int(fitted["n_features_in_"], "n_features_in_", low=0)
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
    _glm_terms(model, fitted, preprocessor)
    if "classes_" in fitted:
        if not is_classifier(model):
            raise ModelFileError("Only a classifier has classes_.")
        model.classes_ = _labels_from_json(fitted["classes_"], tensors, "classes_")
        n_classes = len(model.classes_)
        n_outputs = tensors["global_glm.coef"].shape[0]
        if n_classes < 2 or n_outputs != (1 if n_classes == 2 else n_classes):
            raise ModelFileError(
                f"{n_classes} classes do not fit {n_outputs} linear predictor(s)."
            )
    elif is_classifier(model):
        raise ModelFileError("A saved classifier must have classes_.")
    glm_info = fitted["global_glm"]
    glm = GlobalGLM(
        coef=np.array(tensors["global_glm.coef"]),  # copies
        intercept=np.array(tensors["global_glm.intercept"]),
        n_iter=_int(glm_info["n_iter"], "global_glm.n_iter", low=0),
        converged=_bool(glm_info["converged"], "global_glm.converged"),
    )
    model.is_global_only_ = _bool(fitted["is_global_only_"], "is_global_only_")
    reason = fitted["global_only_reason_"]
    if reason is not None and not isinstance(reason, str):
        raise ModelFileError(f"global_only_reason_ must be a string; got {reason!r}.")
    model.global_only_reason_ = reason
    model.history_ = _history(fitted["history_"])
    if "fit_times_" in fitted:  # files written before it was recorded lack it
        model.fit_times_ = _fit_times(fitted["fit_times_"])
    model.n_iter_ = _int(fitted["n_iter_"], "n_iter_", low=0)
    model.offset_used_ = _bool(fitted["offset_used_"], "offset_used_")
    # Files from before it lack it: predict then checks the offset's spread only.
    bounds = fitted.get("offset_range_")
    model.offset_range_ = None
    if bounds is not None:
        if not isinstance(bounds, list) or len(bounds) != 2:
            raise ModelFileError(f"offset_range_ must be [min, max]; got {bounds!r}.")
        model.offset_range_ = tuple(_number(v, "offset_range_") for v in bounds)
    if "best_epoch_" in fitted:
        model.best_epoch_ = _int(fitted["best_epoch_"], "best_epoch_", low=0)
    for key in ("validation_gain_", "validation_gain_se_", "balance_correction_"):
        if key in fitted:
            setattr(model, key, _number(fitted[key], key))
    interval_bias = fitted.get("interval_bias_")
    if interval_bias is not None:
        n_names = len(fitted["feature_names_out_"])
        interval_bias = _interval_bias(interval_bias, n_names)
    interval_cov = fitted.get("interval_cov_")
    if interval_cov is not None:
        n_coef = len(fitted["feature_names_out_"]) + int(model.fit_intercept)
        interval_cov = _interval_cov(interval_cov, glm.coef.shape[0] * n_coef)
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
    model.interval_bias_ = interval_bias
    model.interval_cov_ = interval_cov
    return model


def _glm_terms(model, fitted: dict, preprocessor) -> None:
    """The global GLM's terms (files written before they were saved: every
    design column), checked against the preprocessor's features."""
    names = list(preprocessor.get_feature_names_out())
    spec = fitted.get("glm_terms", {"columns": list(range(len(names)))})
    if not isinstance(spec, dict) or not isinstance(spec.get("columns"), list):
        raise ModelFileError("fitted.glm_terms must be a JSON object with columns.")
    if "formula" in spec:
        _formula_terms(model, spec["formula"], len(names))
        return
    splines = _splines(spec.get("splines"), len(names))
    width = 0 if splines is None else len(splines.shift)
    columns = [
        _int(c, "glm_terms.columns", low=0, high=max(len(names) - 1, 0))
        for c in spec["columns"][: len(spec["columns"]) - width]
    ]
    if sorted(set(columns)) != columns or (columns and not names):
        raise ModelFileError("glm_terms.columns must be increasing design columns.")
    spline_names = [] if splines is None else splines.names
    if [names[c] for c in columns] + spline_names != list(model.feature_names_out_):
        raise ModelFileError(
            f"{PREPROCESSOR_NAME} does not produce the features of {JSON_NAME}."
        )
    bases = spec.get("base_levels", {})
    if not isinstance(bases, dict) or not all(
        isinstance(v, str) for v in bases.values()
    ):
        raise ModelFileError("glm_terms.base_levels must map columns to strings.")
    model.base_levels_ = dict(bases)
    model._terms = GLMTerms.from_preprocessor(
        preprocessor, columns, getattr(model, "fit_intercept", True)
    )
    if splines is not None:
        model._terms = model._terms.with_splines(splines, len(names))
    _network_bases(model, spec.get("network_bases", []), preprocessor)


def _network_bases(model, bases, preprocessor) -> None:
    """The base levels the network varies too (files written before: none)."""
    if not isinstance(bases, list) or not all(type(b) is int for b in bases):
        raise ModelFileError("glm_terms.network_bases must be a list of columns.")
    if not bases:
        return
    blocks = [
        block
        for block in preprocessor.categorical_blocks()
        if {int(c) for c in block} & set(bases)
    ]
    terms = model._terms.vary_bases(blocks)
    varied = sorted(b for b, _ in terms.varied_bases or ())
    if varied != sorted(bases) or terms.splines is not None:
        raise ModelFileError(
            "glm_terms.network_bases must be base levels the GLM leaves out."
        )
    model._terms = terms


def _splines(state, n_context: int) -> SplineDesign | None:
    """The splines' design saved in ``glm_terms.splines`` (None: none)."""
    if state is None:
        return None
    try:
        splines = SplineDesign.from_state(state)
    except (KeyError, TypeError, ValueError) as exc:
        raise ModelFileError(f"glm_terms.splines is not readable: {exc}") from exc
    if any(not 0 <= t.position < n_context for t in splines.terms):
        raise ModelFileError("glm_terms.splines names columns the design lacks.")
    return splines


def _formula_terms(model, state, n_context: int) -> None:
    """The GLM's terms of a formula, rebuilt from its saved state; its
    expressions may call formulaic's transforms and numpy's ufuncs only."""
    if not isinstance(state, dict):
        raise ModelFileError("glm_terms.formula must be a JSON object.")
    columns = list(getattr(model, "feature_names_in_", [])) + list(
        state.get("target_columns", [])
    )
    try:
        formula = FormulaDesign.from_state(state, columns)
    except (KeyError, TypeError, ValueError) as exc:
        raise ModelFileError(f"glm_terms.formula is not readable: {exc}") from exc
    if list(formula.names) != list(model.feature_names_out_):
        raise ModelFileError(
            f"glm_terms.formula does not produce the features of {JSON_NAME}."
        )
    model.base_levels_ = {}
    model._terms = GLMTerms.from_formula(formula, n_context)


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
        name: np.array(tensors[f"location.{name}"], dtype=np.float64)
        for name in LOCATION_ARRAYS
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
    names = {f.name for f in dataclasses.fields(FitPolicy)}
    if spec.get("__dataclass__") != "FitPolicy" or not isinstance(fields, dict):
        raise ModelFileError(f"fit_policy must be a saved FitPolicy; got {spec!r}.")
    if not set(fields) <= names:
        raise ModelFileError(
            f"Unknown field(s) of FitPolicy: {', '.join(sorted(set(fields) - names))}."
        )
    values = {}
    for key, value in fields.items():
        if isinstance(value, list):
            if not all(type(v) is int for v in value):
                raise ModelFileError(f"fit_policy.{key} must list integers.")
            value = tuple(value)
        elif not isinstance(value, (int, float, bool)):
            raise ModelFileError(f"fit_policy.{key} must be a number or bool.")
        values[key] = value
    return FitPolicy(**values)


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


def _interval_bias(value, n_names: int) -> np.ndarray:
    """The saved ``interval_bias_``: one finite value >= 0 per coefficient."""
    ok = isinstance(value, list) and len(value) in (n_names, n_names + 1)
    if ok:
        ok = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value)
    array = np.asarray(value, dtype=np.float64) if ok else None
    if array is None or not (np.isfinite(array).all() and (array >= 0).all()):
        raise ModelFileError(
            "interval_bias_ must list one finite value >= 0 per coefficient; "
            f"got {value!r}."
        )
    return array


def _interval_cov(value, n_coef: int) -> np.ndarray:
    """The saved ``interval_cov_``: a finite ``n_coef x n_coef`` matrix."""
    ok = isinstance(value, list) and len(value) == n_coef
    ok = ok and all(isinstance(row, list) and len(row) == n_coef for row in value)
    ok = ok and all(
        isinstance(v, (int, float)) and not isinstance(v, bool)
        for row in value
        for v in row
    )
    array = np.asarray(value, dtype=np.float64) if ok else None
    if array is None or not np.isfinite(array).all():
        raise ModelFileError(
            f"interval_cov_ must be a {n_coef} x {n_coef} list of finite numbers "
            "(one row and column per coefficient of local_coef)."
        )
    return array


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
    return FittedNetwork.from_state(config, tensors, device)
