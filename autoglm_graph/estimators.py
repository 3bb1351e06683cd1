"""scikit-learn estimators: GraphGLMRegressor and GraphGLMClassifier."""

from __future__ import annotations

import copy
import dataclasses
import warnings

import numpy as np
import pandas as pd
import torch
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import GroupShuffleSplit, train_test_split
from sklearn.preprocessing import LabelEncoder
from sklearn.utils import check_random_state
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import (
    _check_sample_weight,
    check_array,
    check_consistent_length,
    check_is_fitted,
    column_or_1d,
    validate_data,
)

from ._glm import balance_glm, fit_global_glm, fit_negative_binomial
from ._threads import with_thread_limit
from ._validation import (
    PRECISIONS,
    check_number,
    check_offset,
    check_option,
    resolve_device,
    resolve_precision,
)
from .families import Family, get_family
from .modules import MESSAGE_PASSING, GraphGLMNet
from .preprocessing import TabularPreprocessor
from .training import EarlyStopping, GraphConfig, RowData, Trainer, linear_predictor

# Below this many rows there is no graph worth learning: the model is the GLM.
MIN_ROWS_FOR_NETWORK = 10
# Rows per chunk at prediction time (bounds memory; results do not depend on it).
PREDICT_CHUNK = 8192


class _BaseGraphGLM(BaseEstimator):
    """Shared fitting and inference of the graph-contextualized GLM."""

    def __init__(
        self,
        *,
        alpha: float = 1e-4,
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
        local_penalty: float = 1e-3,
        learning_rate: float = 3e-3,
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
    ) -> None:
        self.alpha = alpha
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
        self.local_penalty = local_penalty
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
        check_number("local_penalty", self.local_penalty, low=0, allow_inf=True)
        check_number("learning_rate", self.learning_rate, low=0, low_open=True)
        check_number("weight_decay", self.weight_decay, low=0)
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
        )
        check_number("n_iter_no_change", self.n_iter_no_change, integer=True, low=1)
        check_number("tol", self.tol, low=0)
        check_number("n_jobs", self.n_jobs, integer=True, allow_none=True)
        if self.n_jobs == 0:
            raise ValueError(
                "The 'n_jobs' parameter must be a non-zero integer or None; got 0."
            )
        check_number("verbose", self.verbose, integer=True, low=0)

    def _validate_X(self, X, *, reset: bool):
        if hasattr(X, "iloc"):
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
    def _fit(self, X, y, sample_weight=None, offset=None, groups=None):
        self._validate_params()
        self.device_ = resolve_device(self.device)
        X, y, sample_weight, offset = self._validate_inputs(X, y, sample_weight, offset)
        groups = _group_codes(groups, X.shape[0])
        y_model = self._encode_target(y)
        family = self._make_family(y_model)
        family.check_y(y_model)
        self.family_ = family
        self.preprocessor_ = TabularPreprocessor()
        # float64: the GLM is solved to a gradient tolerance on it (the
        # network takes a float32 copy).
        design = self.preprocessor_.fit_transform(X, dtype=np.float64)
        self.feature_names_out_ = self.preprocessor_.get_feature_names_out()
        _, scale = self.preprocessor_.design_scaling()
        glm_kwargs = dict(
            sample_weight=sample_weight,
            offset=offset,
            alpha=self.alpha,
            penalty_weights=scale**-2.0,  # alpha penalises the user's units
        )
        if family.name == "negative_binomial" and self._theta_by_ml():
            glm, family = fit_negative_binomial(design, y_model, **glm_kwargs)
            self.family_ = family
        else:
            glm = fit_global_glm(
                design, y_model, family, n_outputs=self._n_outputs, **glm_kwargs
            )
        self.global_glm_ = glm
        self._set_global_coefficients(glm)
        self._train_positions = None
        self.network_ = None
        self.history_ = []
        self.n_iter_ = 0
        reason = self._global_only_reason(X.shape[0])
        if reason is None:
            reason = self._fit_network(
                design, y_model, sample_weight, offset, glm, groups
            )
        self.is_global_only_ = reason is not None
        self.global_only_reason_ = reason
        self.balance_correction_ = self._balance(design, y_model, sample_weight, offset)
        if reason is not None and self.verbose:
            print(
                f"{type(self).__name__}: the fitted model is the global GLM ({reason})."
            )
        self._train_index = self._row_labels(X)
        self.offset_used_ = offset is not None  # predict warns when it is missing
        return self

    def _balance(self, design, y_model, sample_weight, offset) -> float:
        """Shift the intercept so that the fit reproduces the observed total.

        Applies :func:`~autoglm_graph._glm.balance_glm` on all the rows passed
        to ``fit`` (the validation split included); returns the shift, 0.0 when
        ``balance`` is off or the link has no correction.
        """
        if not getattr(self, "balance", False):
            return 0.0
        if not self.family_.has_balance_correction:
            return 0.0
        eta, _ = self._coefficients(design, offset)
        self.global_glm_, shift = balance_glm(
            self.global_glm_, self.family_, y_model, eta[:, 0], sample_weight
        )
        self._set_global_coefficients(self.global_glm_)
        return shift

    def _theta_by_ml(self) -> bool:
        """Whether the negative binomial theta is estimated (``theta=None``)."""
        return getattr(self, "theta", 1.0) is None and isinstance(self.family, str)

    def _global_only_reason(self, n_samples: int) -> str | None:
        if np.isinf(self.local_penalty):
            return "local_penalty=inf"
        if self.max_epochs == 0:
            return "max_epochs=0"
        if n_samples < MIN_ROWS_FOR_NETWORK:
            return f"only {n_samples} rows; the network needs {MIN_ROWS_FOR_NETWORK}"
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
        self, design, y_model, sample_weight, offset, glm, groups=None
    ) -> str | None:
        rng = check_random_state(self.random_state)
        seed = int(rng.randint(np.iinfo(np.int32).max))
        train_pos, val_pos = self._split(y_model, design.shape[0], seed, groups)
        if len(train_pos) < 2:
            return "too few training rows after the validation split"
        rows = self._row_data(design, y_model, sample_weight, offset, glm, train_pos)
        if groups is not None:
            rows.group = torch.as_tensor(groups, device=self.device_)
        train = rows.subset(torch.as_tensor(train_pos, device=self.device_))
        val = None
        if val_pos is not None and len(val_pos):
            val = rows.subset(torch.as_tensor(val_pos, device=self.device_))
        del rows  # the subsets are copies: free the full set before training
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            trainer = self._make_trainer(design.shape[1], train)
            best = trainer.fit(train, val)
        self.history_ = trainer.history
        if trainer.selector is not None:
            self.validation_gain_ = trainer.selector.gain
            self.validation_gain_se_ = trainer.selector.gain_se
        self.n_iter_ = max(1, len([h for h in trainer.history if h["epoch"] > 0]))
        if best is None:
            return (
                "the network did not beat the global GLM's validation deviance by "
                "more than one standard error"
            )
        trainer.net.load_state_dict(best.state_dict)
        trainer.net.eval()
        trainer.callbacks = []
        trainer.neighbor_cache = None  # may be a search's, shared across trials
        self.best_epoch_ = best.epoch
        self._warn_if_still_improving()
        self.network_ = trainer.net
        self._trainer = trainer
        self._train_rows = train
        self._train_positions = train_pos
        self._source_states = trainer.source_states(train, best.train_graph)
        trainer.__dict__.pop("_adjacency_cache", None)  # scratch of the loop
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
        target_channels = 0 if train.targets is None else train.targets.shape[1]
        net = GraphGLMNet(
            n_features,
            (n_features + 1) * self._n_outputs,
            hidden_channels=self.hidden_channels,
            heads=self.heads,
            num_layers=self.num_layers,
            target_channels=target_channels,
            dropout=self.dropout,
            conv=self.conv,
            message_passing=self.message_passing,
        ).to(self.device_)
        callbacks = list(self.callbacks or [])
        if self.early_stopping:
            callbacks.insert(0, EarlyStopping(self.n_iter_no_change, self.tol))
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
            # Set by GraphGLMSearchCV on its trials' clones: one input-space
            # search shared by trials that differ only in k or threshold.
            neighbor_cache=getattr(self, "_neighbor_cache", None),
        )

    def _row_data(self, design, y_model, sample_weight, offset, glm, train_pos):
        device = self.device_
        # np.require copies read-only input (a pandas Series' values): torch
        # warns on non-writable arrays.
        as_tensor = lambda a: torch.as_tensor(  # noqa: E731
            np.require(a, np.float32, ["C", "W"]), device=device
        )
        eta_global = self._global_eta(design, offset)
        targets = None
        if self.use_neighbor_targets:
            targets = outcome_features(
                self.family_, y_model, eta_global, sample_weight, train_pos
            )
        # The design is also the network's context: one tensor serves both.
        matrix = as_tensor(design)
        return RowData(
            context=matrix,
            design=matrix,
            y=as_tensor(y_model),
            weight=as_tensor(sample_weight),
            eta_global=as_tensor(eta_global),
            targets=None if targets is None else as_tensor(targets),
        )

    def _global_eta(self, design: np.ndarray, offset) -> np.ndarray:
        glm = self.global_glm_
        eta = design.astype(np.float64, copy=False) @ glm.coef.T + glm.intercept
        if offset is not None:
            eta = eta + offset[:, None]
        return eta

    # ------------------------------------------------------------- inference
    def _design(self, X) -> np.ndarray:
        check_is_fitted(self, "global_glm_")
        X = self._validate_X(X, reset=False)
        if X.shape[0] == 0:
            raise ValueError("Found array with 0 sample(s); at least 1 is required.")
        return self.preprocessor_.transform(X, dtype=np.float64)

    def _to_user_units(self, theta: np.ndarray) -> np.ndarray:
        """Map ``[..., intercept, slopes]`` on the design to the user's units."""
        shift, scale = self.preprocessor_.design_scaling()
        slopes = theta[..., 1:] / scale
        intercept = theta[..., 0] - slopes @ shift
        return np.concatenate([intercept[..., None], slopes], axis=-1)

    def _global_theta_user(self) -> np.ndarray:
        """The global GLM's ``[n_outputs, 1 + p]`` (intercept, slopes), user units."""
        glm = self.global_glm_
        theta = np.concatenate([glm.intercept[:, None], glm.coef], axis=1)
        return self._to_user_units(theta)

    @with_thread_limit
    def _coefficients(self, design: np.ndarray, offset=None):
        """Per-row (eta [n, n_outputs], theta [n, n_outputs, p + 1])."""
        design = np.require(design, requirements=["W"])  # torch warns on read-only
        offset = check_offset(offset, design.shape[0])
        glm = self.global_glm_
        theta_global = np.concatenate([glm.intercept[:, None], glm.coef], axis=1)
        eta = self._global_eta(design, offset)
        theta = np.broadcast_to(theta_global, (design.shape[0], *theta_global.shape))
        if self.network_ is None:
            return eta, theta.copy()
        deltas = [
            self._query(design[s : s + PREDICT_CHUNK])
            for s in range(0, design.shape[0], PREDICT_CHUNK)
        ]
        delta = torch.cat(deltas).double()
        rows = RowData(
            context=None,
            design=torch.as_tensor(design, dtype=torch.float64),
            y=None,
            weight=None,
            eta_global=torch.as_tensor(eta),
        )
        eta_local, delta = linear_predictor(delta, rows, self._n_outputs)
        eta_local = eta_local.reshape(eta.shape)
        return eta_local.numpy(), theta + delta.numpy()

    def _query(self, design_chunk: np.ndarray, **kwargs):
        context = torch.as_tensor(
            design_chunk, dtype=torch.float32, device=self.device_
        )
        out = self._trainer.query_delta(
            context, self._train_rows, self._source_states, **kwargs
        )
        if kwargs:
            return out
        return out.cpu()

    def _linear_predictor(self, X, offset=None) -> np.ndarray:
        if offset is None and getattr(self, "offset_used_", False):
            # A warning, not an error: offset 0 (a rate per unit of exposure)
            # is a valid prediction, and scikit-learn's tools call predict(X).
            warnings.warn(
                f"This {type(self).__name__} was fitted with an offset, and "
                "predict got none: the predictions are for offset=0 (e.g. a rate "
                "per unit of exposure). Pass offset= to predict with exposure.",
                UserWarning,
                stacklevel=3,
            )
        eta, _ = self._coefficients(self._design(X), offset)
        return eta

    def local_coef(self, X, offset=None) -> pd.DataFrame:
        """Per-row GLM coefficients: the global GLM plus each row's deviation.

        Parameters
        ----------
        X : array-like or DataFrame of shape (n_samples, n_features)
        offset : float or array-like of shape (n_samples,), default=None
            Accepted for symmetry with ``predict``; it does not change coefficients.

        Returns
        -------
        DataFrame of shape (n_samples, n_terms)
            Columns ``intercept`` and the design's feature names; for the
            multinomial family a (class, term) column MultiIndex.
        """
        design = self._design(X)
        _, theta = self._coefficients(design, offset)
        theta = self._to_user_units(theta)
        terms = ["intercept", *self.feature_names_out_]
        index = X.index if hasattr(X, "index") else None
        if self._n_outputs == 1:
            return pd.DataFrame(theta[:, 0, :], columns=terms, index=index)
        columns = pd.MultiIndex.from_product(
            [list(self.classes_), terms], names=["class", "term"]
        )
        return pd.DataFrame(
            theta.reshape(theta.shape[0], -1), columns=columns, index=index
        )

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
        design = self._design(X)
        row_labels = self._row_labels(X)
        columns = ["row", "neighbor", "rank", "similarity", "attention"]
        if self.network_ is None:
            return pd.DataFrame(columns=columns)
        frames = []
        for start in range(0, design.shape[0], PREDICT_CHUNK):
            chunk = design[start : start + PREDICT_CHUNK]
            (_, (edge_index, alpha)), graph = self._query(
                chunk, return_graph=True, return_attention=True
            )
            src, dst = edge_index.cpu().numpy()
            rank = graph.mask.cumsum(dim=1)[graph.mask].cpu().numpy() - 1
            frames.append(
                pd.DataFrame(
                    {
                        "row": row_labels[start + dst],
                        "neighbor": self._train_index[self._train_positions[src]],
                        "rank": rank,
                        "similarity": graph.similarities[graph.mask].cpu().numpy(),
                        "attention": alpha.mean(dim=1).cpu().numpy(),
                    }
                )
            )
        return pd.concat(frames, ignore_index=True)[columns]

    @staticmethod
    def _row_labels(X) -> np.ndarray:
        if hasattr(X, "index"):
            return np.asarray(X.index)
        return np.arange(X.shape[0])

    def coef_table(
        self,
        X,
        y,
        sample_weight=None,
        offset=None,
        cov_type: str = "fisher",
        alpha: float = 0.05,
        weights: str = "variance",
    ) -> pd.DataFrame:
        """The global GLM's coefficients with standard errors, z, p and CIs.

        See :func:`autoglm_graph.explain.coef_table`.

        Parameters
        ----------
        X, y, sample_weight, offset
            The data of the fit (the estimator does not keep its design).
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
        from .explain import coef_table

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

    def local_coef_summary(self, X, offset=None) -> pd.DataFrame:
        """How the per-row coefficients vary over the rows of X, per term.

        See :func:`autoglm_graph.explain.local_coef_summary`.

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
        from .explain import local_coef_summary

        return local_coef_summary(self, X, offset)

    # ---------------------------------------------------------- persistence
    def save(self, path):
        """Save the fitted model without pickle; read it with ``autoglm_graph.load``.

        See :func:`autoglm_graph.io.save_model`: safetensors and JSON (and
        skops for the preprocessing), in a directory or a ``.zip`` file.

        Parameters
        ----------
        path : str or path-like
            A directory, or a file whose name ends in ``.zip``.

        Returns
        -------
        pathlib.Path
            The path written.
        """
        from .io import save_model

        return save_model(self, path)

    def __getstate__(self):
        # As skorch does: tensors travel on the CPU and come back on the device.
        state = self.__dict__.copy()
        state.pop("_neighbor_cache", None)  # a search's scratch, not the model
        for key in _DEVICE_STATE:
            if key in state:
                state[key] = _move(state[key], torch.device("cpu"))
        if state.get("_trainer") is not None:
            state["network_"] = None  # the trainer's network; restored on load
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        if "device_" in state:
            try:
                self.device_ = resolve_device(self.device)
            except ValueError:  # e.g. fitted on a GPU, loaded where there is none
                self.device_ = torch.device("cpu")
            for key in _DEVICE_STATE:
                if key in state:
                    setattr(self, key, _move(state[key], self.device_))
        if getattr(self, "_trainer", None) is not None:
            self.network_ = self._trainer.net


