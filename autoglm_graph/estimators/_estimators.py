"""scikit-learn estimators: GraphGLMRegressor and GraphGLMClassifier."""

from __future__ import annotations

import numpy as np
import pandas as pd
from sklearn.base import ClassifierMixin, RegressorMixin
from sklearn.preprocessing import LabelEncoder
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_array

from ..explain import IntervalSettings, fit_intervals
from ..glm import Family, NegativeBinomialFamily, get_family
from ..persistence import register_estimator
from ..policy import FitPolicy
from ..utils import check_option
from ._base import BaseGraphGLM
from ._docs import COMMON_ATTRIBUTES_DOC, COMMON_PARAMS_DOC
from ._reading import linear_predictor

__all__ = [
    "GraphGLMClassifier",
    "GraphGLMRegressor",
]


class GraphGLMRegressor(RegressorMixin, BaseGraphGLM):
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
    balance : "auto" or bool, default="auto"
        The balance property of actuarial pricing: after fitting, shift the
        intercept so that the fitted model (network included) reproduces the
        observed total on the rows passed to ``fit``, all of them (the early
        stopping split included), ``sum(w * predict(X, offset)) == sum(w * y)``
        to rounding error. The shift is ``log(sum(w * y) / sum(w * mu))`` for
        the log link, ``sum(w * (y - mu)) / sum(w)`` for the identity link; the
        logit link (binomial proportions) is left as fitted. ``"auto"``
        balances the families whose maximum likelihood GLM is balanced already
        (canonical link: poisson, gaussian, tweedie with ``power`` 0 or 1), so
        a network on top reproduces the total and the GLM alone stays exactly
        scikit-learn's. ``True`` also balances gamma, tweedie and negative
        binomial fits, whose maximum likelihood GLMs are not balanced: their
        ``intercept_`` then differs from scikit-learn's and glum's, and the
        test deviance can be slightly worse (measured: 0.01 % at 30k
        policies, up to 1.3 % at 3k, ``benchmarks/results/insurance.md``).
        ``False`` keeps every fit as trained. The shift is
        ``balance_correction_``; ``intercept_``, ``predict``, ``local_coef``
        and ``coef_table`` include it.
    {COMMON_PARAMS_DOC}
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
    {COMMON_ATTRIBUTES_DOC}
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
        balance: str | bool = "auto",
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
        self.family = family
        self.power = power
        self.theta = theta
        self.balance = balance
        super().__init__(
            alpha=alpha,
            formula=formula,
            splines=splines,
            splines_local=splines_local,
            fit_intercept=fit_intercept,
            categorical_coding=categorical_coding,
            base_levels=base_levels,
            min_frequency=min_frequency,
            max_categories=max_categories,
            handle_missing=handle_missing,
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
            numeric_embedding=numeric_embedding,
            dropout=dropout,
            use_neighbor_targets=use_neighbor_targets,
            location_columns=location_columns,
            location_neighbors=location_neighbors,
            local_penalty=local_penalty,
            global_terms=global_terms,
            local_sign=local_sign,
            interval_members=interval_members,
            interval_settings=interval_settings,
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
            fit_policy=fit_policy,
        )

    def _validate_params(self) -> None:
        super()._validate_params()
        check_option("balance", self.balance, ("auto", True, False))

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        try:
            family = get_family(self.family, power=self.power, theta=self.theta)
            tags.target_tags.positive_only = family.positive_only
        except (ValueError, TypeError):
            pass
        return tags

    def _encode_target(self, y: np.ndarray) -> np.ndarray:
        if y.dtype.kind in "OUS":  # object or strings: say which value is no number
            numbers = pd.to_numeric(pd.Series(y), errors="coerce")
            bad = numbers.isna() & pd.notna(pd.Series(y))
            if bad.any():
                raise ValueError(
                    f"GraphGLMRegressor needs a numeric y; {int(bad.sum())} value(s) "
                    f"are not numbers, e.g. {y[bad.to_numpy()][0]!r}. For class "
                    "labels use GraphGLMClassifier."
                )
        y = check_array(y, ensure_2d=False, dtype=np.float64, input_name="y")
        return y

    def _make_family(self, y_model: np.ndarray) -> Family:
        family = get_family(self.family, power=self.power, theta=self.theta)
        if family.multi_output:
            raise ValueError(
                f"The {family.name!r} family is for classification; use "
                "GraphGLMClassifier."
            )
        return family

    @property
    def theta_(self) -> float:
        family = self.__dict__.get("family_")
        if not isinstance(family, NegativeBinomialFamily):
            raise AttributeError(
                "theta_ is defined after fitting family='negative_binomial'."
            )
        return family.theta

    def _set_global_coefficients(self, glm) -> None:
        theta = self._global_theta_user()
        self.coef_ = theta[0, 1:].copy()
        self.intercept_ = float(theta[0, 0])

    def fit(
        self, X, y=None, sample_weight=None, offset=None, groups=None
    ) -> GraphGLMRegressor:
        """Fit the global GLM, then the network of per-row deviations.

        Parameters
        ----------
        X : array-like or DataFrame of shape (n_samples, n_features)
            Numeric, categorical and missing values are handled by the
            preprocessing.
        y : array-like of shape (n_samples,), default=None
            Required unless ``formula`` names the target on its left side.
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
        self._fit(X, y, sample_weight, offset, groups)
        fit_intervals(self, X, y, sample_weight, offset, groups)
        return self

    def predict(self, X, offset=None) -> np.ndarray:
        """Predicted mean on the response scale, shape (n_samples,)."""
        eta = linear_predictor(self, X, offset)[:, 0]
        return self.family_.inverse_link(eta)  # numpy: no torch for a GLM

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
        return linear_predictor(self, X, offset)[:, 0]

    def score(self, X, y, sample_weight=None, offset=None) -> float:
        """D^2, the fraction of deviance explained (1 is perfect).

        As scikit-learn's GLMs: ``1 - D(y, predict(X)) / D(y, weighted mean y)``.

        Raises
        ------
        ValueError
            When the model was fitted with an ``offset`` and gets none here: a
            score for offset=0 would be wrong, not merely approximate (this is
            what ``cross_val_score`` does without metadata routing).
        """
        if offset is None and getattr(self, "offset_used_", False):
            raise ValueError(_SCORE_WITHOUT_OFFSET.format(type(self).__name__))
        y = np.array(y, dtype=np.float64)
        eta = linear_predictor(self, X, offset)[:, 0]
        w = None if sample_weight is None else np.array(sample_weight, np.float64)
        null_mu = np.average(y, weights=w)
        null_eta = self.family_.link(np.full_like(y, null_mu))
        deviance = self.family_.deviance(y, eta, w)
        null = self.family_.deviance(y, null_eta, w)
        with np.errstate(divide="ignore", invalid="ignore"):  # NaN for constant y
            return float(1.0 - deviance / null)


#: score() without the offset of fit: how to route it through scikit-learn.
_SCORE_WITHOUT_OFFSET = (
    "This {0} was fitted with an offset, and score got none: the deviance of "
    "predictions for offset=0 is not a score of the model. Pass offset= to score. "
    "In a Pipeline, cross_val_score or GridSearchCV, route the offset to both fit "
    "and score with metadata routing: sklearn.set_config("
    "enable_metadata_routing=True), then "
    "{0}(...).set_fit_request(offset=True).set_score_request(offset=True) and "
    "params={{'offset': offset}} (without routing, params={{'model__offset': "
    "offset}} reaches fit only)."
)


class GraphGLMClassifier(ClassifierMixin, BaseGraphGLM):
    __doc__ = f"""Graph-contextualized GLM classifier (binomial or multinomial).

    The family follows from y: binomial (logit link) for two classes,
    multinomial (softmax) for more. Labels may be strings.

    Parameters
    ----------
    {COMMON_PARAMS_DOC}
    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
    coef_ : ndarray of shape (1, n_features_out) or (n_classes, n_features_out)
        Global GLM slopes (per class for multinomial), as LogisticRegression.
    intercept_ : ndarray of shape (1,) or (n_classes,)
    family_ : Family
    {COMMON_ATTRIBUTES_DOC}
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
        missing = pd.isna(y)
        if missing.any():  # sorting the labels failed on None vs str
            raise ValueError(
                f"Input y has {int(missing.sum())} missing label(s) (row "
                f"{int(np.flatnonzero(missing)[0])} is the first); drop those rows "
                "or give them a label."
            )
        if y.dtype.kind == "O":
            texts = np.fromiter((isinstance(v, str) for v in y), bool, len(y))
            if texts.any() and not texts.all():
                raise ValueError(
                    "The labels in y mix strings and other values (e.g. "
                    f"{y[texts][0]!r} and {y[~texts][0]!r}); give every label "
                    "one type, e.g. y.astype(str)."
                )
        check_classification_targets(y)
        encoder = LabelEncoder().fit(y)
        self.classes_ = encoder.classes_
        if len(self.classes_) < 2:
            raise ValueError(
                "GraphGLMClassifier needs at least 2 classes in y; got 1 class "
                f"({self.classes_.tolist()[0]!r})."  # 1, not np.int64(1)
            )
        codes = encoder.transform(y)
        if len(self.classes_) == 2:
            return codes.astype(np.float64)
        return np.eye(len(self.classes_))[codes]

    def _make_family(self, y_model: np.ndarray) -> Family:
        return get_family("binomial" if y_model.ndim == 1 else "multinomial")

    def _stratify_labels(self, y_model: np.ndarray):
        return y_model if y_model.ndim == 1 else y_model.argmax(axis=1)

    def _set_global_coefficients(self, glm) -> None:
        theta = self._global_theta_user()
        self.coef_ = theta[:, 1:].copy()
        self.intercept_ = theta[:, 0].copy()

    def fit(
        self, X, y=None, sample_weight=None, offset=None, groups=None
    ) -> GraphGLMClassifier:
        """Fit the global GLM, then the network of per-row deviations.

        Parameters
        ----------
        X : array-like or DataFrame of shape (n_samples, n_features)
        y : array-like of shape (n_samples,), default=None
            Class labels (numbers or strings); None when ``formula`` names
            the target on its left side.
        sample_weight : array-like of shape (n_samples,), default=None
        offset : float or array-like of shape (n_samples,), default=None
            Added to the linear predictor (binary: the log-odds).
        groups : array-like of shape (n_samples,), default=None
            Units that own several rows; see ``GraphGLMRegressor.fit``.

        Returns
        -------
        self
        """
        self._fit(X, y, sample_weight, offset, groups)
        fit_intervals(self, X, y, sample_weight, offset, groups)
        return self

    def predict_proba(self, X, offset=None) -> np.ndarray:
        """Class probabilities, shape (n_samples, n_classes)."""
        eta = linear_predictor(self, X, offset)
        return self.family_.predict_proba(eta)

    def predict(self, X, offset=None) -> np.ndarray:
        """Most probable class label per row."""
        proba = self.predict_proba(X, offset)
        return self.classes_[np.argmax(proba, axis=1)]

    def predict_log_proba(self, X, offset=None) -> np.ndarray:
        """Log of the class probabilities, shape (n_samples, n_classes).

        Computed on the link scale (log-sigmoid, log-softmax), so that it is
        finite where ``predict_proba`` rounds to 0.
        """
        eta = linear_predictor(self, X, offset)
        return self.family_.predict_log_proba(eta)

    def decision_function(self, X, offset=None) -> np.ndarray:
        """Confidence scores on the link scale, as ``LogisticRegression``'s.

        Two classes: the log-odds of ``classes_[1]``, shape (n_samples,);
        positive means ``classes_[1]`` is predicted. More classes: the softmax
        scores, shape (n_samples, n_classes), whose argmax is ``predict``.
        The offset is included.
        """
        eta = linear_predictor(self, X, offset)
        return eta[:, 0] if len(self.classes_) == 2 else eta

    def predict_linear(self, X, offset=None) -> np.ndarray:
        """The linear predictor (link scale): ``decision_function``'s values.

        The same name as ``GraphGLMRegressor.predict_linear``: log-odds of
        ``classes_[1]`` (shape (n_samples,)) for two classes, softmax scores
        (shape (n_samples, n_classes)) for more.
        """
        return self.decision_function(X, offset)


register_estimator(GraphGLMRegressor)
register_estimator(GraphGLMClassifier)
