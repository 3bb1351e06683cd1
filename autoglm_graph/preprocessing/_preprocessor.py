"""Turn a mixed-type table into a dense float32 design matrix.

:class:`TabularPreprocessor` is a thin, scikit-learn compatible wrapper around a
:class:`~sklearn.compose.ColumnTransformer`: median imputation, missing-value
indicators and standardisation for numeric columns, a constant "missing" level and
one-hot encoding (with rare levels grouped) for categorical columns, and a final
:class:`~sklearn.feature_selection.VarianceThreshold` that drops constant features.
"""

from __future__ import annotations

from numbers import Integral
from typing import Any, ClassVar

import numpy as np
import pandas as pd
import scipy.sparse as sp
from sklearn.base import BaseEstimator, TransformerMixin, _fit_context
from sklearn.compose import ColumnTransformer
from sklearn.feature_selection import VarianceThreshold
from sklearn.impute import MissingIndicator, SimpleImputer
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import FunctionTransformer, OneHotEncoder, StandardScaler
from sklearn.utils._param_validation import Interval, RealNotInt, StrOptions
from sklearn.utils.validation import check_is_fitted, validate_data

from ._checks import (
    _check_column_labels,
    _check_missing,
    _check_no_infinity,
    _check_numeric_dtypes,
    _check_text_in_numbers,
    _check_variance_is_finite,
    _column_kind,
    _dense_scalar_columns,
    _find_dropped_columns,
    _identifier_reason,
    _not_numeric_error,
    _onehot_widths,
    _warn_dropped_columns,
)
from ._levels import _match_fitted_levels, _warn_unseen_levels

__all__ = ["MISSING_LEVEL", "PREPROCESSOR_PARTS", "TabularPreprocessor"]

MISSING_LEVEL = "missing"
"""Level given to missing values of categorical columns before one-hot encoding."""

_ONE_TO_ONE: dict[str, Any] = {"feature_names_out": "one-to-one"}


def _as_object_with_nan(X: Any) -> np.ndarray:
    """Copy ``X`` to an object array in which every missing marker is ``np.nan``.

    ``None``, ``pd.NA`` and ``NaT`` are not recognised by
    :class:`~sklearn.impute.SimpleImputer` (``missing_values=np.nan``), so they are
    normalised first. A copy is taken so the caller's frame is never modified.
    """
    values = np.array(X, dtype=object, copy=True)
    values[pd.isna(values)] = np.nan
    return values


def _column_median(values: np.ndarray) -> float:
    """The median of a column's non-missing values, 0 for none (as
    ``SimpleImputer(strategy="median", keep_empty_features=True)``): the same
    numbers, 5x faster than its masked arrays at 1M rows x 32 columns."""
    return float(np.median(values)) if values.size else 0.0


def _as_str(X: Any) -> np.ndarray:
    """Cast to a string array so that mixed-type levels sort and compare cleanly."""
    return np.asarray(X, dtype=object).astype(str)


