"""The estimators' shared class, :class:`BaseGraphGLM`: one class composed of
parts that each own one job and return what they fit (the estimator keeps it).

- :mod:`._checks`: the parameters and the rows, checked;
- :mod:`._glm_fit`: the global GLM's terms, its exact solve, the balance;
- :mod:`._location_fit`: the location effect of ``location_columns``;
- :mod:`._network_fit`: the validation split, the network's rows, its trainer
  and the fitted network (:class:`~autoglm_graph.network.FittedNetwork`);
- :mod:`._reading`: predictions' linear predictor, per-row coefficients,
  attention (through :class:`~autoglm_graph.estimators.Predictor`);
- :mod:`._state`: ``to_state()`` / ``from_state(state)``, what persistence
  writes and the one path by which it builds a loaded estimator.

The public classes, with their parameters documented, are in
:mod:`autoglm_graph.estimators._estimators`.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted

from ..explain import IntervalSettings
from ..glm import Family, split_target
from ..network import CoefficientMap, coefficient_map
from ..persistence import save_model
from ..policy import FitPolicy
from ..preprocessing import TabularPreprocessor
from ..utils import PhaseTimes, resolve_device, torch, with_thread_limit
from . import _gam_fallback as gam_fallback
from . import _glm_fit as glm_fit
from . import _reading as reading
from . import _state as state_io
from ._checks import check_fit_data, check_params, check_X, group_codes
from ._location_fit import fit_location
from ._network_fit import (
    fit_network,
    fold_rows,
    make_trainer,
    policy_of,
    split_rows,
)
from ._rows import FitRows, row_labels
from .predictor import Predictor

if TYPE_CHECKING:
    from ..network import RowData, Trainer

# The network's modules (torch among them) are imported by the parts that
# train one: a model that is the global GLM predicts without.


class BaseGraphGLM(BaseEstimator):
    """Shared fitting and inference of the graph-contextualized GLM."""

    def __init__(
        self,
        *,
        alpha: float = 1e-6,
        formula: str | None = None,
        splines: bool | list = False,
        splines_local: str = "linear",
        fit_intercept: bool = True,
        categorical_coding: str = "treatment",
        base_levels: dict | None = None,
        min_frequency: float | int | None = None,
        max_categories: int | None = None,
        handle_missing: str = "impute",
        n_neighbors: int = 16,
        threshold: float = 0.0,
        graph_space: str = "embedding",
        graph_refresh: int = 10,
        graph_backend: str = "auto",
        hidden_channels: int = 64,
        heads: int = 4,
        num_layers: int = 2,
        conv: str = "gat",
        message_passing: str = "auto",
        numeric_embedding: str = "piecewise_linear",
        dropout: float = 0.1,
        use_neighbor_targets: bool = True,
        location_columns: list | None = None,
        location_neighbors: int | str = "auto",
        local_penalty: float = 1e-3,
        global_terms: list | None = None,
        local_sign: dict | None = None,
        interval_members: int = 0,
        interval_settings: IntervalSettings | None = None,
        learning_rate: float = 6e-3,
        weight_decay: float = 1e-4,
        ema_decay: float = 0.9,
        max_epochs: int = 300,
        batch_size: int | None = None,
        early_stopping: bool = True,
        validation_fraction: float = 0.1,
        n_iter_no_change: int = 10,
        tol: float = 1e-4,
        callbacks: list | None = None,
        device: str = "auto",
        precision: str = "auto",
        random_state=None,
        n_jobs: int | None = None,
        verbose: int = 0,
        fit_policy: FitPolicy | None = None,
    ) -> None:
        self.alpha = alpha
        self.formula = formula
        self.splines = splines
        self.splines_local = splines_local
        self.fit_intercept = fit_intercept
        self.categorical_coding = categorical_coding
        self.base_levels = base_levels
        self.min_frequency = min_frequency
        self.max_categories = max_categories
        self.handle_missing = handle_missing
        self.n_neighbors = n_neighbors
        self.threshold = threshold
        self.graph_space = graph_space
        self.graph_refresh = graph_refresh
        self.graph_backend = graph_backend
        self.hidden_channels = hidden_channels
        self.heads = heads
        self.num_layers = num_layers
        self.conv = conv
        self.message_passing = message_passing
        self.numeric_embedding = numeric_embedding
        self.dropout = dropout
        self.use_neighbor_targets = use_neighbor_targets
        self.location_columns = location_columns
        self.location_neighbors = location_neighbors
        self.local_penalty = local_penalty
        self.global_terms = global_terms
        self.local_sign = local_sign
        self.interval_members = interval_members
        self.interval_settings = interval_settings
        self.learning_rate = learning_rate
        self.weight_decay = weight_decay
        self.ema_decay = ema_decay
        self.max_epochs = max_epochs
        self.batch_size = batch_size
        self.early_stopping = early_stopping
        self.validation_fraction = validation_fraction
        self.n_iter_no_change = n_iter_no_change
        self.tol = tol
        self.callbacks = callbacks
        self.device = device
        self.precision = precision
        self.random_state = random_state
        self.n_jobs = n_jobs
        self.verbose = verbose
        self.fit_policy = fit_policy

    @classmethod
    def default_search_space(cls, family: str | Family | None = None) -> dict:
        """Optuna distributions for :class:`~autoglm_graph.GraphGLMSearchCV`.

        Parameters
        ----------
        family : str, Family or None, default=None
            The family the search will fit; ``"tweedie"`` adds ``power``.

        Returns
        -------
        dict of str to optuna.distributions.BaseDistribution
        """
        from ._search_space import default_search_space

        return default_search_space(family)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = True  # the preprocessing imputes
        tags.input_tags.categorical = True
        tags.input_tags.string = True
        return tags

    def _validate_params(self) -> None:
        check_params(self)

    # --------------------------------------------------------------- fitting
    @with_thread_limit
    def _fit(
        self, X, y, sample_weight=None, offset=None, groups=None, neighbor_cache=None
    ):
        """``fit``; ``neighbor_cache``
        (a :class:`~autoglm_graph.neighbors.NeighborCache`) shares input-space
        neighbour searches between fits on the same rows
        (:class:`~autoglm_graph.GraphGLMSearchCV` passes one to its trials)."""
        self._validate_params()
        self.device_ = resolve_device(self.device)
        times = PhaseTimes(self.device_)
        with times.phase("preprocessing"):
            X, rows, glm_design = self._preprocess(X, y, sample_weight, offset, groups)
        with times.phase("global_glm"):
            self._fit_global_glm(glm_design, rows)
        del glm_design
        self._coefficient_map()  # names and the GLM's signs, before training
        self._fitted = None
        self._validation_positions = None
        self.network_ = None
        self.location_effect_ = None
        self.location_report_ = None
        self.history_ = []
        self.n_iter_ = 0
        n_context = self._terms.context(rows.design).shape[1]
        reason = self._global_only_reason(X.shape[0], n_context)
        if reason is None:
            # The validation split's seed; the GAM fallback's folds too.
            rng = check_random_state(self.random_state)
            seed = int(rng.randint(np.iinfo(np.int32).max))
            reason = self._fit_local(rows, neighbor_cache, times, seed)
            if self._network_dropped():
                with times.phase("global_glm"):
                    rows, reason = self._gam_fallback(rows, reason, seed)
        # A kept location effect alone is not the global GLM either.
        self.is_global_only_ = reason is not None and self.location_effect_ is None
        self.global_only_reason_ = reason
        with times.phase("balance"):
            self.balance_correction_ = self._balance(rows)
        with times.phase("global_glm"):  # its tables, kept for summary()
            self.glm_statistics_ = glm_fit.statistics(self, rows, y, sample_weight)
        if reason is not None and self.verbose:
            print(
                f"{type(self).__name__}: the fitted model is the global GLM ({reason})."
            )
        self._train_index = np.asarray(row_labels(X))
        offset = rows.offset
        self.offset_used_ = offset is not None  # predict warns when it is missing
        self.offset_range_ = (
            None if offset is None else (float(offset.min()), float(offset.max()))
        )
        self.fit_times_ = times.result()
        return self

    def _preprocess(self, X, y, sample_weight, offset, groups):
        """The data checked, the target encoded, the family chosen, the
        preprocessor fitted and the global GLM's terms chosen (``_terms``);
        returns X, the fit's rows and the GLM's design."""
        if self.formula is not None:  # the left side's column leaves X
            X, y = split_target(self.formula, self.fit_intercept, X, y)
        X, y, sample_weight, offset = check_fit_data(self, X, y, sample_weight, offset)
        groups = group_codes(groups, X.shape[0])
        y_model = self._encode_target(y)
        family = self._make_family(y_model)
        family.check_y(y_model)
        family.check_offset(offset)
        self.family_ = family
        self.preprocessor_ = TabularPreprocessor(
            min_frequency=self.min_frequency,
            max_categories=self.max_categories,
            handle_missing=self.handle_missing,
        )
        # float64: the GLM is solved to a gradient tolerance on it (the
        # network takes a float32 copy).
        design = self.preprocessor_.fit_transform(X, dtype=np.float64)
        terms, self.base_levels_ = glm_fit.choose_terms(
            self, self.preprocessor_, design, sample_weight, X
        )
        self._terms = terms
        self.feature_names_out_ = terms.names
        design = terms.design(design, X)  # (the formula's columns appended)
        rows = FitRows(design, y_model, sample_weight, offset, groups)
        return X, rows, terms.select(design)

    def _fit_global_glm(self, glm_design: np.ndarray, rows: FitRows) -> None:
        solution = glm_fit.solve(
            self, glm_design, rows, self.family_, self._terms, self._n_outputs
        )
        self._fit_global_glm_solution(solution)

    def _fit_global_glm_solution(self, solution: glm_fit.GLMSolution) -> None:
        if solution.splines_penalty is not None:
            self.splines_penalty_ = solution.splines_penalty
            self.splines_scores_ = solution.splines_scores
        self._terms = solution.terms
        self.family_ = solution.family
        self.global_glm_ = solution.glm
        self._set_global_coefficients(solution.glm)

    def _fit_local(self, rows: FitRows, neighbor_cache, times, seed: int) -> str | None:
        """The location effect, then the network of per-row deviations, on
        top of the global GLM; returns why the model stays the global GLM
        (None: a network was kept). ``seed`` draws the validation split, the
        initial weights and the dropout masks."""
        train_pos, val_pos = split_rows(self, rows, seed)
        # Read by GraphGLMSearchCV, which scores a trial on these rows.
        self._validation_positions = val_pos
        if len(train_pos) < 2:
            return "too few training rows after the validation split"
        location = fit_location(self, rows, train_pos, val_pos)
        eta_shift = None
        if location is not None:
            self.location_report_ = location.report
            self.location_effect_ = location.effect
            eta_shift = location.shift
        if self.max_epochs == 0:  # the location effect without a network
            return "max_epochs=0"
        trained = fit_network(
            self,
            rows,
            self._terms,
            (train_pos, val_pos),
            eta_shift,
            seed,
            neighbor_cache,
            times,
        )
        self.history_ = trained.history
        if trained.gain is not None:
            self.validation_gain_ = trained.gain
            self.validation_gain_se_ = trained.gain_se
        self.n_iter_ = trained.n_iter
        keep = policy_of(self).keep_standard_errors
        if trained.network is None:
            return (
                "the network did not beat the global GLM's validation deviance by "
                f"more than {keep:g} standard error{'' if keep == 1 else 's'}"
            )
        self.best_epoch_ = trained.best_epoch
        self._fitted = trained.network
        self.network_ = trained.network.net
        return None

    def _network_dropped(self) -> bool:
        """Whether a network was trained and dropped for the global GLM
        (no location effect kept either)."""
        return (
            self.network_ is None
            and self.location_effect_ is None
            and bool(self.history_)
        )

    def _gam_fallback(
        self, rows: FitRows, reason: str, seed: int
    ) -> tuple[FitRows, str]:
        """``FitPolicy(fallback="gam")``: the GAM in place of the global GLM
        where it beats it cross-fitted on the fit's rows (folds drawn with
        ``seed``); the fit's rows (the GAM's design) and the reason the model
        is global."""
        policy = policy_of(self)
        if policy.fallback != "gam" or not gam_fallback.applies(self):
            return rows, reason
        folds = fold_rows(self, rows, policy.fallback_folds, seed)
        choice = gam_fallback.choose_gam(self, rows, folds)
        if choice is None:
            return rows, reason
        self._fit_global_glm_solution(choice.solution)
        self.feature_names_out_ = choice.solution.terms.names
        return choice.rows, (
            f"{reason}; the GAM (splines on the GLM's numeric columns) beat the "
            f"GLM's held-out deviance over {len(folds)} folds by {choice.gain:.3g} "
            f"(standard error {choice.gain_se:.2g}) and replaced it"
        )

    def _balance(self, rows: FitRows) -> float:
        """Shift the intercept so that the fit reproduces the observed total
        (``balance``); returns the shift, 0.0 when it does not apply."""
        glm, shift = glm_fit.balance(self, rows)
        if glm is not None:
            self.global_glm_ = glm
            self._set_global_coefficients(glm)
        return shift

    def _global_only_reason(self, n_samples: int, n_columns: int) -> str | None:
        if n_columns == 0:
            return "X has no feature that varies: the intercept-only GLM"
        if np.isinf(self.local_penalty):
            return "local_penalty=inf"
        if self.max_epochs == 0 and self.location_columns is None:
            return "max_epochs=0"  # (with location columns: their effect alone)
        min_rows = policy_of(self).min_rows_for_network
        if n_samples < min_rows:
            return f"only {n_samples} rows; the network needs {min_rows}"
        return None

    @property
    def _n_outputs(self) -> int:
        """Linear predictors per row: the family's, for the fitted classes."""
        classes = getattr(self, "classes_", None)
        return self.family_.n_outputs(None if classes is None else len(classes))

    def _stratify_labels(self, y_model: np.ndarray):
        """The labels the validation split is stratified by (None: none)."""
        return None

    def _make_trainer(self, n_features: int, train: RowData) -> Trainer:
        """The trainer ``fit`` builds for these training rows."""
        return make_trainer(self, self._terms, n_features, train)

    # ------------------------------------------------------------- inference
    def predictor(self) -> Predictor:
        """The fitted model's arithmetic: design, linear predictor, coefficients.

        Returns
        -------
        Predictor
            Reads the fitted state (no copy): rows -> design -> linear
            predictor and per-row coefficients, in the user's units too.
        """
        check_is_fitted(self, "global_glm_")
        return Predictor(
            preprocessor=self.preprocessor_,
            global_glm=self.global_glm_,
            n_outputs=self._n_outputs,
            check_X=functools.partial(check_X, self, reset=False),
            predict_chunk=policy_of(self).predict_chunk,
            n_jobs=self.n_jobs,
            location_effect=getattr(self, "location_effect_", None),
            network=getattr(self, "_fitted", None),
            terms=getattr(self, "_terms", None),
            coef_map=self._coefficient_map(),
        )

    def _coefficient_map(self) -> CoefficientMap | None:
        """The constraints ``global_terms``, ``local_sign`` and
        ``splines_local="linear"`` on the fitted design (None without; an
        estimator saved before they existed too)."""
        return coefficient_map(
            getattr(self, "global_terms", None),
            getattr(self, "local_sign", None),
            self.preprocessor_,
            self.global_glm_,
            getattr(self, "_terms", None),
            hold_bases=glm_fit.splines_local_of(self) == "linear",
        )

    def _global_theta_user(self) -> np.ndarray:
        """The global GLM's ``[n_outputs, 1 + p]`` (intercept, slopes), user units."""
        return self.predictor().global_theta_user()

    # --------------------------------------------------------------- readers
    def local_coef(self, X, offset=None, interval=None) -> pd.DataFrame:
        """Per-row GLM coefficients: the global GLM plus each row's deviation.

        Parameters
        ----------
        X : array-like or DataFrame of shape (n_samples, n_features)
        offset : float or array-like of shape (n_samples,), default=None
            Accepted for symmetry with ``predict``; it does not change coefficients.
        interval : float or None, default=None
            With a level in (0, 1), e.g. 0.9, also the lower and upper bounds
            of each coefficient from the bootstrap members of the fit
            (``interval_members``; see :mod:`autoglm_graph.explain.intervals`). For
            a model that is the global GLM, the GLM's Wald interval on every
            row: ``coef_table(X_train, y_train, alpha=1 - interval)``'s
            ``ci_lower`` and ``ci_upper``.

        Returns
        -------
        DataFrame of shape (n_samples, n_terms)
            Columns ``intercept`` (absent with ``fit_intercept=False``) and
            ``feature_names_out_``; for the multinomial family a (class, term)
            column MultiIndex. With ``interval``, three times as many columns
            under a first column level ``statistic``: ``"coef"`` (the frame
            above), ``"lower"`` and ``"upper"``, so that
            ``local_coef(X, interval=0.9)["lower"]`` is shaped as
            ``local_coef(X)``.
        """
        return reading.local_coef(self, X, offset, interval)

    @with_thread_limit
    def explain(self, X) -> pd.DataFrame:
        """The training rows each row attended to, with attention weights.

        Parameters
        ----------
        X : array-like or DataFrame of shape (n_samples, n_features)

        Returns
        -------
        DataFrame
            One line per (row, neighbour): ``row`` (X's index, or position),
            ``neighbor`` (the training row's index in the training data, or its
            position), ``rank``, ``similarity`` and ``attention`` (last layer,
            mean over heads), sorted by row then rank. Empty when the fitted
            model is the global GLM.
        """
        return reading.explain(self, X, self._train_index)

    def coef_table(
        self,
        X=None,
        y=None,
        sample_weight=None,
        offset=None,
        cov_type: str = "fisher",
        alpha: float = 0.05,
        weights: str = "variance",
    ) -> pd.DataFrame:
        """The global GLM's coefficients with standard errors, z, p and CIs.

        See :func:`autoglm_graph.glm.coef_table`.

        Parameters
        ----------
        X, y, sample_weight, offset : default=None
            None: the training rows' table, kept by ``fit`` and saved with the
            model (``ValueError`` for a file written before it was kept). Else
            the rows to compute it on (``X`` with ``y``, or a formula's target
            in ``X``, as in ``fit``; a part of them is a ``ValueError``).
        cov_type : {"fisher", "sandwich"}, default="fisher"
        alpha : float, default=0.05
            Level of the confidence intervals (not the L2 penalty).
        weights : {"variance", "frequency"}, default="variance"
            What ``sample_weight`` means for the standard errors
            (statsmodels' ``var_weights`` or ``freq_weights``).

        Returns
        -------
        DataFrame
            ``coef``, ``std_err``, ``z``, ``p_value``, ``ci_lower``,
            ``ci_upper`` per term.
        """
        from ..glm import coef_table

        return coef_table(
            self,
            X,
            y,
            sample_weight,
            offset,
            cov_type=cov_type,
            alpha=alpha,
            weights=weights,
        )

    def wald_test_terms(
        self,
        X=None,
        y=None,
        sample_weight=None,
        offset=None,
        cov_type: str = "fisher",
        weights: str = "variance",
    ) -> pd.DataFrame:
        """Joint Wald tests per term of the global GLM (a categorical
        column's levels together), as statsmodels' ``wald_test_terms``.

        See :func:`autoglm_graph.glm.wald_test_terms`.

        Parameters
        ----------
        X, y, sample_weight, offset : default=None
            As for ``coef_table``: None, the training rows (kept by ``fit``).
        cov_type : {"fisher", "sandwich"}, default="fisher"
        weights : {"variance", "frequency"}, default="variance"

        Returns
        -------
        DataFrame
            ``chi2``, ``df`` and ``p_value`` per term (ValueError as ``coef_table``).
        """
        from ..glm import wald_test_terms

        return wald_test_terms(
            self, X, y, sample_weight, offset, cov_type=cov_type, weights=weights
        )

    def summary(
        self,
        X=None,
        y=None,
        sample_weight=None,
        offset=None,
        *,
        alpha: float = 0.05,
        cov_type: str = "fisher",
        weights: str = "variance",
    ):
        """The global GLM's summary table, as statsmodels' ``GLMResults.summary()``.

        Without data, of the training rows (``fit`` keeps the figures, ``save``
        writes them). See :func:`autoglm_graph.glm.glm_summary`.

        Parameters
        ----------
        X, y, sample_weight, offset : default=None
            None: the training rows, with the weights and offset of the fit;
            else the rows to report on, as for ``coef_table``.
        alpha : float, default=0.05
            Level of the confidence intervals (not the L2 penalty).
        cov_type : {"fisher", "sandwich"}, default="fisher"
        weights : {"variance", "frequency"}, default="variance"
            What ``sample_weight`` means (statsmodels' ``var_weights`` or
            ``freq_weights``).

        Returns
        -------
        GLMSummary
            ``print`` it for the table: family, link, rows, parameters,
            deviance, null deviance, D², log-likelihood, AIC, BIC, scale and
            the coefficients; ``.header`` (dict) and ``.coefficients``
            (DataFrame) hold the numbers. ``ValueError`` as ``coef_table``.
        """
        from ..glm import glm_summary

        return glm_summary(
            self,
            X,
            y,
            sample_weight,
            offset,
            alpha=alpha,
            cov_type=cov_type,
            weights=weights,
        )

    def factor_table(
        self,
        X,
        y=None,
        sample_weight=None,
        offset=None,
        *,
        alpha: float = 0.05,
        cov_type: str = "fisher",
        weights: str = "variance",
    ) -> pd.DataFrame:
        """Per term and level: relativity, its interval, weight and local spread.

        See :func:`autoglm_graph.explain.tariffs.factor_table`.

        Parameters
        ----------
        X : array-like or DataFrame of shape (n_samples, n_features)
        y : array-like of shape (n_samples,), default=None
            With the data of the fit, the standard errors and intervals
            (else NaN).
        sample_weight, offset : array-like of shape (n_samples,), default=None
        alpha : float, default=0.05
        cov_type : {"fisher", "sandwich"}, default="fisher"
        weights : {"variance", "frequency"}, default="variance"

        Returns
        -------
        DataFrame
            One row per term and level (see the function).
        """
        from ..explain import factor_table

        return factor_table(
            self,
            X,
            y,
            sample_weight,
            offset,
            alpha=alpha,
            cov_type=cov_type,
            weights=weights,
        )

    def local_coef_summary(self, X, offset=None) -> pd.DataFrame:
        """How the per-row coefficients vary over the rows of X, per term.

        See :func:`autoglm_graph.glm.local_coef_summary`.

        Parameters
        ----------
        X : array-like or DataFrame of shape (n_samples, n_features)
        offset : float or array-like of shape (n_samples,), default=None

        Returns
        -------
        DataFrame
            ``global``, ``mean``, ``sd``, quantiles and
            ``opposite_sign_share`` per term.
        """
        from ..glm import local_coef_summary

        return local_coef_summary(self, X, offset)

    # ----------------------------------------------------------- persistence
    def save(self, path):
        """Save the fitted model without pickle; read it with ``autoglm_graph.load``.

        See :func:`autoglm_graph.persistence.save_model`: safetensors and JSON
        (and skops for the preprocessing), in a directory or a ``.zip`` file.

        Parameters
        ----------
        path : str or path-like
            A directory, or a file whose name ends in ``.zip``.

        Returns
        -------
        pathlib.Path
            The path written.

        Notes
        -----
        The bootstrap members of ``interval_members`` and the bias estimate
        of ``interval_settings`` are saved with the model, so that the loaded
        model's ``local_coef(X, interval=...)`` is the same.
        """
        return save_model(self, path)

    def to_state(self) -> dict:
        """The estimator's state: its parameters and its fitted state.

        What :func:`~autoglm_graph.persistence.save_model` writes, and what
        :meth:`from_state` builds an estimator from.

        Returns
        -------
        dict
            ``"estimator"`` (the class name) and ``"params"``; for a fitted
            estimator also ``"fitted"`` (its fitted attributes: plain data,
            arrays and the fitted parts), ``"glm_terms"``, ``"train_index"``,
            ``"network"`` and ``"interval_members"`` (the members' states).
            It shares the estimator's objects (no copy).
        """
        return state_io.to_state(self)

    @classmethod
    def from_state(cls, state: dict) -> BaseGraphGLM:
        """The estimator of a state, as :meth:`to_state` gives it.

        The one path by which :func:`~autoglm_graph.persistence.load_model`
        builds a loaded estimator.

        Parameters
        ----------
        state : dict
            From :meth:`to_state` (or read from a file): its ``"params"`` are
            validated as ``fit`` validates them.

        Returns
        -------
        BaseGraphGLM
            Fitted when the state has ``"fitted"``, else unfitted.
        """
        return state_io.from_state(cls, state)

    def __getstate__(self):
        # The fitted network pickles through its state() (tensors on the CPU);
        # network_ is its net, restored with it.
        state = self.__dict__.copy()
        if state.get("_fitted") is not None:
            state["network_"] = None
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        if "device_" in state:
            try:
                self.device_ = resolve_device(self.device)
            except ValueError:  # e.g. fitted on a GPU, loaded where there is none
                self.device_ = torch.device("cpu")
        if getattr(self, "_fitted", None) is not None:
            self._fitted = self._fitted.to(self.device_)
            self.network_ = self._fitted.net
