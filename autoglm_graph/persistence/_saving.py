"""Writing a fitted estimator's files (:func:`save_model`); see :mod:`autoglm_graph.io`.

The estimator classes that may be saved (and loaded) are registered here by
:mod:`autoglm_graph.estimators` (:func:`register_estimator`): this module and
:mod:`autoglm_graph.io` import no estimator module, so that an estimator's
``save`` can call them without an import cycle.
"""

from __future__ import annotations

import dataclasses
import json
import os
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

import joblib
import numpy as np
from sklearn.utils.validation import check_is_fitted

from ..glm import Family
from ..utils import torch
from ._container import (
    _SCALARS,
    FORMAT_NAME,
    FORMAT_VERSION,
    JSON_NAME,
    MAX_MEMBERS,
    PREPROCESSOR_NAME,
    TENSORS_NAME,
    _labels_to_json,
    _plain,
    write_members,
)
from ._io_checks import LOCATION_ARRAYS

if TYPE_CHECKING:
    from ..network import FittedNetwork

__all__ = ["ESTIMATORS", "register_estimator", "save_model"]

#: The estimator classes a file may name (the allow-list; nothing is imported),
#: filled by :func:`register_estimator`.
ESTIMATORS: dict[str, type] = {}


def register_estimator(cls: type) -> type:
    """Allow ``cls`` to be saved and loaded under its class name.

    The class provides ``_save_state()``, ``_from_params(params)`` and
    ``_restore(global_glm, train_index, network)`` (see
    ``autoglm_graph._persistence._PersistenceMixin``).

    Parameters
    ----------
    cls : type
        An estimator class.

    Returns
    -------
    type
        ``cls`` (usable as a class decorator).
    """
    ESTIMATORS[cls.__name__] = cls
    return cls


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

    The bootstrap members of ``interval_members`` (``interval_members_``,
    at most :data:`~autoglm_graph.io.MAX_MEMBERS`) are saved with the model:
    each member's configuration in ``model.json`` under ``interval_members``,
    its tensors under the names ``members.<i>.<name>``, and the preprocessor
    once (a member's is the model's: the same rows, fitted without weights).

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
    # Imported here: the estimators import this module, and a model that is
    # the global GLM loads and predicts without skops' or torch's imports.
    import skops.io as sio
    from safetensors.torch import save as st_save

    name = type(model).__name__
    if ESTIMATORS.get(name) is not type(model):
        raise TypeError(f"save_model saves {' and '.join(ESTIMATORS)}; got {name}.")
    check_is_fitted(model, "global_glm_")
    config, tensors = _model_state(model)
    config = {
        "format": FORMAT_NAME,
        "format_version": FORMAT_VERSION,
        "estimator": config["estimator"],
        "versions": _versions(),
        **config,
    }
    interval_members = getattr(model, "interval_members_", None) or []
    if interval_members:  # files without members stay as before
        config["interval_members"] = _members_state(model, interval_members, tensors)
    members = {
        JSON_NAME: json.dumps(config, indent=1).encode("utf-8"),
        TENSORS_NAME: st_save(tensors),
        PREPROCESSOR_NAME: sio.dumps(model.preprocessor_),
    }
    path = Path(path)
    write_members(path, members)
    return path


def _members_state(model, interval_members: list, tensors: dict) -> list[dict]:
    """The bootstrap members' configurations; their tensors are added to
    ``tensors`` as ``members.<i>.<name>``. They share the model's
    preprocessor (fitted on the same rows, without the weights), saved once."""
    if len(interval_members) > MAX_MEMBERS:
        raise ValueError(
            f"A model file holds at most {MAX_MEMBERS} interval_members_; this "
            f"model has {len(interval_members)}."
        )
    # Each member fitted its own preprocessor: compare contents, not objects.
    preprocessor = joblib.hash(model.preprocessor_)
    configs = []
    for i, member in enumerate(interval_members):
        if type(member) is not type(model):
            raise TypeError(
                f"interval_members_[{i}] is a {type(member).__name__}, not a "
                f"{type(model).__name__}."
            )
        check_is_fitted(member, "global_glm_")
        if joblib.hash(member.preprocessor_) != preprocessor:
            raise ValueError(
                f"interval_members_[{i}] has another preprocessor than the model "
                "(a member is fitted on the model's rows): it cannot be saved."
            )
        config, member_tensors = _model_state(member)
        for key, tensor in member_tensors.items():
            tensors[f"members.{i}.{key}"] = tensor
        configs.append(config)
    return configs