_DEVICE_STATE = ("_trainer", "_train_rows", "_source_states")


def _move(obj, device: torch.device):
    """A copy of ``obj`` (tensor, module, dataclass of them) on ``device``."""
    if isinstance(obj, torch.Tensor):
        return obj.to(device)
    if isinstance(obj, torch.nn.Module):
        return copy.deepcopy(obj).to(device)
    if isinstance(obj, list):
        return [_move(item, device) for item in obj]
    if dataclasses.is_dataclass(obj):
        changes = {
            f.name: _move(getattr(obj, f.name), device) for f in dataclasses.fields(obj)
        }
        return dataclasses.replace(obj, **changes)
    return obj


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

    Two blocks: the target on the link scale (smoothed so that log(0) is
    finite; one-hot classes for multinomial) and the Pearson residual under the
    global GLM (y - mu for multinomial). Standardised with the training rows'
    weighted moments.
    """
    y2 = y.reshape(len(y), -1).astype(np.float64)
    eta = torch.as_tensor(eta_global if y2.shape[1] > 1 else eta_global[:, 0])
    mu = family.inverse_link(eta).numpy().reshape(len(y), -1)
    if family.link_name == "log":
        mean_y = np.average(y2[train_pos, 0], weights=sample_weight[train_pos])
        shift = 0.1 * max(mean_y, 1e-8)
        transformed = np.log(y2 + shift)
    else:
        transformed = y2
    if family.link_name == "softmax":
        residual = y2 - mu
    else:
        variance = family.unit_variance(torch.as_tensor(mu)).numpy()
        residual = np.clip((y2 - mu) / np.sqrt(np.maximum(variance, 1e-12)), -10, 10)
    features = np.concatenate([transformed, residual], axis=1)
    weights = sample_weight[train_pos]
    mean = np.average(features[train_pos], axis=0, weights=weights)
    std = np.sqrt(
        np.average((features[train_pos] - mean) ** 2, axis=0, weights=weights)
    )
    return (features - mean) / np.where(std > 1e-12, std, 1.0)


_COMMON_PARAMS_DOC = """
    alpha : float, default=1e-4
        L2 penalty of the global GLM's slopes, as in scikit-learn's
        ``PoissonRegressor``: the global GLM minimises
        ``(1/sum(w)) sum_i w_i unit_deviance_i / 2 + alpha/2 ||beta||^2``.
    n_neighbors : int, default=16
        Neighbours (training rows) per row in the similarity graph.
    threshold : float, default=0.0
        Cosine similarity below which a neighbour is dropped (tau).
    graph_space : {"embedding", "input"}, default="embedding"
        Build the graph in the learned embedding space (rebuilt every
        ``graph_refresh`` epochs) or in the standardised input space.
    graph_refresh : int, default=10
        Epochs between rebuilds of the embedding-space graph. The validation
        rows' neighbours are searched at the same rebuilds (not every epoch),
        so that early stopping scores them as new rows at that point.
    graph_backend : {"auto", "exact", "faiss"}, default="auto"
        Neighbour search (:func:`autoglm_graph.cosine_topk`): exact chunked
        search, or faiss HNSW (approximate, its efSearch calibrated to recall@k
        0.95 on a sample of the queries; see
        ``benchmarks/results/graph_build_approx.md``; needs ``faiss-cpu``).
        ``"auto"``: exact below 150k rows on a CPU (up to 10M on a GPU),
        faiss above when it is installed. The index over the training rows is
        built once and serves validation and prediction; for many predictions
        from 50k+ training rows, ``"faiss"`` is worth trying below 150k too
        (2.5-4x faster prediction on real rows at 100k, see
        ``benchmarks/results/predict.md``).
    hidden_channels : int, default=64
        Width of the encoder and attention layers.
    heads : int, default=4
        Attention heads; must divide ``hidden_channels``.
    num_layers : int, default=2
        Graph attention layers.
    conv : {"gat", "gatv2"}, default="gat"
        torch_geometric's ``GATConv`` or ``GATv2Conv``.
    message_passing : {"auto", "fused", "pyg"}, default="auto"
        How attention runs. ``"fused"``: the fixed-degree fast path
        (:mod:`autoglm_graph.fused`; ``conv="gat"`` only), equal to the
        torch_geometric layer to float rounding and several times faster on a
        CPU; ``"pyg"``: torch_geometric's layer (the reference). ``"auto"``:
        the fast path where it exists.
    dropout : float, default=0.1
        Dropout on hidden states and attention weights. With ``dropout=0`` the
        training forward pass doubles as the validation pass (faster), but the
        benchmark suite's test deviance is better with 0.1 (mean rank 2.12 vs
        2.26 over 17 datasets; ``benchmarks/results/suite_dropout0.md``).
    use_neighbor_targets : bool, default=True
        Let last-layer messages carry neighbours' outcomes (target on the link
        scale and residual under the global GLM). A training row never sees its
        own outcome, and validation rows are never neighbours.
    local_penalty : float, default=1e-3
        Penalty on the squared per-row coefficient deviations. ``numpy.inf``
        gives exactly the global GLM (no network is trained).
    learning_rate : float, default=3e-3
        AdamW learning rate.
    weight_decay : float, default=1e-4
        AdamW weight decay of the network.
    ema_decay : float, default=0.9
        Decay of an exponential moving average of the network's weights, which
        validation, the kept epoch and prediction use (0: the raw weights).
        Averaging smooths the noise of training: on the synthetic suite it
        lowered test deviance on every family tried and halved its spread over
        seeds (e.g. gamma 0.863 +/- 0.080 -> 0.807 +/- 0.036, 4 seeds).
    max_epochs : int, default=300
        Upper bound on training epochs (full-batch steps, or passes over the
        mini-batches when ``batch_size`` is set).
    batch_size : int or None, default=None
        Destination rows per optimiser step (each with its L-hop
        neighbourhood); None trains full-batch. From 250,000 rows a pass, the
        network's activations are recomputed in the backward pass instead of
        kept (activation checkpointing), so a full-batch fit of 1M rows stays
        within a few GiB; mini-batches with k = 16 and 2 layers reach most rows
        through their neighbourhoods and save little memory.
    early_stopping : bool, default=True
        Hold out ``validation_fraction`` of the rows, keep the epoch with the
        best validation deviance, and stop after ``n_iter_no_change`` epochs
        without improvement. If no epoch beats the global GLM, the fitted model
        is the global GLM (``is_global_only_``).
    validation_fraction : float, default=0.1
    n_iter_no_change : int, default=10
        Patience, counted from the global GLM's validation deviance; until an
        epoch beats it, the patience is at most 5 epochs
        (``training.SCREENING_EPOCHS``), so that a network with nothing to add
        is given up early. 10 instead of 20 ends fits 10 epochs sooner; on the
        suite's validation curves (smooth, from weight averaging) it kept the
        same best epoch on all but one dataset.
    tol : float, default=1e-4
        Relative improvement of validation deviance that resets the patience.
    callbacks : list or None, default=None
        Objects with ``on_epoch_end(trainer, logs) -> bool`` (True stops).
    device : str, default="auto"
        "auto" (CUDA when available), "cpu", "cuda", ...
    precision : {"auto", "fp32", "bf16", "fp16"}, default="auto"
        Precision of the network under autocast; the GLM deviance and the
        global GLM stay in float32 (float64 for the global fit). ``"auto"``:
        bf16 on a GPU that supports it, else fp16 there (with a gradient
        scaler), fp32 on a CPU (where bf16 measured no faster). A non-finite
        loss skips the step (fp16: the scaler lowers its scale; bf16: training
        falls back to fp32 with a warning); the model never holds NaN.
    random_state : int, RandomState instance or None, default=None
    n_jobs : int or None, default=None
        Threads of torch, BLAS and faiss during ``fit`` and prediction, with
        scikit-learn's meaning: None is 1 unless inside a joblib
        ``parallel_config``, -1 is every core. The caller's settings are
        restored afterwards. One thread by default, so that
        ``GridSearchCV(n_jobs=...)``, several search workers or another
        process on the machine are not oversubscribed (which slowed fits
        5-50x); ``n_jobs=-1`` for one fit on an otherwise idle machine.
    verbose : int, default=0
        Progress bar and messages when > 0.
