"""The objective of :class:`~autoglm_graph.GraphGLMSearchCV`: one trial's fit and score.

As optuna_integration's scikit-learn search does, the objective is a small
callable object: the study calls it with a trial; it suggests the trial's
parameters, fits a clone of the estimator (sharing the search's neighbour
cache, with a pruning callback) and returns the score, greater is better
(negated deviances). It also keeps the best ``cv=None`` trial's fitted
estimator, so that the search need not refit it.
"""

from __future__ import annotations

import logging
import re
import threading

import numpy as np
import optuna
import torch
from sklearn.base import clone, is_classifier
from sklearn.metrics import check_scoring, log_loss
from sklearn.utils import _safe_indexing

from ..estimators import BaseGraphGLM
from ..glm import Family, left_side_columns, split_target
from ..neighbors import NeighborCache
from ._optuna import OptunaPruningCallback, _suggest

__all__ = ["CAUGHT", "NUMERICAL_FAILURE", "TrialObjective", "is_numerical_failure"]

#: Errors that fail a trial, not the search.
CAUGHT = (ValueError, FloatingPointError)
#: The user attribute holding why a trial whose fit failed numerically was pruned.
NUMERICAL_FAILURE = "numerical_failure"

# The words of scikit-learn's ("Input contains NaN", "... infinity or a value
# too large"), torch's ("found invalid values: tensor([nan])") and our own
# ("The training loss became inf") errors about non-finite numbers.
_NON_FINITE = re.compile(r"\bnan\b|\binf\b|infinit|non-finite|not finite", re.I)
_LOGGER = logging.getLogger("autoglm_graph.search")


def is_numerical_failure(exc: BaseException) -> bool:
    """Whether ``exc`` says that a fit diverged (non-finite numbers), as
    opposed to a setting or data error."""
    if isinstance(exc, FloatingPointError):
        return True
    return isinstance(exc, ValueError) and bool(_NON_FINITE.search(str(exc)))


class _Data:
    """The arrays of a fit, with row subsetting (X may be a DataFrame).

    ``y_in_X``: the target is a column of ``X`` that the estimator's
    two-sided formula names; ``y`` is then its value, for the folds and the
    scores, and fits get ``y=None``.
    """

    def __init__(
        self, X, y, sample_weight, offset, groups, *, y_in_X: bool = False
    ) -> None:
        self.X, self.y = X, np.asarray(y)
        self.sample_weight = _as_optional(sample_weight)
        self.offset = _as_optional(offset)
        self.groups = None if groups is None else np.asarray(groups)
        self.y_in_X = y_in_X

    @classmethod
    def of(cls, estimator, X, y, sample_weight, offset, groups) -> _Data:
        """The data of a search of ``estimator``: with ``y`` None, the target
        is the left side of its formula, evaluated on ``X``."""
        if y is not None:
            return cls(X, y, sample_weight, offset, groups)
        formula = getattr(estimator, "formula", None)
        if formula is None or not left_side_columns(formula):
            raise ValueError(
                "y is None: pass y, or an estimator whose formula names the target "
                f"on its left side (e.g. 'y ~ x0 + x1'); got formula={formula!r}."
            )
        _, target = split_target(formula, estimator.fit_intercept, X, None)
        return cls(X, target, sample_weight, offset, groups, y_in_X=True)

    def take(self, rows) -> _Data:
        pick = lambda a: None if a is None else a[rows]  # noqa: E731
        return _Data(
            _safe_indexing(self.X, rows),
            self.y[rows],
            pick(self.sample_weight),
            pick(self.offset),
            pick(self.groups),
            y_in_X=self.y_in_X,
        )

    def fit(self, est: BaseGraphGLM, neighbor_cache=None) -> BaseGraphGLM:
        """``est.fit`` on these rows; with ``neighbor_cache`` shared (one
        input-space search serves trials that differ only in k or threshold)."""
        fit = est.fit if neighbor_cache is None else est._fit
        kwargs = {} if neighbor_cache is None else {"neighbor_cache": neighbor_cache}
        return fit(
            self.X,
            None if self.y_in_X else self.y,
            sample_weight=self.sample_weight,
            offset=self.offset,
            groups=self.groups,
            **kwargs,
        )


