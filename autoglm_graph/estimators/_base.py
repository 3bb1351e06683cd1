"""The fitting and inference the two estimators share (:class:`BaseGraphGLM`).

The global GLM is solved first; the network of per-row deviations is then
trained (:mod:`autoglm_graph.training`) and kept as a
:class:`~autoglm_graph._fitted.FittedNetwork`. The public classes, with their
parameters documented, are in :mod:`autoglm_graph.estimators`.
"""

from __future__ import annotations

import functools
import warnings
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import GroupShuffleSplit, train_test_split
from sklearn.utils import check_random_state
from sklearn.utils.validation import (
    _check_sample_weight,
    check_array,
    check_consistent_length,
    check_is_fitted,
    column_or_1d,
    validate_data,
)

from ..explain import IntervalSettings, check_interval_members, check_interval_settings
from ..glm import (
    CATEGORICAL_CODINGS,
    SPLINES_LOCAL,
    Family,
    NegativeBinomialFamily,
    balance_glm,
    check_formula,
    check_splines,
    fit_global_glm,
    fit_negative_binomial,
    split_target,
)
from ..network import CoefficientMap, check_constraint_params, coefficient_map
from ..policy import FitPolicy
from ..preprocessing import TabularPreprocessor
from ..utils import (
    MESSAGE_PASSING,
    PRECISIONS,
    PhaseTimes,
    align_to_rows,
    check_callbacks,
    check_number,
    check_offset,
    check_option,
    resolve_device,
    resolve_precision,
    torch,
    with_thread_limit,
)
from ._location_fit import _LocationMixin
from ._persistence import _PersistenceMixin
from ._reading import _ReadingMixin
from ._terms_fit import _splines_local_of, _splines_of, _TermsMixin
from .predictor import Predictor

if TYPE_CHECKING:
    from ..network import RowData, Trainer

# The network's modules (torch_geometric among them) are imported by the
# methods that train one: a model that is the global GLM predicts without.


def _policy_of(estimator) -> FitPolicy:
    """The estimator's ``fit_policy``; the defaults for None (or an estimator
    pickled before the parameter existed)."""
    return getattr(estimator, "fit_policy", None) or FitPolicy()


