"""Checks of an estimator's parameters (``fit`` runs them first, loading too)
and of the rows it is given (``fit`` and prediction).

Each parameter is checked here once, under its own name: the parts of ``fit``
and the areas below receive values that passed.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from sklearn.utils.validation import (
    _check_sample_weight,
    check_array,
    check_consistent_length,
    column_or_1d,
    validate_data,
)

from ..explain import check_interval_members, check_interval_settings
from ..glm import CATEGORICAL_CODINGS, SPLINES_LOCAL, check_formula, check_splines
from ..network import check_constraint_params
from ..policy import FitPolicy
from ..utils import (
    MESSAGE_PASSING,
    PRECISIONS,
    align_to_rows,
    check_callbacks,
    check_number,
    check_offset,
    check_option,
)
from ._glm_fit import splines_local_of, splines_of


def check_params(estimator) -> None:
    """Raise ``ValueError``, naming the parameter, for a value ``fit`` cannot
    use (the estimators' ``_validate_params``)."""
    _check_glm_params(estimator)
    _check_graph_params(estimator)
    _check_network_params(estimator)
    _check_local_params(estimator)
    _check_training_params(estimator)


def _check_glm_params(est) -> None:
    """The global GLM's terms and their preprocessing."""
    check_number("alpha", est.alpha, low=0)
    check_option("fit_intercept", est.fit_intercept, (True, False))
    check_option("categorical_coding", est.categorical_coding, CATEGORICAL_CODINGS)
    _check_rare_levels(est.min_frequency, est.max_categories)
    check_option("handle_missing", est.handle_missing, ("impute", "error"))
    check_formula(est.formula)
    check_splines(splines_of(est))
    check_option("splines_local", splines_local_of(est), SPLINES_LOCAL)
    if est.formula is not None and splines_of(est) is not False:
        raise ValueError(
            "The 'splines' parameter does not apply with a formula: write the "
            "splines in the formula, e.g. bs(age, df=5); got "
            f"formula={est.formula!r} and splines={est.splines!r}."
        )
    if est.formula is not None and est.base_levels is not None:
        raise ValueError(
            "The 'base_levels' parameter does not apply with a formula: choose "
            "a base level in the formula, e.g. C(region, contr.treatment('b')); "
            f"got formula={est.formula!r} and base_levels={est.base_levels!r}."
        )
    if not (est.fit_intercept or est.location_columns is None):
        raise ValueError(
            "The 'location_columns' parameter shifts the intercept and needs "
            f"fit_intercept=True; got location_columns={est.location_columns!r} "
            "and fit_intercept=False."
        )
    if not est.fit_intercept and getattr(est, "balance", None) is True:
        raise ValueError(
            "The 'balance' parameter shifts the intercept and needs "
            "fit_intercept=True; got balance=True and fit_intercept=False."
        )


def _check_graph_params(est) -> None:
    """The similarity graph's."""
    check_number("n_neighbors", est.n_neighbors, integer=True, low=1)
    check_number("threshold", est.threshold, low=-1, high=1)
    check_option("graph_space", est.graph_space, ("embedding", "input"))
    check_number("graph_refresh", est.graph_refresh, integer=True, low=1)
    check_option("graph_backend", est.graph_backend, ("auto", "exact", "faiss"))


def _check_network_params(est) -> None:
    """The network's modules."""
    check_number("hidden_channels", est.hidden_channels, integer=True, low=1)
    check_number("heads", est.heads, integer=True, low=1)
    if est.hidden_channels % est.heads:
        raise ValueError(
            f"The 'heads' parameter must divide hidden_channels="
            f"{est.hidden_channels}; got heads={est.heads}."
        )
    check_number("num_layers", est.num_layers, integer=True, low=1)
    check_option("conv", est.conv, ("gat", "gatv2"))
    check_option("message_passing", est.message_passing, MESSAGE_PASSING)
    check_option("precision", est.precision, PRECISIONS)
    if est.message_passing == "fused" and est.conv != "gat":
        raise ValueError(
            "The 'message_passing' parameter 'fused' needs conv='gat'; got "
            f"conv={est.conv!r}."
        )
    check_option(
        "numeric_embedding",
        getattr(est, "numeric_embedding", "linear"),
        ("linear", "piecewise_linear"),
    )
    check_number("dropout", est.dropout, low=0, high=1)
    check_option("use_neighbor_targets", est.use_neighbor_targets, (True, False))


def _check_local_params(est) -> None:
    """The location effect's, the constraints' and the intervals'."""
    _check_location_columns(est.location_columns)
    if est.location_neighbors != "auto":
        check_number("location_neighbors", est.location_neighbors, integer=True, low=1)
    check_number("local_penalty", est.local_penalty, low=0, allow_inf=True)
    check_constraint_params(est.global_terms, est.local_sign)
    check_interval_members(getattr(est, "interval_members", 0))
    check_interval_settings(getattr(est, "interval_settings", None))


def _check_training_params(est) -> None:
    """The training loop's, its stopping and its resources."""
    check_number("learning_rate", est.learning_rate, low=0, low_open=True)
    check_number("weight_decay", est.weight_decay, low=0)
    if est.fit_policy is not None and not isinstance(est.fit_policy, FitPolicy):
        raise ValueError(
            "The 'fit_policy' parameter must be None or a FitPolicy; got "
            f"{est.fit_policy!r}."
        )
    check_number("ema_decay", est.ema_decay, low=0, high=1)
    if est.ema_decay == 1:
        raise ValueError(
            "The 'ema_decay' parameter must be in [0, 1): an average that "
            "never moves keeps the untrained network; got ema_decay=1."
        )
    check_number("max_epochs", est.max_epochs, integer=True, low=0)
    check_number("batch_size", est.batch_size, integer=True, low=1, allow_none=True)
    check_option("early_stopping", est.early_stopping, (True, False))
    check_number(
        "validation_fraction",
        est.validation_fraction,
        low=0,
        high=1,
        low_open=True,
        high_open=True,
    )
    check_callbacks(est.callbacks)
    check_number("n_iter_no_change", est.n_iter_no_change, integer=True, low=1)
    check_number("tol", est.tol, low=0)
    check_number("n_jobs", est.n_jobs, integer=True, allow_none=True)
    if est.n_jobs == 0:
        raise ValueError(
            "The 'n_jobs' parameter must be a non-zero integer or None; got 0."
        )
    check_number("verbose", est.verbose, integer=True, low=0)


def _check_location_columns(columns) -> None:
    if columns is None:
        return
    if isinstance(columns, (str, bytes)) or not hasattr(columns, "__iter__"):
        raise ValueError(
            "The 'location_columns' parameter must be None or a list of column "
            f"names or indices; got {columns!r}."
        )
    columns = list(columns)
    if not columns or not all(
        isinstance(c, (str, int, np.integer)) and not isinstance(c, bool)
        for c in columns
    ):
        raise ValueError(
            "The 'location_columns' parameter must list at least one column "
            f"name or index; got {columns!r}."
        )


def _check_rare_levels(min_frequency, max_categories) -> None:
    """``min_frequency`` and ``max_categories`` as the preprocessor takes them."""
    if min_frequency is not None:
        is_count = isinstance(min_frequency, (int, np.integer)) and min_frequency >= 1
        is_share = isinstance(min_frequency, (float, np.floating)) and (
            0 < min_frequency < 1
        )
        if isinstance(min_frequency, bool) or not (is_count or is_share):
            raise ValueError(
                "The 'min_frequency' parameter must be None (keep every level), "
                "an int >= 1 (a count of rows) or a float in (0, 1) (a share of "
                f"rows); got min_frequency={min_frequency!r}."
            )
    check_number("max_categories", max_categories, integer=True, low=1, allow_none=True)


# ------------------------------------------------------------------ the rows
def check_X(estimator, X, *, reset: bool):
    """``X`` validated as scikit-learn's ``validate_data`` does (``reset``:
    in ``fit``, recording ``n_features_in_`` and ``feature_names_in_``;
    otherwise against them). A DataFrame passes through, checked."""
    if isinstance(X, pd.Series) and not reset:
        # One row, as df.iloc[i] gives it: its index holds the column names.
        X = X.to_frame().T.infer_objects()
    on_frame = not reset and getattr(estimator.preprocessor_, "_fitted_on_frame", False)
    if hasattr(X, "iloc") or on_frame:
        if not hasattr(X, "iloc"):
            # Fitted on a DataFrame: an array's columns are those of fit,
            # and the preprocessor reads each as fit did (strings stay
            # strings), so only its shape is checked here.
            X = check_array(X, dtype=None, ensure_all_finite=False)
        validate_data(estimator, X, reset=reset, skip_check_array=True)
        return X
    return validate_data(
        estimator,
        X,
        reset=reset,
        accept_sparse=False,
        ensure_all_finite="allow-nan",
        dtype="numeric",
        ensure_min_samples=1,
        ensure_min_features=0,  # no column: the intercept-only GLM
    )


def check_fit_data(estimator, X, y, sample_weight, offset):
    """``fit``'s ``X`` (:func:`check_X`), ``y`` (1-d, as long as X, at least
    2 rows), ``sample_weight`` (non-negative, a positive sum; ones for None)
    and ``offset`` (None or one finite value per row)."""
    X = check_X(estimator, X, reset=True)
    if y is None:
        raise ValueError(
            f"{type(estimator).__name__} requires y to be passed, but the target "
            "y is None."
        )
    y = column_or_1d(y, warn=True)
    check_consistent_length(X, y)
    if X.shape[0] < 2:
        raise ValueError(
            f"Found array with {X.shape[0]} sample(s) (shape={X.shape}) while a "
            "minimum of 2 is required; got 1 sample."
            if X.shape[0] == 1
            else f"Found array with 0 sample(s) (shape={X.shape}) while a "
            "minimum of 2 is required."
        )
    sample_weight = align_to_rows(sample_weight, X, "sample_weight")
    offset = align_to_rows(offset, X, "offset")
    sample_weight = _check_sample_weight(
        sample_weight,
        np.empty(X.shape[0]),
        dtype=np.float64,
        ensure_non_negative=True,
    )
    if not sample_weight.sum() > 0:
        raise ValueError("sample_weight must have a positive sum.")
    offset = check_offset(offset, X.shape[0])
    return X, y, sample_weight, offset


def group_codes(groups, n_samples: int) -> np.ndarray | None:
    """Integer codes of ``groups`` (None passes through), checked for length."""
    if groups is None:
        return None
    groups = np.asarray(groups)
    if groups.ndim != 1 or groups.shape[0] != n_samples:
        raise ValueError(
            f"groups must be a 1-d array with one value per row ({n_samples}); "
            f"got shape {groups.shape}."
        )
    return np.unique(groups, return_inverse=True)[1]