def _as_optional(a):
    return None if a is None else np.asarray(a, dtype=np.float64)


class TrialObjective:
    """``objective(trial) -> score`` of a search over ``space``.

    Parameters
    ----------
    estimator : GraphGLMRegressor or GraphGLMClassifier
        The estimator whose clones the trials fit.
    space : dict of str to optuna distribution
    data : _Data
        The rows of the search.
    folds : list of (train, test) or None
        Cross-validation folds; None scores a trial by the validation
        deviance of its early stopping.
    random_state : int
        Every trial's estimator ``random_state`` (the study's shared one).
    neighbor_cache : NeighborCache
        Input-space searches shared by the trials.
    reference_family : Family or None
        The family the deviances are compared under (regressors).
    scoring : str, callable or None
        scikit-learn scoring of a fold (cross-validation only).
    keep_best : bool
        Keep the best ``cv=None`` trial's fitted estimator (``best``).
    """

    def __init__(
        self,
        estimator: BaseGraphGLM,
        space: dict,
        data: _Data,
        folds,
        *,
        random_state: int,
        neighbor_cache: NeighborCache,
        reference_family: Family | None,
        scoring=None,
        keep_best: bool = False,
    ) -> None:
        self.estimator = estimator
        self.space = space
        self.data = data
        self.folds = folds
        self.random_state = random_state
        self.neighbor_cache = neighbor_cache
        self.reference_family = reference_family
        self.scoring = scoring
        self.keep_best = keep_best
        #: ``(trial number, score, fitted estimator)`` of the best kept trial.
        self.best: tuple[int, float, BaseGraphGLM] | None = None
        self._lock = threading.Lock()

    def __call__(self, trial) -> float:
        params = {
            name: _suggest(trial, name, dist) for name, dist in self.space.items()
        }
        est = self.make_estimator(params)
        if est.hidden_channels % est.heads:
            raise optuna.TrialPruned(
                f"heads={est.heads} does not divide hidden_channels="
                f"{est.hidden_channels}."
            )
        try:
            if self.folds is None:
                est = self.fit(est, self.data, trial)
                score, global_score = self._validation_scores(est)
                trial.set_user_attr("is_global_only", bool(est.is_global_only_))
                trial.set_user_attr("n_iter", int(est.n_iter_))
            else:
                score = self.cv_score(est, trial)
                global_score = None
        except CAUGHT as exc:
            reason = " ".join(f"{type(exc).__name__}: {exc}".split())  # one line
            if is_numerical_failure(exc):
                _prune_diverged(trial, params, reason)
            trial.set_user_attr("fail_reason", reason)
            raise
        if not np.isfinite(score):
            _prune_diverged(trial, params, f"the trial's score is {score}")
        if global_score is not None:
            trial.set_user_attr("global_score", global_score)
        if self.folds is None and self.keep_best:
            self._keep_if_best(trial.number, score, est)
        return score

    def make_estimator(self, params: dict) -> BaseGraphGLM:
        """A clone of the estimator with ``params`` and the shared seed."""
        est = clone(self.estimator)
        return est.set_params(**params, random_state=self.random_state)

    def fit(self, est, data: _Data, trial=None) -> BaseGraphGLM:
        """Fit with the shared neighbour cache (and pruning), then clean up."""
        callbacks = est.callbacks
        if trial is not None:
            est.set_params(callbacks=[*(callbacks or []), OptunaPruningCallback(trial)])
        try:
            return data.fit(est, neighbor_cache=self.neighbor_cache)
        finally:
            est.set_params(callbacks=callbacks)

    def cv_score(self, est, trial=None) -> float:
        """Mean score of ``est``'s clones over the folds (the first one prunes)."""
        data, scores = self.data, []
        for i, (train, test) in enumerate(self.folds):
            fold = self.fit(clone(est), data.take(train), trial if i == 0 else None)
            scores.append(self._score_fold(fold, data.take(test)))
        return float(np.mean(scores))

    def _keep_if_best(self, number: int, score: float, est) -> None:
        with self._lock:  # greater is better
            if self.best is None or score > self.best[1]:
                self.best = (number, score, est)

    def _validation_scores(self, est) -> tuple[float, float]:
        """(kept model, global GLM) negated validation deviance of a cv=None
        trial (greater is better)."""
        history = est.history_
        if not history or history[0].get("epoch") != 0:
            raise ValueError(
                "The trial has no validation deviance (the fit trained no "
                f"network: {est.global_only_reason_}); cv=None cannot score it."
            )
        if "power" in self.space:  # deviances under different powers do not compare
            model, glm = self._reference_validation_scores(est)
            return -model, -glm
        global_score = -float(history[0]["val_deviance"])
        if est.is_global_only_:  # the GLM, or the GAM that took its place
            return -self._returned_validation_deviance(est), global_score
        kept = next(h for h in history if h["epoch"] == est.best_epoch_)
        return -float(kept["val_deviance"]), global_score

    def _returned_validation_deviance(self, est) -> float:
        """The validation deviance of the model a global-only fit returns:
        the history's epoch 0 is the GLM's, and the GAM of
        ``FitPolicy(fallback="gam")`` may have replaced it."""
        rows = self.data.take(est._validation_positions)
        if is_classifier(est):  # the deviance is twice the log-loss
            proba = est.predict_proba(rows.X, offset=rows.offset)
            return 2.0 * float(
                log_loss(
                    rows.y, proba, labels=est.classes_, sample_weight=rows.sample_weight
                )
            )
        return _deviance(est.family_, est.predict(rows.X, offset=rows.offset), rows)

    def _reference_validation_scores(self, est) -> tuple[float, float]:
        """Validation deviances under the reference family (its power)."""
        rows = self.data.take(est._validation_positions)  # early stopping's rows
        family = self.reference_family
        model = _deviance(family, est.predict(rows.X, offset=rows.offset), rows)
        predictor = est.predictor()  # a formula's or the splines' columns too
        eta = predictor.global_eta(predictor.design(rows.X), rows.offset)[:, 0]
        glm_mu = est.family_.inverse_link(torch.as_tensor(eta)).numpy()
        return model, _deviance(family, glm_mu, rows)

    def _score_fold(self, est, rows: _Data) -> float:
        if self.scoring is not None:
            scorer = check_scoring(est, self.scoring)
            if rows.sample_weight is None:
                return float(scorer(est, rows.X, rows.y))
            return float(scorer(est, rows.X, rows.y, sample_weight=rows.sample_weight))
        if is_classifier(est):  # negated, as scikit-learn's "neg_log_loss"
            proba = est.predict_proba(rows.X, offset=rows.offset)
            return -float(
                log_loss(
                    rows.y, proba, labels=est.classes_, sample_weight=rows.sample_weight
                )
            )
        mu = est.predict(rows.X, offset=rows.offset)
        return -_deviance(self.reference_family, mu, rows)


def _prune_diverged(trial, params: dict, reason: str) -> None:
    """Prune a trial whose fit failed numerically, said in one line.

    A diverging trial (too large a learning rate, say) is a bad point of the
    space, not a bug: it is pruned, as Optuna prunes a bad trial, and the
    search goes on. Failing it instead had Optuna log it with a traceback.
    """
    trial.set_user_attr(NUMERICAL_FAILURE, reason)
    shown = {  # 4 significant digits: the exact values are in the study
        name: float(f"{value:.4g}") if isinstance(value, float) else value
        for name, value in params.items()
    }
    _LOGGER.warning(
        "Trial %d pruned: its fit failed numerically (%s); parameters: %s",
        trial.number,
        reason,
        shown,
    )
    raise optuna.TrialPruned(reason) from None


def _deviance(family, mu: np.ndarray, rows: _Data) -> float:
    eta = family.link(torch.as_tensor(mu, dtype=torch.float64))
    y = torch.as_tensor(rows.y, dtype=torch.float64)
    w = None if rows.sample_weight is None else torch.as_tensor(rows.sample_weight)
    return float(family.deviance(y, eta, w))