"""

_COMMON_ATTRIBUTES_DOC = """
    feature_names_out_ : ndarray of str
        Names of the design columns (after preprocessing) that ``coef_`` uses.
    preprocessor_ : TabularPreprocessor
    global_glm_ : GlobalGLM
        The global GLM's solution on the preprocessor's (standardised)
        design, the one the network sees; ``coef_``, ``intercept_``,
        ``local_coef`` and ``coef_table`` map it to the user's units
        (``preprocessor_.design_scaling()``).
    network_ : GraphGLMNet or None
        The trained network (None when the model is the global GLM).
    is_global_only_ : bool
        True when the fitted model is exactly the global GLM.
    global_only_reason_ : str or None
    history_ : list of dict
        Per-epoch ``train_loss``, ``train_deviance``, ``val_deviance``, ``seconds``.
    best_epoch_ : int
        The epoch whose weights were kept (when a network is used).
    validation_gain_, validation_gain_se_ : float
        Validation deviance of the global GLM minus that of the best epoch, and
        its standard error; the network is kept only when the gain exceeds one
        standard error.
    n_iter_ : int
        Epochs run.
    offset_used_ : bool
        Whether ``fit`` got an ``offset``; ``predict`` without one then warns.
    n_features_in_ : int
    feature_names_in_ : ndarray of str
        Defined when X was a DataFrame with string column names.