class TabularPreprocessor(TransformerMixin, BaseEstimator):
    """DataFrame or array -> float32 design matrix with feature names.

    Columns of a :class:`pandas.DataFrame` are split by dtype:

    - numeric columns (ints, floats, nullable ``Int64``/``Float64``) are imputed
      with their median, optionally standardised, and get a 0/1 missing-value
      indicator when they had missing values during ``fit``;
    - categorical columns (``object``, ``category``, ``bool``/``boolean`` and the
      pandas string dtypes, including pandas 3's default ``str``) get a constant
      ``"missing"`` level for missing values, are cast to ``str`` and one-hot
      encoded, one feature per level: every level is kept, as statsmodels, glum
      and R keep them. Rare levels are grouped into one
      ``<column>_infrequent_sklearn`` feature only when ``min_frequency`` or
      ``max_categories`` asks for it (:meth:`infrequent_levels` lists them).

    Three kinds of column are not encoded as they come:

    - a text column most of whose values are numbers, but not all (``"n/a"``
      in a column of prices), is refused with a ``ValueError`` that names the
      text values: convert it with :func:`pandas.to_numeric` (the text then
      counts as missing) or declare it a factor with ``.astype("category")``;
    - an *identifier*, a categorical column more than half of whose rows hold a
      level seen in no other row, is dropped (see ``dropped_columns_``), with a
      :class:`DroppedColumnsWarning`;
    - features that are constant on the fit data are dropped at the end.

    Missing values are imputed (``handle_missing="impute"``, the default) as
    above, or refused (``"error"``). A column that had no missing value in
    ``fit`` and has some at ``transform`` gets a
    :class:`NewMissingValuesWarning`: there is no indicator for it, so the
    imputed value is read as an observed one. NumPy arrays and nested lists
    must be numeric; their columns are named ``"x0"``, ``"x1"``, ... and
    treated as numeric.

    Parameters
    ----------
    scale_numeric : bool, default=True
        Standardise the imputed numeric columns to mean 0 and unit variance on the
        fit data. Missing-value indicators and one-hot columns stay 0/1.
    min_frequency : int or float or None, default=None
        None keeps every level. Otherwise categories seen fewer times than this
        in ``fit`` are grouped into an "infrequent" feature: an int is a count,
        a float in ``(0, 1)`` a fraction of the number of rows. Passed to
        :class:`~sklearn.preprocessing.OneHotEncoder`.
    max_categories : int or None, default=None
        None keeps every level. Otherwise an upper bound on the number of
        one-hot features per column, including the infrequent feature. Passed
        to :class:`~sklearn.preprocessing.OneHotEncoder`.
    add_missing_indicator : bool, default=True
        Add a 0/1 ``missingindicator_<column>`` feature for every numeric column
        that had missing values in ``fit``.
    handle_missing : {"impute", "error"}, default="impute"
        ``"impute"``: a numeric column's missing values get its median in
        ``fit`` (and the indicator above), a categorical column's the level
        ``"missing"``. ``"error"``: missing values raise a ``ValueError`` that
        names the columns, in ``fit`` and at ``transform``.

    Attributes
    ----------
    column_transformer_ : sklearn.pipeline.Pipeline
        The fitted scikit-learn pipeline: a ``"columns"``
        :class:`~sklearn.compose.ColumnTransformer` (transformers ``"numeric"``,
        ``"missing"``, ``"categorical"``, each present only when it has work to do)
        followed by a ``"drop_constant"``
        :class:`~sklearn.feature_selection.VarianceThreshold`.
    numeric_features_ : list
        Input columns treated as numeric (DataFrame column labels, or ``"x0"``,
        ``"x1"``, ... for arrays).
    categorical_features_ : list
        Input columns treated as categorical (always empty for arrays);
        identifiers are not among them.
    missing_features_ : list
        Input columns that had missing values in ``fit``.
    n_features_in_ : int
        Number of input columns seen in ``fit``.
    feature_names_in_ : ndarray of shape (n_features_in,)
        Input column names. Defined only when ``X`` was a DataFrame whose column
        names are all strings.
    n_features_out_ : int
        Number of output columns, ``len(get_feature_names_out())``.
    dropped_columns_ : dict
        Input columns that produced no output feature, mapped to the reason:
        constant, all values missing, an identifier (see above), or every
        level rarer than ``min_frequency``, where the grouped "infrequent"
        feature is constant. Empty when nothing was
        dropped. ``fit`` warns (:class:`DroppedColumnsWarning`) about the
        columns that varied, which held information; constant and empty
        columns hold none and are dropped quietly.

    See Also
    --------
    sklearn.compose.ColumnTransformer : The machinery this class configures.
    sklearn.preprocessing.OneHotEncoder : Encoder used for categorical columns.

    Notes
    -----
    The missing-value indicators are deliberately *not* standardised: like the
    one-hot columns they are binary, their coefficient reads as "shift when
    missing", and standardising a rarely-missing column's indicator would turn a
    single missing value into a feature of size ``sqrt(n_samples)``, which hurts
    gradient-based training.

    One-hot encoding keeps every level (no reference level is dropped), so the
    output is collinear with an intercept; use a penalised model.

    Examples
    --------
    >>> import pandas as pd
    >>> from autoglm_graph.preprocessing import TabularPreprocessor
    >>> X = pd.DataFrame(
    ...     {
    ...         "age": [25.0, 32.0, None, 51.0],
    ...         "region": ["north", "south", "north", None],
    ...         "const": [1, 1, 1, 1],
    ...     }
    ... )
    >>> pre = TabularPreprocessor(min_frequency=None).fit(X)
    >>> pre.get_feature_names_out().tolist()
    ['age', 'missingindicator_age', 'region_missing', 'region_north', 'region_south']
    >>> Xt = pre.transform(X)
    >>> Xt.dtype, Xt.shape
    (dtype('float32'), (4, 5))
    >>> pre.transform(X.assign(region=["west", None, "north", "south"]))[:, 2:]
    array([[0., 0., 0.],
           [1., 0., 0.],
           [0., 1., 0.],
           [0., 0., 1.]], dtype=float32)
    """

    _parameter_constraints: ClassVar[dict] = {
        "scale_numeric": ["boolean"],
        "min_frequency": [
            Interval(Integral, 1, None, closed="left"),
            Interval(RealNotInt, 0, 1, closed="neither"),
            None,
        ],
        "max_categories": [Interval(Integral, 1, None, closed="left"), None],
        "add_missing_indicator": ["boolean"],
        "handle_missing": [StrOptions({"impute", "error"})],
    }

    def __init__(
        self,
        *,
        scale_numeric: bool = True,
        # None: every level kept, as statsmodels and R (docs/decisions/every_level.md).
        min_frequency: float | int | None = None,
        max_categories: int | None = None,
        add_missing_indicator: bool = True,
        handle_missing: str = "impute",
    ) -> None:
        self.scale_numeric = scale_numeric
        self.min_frequency = min_frequency
        self.max_categories = max_categories
        self.add_missing_indicator = add_missing_indicator
        self.handle_missing = handle_missing

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X: Any, y: Any = None) -> TabularPreprocessor:
        """Learn column types, imputation values, scaling and categories.

        Parameters
        ----------
        X : DataFrame or array-like of shape (n_samples, n_features)
            Training data. Arrays must be numeric; NaN is allowed, infinity is not.
        y : None
            Ignored.

        Returns
        -------
        self : TabularPreprocessor
            The fitted preprocessor.
        """
        self._fit_transform(X)
        return self

    @_fit_context(prefer_skip_nested_validation=True)
    def fit_transform(
        self, X: Any, y: Any = None, *, dtype: Any = np.float32, **fit_params: Any
    ) -> np.ndarray:
        """Fit to ``X`` and return its transformed version in one pass.

        Parameters
        ----------
        X : DataFrame or array-like of shape (n_samples, n_features)
            Training data.
        y : None
            Ignored.
        dtype : {np.float32, np.float64}, default=np.float32
            Floating type of the output (the global GLM is solved in float64).
        **fit_params : dict
            Ignored; accepted for compatibility with :class:`TransformerMixin`.

        Returns
        -------
        X_out : ndarray of shape (n_samples, n_features_out), dtype ``dtype``
            Same as ``fit(X).transform(X, dtype=dtype)``.
        """
        return self._fit_transform(X, dtype)

    def design_scaling(self) -> tuple[np.ndarray, np.ndarray]:
        """The affine map from the user's units to the output columns.

        Returns
        -------
        shift, scale : ndarrays of shape (n_features_out,)
            Output column ``j`` is ``(u_j - shift[j]) / scale[j]``, where
            ``u_j`` is the column in the user's units (the imputed numeric
            column, a 0/1 indicator or one-hot level). Unscaled columns have
            shift 0 and scale 1. A coefficient ``c`` of output column ``j`` is
            ``c / scale[j]`` per unit of the user's column.
        """
        check_is_fitted(self)
        columns = self.column_transformer_.named_steps["columns"]
        n_all = max(s.stop for s in columns.output_indices_.values())
        shift, scale = np.zeros(n_all), np.ones(n_all)
        if "numeric" in columns.named_transformers_ and self.scale_numeric:
            scaler = columns.named_transformers_["numeric"].named_steps["scale"]
            where = columns.output_indices_["numeric"]
            shift[where] = scaler.mean_
            scale[where] = scaler.scale_
        kept = self.column_transformer_.named_steps["drop_constant"].get_support()
        return shift[kept], scale[kept]

    def categorical_blocks(self) -> list[np.ndarray]:
        """The output columns of each categorical input column's levels.

        Returns
        -------
        blocks : list of ndarray of int
            One array per categorical input column (in input order) with the
            positions, among the output columns, of its one-hot levels (the
            shared "infrequent" level included). A row has a 1 in at most one
            of them (none for a category unseen in ``fit`` without an
            infrequent level). A level column constant in ``fit`` is dropped
            from the output, and so from its block.
        """
        check_is_fitted(self)
        columns = self.column_transformer_.named_steps["columns"]
        kept = self.column_transformer_.named_steps["drop_constant"].get_support()
        position = np.cumsum(kept) - 1  # output position of each kept column
        if "categorical" not in columns.named_transformers_:
            return []
        encoder = columns.named_transformers_["categorical"].named_steps["onehot"]
        start = columns.output_indices_["categorical"].start
        blocks = []
        for width in _onehot_widths(encoder):
            block = np.arange(start, start + width)
            blocks.append(position[block[kept[block]]])
            start += width
        return blocks

    def categorical_levels(self) -> list[np.ndarray]:
        """The level of each output column of :meth:`categorical_blocks`.

        Returns
        -------
        levels : list of ndarray of str
            One array per categorical input column, aligned with its block:
            the level as encoded (a string; ``"infrequent_sklearn"`` for the
            grouped rare levels, ``"missing"`` for missing values).
        """
        check_is_fitted(self)
        columns = self.column_transformer_.named_steps["columns"]
        if "categorical" not in columns.named_transformers_:
            return []
        kept = self.column_transformer_.named_steps["drop_constant"].get_support()
        encoder = columns.named_transformers_["categorical"].named_steps["onehot"]
        start = columns.output_indices_["categorical"].start
        levels = []
        for i, width in enumerate(_onehot_widths(encoder)):
            # Frequent levels in sorted order, then the infrequent one.
            encoded = encoder._compute_transformed_categories(i, remove_dropped=False)
            levels.append(
                np.asarray(encoded, dtype=object)[kept[start : start + width]]
            )
            start += width
        return levels

    def infrequent_levels(self) -> dict:
        """The levels grouped into each column's "infrequent" feature.

        Returns
        -------
        dict
            Categorical input column -> list of its levels (as strings) that
            share the ``<column>_infrequent_sklearn`` feature; only columns
            with such a group (none unless ``min_frequency`` or
            ``max_categories`` is set).
        """
        check_is_fitted(self)
        columns = self.column_transformer_.named_steps["columns"]
        if "categorical" not in columns.named_transformers_:
            return {}
        encoder = columns.named_transformers_["categorical"].named_steps["onehot"]
        if encoder.min_frequency is None and encoder.max_categories is None:
            return {}
        return {
            column: [str(level) for level in merged]
            for column, merged in zip(
                self.categorical_features_,
                encoder.infrequent_categories_,
                strict=True,
            )
            if merged is not None
        }

    def transform(self, X: Any, *, dtype: Any = np.float32) -> np.ndarray:
        """Encode ``X`` with the fitted preprocessing.

        Parameters
        ----------
        X : DataFrame or array-like of shape (n_samples, n_features_in)
            Data with the same columns as in ``fit``. Missing values and unseen
            categories are allowed (unseen categories map to the infrequent
            feature when there is one, otherwise to all zeros).
        dtype : {np.float32, np.float64}, default=np.float32
            Floating type of the output.

        Returns
        -------
        X_out : ndarray of shape (n_samples, n_features_out), dtype ``dtype``
            C-contiguous and finite.
        """
        check_is_fitted(self)
        X = self._validate_input(X, reset=False)
        if self.n_features_out_ == 0:
            return self._finalize(np.empty((X.shape[0], 0)), dtype)
        return self._finalize(self.column_transformer_.transform(X), dtype)

    def get_feature_names_out(self, input_features: Any = None) -> np.ndarray:
        """Names of the output features.

        Parameters
        ----------
        input_features : array-like of str or None, default=None
            Input column names. When ``None``, ``feature_names_in_`` is used, or
            ``"x0"``, ``"x1"``, ... when it is not defined. When given, it must
            match ``feature_names_in_`` (if defined) and have length
            ``n_features_in_``.

        Returns
        -------
        feature_names_out : ndarray of str objects
            One name per output column, e.g. ``"age"``,
            ``"missingindicator_income"``, ``"region_north"``,
            ``"region_infrequent_sklearn"``.
        """
        check_is_fitted(self)
        names = self.column_transformer_.get_feature_names_out(input_features)
        return np.asarray(names, dtype=object)

    def __setstate__(self, state: dict) -> None:
        # Model files from before the parameter imputed missing values.
        state.setdefault("handle_missing", "impute")
        super().__setstate__(state)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = True
        tags.input_tags.categorical = True  # through DataFrame columns
        tags.transformer_tags.preserves_dtype = ["float32"]
        return tags

    # ------------------------------------------------------------------ helpers

    def _fit_transform(self, X: Any, dtype: Any = np.float32) -> np.ndarray:
        self._identifiers = {}
        X = self._validate_input(X, reset=True)
        self.column_transformer_ = self._build_pipeline()
        try:
            X_out = self.column_transformer_.fit_transform(X)
        except ValueError as exc:
            if "variance threshold" not in str(exc) or "one sample" in str(exc):
                raise
            X_out = self._keep_no_feature(X)
        columns = self.column_transformer_.named_steps["columns"]
        try:
            columns.get_feature_names_out()
        except ValueError:  # short names collide: numeric "a_b" vs level "b" of "a"
            columns.set_params(verbose_feature_names_out=True)
        self.n_features_out_ = len(self.get_feature_names_out())
        dropped = {} if self._no_columns else _find_dropped_columns(self, X)
        dropped.update(getattr(self, "_identifiers", {}))
        order = {label: i for i, label in enumerate(getattr(self, "_columns", []))}
        self.dropped_columns_ = dict(
            sorted(dropped.items(), key=lambda item: order.get(item[0], -1))
        )
        _warn_dropped_columns(self)
        return self._finalize(X_out, dtype)

    def _keep_no_feature(self, X: Any) -> np.ndarray:
        """Every column is constant (or missing): the design has no feature, as
        an intercept-only model (R's ``y ~ 1``) reads it."""
        columns = self.column_transformer_.named_steps["columns"]
        encoded = columns.fit_transform(X)
        drop = self.column_transformer_.named_steps["drop_constant"]
        drop.variances_ = np.zeros(encoded.shape[1])
        drop.n_features_in_ = encoded.shape[1]
        return np.empty((encoded.shape[0], 0))

    def _build_pipeline(self) -> Pipeline:
        transformers: list[tuple[str, Any, list[int]]] = []
        numeric, categorical = self._numeric_idx, self._categorical_idx
        if numeric:
            steps: list[tuple[str, Any]] = [
                (
                    "impute",
                    SimpleImputer(strategy=_column_median, keep_empty_features=True),
                )
            ]
            if self.scale_numeric:
                steps.append(("scale", StandardScaler()))
            transformers.append(("numeric", Pipeline(steps), numeric))
            if self.add_missing_indicator:
                indicator = MissingIndicator(
                    features="missing-only", error_on_new=False
                )
                transformers.append(("missing", indicator, numeric))
        if categorical:
            encoder = OneHotEncoder(
                handle_unknown="infrequent_if_exist",
                min_frequency=self.min_frequency,
                max_categories=self.max_categories,
                sparse_output=False,
            )
            steps = [
                ("as_object", FunctionTransformer(_as_object_with_nan, **_ONE_TO_ONE)),
                (
                    "impute",
                    SimpleImputer(
                        strategy="constant",
                        fill_value=MISSING_LEVEL,
                        keep_empty_features=True,
                    ),
                ),
                ("as_str", FunctionTransformer(_as_str, **_ONE_TO_ONE)),
                ("onehot", encoder),
            ]
            transformers.append(("categorical", Pipeline(steps), categorical))
        columns = ColumnTransformer(
            transformers, sparse_threshold=0.0, verbose_feature_names_out=False
        )
        pipeline = Pipeline(
            [("columns", columns), ("drop_constant", VarianceThreshold(0.0))]
        )
        # Our own output container is handled by TransformerMixin.set_output; the
        # inner pipeline always works on numpy, whatever the global config says.
        return pipeline.set_output(transform="default")

    def _validate_input(self, X: Any, reset: bool) -> Any:
        """Check ``X`` and, when ``reset``, record the column layout."""
        if reset:
            shape = getattr(X, "shape", None)
            self._no_columns = shape is not None and len(shape) == 2 and shape[1] == 0
        if getattr(self, "_no_columns", False):
            return self._validate_no_columns(X, reset)
        on_frame = isinstance(X, pd.DataFrame) if reset else self._fitted_on_frame
        if not on_frame:
            return self._validate_array(X, reset)
        if not isinstance(X, pd.DataFrame):  # fitted on a DataFrame, given an array
            validate_data(self, X, skip_check_array=True, reset=False)
            X = pd.DataFrame(np.asarray(X, dtype=object), columns=self._columns)
        validate_data(self, X, skip_check_array=True, reset=reset)
        if not reset:
            _check_column_labels(self, X)
            _check_numeric_dtypes(self, X)
        X = _dense_scalar_columns(X)
        n_samples, n_features = X.shape
        if n_samples == 0 or n_features == 0:
            what = "0 sample(s)" if n_samples == 0 else "0 feature(s)"
            raise ValueError(
                f"Found array with {what} (shape={X.shape}) while a minimum of 1 "
                f"is required by {type(self).__name__}."
            )
        if reset:
            self._fitted_on_frame = True
            self._columns = list(X.columns)
            self._dtypes = [str(dtype) for dtype in X.dtypes]
            self._classify_columns(X)
        if self._numeric_idx:
            labels = [X.columns[i] for i in self._numeric_idx]
            # One float64 copy of the numeric columns serves both checks.
            try:
                values = X.iloc[:, self._numeric_idx].to_numpy(
                    dtype=np.float64, na_value=np.nan
                )
            except (TypeError, ValueError) as exc:  # only at predict: fit classified
                raise _not_numeric_error(X.iloc[:, self._numeric_idx]) from exc
            _check_no_infinity(values, labels)
            if reset and self.scale_numeric:
                _check_variance_is_finite(values, labels)
        _check_missing(self, X, self._columns, reset)
        if not reset:
            _warn_unseen_levels(self, X)
            X = _match_fitted_levels(self, X)
        return X

    def _validate_no_columns(self, X: Any, reset: bool) -> np.ndarray:
        """``X`` without columns (an intercept-only model): one constant
        stand-in column, which the pipeline drops."""
        n_samples, n_features = X.shape
        if n_features != 0:
            raise ValueError(
                f"X has {n_features} features, but {type(self).__name__} is "
                "expecting 0 features as input (it was fitted without columns)."
            )
        if n_samples == 0:
            raise ValueError(
                f"Found array with 0 sample(s) (shape={X.shape}) while a minimum "
                f"of 1 is required by {type(self).__name__}."
            )
        if reset:
            self.n_features_in_ = 0
            self._fitted_on_frame = False
            self._numeric_idx, self._categorical_idx = [0], []
            self.numeric_features_, self.categorical_features_ = [], []
            self.missing_features_ = []
        return np.zeros((n_samples, 1))

    def _validate_array(self, X: Any, reset: bool) -> np.ndarray:
        if not sp.issparse(X) and not isinstance(X, pd.DataFrame):
            values = np.asarray(X)
            if values.dtype.kind in "OUS":
                try:
                    values.astype(np.float64)
                except ValueError as exc:
                    raise ValueError(
                        f"{type(self).__name__} accepts only numeric arrays; got an "
                        f"array of dtype {values.dtype} with non-numeric values. "
                        "Pass a pandas DataFrame to encode categorical columns."
                    ) from exc
        X = validate_data(
            self, X, dtype=np.float64, ensure_all_finite="allow-nan", reset=reset
        )
        if not sp.issparse(X):
            labels = [f"x{i}" for i in range(X.shape[1])]
            _check_missing(self, X, labels, reset)
        if reset:
            self._fitted_on_frame = False
            self._numeric_idx = list(range(X.shape[1]))
            self._categorical_idx = []
            self.numeric_features_ = [f"x{i}" for i in range(X.shape[1])]
            self.categorical_features_ = []
            if self.scale_numeric and not sp.issparse(X):
                _check_variance_is_finite(X, self.numeric_features_)
        return X

    def _classify_columns(self, X: pd.DataFrame) -> None:
        """Numeric and categorical columns; text columns of numbers with stray
        text refused; identifiers set aside (dropped, with their reason)."""
        kinds = [_column_kind(dtype) for dtype in X.dtypes]
        unsupported = [
            f"{col!r} ({dtype})"
            for col, dtype, kind in zip(X.columns, X.dtypes, kinds, strict=True)
            if kind is None
        ]
        if unsupported:
            raise ValueError(
                f"{type(self).__name__} supports numeric, bool, object, category and "
                f"string columns; got unsupported column(s) {', '.join(unsupported)}. "
                "Convert them to numbers or strings first."
            )
        self._identifiers = {}
        for i, kind in enumerate(kinds):
            if kind != "categorical":
                continue
            _check_text_in_numbers(X.iloc[:, i], X.columns[i])
            reason = _identifier_reason(X.iloc[:, i])
            if reason is not None:
                kinds[i], self._identifiers[X.columns[i]] = "identifier", reason
        self._numeric_idx = [i for i, k in enumerate(kinds) if k == "numeric"]
        self._categorical_idx = [i for i, k in enumerate(kinds) if k == "categorical"]
        self.numeric_features_ = [X.columns[i] for i in self._numeric_idx]
        self.categorical_features_ = [X.columns[i] for i in self._categorical_idx]

    @staticmethod
    def _finalize(X_out: Any, dtype: Any = np.float32) -> np.ndarray:
        if np.dtype(dtype) not in (np.float32, np.float64):
            raise ValueError(f"dtype must be float32 or float64; got {dtype!r}.")
        X_out = np.ascontiguousarray(X_out, dtype=dtype)
        if not np.isfinite(X_out).all():
            raise ValueError(
                f"The encoded matrix has values too large for {np.dtype(dtype)}; "
                "rescale the numeric columns or set scale_numeric=True."
            )
        return X_out


# The names saved model files give these objects (skops records a class's or a
# function's module): the area's face, which re-exports them, so that files do
# not depend on the module that defines them.
for _saved in (TabularPreprocessor, _as_object_with_nan, _as_str, _column_median):
    _saved.__module__ = "autoglm_graph.preprocessing"
del _saved

#: The classes and functions a fitted :class:`TabularPreprocessor` is made of,
#: by the name a saved file gives each (``module.name``): what reading one
#: back builds, besides builtins and numpy's arrays, dtypes and scalars.
PREPROCESSOR_PARTS: dict[str, Any] = {
    f"{part.__module__}.{part.__name__}": part
    for part in (
        TabularPreprocessor,
        Pipeline,
        ColumnTransformer,
        SimpleImputer,
        StandardScaler,
        MissingIndicator,
        FunctionTransformer,
        OneHotEncoder,
        VarianceThreshold,
        _as_object_with_nan,
        _as_str,
        _column_median,
    )
}
