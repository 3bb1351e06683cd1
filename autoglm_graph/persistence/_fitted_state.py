"""The fitted state of a model file, read and checked part by part.

Each function reads one part of ``model.json``'s ``fitted`` object (its
tensors' names and shapes already checked) and returns it as the estimator's
state holds it (``from_state``); anything a fit could not have made raises
:class:`~autoglm_graph.persistence.ModelFileError`.
"""

from __future__ import annotations

import dataclasses

import numpy as np
from sklearn.base import is_classifier

from ..glm import FormulaDesign, GLMStatistics, GLMTerms, GlobalGLM, SplineDesign
from ..network import LocationEffect
from ._container import (
    JSON_NAME,
    PREPROCESSOR_NAME,
    ModelFileError,
    _array_copy,
    _bool,
    _fit_times,
    _history,
    _int,
    _labels_from_json,
    _number,
    _str_list,
)
from ._io_checks import LOCATION_ARRAYS, STATISTICS_ARRAYS


def read_features(fitted: dict, preprocessor) -> dict:
    """``n_features_in_`` (the preprocessor's), ``feature_names_in_`` (when
    saved) and ``feature_names_out_``."""
    n_features = _int(fitted["n_features_in_"], "n_features_in_", low=0)
    if n_features != getattr(preprocessor, "n_features_in_", None):
        raise ModelFileError(
            f"n_features_in_={n_features} is not the preprocessor's "
            f"{getattr(preprocessor, 'n_features_in_', None)}."
        )
    out = {"n_features_in_": n_features}
    if "feature_names_in_" in fitted:
        names = np.asarray(_str_list(fitted["feature_names_in_"]), dtype=object)
        if len(names) != n_features:
            raise ModelFileError("feature_names_in_ has n_features_in_ names.")
        out["feature_names_in_"] = names
    out["feature_names_out_"] = np.asarray(
        _str_list(fitted["feature_names_out_"]), dtype=object
    )
    return out


# ----------------------------------------------------------------- the terms
def read_glm_terms(
    fitted: dict, preprocessor, features: dict, fit_intercept: bool
) -> tuple[GLMTerms, dict]:
    """The global GLM's terms and ``base_levels_`` (files written before the
    terms were saved: every design column), checked against the
    preprocessor's features and ``features`` (:func:`read_features`)."""
    names = list(preprocessor.get_feature_names_out())
    spec = fitted.get("glm_terms", {"columns": list(range(len(names)))})
    if not isinstance(spec, dict) or not isinstance(spec.get("columns"), list):
        raise ModelFileError("fitted.glm_terms must be a JSON object with columns.")
    if "formula" in spec:
        return _formula_terms(spec["formula"], len(names), features), {}
    splines = _splines(spec.get("splines"), len(names))
    width = 0 if splines is None else len(splines.shift)
    columns = [
        _int(c, "glm_terms.columns", low=0, high=max(len(names) - 1, 0))
        for c in spec["columns"][: len(spec["columns"]) - width]
    ]
    if sorted(set(columns)) != columns or (columns and not names):
        raise ModelFileError("glm_terms.columns must be increasing design columns.")
    spline_names = [] if splines is None else splines.names
    if [names[c] for c in columns] + spline_names != list(
        features["feature_names_out_"]
    ):
        raise ModelFileError(
            f"{PREPROCESSOR_NAME} does not produce the features of {JSON_NAME}."
        )
    bases = spec.get("base_levels", {})
    if not isinstance(bases, dict) or not all(
        isinstance(v, str) for v in bases.values()
    ):
        raise ModelFileError("glm_terms.base_levels must map columns to strings.")
    terms = GLMTerms.from_preprocessor(preprocessor, columns, fit_intercept)
    if splines is not None:
        terms = terms.with_splines(splines, len(names))
    terms = _network_bases(terms, spec.get("network_bases", []), preprocessor)
    return terms, dict(bases)