"""


class GraphGLMRegressor(RegressorMixin, _BaseGraphGLM):
    __doc__ = f"""Graph-contextualized GLM regressor.

    Every row gets its own GLM coefficients: those of a global GLM plus a
    deviation predicted by a graph attention network over the most similar
    training rows.

    Parameters
    ----------
    family : {{"gaussian", "poisson", "gamma", "tweedie", "negative_binomial", \
"binomial"}} or Family, default="gaussian"
        ``"binomial"`` here is for proportions ``y`` in [0, 1] with
        ``sample_weight`` the numbers of trials (R's ``glm(cbind(s, f) ~ .)``);
        class labels go to :class:`GraphGLMClassifier`.
    power : float, default=1.5
        Tweedie power (used when ``family="tweedie"``): 0 or >= 1.
    theta : float or None, default=None
        Negative binomial dispersion: variance ``mu + theta * mu**2`` (R's
        ``glm.nb`` reports ``1 / theta``; statsmodels calls it ``alpha``).
        None estimates it by maximum likelihood, alternating with the GLM as
        ``MASS::glm.nb`` does (``theta_``); a float keeps it fixed.
    balance : bool, default=True
        The balance property of actuarial pricing: after fitting, shift the
        intercept so that the fitted model (network included) reproduces the
        observed total on the rows passed to ``fit``, all of them (the early
        stopping split included), ``sum(w * predict(X, offset)) == sum(w * y)``
        to rounding error. For the log link (poisson, gamma, tweedie with
        ``power >= 1``, negative_binomial) the shift is
        ``log(sum(w * y) / sum(w * mu))``, for the identity link (gaussian,
        tweedie with ``power=0``) ``sum(w * (y - mu)) / sum(w)``; the logit link
        (binomial proportions) is left as fitted. A Poisson or gaussian GLM
        with an intercept is balanced already; the gamma, tweedie and negative
        binomial GLMs (and a network on top of any) generally are not, so with
        ``balance=True`` their ``intercept_`` differs slightly from the maximum
        likelihood one; ``balance=False`` keeps the fit as trained (the exact
        GLM when the network is off). The shift is ``balance_correction_``;
        ``intercept_``, ``predict``, ``local_coef`` and ``coef_table`` include it.
    {_COMMON_PARAMS_DOC}
    Attributes
    ----------
    coef_ : ndarray of shape (n_features_out,)
        Slopes of the global GLM, named by ``feature_names_out_``.
    intercept_ : float
    family_ : Family
    theta_ : float
        The negative binomial theta used (estimated when ``theta=None``);
        only for ``family="negative_binomial"``.
    balance_correction_ : float
        The shift added to the intercept by ``balance`` (0.0 when off or not
        applicable).
    {_COMMON_ATTRIBUTES_DOC}
    Examples
    --------
    >>> from autoglm_graph import GraphGLMRegressor
    >>> from autoglm_graph.datasets import make_varying_coefficients
    >>> X, y, _ = make_varying_coefficients(300, 3, family="poisson", random_state=0)
    >>> model = GraphGLMRegressor(family="poisson", max_epochs=5, random_state=0)
    >>> model.fit(X, y).predict(X[:2]).shape
    (2,)
    """

    def __init__(
        self,
        *,
        family: str | Family = "gaussian",
        power: float = 1.5,
        theta: float | None = None,
        balance: bool = True,
        alpha: float = 1e-4,
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
        local_penalty: float = 1e-3,
        learning_rate: float = 3e-3,
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
    ) -> None:
        self.family = family
        self.power = power
        self.theta = theta
        self.balance = balance
        super().__init__(
            alpha=alpha,
            n_neighbors=n_neighbors,
            threshold=threshold,
            graph_space=graph_space,
            graph_refresh=graph_refresh,
            graph_backend=graph_backend,
            hidden_channels=hidden_channels,
            heads=heads,
            num_layers=num_layers,
            conv=conv,
            message_passing=message_passing,
            dropout=dropout,
            use_neighbor_targets=use_neighbor_targets,
            local_penalty=local_penalty,
            learning_rate=learning_rate,
            weight_decay=weight_decay,
            ema_decay=ema_decay,
            max_epochs=max_epochs,
            batch_size=batch_size,
            early_stopping=early_stopping,
            validation_fraction=validation_fraction,
            n_iter_no_change=n_iter_no_change,
            tol=tol,
            callbacks=callbacks,
            device=device,
            precision=precision,
            random_state=random_state,
            n_jobs=n_jobs,
            verbose=verbose,
        )

    _n_outputs = 1

    def _validate_params(self) -> None:
        super()._validate_params()
        check_option("balance", self.balance, (True, False))

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        try:
            family = get_family(self.family, power=self.power, theta=self.theta)
            tags.target_tags.positive_only = family.name in (
                "poisson",
                "gamma",
                "negative_binomial",
            ) or (family.name == "tweedie" and family.power > 0)
        except (ValueError, TypeError):
            pass
        return tags

    def _encode_target(self, y: np.ndarray) -> np.ndarray:
        y = check_array(y, ensure_2d=False, dtype=np.float64, input_name="y")
        return y

    def _make_family(self, y_model: np.ndarray) -> Family:
        family = get_family(self.family, power=self.power, theta=self.theta)
        if family.name == "multinomial":
            raise ValueError(
                "The 'multinomial' family is for classification; use "
                "GraphGLMClassifier."
            )
        return family

    @property
    def theta_(self) -> float:
        family = self.__dict__.get("family_")
        if getattr(family, "name", None) != "negative_binomial":
            raise AttributeError(
                "theta_ is defined after fitting family='negative_binomial'."
            )
        return family.theta

    def _set_global_coefficients(self, glm) -> None:
        theta = self._global_theta_user()
        self.coef_ = theta[0, 1:].copy()
        self.intercept_ = float(theta[0, 0])

    def fit(
        self, X, y, sample_weight=None, offset=None, groups=None
    ) -> GraphGLMRegressor:
        """Fit the global GLM, then the network of per-row deviations.

        Parameters
        ----------
        X : array-like or DataFrame of shape (n_samples, n_features)
            Numeric, categorical and missing values are handled by the
            preprocessing.
        y : array-like of shape (n_samples,)
        sample_weight : array-like of shape (n_samples,), default=None
        offset : float or array-like of shape (n_samples,), default=None
            Added to the linear predictor (e.g. log exposure for poisson).
        groups : array-like of shape (n_samples,), default=None
            Units that own several rows (a person observed in several years).
            Each group stays on one side of the validation split, and a
            training row never takes neighbours from its own group, so that
            validation measures what a new unit will get.

        Returns
        -------
        self
        """
        return self._fit(X, y, sample_weight, offset, groups)

    def predict(self, X, offset=None) -> np.ndarray:
        """Predicted mean on the response scale, shape (n_samples,)."""
        eta = self._linear_predictor(X, offset)[:, 0]
        return self.family_.inverse_link(torch.as_tensor(eta)).numpy()

    def predict_linear(self, X, offset=None) -> np.ndarray:
        """The linear predictor ``eta = offset + b_i + x_i . beta_i`` (link scale).

        ``predict(X, offset) == family_.inverse_link(predict_linear(X, offset))``;
        for the log link, ``log(predict(X, offset))``.

        Parameters
        ----------
        X : array-like or DataFrame of shape (n_samples, n_features)
        offset : float or array-like of shape (n_samples,), default=None
            Added to the linear predictor, as in ``fit``.

        Returns
        -------
        ndarray of shape (n_samples,)
        """
        return self._linear_predictor(X, offset)[:, 0]

    def score(self, X, y, sample_weight=None, offset=None) -> float:
        """D^2, the fraction of deviance explained (1 is perfect).

        As scikit-learn's GLMs: ``1 - D(y, predict(X)) / D(y, weighted mean y)``.
        """
        # Copies: torch warns on read-only arrays (a pandas Series' values).
        y = np.array(y, dtype=np.float64)
        eta = torch.as_tensor(self._linear_predictor(X, offset)[:, 0])
        yt = torch.as_tensor(y)
        w = (
            None
            if sample_weight is None
            else torch.as_tensor(np.array(sample_weight, dtype=np.float64))
        )
        null_mu = np.average(y, weights=None if w is None else w.numpy())
        null_eta = self.family_.link(torch.full_like(yt, null_mu))
        deviance = self.family_.deviance(yt, eta, w)
        null = self.family_.deviance(yt, null_eta, w)
        return float(1.0 - deviance / null)


class GraphGLMClassifier(ClassifierMixin, _BaseGraphGLM):
    __doc__ = f"""Graph-contextualized GLM classifier (binomial or multinomial).

    The family follows from y: binomial (logit link) for two classes,
    multinomial (softmax) for more. Labels may be strings.

    Parameters
    ----------
    {_COMMON_PARAMS_DOC}
    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
    coef_ : ndarray of shape (1, n_features_out) or (n_classes, n_features_out)
        Global GLM slopes (per class for multinomial), as LogisticRegression.
    intercept_ : ndarray of shape (1,) or (n_classes,)
    family_ : Family
    {_COMMON_ATTRIBUTES_DOC}
    Examples
    --------
    >>> from autoglm_graph import GraphGLMClassifier
    >>> from autoglm_graph.datasets import make_varying_coefficients
    >>> X, y, _ = make_varying_coefficients(300, 3, family="binomial", random_state=0)
    >>> model = GraphGLMClassifier(max_epochs=5, random_state=0).fit(X, y)
    >>> model.predict_proba(X[:2]).shape
    (2, 2)
    """

    def _encode_target(self, y: np.ndarray) -> np.ndarray:
        check_classification_targets(y)
        self._label_encoder = LabelEncoder().fit(y)
        self.classes_ = self._label_encoder.classes_
        if len(self.classes_) < 2:
            raise ValueError(
                "GraphGLMClassifier needs at least 2 classes in y; got 1 class "
                f"({self.classes_.tolist()[0]!r})."  # 1, not np.int64(1)
            )
        codes = self._label_encoder.transform(y)
        if len(self.classes_) == 2:
            return codes.astype(np.float64)
        return np.eye(len(self.classes_))[codes]

    @property
    def _n_outputs(self) -> int:
        return 1 if len(self.classes_) == 2 else len(self.classes_)

    def _make_family(self, y_model: np.ndarray) -> Family:
        return get_family("binomial" if y_model.ndim == 1 else "multinomial")

    def _stratify_labels(self, y_model: np.ndarray):
        return y_model if y_model.ndim == 1 else y_model.argmax(axis=1)

    def _set_global_coefficients(self, glm) -> None:
        theta = self._global_theta_user()
        self.coef_ = theta[:, 1:].copy()
        self.intercept_ = theta[:, 0].copy()

    def fit(
        self, X, y, sample_weight=None, offset=None, groups=None
    ) -> GraphGLMClassifier:
        """Fit the global GLM, then the network of per-row deviations.

        Parameters
        ----------
        X : array-like or DataFrame of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)
            Class labels (numbers or strings).
        sample_weight : array-like of shape (n_samples,), default=None
        offset : float or array-like of shape (n_samples,), default=None
            Added to the linear predictor (binary: the log-odds).
        groups : array-like of shape (n_samples,), default=None
            Units that own several rows; see ``GraphGLMRegressor.fit``.

        Returns
        -------
        self
        """
        return self._fit(X, y, sample_weight, offset, groups)

    def predict_proba(self, X, offset=None) -> np.ndarray:
        """Class probabilities, shape (n_samples, n_classes)."""
        eta = torch.as_tensor(self._linear_predictor(X, offset))
        if len(self.classes_) == 2:
            p = torch.sigmoid(eta[:, 0]).numpy()
            return np.column_stack([1.0 - p, p])
        return torch.softmax(eta, dim=1).numpy()

    def predict(self, X, offset=None) -> np.ndarray:
        """Most probable class label per row."""
        proba = self.predict_proba(X, offset)
        return self.classes_[np.argmax(proba, axis=1)]

    def predict_log_proba(self, X, offset=None) -> np.ndarray:
        """Log of the class probabilities, shape (n_samples, n_classes).

        Computed on the link scale (log-sigmoid, log-softmax), so that it is
        finite where ``predict_proba`` rounds to 0.
        """
        eta = torch.as_tensor(self._linear_predictor(X, offset))
        if len(self.classes_) == 2:
            log_p = torch.nn.functional.logsigmoid(eta[:, 0])
            log_q = torch.nn.functional.logsigmoid(-eta[:, 0])
            return torch.stack([log_q, log_p], dim=1).numpy()
        return torch.log_softmax(eta, dim=1).numpy()

    def decision_function(self, X, offset=None) -> np.ndarray:
        """Confidence scores on the link scale, as ``LogisticRegression``'s.

        Two classes: the log-odds of ``classes_[1]``, shape (n_samples,);
        positive means ``classes_[1]`` is predicted. More classes: the softmax
        scores, shape (n_samples, n_classes), whose argmax is ``predict``.
        The offset is included.
        """
        eta = self._linear_predictor(X, offset)
        return eta[:, 0] if len(self.classes_) == 2 else eta

    def predict_linear(self, X, offset=None) -> np.ndarray:
        """The linear predictor (link scale): ``decision_function``'s values.

        The same name as ``GraphGLMRegressor.predict_linear``: log-odds of
        ``classes_[1]`` (shape (n_samples,)) for two classes, softmax scores
        (shape (n_samples, n_classes)) for more.
        """
        return self.decision_function(X, offset)