def _model_state(model) -> tuple[dict, dict[str, torch.Tensor]]:
    """One model's configuration (estimator, parameters, family and fitted
    state; the file's header aside) and its tensors by name."""
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
        "fit_times_": {str(k): float(v) for k, v in model.fit_times_.items()},
        "n_iter_": int(model.n_iter_),
        "offset_used_": bool(getattr(model, "offset_used_", False)),
        "offset_range_": _offset_range(model),
        "device_": str(model.device_),
        "global_glm": {"n_iter": int(glm.n_iter), "converged": bool(glm.converged)},
    }
    terms = model.predictor().glm_terms
    fitted["glm_terms"] = {
        "columns": [int(c) for c in terms.columns],
        "n_columns": int(model.preprocessor_.n_features_out_),
        "base_levels": {str(k): str(v) for k, v in model.base_levels_.items()}
        if hasattr(model, "base_levels_")
        else {},
    }
    if terms.varied_bases:  # the base levels the network varies too
        fitted["glm_terms"]["network_bases"] = [int(b) for b, _ in terms.varied_bases]
    if terms.formula is not None:  # its text and fitted levels, knots, scaling
        fitted["glm_terms"]["formula"] = terms.formula.state()
    if terms.splines is not None:  # knots, bases, scaling and penalty
        fitted["glm_terms"]["splines"] = terms.splines.state()
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
    if getattr(model, "interval_bias_", None) is not None:
        fitted["interval_bias_"] = [float(v) for v in model.interval_bias_]
    if getattr(model, "interval_cov_", None) is not None:  # a global GLM's
        fitted["interval_cov_"] = np.asarray(model.interval_cov_, float).tolist()
    if hasattr(model, "classes_"):
        fitted["classes_"] = _labels_to_json(model.classes_, "classes_")
    train_index, network = model._save_state()
    if train_index is not None:
        fitted["train_index"] = _labels_to_json(train_index, "train_index", put)
    if network is not None:
        fitted["network"] = _network_state(network, put)
    if getattr(model, "location_report_", None) is not None:
        fitted["location_report_"] = _plain(model.location_report_)
    effect = getattr(model, "location_effect_", None)
    if effect is not None:
        fitted["location_effect"] = {
            "columns": [int(c) for c in effect.columns],
            "n_neighbors": int(effect.n_neighbors),
            "coefficient": float(effect.coefficient),
        }
        for name in LOCATION_ARRAYS:
            put(f"location.{name}", np.asarray(getattr(effect, name), np.float64))
    config = {
        "estimator": type(model).__name__,
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
    for key in ("fit_policy", "interval_settings"):
        if dataclasses.is_dataclass(params.get(key)):
            params[key] = _dataclass_to_json(params[key])
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


def _dataclass_to_json(value) -> dict:
    """A frozen configuration object (``fit_policy``, ``interval_settings``)
    as a JSON object of its
    fields; :func:`autoglm_graph.io.load_model` rebuilds it."""
    fields = {}
    for field in dataclasses.fields(value):
        item = getattr(value, field.name)
        fields[field.name] = list(item) if isinstance(item, tuple) else item
    return {"__dataclass__": type(value).__name__, "fields": _plain(fields)}


def _versions() -> dict:
    import sklearn
    import skops

    from ..utils import package_version

    __version__ = package_version()

    return {
        "autoglm_graph": __version__,
        "scikit-learn": sklearn.__version__,
        "torch": torch.__version__,
        "skops": skops.__version__,
    }


def _offset_range(model) -> list[float] | None:
    """``offset_range_`` as JSON (None: no offset in fit, or an older model)."""
    value = getattr(model, "offset_range_", None)
    return None if value is None else [float(v) for v in value]