class BaseGraphGLM(
    _ReadingMixin, _LocationMixin, _TermsMixin, _PersistenceMixin, BaseEstimator
):
    """Shared fitting and inference of the graph-contextualized GLM."""

    def __init__(
        self,
        *,
        alpha: float = 1e-4,
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

    # ------------------------------------------------------------ validation
    def _validate_params(self) -> None:
        check_number("alpha", self.alpha, low=0)
        check_option("fit_intercept", self.fit_intercept, (True, False))
        check_option("categorical_coding", self.categorical_coding, CATEGORICAL_CODINGS)
        _check_rare_levels(self.min_frequency, self.max_categories)
        check_option("handle_missing", self.handle_missing, ("impute", "error"))
        check_formula(self.formula)
        check_splines(_splines_of(self))
        check_option("splines_local", _splines_local_of(self), SPLINES_LOCAL)
        if self.formula is not None and _splines_of(self) is not False:
            raise ValueError(
                "The 'splines' parameter does not apply with a formula: write the "
                "splines in the formula, e.g. bs(age, df=5); got "
                f"formula={self.formula!r} and splines={self.splines!r}."
            )
        if self.formula is not None and self.base_levels is not None:
            raise ValueError(
                "The 'base_levels' parameter does not apply with a formula: choose "
                "a base level in the formula, e.g. C(region, contr.treatment('b')); "
                f"got formula={self.formula!r} and base_levels={self.base_levels!r}."
            )
        if not (self.fit_intercept or self.location_columns is None):
            raise ValueError(
                "The 'location_columns' parameter shifts the intercept and needs "
                f"fit_intercept=True; got location_columns={self.location_columns!r} "
                "and fit_intercept=False."
            )
        if not self.fit_intercept and getattr(self, "balance", None) is True:
            raise ValueError(
                "The 'balance' parameter shifts the intercept and needs "
                "fit_intercept=True; got balance=True and fit_intercept=False."
            )
        check_number("n_neighbors", self.n_neighbors, integer=True, low=1)
        check_number("threshold", self.threshold, low=-1, high=1)
        check_option("graph_space", self.graph_space, ("embedding", "input"))
        check_number("graph_refresh", self.graph_refresh, integer=True, low=1)
        check_option("graph_backend", self.graph_backend, ("auto", "exact", "faiss"))
        check_number("hidden_channels", self.hidden_channels, integer=True, low=1)
        check_number("heads", self.heads, integer=True, low=1)
        if self.hidden_channels % self.heads:
            raise ValueError(
                f"The 'heads' parameter must divide hidden_channels="
                f"{self.hidden_channels}; got heads={self.heads}."
            )
        check_number("num_layers", self.num_layers, integer=True, low=1)
        check_option("conv", self.conv, ("gat", "gatv2"))
        check_option("message_passing", self.message_passing, MESSAGE_PASSING)
        check_option("precision", self.precision, PRECISIONS)
        if self.message_passing == "fused" and self.conv != "gat":
            raise ValueError(
                "The 'message_passing' parameter 'fused' needs conv='gat'; got "
                f"conv={self.conv!r}."
            )
        check_number("dropout", self.dropout, low=0, high=1)
        check_option("use_neighbor_targets", self.use_neighbor_targets, (True, False))
        _check_location_columns(self.location_columns)
        if self.location_neighbors != "auto":
            check_number(
                "location_neighbors", self.location_neighbors, integer=True, low=1
            )
        check_number("local_penalty", self.local_penalty, low=0, allow_inf=True)
        check_constraint_params(self.global_terms, self.local_sign)
        check_interval_members(getattr(self, "interval_members", 0))
        check_interval_settings(getattr(self, "interval_settings", None))
        check_number("learning_rate", self.learning_rate, low=0, low_open=True)
        check_number("weight_decay", self.weight_decay, low=0)
        if self.fit_policy is not None and not isinstance(self.fit_policy, FitPolicy):
            raise ValueError(
                "The 'fit_policy' parameter must be None or a FitPolicy; got "
                f"{self.fit_policy!r}."
            )
        check_number("ema_decay", self.ema_decay, low=0, high=1)
        if self.ema_decay == 1:
            raise ValueError(
                "The 'ema_decay' parameter must be in [0, 1): an average that "
                "never moves keeps the untrained network; got ema_decay=1."
            )
        check_number("max_epochs", self.max_epochs, integer=True, low=0)
        check_number(
            "batch_size", self.batch_size, integer=True, low=1, allow_none=True
        )
        check_option("early_stopping", self.early_stopping, (True, False))
        check_number(
            "validation_fraction",
            self.validation_fraction,
            low=0,
            high=1,
            low_open=True,
            high_open=True,
        )
        check_callbacks(self.callbacks)
        check_number("n_iter_no_change", self.n_iter_no_change, integer=True, low=1)
        check_number("tol", self.tol, low=0)
        check_number("n_jobs", self.n_jobs, integer=True, allow_none=True)
        if self.n_jobs == 0:
            raise ValueError(
                "The 'n_jobs' parameter must be a non-zero integer or None; got 0."
            )
        check_number("verbose", self.verbose, integer=True, low=0)

    def _validate_X(self, X, *, reset: bool):
        if isinstance(X, pd.Series) and not reset:
            # One row, as df.iloc[i] gives it: its index holds the column names.
            X = X.to_frame().T.infer_objects()
        on_frame = not reset and getattr(self.preprocessor_, "_fitted_on_frame", False)
        if hasattr(X, "iloc") or on_frame:
            if not hasattr(X, "iloc"):
                # Fitted on a DataFrame: an array's columns are those of fit,
                # and the preprocessor reads each as fit did (strings stay
                # strings), so only its shape is checked here.
                X = check_array(X, dtype=None, ensure_all_finite=False)
            validate_data(self, X, reset=reset, skip_check_array=True)
            return X
        return validate_data(
            self,
            X,
            reset=reset,
            accept_sparse=False,
            ensure_all_finite="allow-nan",
            dtype="numeric",
            ensure_min_samples=1,
            ensure_min_features=0,  # no column: the intercept-only GLM
        )

    def _validate_inputs(self, X, y, sample_weight, offset):
        X = self._validate_X(X, reset=True)
        if y is None:
            raise ValueError(
                f"{type(self).__name__} requires y to be passed, but the target y "
                "is None."
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
            if self.formula is not None:  # the left side's column leaves X
                X, y = split_target(self.formula, self.fit_intercept, X, y)
            X, y, sample_weight, offset = self._validate_inputs(
                X, y, sample_weight, offset
            )
            groups = _group_codes(groups, X.shape[0])
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
            terms = self._choose_terms(design, sample_weight, X)
            terms = self._add_splines(terms, design)
            terms = self._vary_base_levels(terms)
            design = terms.design(design, X)  # (the formula's columns appended)
            glm_design = terms.select(design)
        glm_kwargs = dict(
            sample_weight=sample_weight,
            offset=offset,
            alpha=self.alpha,
            penalty_weights=terms.scale**-2.0,  # alpha penalises the user's units
            fit_intercept=terms.fit_intercept,
        )
        with times.phase("global_glm"):
            if terms.splines is not None:
                terms = self._smoothing_penalty(glm_design, y_model, terms, glm_kwargs)
                penalty_weights = terms.penalty_weights(self.alpha)
                glm_kwargs.update(alpha=1.0, penalty_weights=penalty_weights)
            if isinstance(family, NegativeBinomialFamily) and self._theta_by_ml():
                glm, family = fit_negative_binomial(glm_design, y_model, **glm_kwargs)
                self.family_ = family
            else:
                glm = fit_global_glm(
                    glm_design, y_model, family, n_outputs=self._n_outputs, **glm_kwargs
                )
        del glm_design
        self.global_glm_ = glm
        self._set_global_coefficients(glm)
        self._coefficient_map()  # names and the GLM's signs, before training
        self._fitted = None
        self._validation_positions = None
        self.network_ = None
        self.location_effect_ = None
        self.location_report_ = None
        self.history_ = []
        self.n_iter_ = 0
        reason = self._global_only_reason(X.shape[0], terms.context(design).shape[1])
        if reason is None:
            reason = self._fit_network(
                design,
                y_model,
                sample_weight,
                offset,
                glm,
                groups,
                neighbor_cache,
                times,
            )
        # A kept location effect alone is not the global GLM either.
        self.is_global_only_ = reason is not None and self.location_effect_ is None
        self.global_only_reason_ = reason
        with times.phase("balance"):
            self.balance_correction_ = self._balance(
                design, y_model, sample_weight, offset
            )
        if reason is not None and self.verbose:
            print(
                f"{type(self).__name__}: the fitted model is the global GLM ({reason})."
            )
        self._train_index = np.asarray(self._row_labels(X))
        self.offset_used_ = offset is not None  # predict warns when it is missing
        self.offset_range_ = (
            None if offset is None else (float(offset.min()), float(offset.max()))
        )
        self.fit_times_ = times.result()
        return self

    def _balance(self, design, y_model, sample_weight, offset) -> float:
        """Shift the intercept so that the fit reproduces the observed total.

        Applies :func:`~autoglm_graph._glm.balance_glm` on all the rows passed
        to ``fit`` (the validation split included); returns the shift, 0.0 when
        ``balance`` is off or does not apply (see ``GraphGLMRegressor``).
        """
        balance = getattr(self, "balance", False)  # the classifier has none
        if balance is False or not self.family_.has_balance_correction:
            return 0.0
        if not getattr(self, "fit_intercept", True):
            return 0.0  # no intercept to shift (balance=True raised in fit)
        if balance == "auto" and not self.family_.canonical_link:
            return 0.0  # the maximum likelihood GLM stays as scikit-learn's
        eta, _ = self.predictor().coefficients(design, offset)
        self.global_glm_, shift = balance_glm(
            self.global_glm_, self.family_, y_model, eta[:, 0], sample_weight
        )
        self._set_global_coefficients(self.global_glm_)
        return shift

    @property
    def _n_outputs(self) -> int:
        """Linear predictors per row: the family's, for the fitted classes."""
        classes = getattr(self, "classes_", None)
        return self.family_.n_outputs(None if classes is None else len(classes))

    def _theta_by_ml(self) -> bool:
        """Whether the negative binomial theta is estimated (``theta=None``)."""
        return getattr(self, "theta", 1.0) is None and isinstance(self.family, str)

    def _global_only_reason(self, n_samples: int, n_columns: int) -> str | None:
        if n_columns == 0:
            return "X has no feature that varies: the intercept-only GLM"
        if np.isinf(self.local_penalty):
            return "local_penalty=inf"
        if self.max_epochs == 0 and self.location_columns is None:
            return "max_epochs=0"  # (with location columns: their effect alone)
        min_rows = _policy_of(self).min_rows_for_network
        if n_samples < min_rows:
            return f"only {n_samples} rows; the network needs {min_rows}"
        return None

    def _split(self, y_model: np.ndarray, n_samples: int, seed: int, groups=None):
        positions = np.arange(n_samples)
        if not self.early_stopping:
            return positions, None
        if groups is not None:
            splitter = GroupShuffleSplit(
                n_splits=1, test_size=self.validation_fraction, random_state=seed
            )
            train, val = next(splitter.split(positions, groups=groups))
            return np.sort(train), np.sort(val)
        stratify = self._stratify_labels(y_model)
        try:
            train, val = train_test_split(
                positions,
                test_size=self.validation_fraction,
                random_state=seed,
                stratify=stratify,
            )
        except ValueError:  # a class too small to stratify
            train, val = train_test_split(
                positions, test_size=self.validation_fraction, random_state=seed
            )
        return np.sort(train), np.sort(val)

    def _stratify_labels(self, y_model: np.ndarray):
        return None

    def _fit_network(
        self, design, y_model, sample_weight, offset, glm, groups, neighbor_cache, times
    ) -> str | None:
        from ..network import FittedNetwork

        rng = check_random_state(self.random_state)
        seed = int(rng.randint(np.iinfo(np.int32).max))
        train_pos, val_pos = self._split(y_model, design.shape[0], seed, groups)
        # Read by GraphGLMSearchCV, which scores a trial on these rows.
        self._validation_positions = val_pos
        if len(train_pos) < 2:
            return "too few training rows after the validation split"
        eta_shift = self._fit_location(
            design, y_model, sample_weight, offset, train_pos, val_pos, groups
        )
        if self.max_epochs == 0:  # the location effect without a network
            return "max_epochs=0"
        rows = self._row_data(
            design, y_model, sample_weight, offset, glm, train_pos, eta_shift
        )
        if groups is not None:
            rows.group = torch.as_tensor(groups, device=self.device_)
        train = rows.subset(torch.as_tensor(train_pos, device=self.device_))
        val = None
        if val_pos is not None and len(val_pos):
            val = rows.subset(torch.as_tensor(val_pos, device=self.device_))
        del rows  # the subsets are copies: free the full set before training
        trainer = self._make_trainer(train.context.shape[1], train)
        # The fit's own generator (seeded from the fit's seed) serves the
        # fused path; fork_rng keeps the caller's global generator as it was
        # for torch_geometric's layers, which draw from it.
        # On CUDA torch_geometric's layers draw from the device's generator.
        cuda = [self.device_] if torch.device(self.device_).type == "cuda" else []
        with torch.random.fork_rng(devices=cuda):
            result = trainer.fit(
                train, val, neighbor_cache=neighbor_cache, seed=seed, times=times
            )
        self.history_ = result.history
        if result.gain is not None:
            self.validation_gain_ = result.gain
            self.validation_gain_se_ = result.gain_se
        self.n_iter_ = max(1, len([h for h in result.history if h["epoch"] > 0]))
        if result.best is None:
            return (
                "the network did not beat the global GLM's validation deviance by "
                "more than one standard error"
            )
        self.best_epoch_ = result.best.epoch
        self._warn_if_still_improving()
        self._fitted = FittedNetwork(
            net=result.net,
            graph=trainer.graph,
            n_outputs=trainer.n_outputs,
            precision=result.precision,
            training=trainer.settings(),
            rows=train,
            states=result.states,
            positions=train_pos,
            index=result.index,
        )
        with times.phase("prediction_index"):
            self._fitted.fit_prediction_index(
                None if val is None else val.context, _policy_of(self)
            )
        self.network_ = self._fitted.net
        return None

    def _warn_if_still_improving(self) -> None:
        """ConvergenceWarning when max_epochs cut a still-improving training.

        Early stopping would have gone on: the kept epoch is among the last
        ``n_iter_no_change`` ones, as scikit-learn's iterative estimators warn
        when they reach ``max_iter``.
        """
        if not self.early_stopping or self.n_iter_ < self.max_epochs:
            return
        if self.max_epochs - self.best_epoch_ < self.n_iter_no_change:
            warnings.warn(
                f"Training stopped at max_epochs={self.max_epochs} while the "
                f"validation deviance was still improving (best epoch "
                f"{self.best_epoch_}); raise max_epochs for a better fit.",
                ConvergenceWarning,
                # the user's fit: fit -> thread limit -> _fit -> _fit_network
                stacklevel=6,
            )

    def _make_trainer(self, n_features: int, train: RowData) -> Trainer:
        from ..network import EarlyStopping, GraphConfig, NetConfig, Trainer

        policy = _policy_of(self)
        target_channels = 0 if train.targets is None else train.targets.shape[1]
        net = NetConfig(
            n_features,
            (self._terms.n_network_terms + 1) * self._n_outputs,
            hidden_channels=self.hidden_channels,
            heads=self.heads,
            num_layers=self.num_layers,
            target_channels=target_channels,
            dropout=self.dropout,
            conv=self.conv,
            message_passing=self.message_passing,
        )
        callbacks = list(self.callbacks or [])
        if self.early_stopping:
            callbacks.insert(
                0, EarlyStopping.from_policy(policy, self.n_iter_no_change, self.tol)
            )
        return Trainer(
            net=net,
            family=self.family_,
            n_outputs=self._n_outputs,
            graph=GraphConfig(
                self.graph_space,
                self.n_neighbors,
                self.threshold,
                self.graph_refresh,
                self.graph_backend,
            ),
            learning_rate=self.learning_rate,
            weight_decay=self.weight_decay,
            local_penalty=self.local_penalty,
            ema_decay=self.ema_decay,
            max_epochs=self.max_epochs,
            batch_size=self.batch_size,
            precision=resolve_precision(self.precision, self.device_),
            callbacks=callbacks,
            verbose=self.verbose,
            policy=policy,
            fit_intercept=self._terms.fit_intercept,
            coef_map=self._coefficient_map(),
            reduce=self._terms.reduce if self._terms.varied_bases else None,
        )

    def _row_data(
        self, design, y_model, sample_weight, offset, glm, train_pos, eta_shift=None
    ):
        from ..network import RowData

        device = self.device_
        # np.require copies read-only input (a pandas Series' values): torch
        # warns on non-writable arrays.
        as_tensor = lambda a: torch.as_tensor(  # noqa: E731
            np.require(a, np.float32, ["C", "W"]), device=device
        )
        eta_global = self.predictor().global_eta(design, offset)
        if eta_shift is not None:  # the location effect, leave-one-out on train
            eta_global = eta_global + eta_shift[:, None]
        targets = None
        if self.use_neighbor_targets:
            targets = outcome_features(
                self.family_, y_model, eta_global, sample_weight, train_pos
            )
        # The design is also the network's context: one tensor serves both
        # when the GLM reads every column as it is.
        terms = self._terms
        matrix = as_tensor(terms.context(design))
        glm_design = matrix
        if not terms.full or terms.add is not None:
            glm_design = as_tensor(terms.select(design))
        return RowData(
            context=matrix,
            design=glm_design,
            y=as_tensor(y_model),
            # Relative weights: the loss is a weighted mean, and weights near
            # 1e300 would be infinite in float32 (unit weights are unchanged).
            weight=as_tensor(sample_weight / np.mean(sample_weight)),
            eta_global=as_tensor(eta_global),
            targets=None if targets is None else as_tensor(targets),
        )

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
            check_X=functools.partial(self._validate_X, reset=False),
            chunk_rows=_policy_of(self).predict_chunk,
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
            hold_bases=_splines_local_of(self) == "linear",
        )


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


def _group_codes(groups, n_samples: int) -> np.ndarray | None:
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


def outcome_features(
    family: Family,
    y: np.ndarray,
    eta_global: np.ndarray,
    sample_weight: np.ndarray,
    train_pos: np.ndarray,
) -> np.ndarray:
    """What a training row's messages say about its outcome, standardised.

    Two blocks: the family's ``outcome_transform`` of the target (the log,
    smoothed so that log(0) is finite, under the log link; one-hot classes for
    multinomial) and its ``residual`` under the global GLM (Pearson; y - mu for
    multinomial). Standardised with the training rows' weighted moments.
    """
    y2 = y.reshape(len(y), -1).astype(np.float64)
    eta = torch.as_tensor(eta_global if y2.shape[1] > 1 else eta_global[:, 0])
    mu = family.inverse_link(eta).numpy().reshape(len(y), -1)
    transformed = family.outcome_transform(y2, train_pos, sample_weight)
    features = np.concatenate([transformed, family.residual(y2, mu)], axis=1)
    weights = sample_weight[train_pos]
    mean = np.average(features[train_pos], axis=0, weights=weights)
    std = np.sqrt(
        np.average((features[train_pos] - mean) ** 2, axis=0, weights=weights)
    )
    return (features - mean) / np.where(std > 1e-12, std, 1.0)