def _network_bases(terms: GLMTerms, bases, preprocessor) -> GLMTerms:
    """``terms`` with the base levels the network varies too (files written
    before them: none)."""
    if not isinstance(bases, list) or not all(type(b) is int for b in bases):
        raise ModelFileError("glm_terms.network_bases must be a list of columns.")
    if not bases:
        return terms
    blocks = [
        block
        for block in preprocessor.categorical_blocks()
        if {int(c) for c in block} & set(bases)
    ]
    varied_terms = terms.vary_bases(blocks)
    varied = sorted(b for b, _ in varied_terms.varied_bases or ())
    if varied != sorted(bases) or varied_terms.splines is not None:
        raise ModelFileError(
            "glm_terms.network_bases must be base levels the GLM leaves out."
        )
    return varied_terms


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


def _formula_terms(state, n_context: int, features: dict) -> GLMTerms:
    """The GLM's terms of a formula, rebuilt from its saved state; its
    expressions may call formulaic's transforms and numpy's ufuncs only."""
    if not isinstance(state, dict):
        raise ModelFileError("glm_terms.formula must be a JSON object.")
    columns = list(features.get("feature_names_in_", [])) + list(
        state.get("target_columns", [])
    )
    try:
        formula = FormulaDesign.from_state(state, columns)
    except (KeyError, TypeError, ValueError) as exc:
        raise ModelFileError(f"glm_terms.formula is not readable: {exc}") from exc
    if list(formula.names) != list(features["feature_names_out_"]):
        raise ModelFileError(
            f"glm_terms.formula does not produce the features of {JSON_NAME}."
        )
    return GLMTerms.from_formula(formula, n_context)


# ------------------------------------------------------- the GLM, the record
def read_classes(fitted: dict, tensors, model) -> dict:
    """``classes_``, a classifier's (and only a classifier's), one linear
    predictor for two classes, one per class for more."""
    if "classes_" not in fitted:
        if is_classifier(model):
            raise ModelFileError("A saved classifier must have classes_.")
        return {}
    if not is_classifier(model):
        raise ModelFileError("Only a classifier has classes_.")
    classes = _labels_from_json(fitted["classes_"], tensors, "classes_")
    n_classes = len(classes)
    n_outputs = tensors["global_glm.coef"].shape[0]
    if n_classes < 2 or n_outputs != (1 if n_classes == 2 else n_classes):
        raise ModelFileError(
            f"{n_classes} classes do not fit {n_outputs} linear predictor(s)."
        )
    return {"classes_": classes}


def read_global_glm(fitted: dict, tensors) -> GlobalGLM:
    """The global GLM (``global_glm_``): its arrays copied from the tensors."""
    info = fitted["global_glm"]
    return GlobalGLM(
        coef=_array_copy(tensors["global_glm.coef"]),
        intercept=_array_copy(tensors["global_glm.intercept"]),
        n_iter=_int(info["n_iter"], "global_glm.n_iter", low=0),
        converged=_bool(info["converged"], "global_glm.converged"),
    )


def read_fit_record(fitted: dict) -> dict:
    """What the fit recorded: whether the model is the global GLM and why,
    its history, times and epochs, its offset, its validation gain and its
    balance shift (those a file written before them lacks are left out)."""
    reason = fitted["global_only_reason_"]
    if reason is not None and not isinstance(reason, str):
        raise ModelFileError(f"global_only_reason_ must be a string; got {reason!r}.")
    out = {
        "is_global_only_": _bool(fitted["is_global_only_"], "is_global_only_"),
        "global_only_reason_": reason,
        "history_": _history(fitted["history_"]),
    }
    if "fit_times_" in fitted:  # files written before it was recorded lack it
        out["fit_times_"] = _fit_times(fitted["fit_times_"])
    out["n_iter_"] = _int(fitted["n_iter_"], "n_iter_", low=0)
    out["offset_used_"] = _bool(fitted["offset_used_"], "offset_used_")
    # Files from before it lack it: predict then checks the offset's spread only.
    bounds = fitted.get("offset_range_")
    out["offset_range_"] = None
    if bounds is not None:
        if not isinstance(bounds, list) or len(bounds) != 2:
            raise ModelFileError(f"offset_range_ must be [min, max]; got {bounds!r}.")
        low, high = (_number(v, "offset_range_") for v in bounds)
        if not (np.isfinite(low) and np.isfinite(high) and low <= high):
            raise ModelFileError(
                f"offset_range_ must be finite with min <= max; got {bounds!r}."
            )
        out["offset_range_"] = (low, high)
    if "best_epoch_" in fitted:
        out["best_epoch_"] = _int(fitted["best_epoch_"], "best_epoch_", low=0)
    for key in ("validation_gain_", "validation_gain_se_", "balance_correction_"):
        if key in fitted:
            out[key] = _number(fitted[key], key)
    if "splines_penalty_" in fitted:  # files from before it lack it
        out["splines_penalty_"] = _number(
            fitted["splines_penalty_"], "splines_penalty_"
        )
        out["splines_scores_"] = _splines_scores(fitted.get("splines_scores_"))
    return out


