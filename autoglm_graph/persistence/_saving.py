"""Writing a fitted estimator's files (:func:`save_model`) from its state
(``to_state()``); the format is :mod:`autoglm_graph.persistence._io`'s.

The estimator classes that may be saved (and loaded) are registered here by
:mod:`autoglm_graph.estimators` (:func:`register_estimator`): persistence
imports no estimator module (it sits below them), so that an estimator's
``save`` can call it without an import cycle.
"""

from __future__ import annotations

import dataclasses
import json
import os
import warnings
from pathlib import Path
from typing import TYPE_CHECKING

import joblib
import numpy as np
from sklearn.exceptions import NotFittedError
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
from ._io_checks import LOCATION_ARRAYS, STATISTICS_ARRAYS

if TYPE_CHECKING:
    from ..network import FittedNetwork

__all__ = ["ESTIMATORS", "register_estimator", "save_model"]

#: The estimator classes a file may name (the allow-list; nothing is imported),
#: filled by :func:`register_estimator`.
ESTIMATORS: dict[str, type] = {}


def register_estimator(cls: type) -> type:
    """Allow ``cls`` to be saved and loaded under its class name.

    The class provides ``to_state()`` and the class method
    ``from_state(state)`` (see
    :meth:`autoglm_graph.estimators.BaseGraphGLM.to_state`): a file is
    written from the state, and a loaded estimator built from the state read.

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
    at most :data:`~autoglm_graph.persistence._container.MAX_MEMBERS`) are
    saved with the model:
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
    state = model.to_state()
    config, tensors = _model_config(state)
    config = {**_header(state["estimator"]), **config}
    if state["interval_members"]:  # files without members stay as before
        config["interval_members"] = _members_config(state, tensors)
    members = {
        JSON_NAME: json.dumps(config, indent=1).encode("utf-8"),
        TENSORS_NAME: st_save(tensors),
        PREPROCESSOR_NAME: sio.dumps(state["fitted"]["preprocessor_"]),
    }
    path = Path(path)
    write_members(path, members)
    return path


def _members_config(state: dict, tensors: dict) -> list[dict]:
    """The bootstrap members' configurations; their tensors are added to
    ``tensors`` as ``members.<i>.<name>``. They share the model's
    preprocessor (fitted on the same rows, without the weights), saved once."""
    members = state["interval_members"]
    if len(members) > MAX_MEMBERS:
        raise ValueError(
            f"A model file holds at most {MAX_MEMBERS} interval_members_; this "
            f"model has {len(members)}."
        )
    # Each member fitted its own preprocessor: compare contents, not objects.
    preprocessor = joblib.hash(state["fitted"]["preprocessor_"])
    configs = []
    for i, member in enumerate(members):
        if member["estimator"] != state["estimator"]:
            raise TypeError(
                f"interval_members_[{i}] is a {member['estimator']}, not a "
                f"{state['estimator']}."
            )
        if "fitted" not in member:
            raise NotFittedError(f"interval_members_[{i}] is not fitted.")
        if joblib.hash(member["fitted"]["preprocessor_"]) != preprocessor:
            raise ValueError(
                f"interval_members_[{i}] has another preprocessor than the model "
                "(a member is fitted on the model's rows): it cannot be saved."
            )
        config, member_tensors = _model_config(member)
        for key, tensor in member_tensors.items():
            tensors[f"members.{i}.{key}"] = tensor
        configs.append(config)
    return configs


def _model_config(state: dict) -> tuple[dict, dict[str, torch.Tensor]]:
    """One model's configuration (estimator, parameters, family and fitted
    state; the file's header aside) and its tensors by name, from its state
    (``to_state()``)."""
    tensors: dict[str, torch.Tensor] = {}

    def put(key: str, value) -> None:
        tensor = torch.as_tensor(value).detach().to("cpu")
        tensors[key] = tensor.contiguous().clone()  # no shared storage

    attributes = state["fitted"]
    glm = attributes["global_glm_"]
    put("global_glm.coef", np.asarray(glm.coef, dtype=np.float64))
    put("global_glm.intercept", np.asarray(glm.intercept, dtype=np.float64))
    fitted = _fit_record(attributes)
    fitted["global_glm"] = {"n_iter": int(glm.n_iter), "converged": bool(glm.converged)}
    fitted["glm_terms"] = _terms_config(state["glm_terms"], attributes)
    fitted.update(_optional_attributes(attributes))
    statistics = attributes.get("glm_statistics_")
    if statistics is not None:  # (an interval member, or an old fit, has none)
        fitted["glm_statistics"] = _statistics_config(statistics, put)
    if "classes_" in attributes:
        fitted["classes_"] = _labels_to_json(attributes["classes_"], "classes_")
    if state["train_index"] is not None:
        train_index = state["train_index"]
        fitted["train_index"] = _labels_to_json(train_index, "train_index", put)
    if state["network"] is not None:
        fitted["network"] = _network_state(state["network"], put)
    if attributes.get("location_report_") is not None:
        fitted["location_report_"] = _plain(attributes["location_report_"])
    effect = attributes.get("location_effect_")
    if effect is not None:
        fitted["location_effect"] = {
            "columns": [int(c) for c in effect.columns],
            "n_neighbors": int(effect.n_neighbors),
            "coefficient": float(effect.coefficient),
        }
        for name in LOCATION_ARRAYS:
            put(f"location.{name}", np.asarray(getattr(effect, name), np.float64))
    family = attributes["family_"]
    config = {
        "estimator": state["estimator"],
        "params": _params_to_json(state["params"]),
        "family": {"name": family.name, "params": family._params()},
        "fitted": fitted,
    }
    return config, tensors


def _fit_record(attributes: dict) -> dict:
    """The fitted attributes every saved model has, as JSON."""
    offset_range = attributes.get("offset_range_")  # None: no offset in fit
    return {
        "n_features_in_": int(attributes["n_features_in_"]),
        "feature_names_out_": [str(n) for n in attributes["feature_names_out_"]],
        "is_global_only_": bool(attributes["is_global_only_"]),
        "global_only_reason_": attributes["global_only_reason_"],
        "history_": _plain(attributes["history_"]),
        "fit_times_": {str(k): float(v) for k, v in attributes["fit_times_"].items()},
        "n_iter_": int(attributes["n_iter_"]),
        "offset_used_": bool(attributes.get("offset_used_", False)),
        "offset_range_": (
            None if offset_range is None else [float(v) for v in offset_range]
        ),
        "device_": str(attributes["device_"]),
    }


def _terms_config(terms, attributes: dict) -> dict:
    """The global GLM's terms: the design columns it reads, the base levels
    (and those the network varies too), a formula's or the splines' state."""
    base_levels = attributes.get("base_levels_", {})
    config = {
        "columns": [int(c) for c in terms.columns],
        "n_columns": int(attributes["preprocessor_"].n_features_out_),
        "base_levels": {str(k): str(v) for k, v in base_levels.items()},
    }
    if terms.varied_bases:  # the base levels the network varies too
        config["network_bases"] = [int(b) for b, _ in terms.varied_bases]
    if terms.formula is not None:  # its text and fitted levels, knots, scaling
        config["formula"] = terms.formula.state()
    if terms.splines is not None:  # knots, bases, scaling and penalty
        config["splines"] = terms.splines.state()
    return config


def _optional_attributes(attributes: dict) -> dict:
    """The fitted attributes a model may lack (files written without them)."""
    out = {}
    if "feature_names_in_" in attributes:
        out["feature_names_in_"] = [str(n) for n in attributes["feature_names_in_"]]
    for key in (
        "best_epoch_",
        "validation_gain_",
        "validation_gain_se_",
        "balance_correction_",
    ):
        if key in attributes:
            out[key] = _plain(attributes[key])
    if attributes.get("splines_penalty_") is not None:  # a GAM's GCV choice
        out["splines_penalty_"] = float(attributes["splines_penalty_"])
        scores = attributes["splines_scores_"].items()
        out["splines_scores_"] = [[float(lam), float(v)] for lam, v in scores]
    if attributes.get("interval_bias_") is not None:
        out["interval_bias_"] = [float(v) for v in attributes["interval_bias_"]]
    if attributes.get("interval_cov_") is not None:  # a global GLM's
        out["interval_cov_"] = np.asarray(attributes["interval_cov_"], float).tolist()
    return out


def _statistics_config(statistics, put) -> dict:
    """The global GLM's figures on the training rows (``glm_statistics_``):
    its p x p arrays as the tensors ``glm_statistics.<name>``, its scalars as
    JSON (a log-likelihood may be NaN)."""
    config = {}
    for field in dataclasses.fields(statistics):
        value = getattr(statistics, field.name)
        if field.name in STATISTICS_ARRAYS:
            put(f"glm_statistics.{field.name}", np.asarray(value, dtype=np.float64))
        else:
            config[field.name] = _plain(value)
    return config


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


def _params_to_json(params: dict) -> dict:
    params = dict(params)  # (the state's stays as it is)
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
    fields; :func:`autoglm_graph.persistence.load_model` rebuilds it."""
    fields = {}
    for field in dataclasses.fields(value):
        item = getattr(value, field.name)
        if dataclasses.is_dataclass(item):  # FitPolicy's index and tiles
            item = _dataclass_to_json(item)["fields"]
        fields[field.name] = list(item) if isinstance(item, tuple) else item
    return {"__dataclass__": type(value).__name__, "fields": _plain(fields)}


def _header(estimator: str) -> dict:
    """The file's header: its format and version, the estimator's class and
    the versions of the libraries that wrote it."""
    return {
        "format": FORMAT_NAME,
        "format_version": FORMAT_VERSION,
        "estimator": estimator,
        "versions": _versions(),
    }


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