def _splines_scores(value) -> dict:
    """The saved ``splines_scores_``: ``[penalty, GCV score]`` pairs."""
    if not isinstance(value, list) or not all(
        isinstance(pair, list) and len(pair) == 2 for pair in value
    ):
        raise ModelFileError(
            f"splines_scores_ must list [penalty, score] pairs; got {value!r}."
        )
    return {
        _number(lam, "splines_scores_"): _number(v, "splines_scores_")
        for lam, v in value
    }


# ------------------------------------------------------------ the intervals
def read_intervals(fitted: dict, n_outputs: int, fit_intercept: bool) -> dict:
    """``interval_bias_`` and ``interval_cov_`` (None where not saved)."""
    n_names = len(fitted["feature_names_out_"])
    bias = fitted.get("interval_bias_")
    if bias is not None:
        bias = _interval_bias(bias, n_names)
    cov = fitted.get("interval_cov_")
    if cov is not None:
        cov = _interval_cov(cov, n_outputs * (n_names + int(fit_intercept)))
    return {"interval_bias_": bias, "interval_cov_": cov}


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


# ------------------------------------------------------- the kept figures
def read_glm_statistics(fitted: dict, tensors) -> dict:
    """``glm_statistics_``, the global GLM's figures on the training rows
    (their arrays' shapes checked already); None in a file written before
    they were kept, whose ``summary()`` then asks for the training data."""
    spec = fitted.get("glm_statistics")
    if spec is None:
        return {"glm_statistics_": None}
    names = [f.name for f in dataclasses.fields(GLMStatistics)]
    scalars = [name for name in names if name not in STATISTICS_ARRAYS]
    if not isinstance(spec, dict) or sorted(spec) != sorted(scalars):
        raise ModelFileError(
            f"fitted.glm_statistics must be a JSON object of {', '.join(scalars)}."
        )
    values = {
        name: _array_copy(tensors[f"glm_statistics.{name}"], dtype=np.float64)
        for name in STATISTICS_ARRAYS
    }
    for name in scalars:
        what = f"glm_statistics.{name}"
        if name in ("rank", "n_rows"):
            values[name] = _int(spec[name], what, low=0)
        elif name == "weighted":
            values[name] = _bool(spec[name], what)
        elif name == "target_name":
            if not isinstance(spec[name], str):
                raise ModelFileError(f"{what} must be a string; got {spec[name]!r}.")
            values[name] = spec[name]
        else:  # (a log-likelihood may be NaN)
            values[name] = float(_number(spec[name], what))
    return {"glm_statistics_": GLMStatistics(**values)}


# ------------------------------------------------------- the location effect
def read_location(fitted: dict, tensors, n_terms: int) -> dict:
    """``location_effect_`` (None: none kept) and ``location_report_``."""
    effect = _location_effect(fitted, tensors, n_terms)
    report = None
    if "location_report_" in fitted:
        report = fitted["location_report_"]
        if not isinstance(report, dict) or not all(
            isinstance(v, (int, float)) and not isinstance(v, bool)
            for v in report.values()
        ):
            raise ModelFileError("location_report_ must be an object of numbers.")
    return {"location_effect_": effect, "location_report_": report}


def _location_effect(fitted: dict, tensors, n_terms: int) -> LocationEffect | None:
    """The stored location effect, its numbers checked (shapes already are)."""
    spec = fitted.get("location_effect")
    if spec is None:
        return None
    columns = [
        _int(c, "location_effect.columns", low=0, high=n_terms - 1)
        for c in spec["columns"]
    ]
    if not columns or len(set(columns)) != len(columns):
        raise ModelFileError("location_effect.columns must be distinct design columns.")
    arrays = {
        name: _array_copy(tensors[f"location.{name}"], dtype=np.float64)
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
