"""The suite's tuned peers: LightGBM tuned by Optuna, and interpret's EBM.

Adapters with the interface of :mod:`benchmarks._lib.models` (``fit(X, y,
offset, groups)``, ``predict(X, offset)``, ``note()``); their factories are
registered there, in ``EXTRA_MODELS`` (run when named with ``--models``). This
module imports only the shared :mod:`benchmarks._lib.task`, never ``models``.

- :class:`LightGBMTunedModel`: LightGBM with the family's objective, its
  hyperparameters chosen by Optuna's ``TPESampler`` over ``Task.tuning_trials``
  trials, each scored by the family's mean deviance on ``Task.tuning_folds``-fold
  cross-validation of the training rows (folds by unit when the data has
  groups), then refitted on all training rows with the best trial's values.
- :class:`EBMModel`: ``ExplainableBoostingRegressor`` / ``Classifier`` with their
  defaults, the family's objective where interpret has one, the offset as
  ``init_score``, and a time budget after which the fit is reported n/a.
"""

from __future__ import annotations

import time
import warnings

import numpy as np
from sklearn.model_selection import GroupKFold, KFold, StratifiedKFold

from autoglm_graph import get_family
from benchmarks._lib.suite import mean_deviance
from benchmarks._lib.task import (
    LOG_LINK,
    NotApplicable,
    Task,
    string_levels,
    with_categories,
)


def _lightgbm_objective(task: Task) -> dict:
    """LightGBM's objective of the family (the plain ``lightgbm`` peer's)."""
    if task.is_classification:
        return {}
    objective = {
        "gaussian": "regression",
        "negative_binomial": "poisson",  # no NB objective: same mean model
    }.get(task.family, task.family)
    params = {"objective": objective}
    if objective == "tweedie":
        params["tweedie_variance_power"] = task.power
    return params


def _take(values, index):
    """Rows ``index`` of a DataFrame or an array (None stays None)."""
    if values is None:
        return None
    return values.iloc[index] if hasattr(values, "iloc") else values[index]


class LightGBMTunedModel:
    """LightGBM tuned by Optuna (TPE) on K-fold CV of the training rows.

    The search space: ``num_leaves`` 4-256, ``learning_rate`` 0.01-0.3,
    ``n_estimators`` 50-1000 (all log-uniform), ``min_child_samples`` 5-200
    (log), row subsampling (``subsample`` 0.5-1, every iteration) and
    ``colsample_bytree`` 0.5-1, ``reg_lambda`` and ``reg_alpha`` 1e-3-10 (log).
    A trial's score is the family's mean deviance (weighted when
    ``sample_weight`` is given) over the held-out rows of all folds. The offset,
    plus the log of the fold's observed rate, is the ``init_score`` (as in the
    plain ``lightgbm`` peer); string columns become categories of their
    training levels (as in the plain peer).
    """

    def __init__(self, task: Task) -> None:
        self.task = task
        self.family = get_family(task.family, power=task.power, theta=task.theta)

    # --------------------------------------------------------------- pieces

    def _estimator(self, params: dict):
        import lightgbm

        common = {
            "random_state": self.task.seed,
            "verbose": -1,
            "n_jobs": self.task.threads,
            "subsample_freq": 1,
            **_lightgbm_objective(self.task),
            **params,
        }
        if self.task.is_classification:
            return lightgbm.LGBMClassifier(**common)
        return lightgbm.LGBMRegressor(**common)

    def _fit_one(self, params: dict, X, y, offset, weight):
        """A fitted estimator and its base score (0 without an offset)."""
        estimator = self._estimator(params)
        init, base = {}, 0.0
        if offset is not None:
            w = np.ones(len(y)) if weight is None else weight
            base = float(np.log(np.sum(w * y) / np.sum(w * np.exp(offset))))
            init = {"init_score": offset + base}
        estimator.fit(X, y, sample_weight=weight, **init)
        return estimator, base

    def _predict_one(self, estimator, base: float, X, offset) -> np.ndarray:
        if self.task.is_classification:
            return estimator.predict_proba(X)
        if offset is None:
            return estimator.predict(X)
        raw = estimator.predict(X, raw_score=True) + base
        return np.exp(raw + offset)  # every objective with an offset has a log link

    def _folds(self, X, y, groups) -> list[tuple[np.ndarray, np.ndarray]]:
        k, seed = self.task.tuning_folds, self.task.seed
        if groups is not None:
            splitter = GroupKFold(n_splits=k, shuffle=True, random_state=seed)
        elif self.task.is_classification:
            splitter = StratifiedKFold(n_splits=k, shuffle=True, random_state=seed)
        else:
            splitter = KFold(n_splits=k, shuffle=True, random_state=seed)
        return list(splitter.split(X, y, groups))

    def cv_deviance(self, params: dict, X, y, offset, weight, folds) -> float:
        """The family's mean deviance over the held-out rows of ``folds``."""
        mean = None
        for train, test in folds:
            estimator, base = self._fit_one(
                params,
                _take(X, train),
                y[train],
                _take(offset, train),
                _take(weight, train),
            )
            pred = self._predict_one(
                estimator, base, _take(X, test), _take(offset, test)
            )
            if mean is None:
                mean = np.zeros((len(y), *pred.shape[1:]))
            mean[test] = pred
        return mean_deviance(self.family, y, mean, sample_weight=weight)

    @staticmethod
    def suggest(trial) -> dict:
        """One trial's LightGBM parameters (see the class docstring)."""
        return {
            "num_leaves": trial.suggest_int("num_leaves", 4, 256, log=True),
            "learning_rate": trial.suggest_float("learning_rate", 0.01, 0.3, log=True),
            "n_estimators": trial.suggest_int("n_estimators", 50, 1000, log=True),
            "min_child_samples": trial.suggest_int(
                "min_child_samples", 5, 200, log=True
            ),
            "subsample": trial.suggest_float("subsample", 0.5, 1.0),
            "colsample_bytree": trial.suggest_float("colsample_bytree", 0.5, 1.0),
            "reg_lambda": trial.suggest_float("reg_lambda", 1e-3, 10.0, log=True),
            "reg_alpha": trial.suggest_float("reg_alpha", 1e-3, 10.0, log=True),
        }

    # ------------------------------------------------------------ interface

    def fit(self, X, y, offset=None, groups=None, sample_weight=None):
        import optuna

        if offset is not None and self.task.family not in LOG_LINK:
            raise NotApplicable(f"offset for family={self.task.family!r}")
        y = np.asarray(y)
        self.levels_ = string_levels(X)
        X = with_categories(X, self.levels_)
        folds = self._folds(X, y, groups)

        def objective(trial) -> float:
            params = self.suggest(trial)
            return self.cv_deviance(params, X, y, offset, sample_weight, folds)

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        self.study_ = optuna.create_study(
            direction="minimize",
            sampler=optuna.samplers.TPESampler(seed=self.task.seed),
        )
        self.study_.optimize(objective, n_trials=self.task.tuning_trials)
        self.best_params_ = dict(self.study_.best_params)
        self.estimator_, self.base_score_ = self._fit_one(
            self.best_params_, X, y, offset, sample_weight
        )
        return self

    def predict(self, X, offset=None) -> np.ndarray:
        X = with_categories(X, self.levels_)
        return self._predict_one(self.estimator_, self.base_score_, X, offset)

    def note(self) -> str:
        """The number of trials, the best CV deviance and the best values."""
        p = self.best_params_
        return (
            f"{len(self.study_.trials)} trials, best CV deviance "
            f"{self.study_.best_value:.4g}: {p['n_estimators']} trees, "
            f"{p['num_leaves']} leaves, learning rate {p['learning_rate']:.3g}"
        )


# ---------------------------------------------------------------------- EBM

# interpret's regression objectives of the suite's families; negative binomial
# has none: Poisson is the same log-link mean model (as for LightGBM).
EBM_OBJECTIVES = {
    "gaussian": "rmse",
    "poisson": "poisson_deviance",
    "negative_binomial": "poisson_deviance",
    "gamma": "gamma_deviance",
    "tweedie": "tweedie_deviance:variance_power={power}",
}


class _Deadline:
    """interpret's boosting callback: stop every bag once ``at`` has passed.

    A class, not a closure, so that it pickles into joblib's workers.
    """

    def __init__(self, at: float) -> None:
        self.at = at

    def __call__(self, bag_index, step_index, progress, metric) -> bool:
        return time.time() > self.at


class EBMModel:
    """interpret's Explainable Boosting Machine with its defaults.

    Classifiers: ``ExplainableBoostingClassifier()``; regression:
    ``ExplainableBoostingRegressor(objective=...)`` from :data:`EBM_OBJECTIVES`.
    The offset of a log-link family is the ``init_score`` (link scale) in both
    ``fit`` and ``predict``. With ``Task.ebm_budget_s`` a callback stops the
    boosting once the budget has passed, and the fit is then reported n/a (a
    truncated EBM is not the model with its defaults).
    """

    def __init__(self, task: Task) -> None:
        self.task = task

    def _estimator(self, callback):
        from interpret.glassbox import (
            ExplainableBoostingClassifier,
            ExplainableBoostingRegressor,
        )

        params = {
            "random_state": self.task.seed,
            "n_jobs": -2 if self.task.threads is None else self.task.threads,
            "callback": callback,
        }
        if self.task.is_classification:
            return ExplainableBoostingClassifier(**params)
        objective = EBM_OBJECTIVES.get(self.task.family)
        if objective is None:
            raise NotApplicable(f"interpret has no objective for {self.task.family}")
        objective = objective.format(power=self.task.power)
        return ExplainableBoostingRegressor(objective=objective, **params)

    def fit(self, X, y, offset=None, groups=None):
        if offset is not None and self.task.family not in LOG_LINK:
            raise NotApplicable(f"offset for family={self.task.family!r}")
        budget = self.task.ebm_budget_s
        start = time.time()
        callback = None if budget is None else _Deadline(start + budget)
        self.estimator_ = self._estimator(callback)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self.estimator_.fit(X, np.asarray(y), init_score=offset)
        elapsed = time.time() - start
        if budget is not None and elapsed > budget:
            raise NotApplicable(
                f"EBM stopped at its time budget (--ebm-budget {budget:g} s; "
                f"{elapsed:.0f} s)"
            )
        return self

    def predict(self, X, offset=None) -> np.ndarray:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if self.task.is_classification:
                return self.estimator_.predict_proba(X)
            return self.estimator_.predict(X, init_score=offset)

    def note(self) -> str:
        """Objective, terms (mains and pairs) and outer bags."""
        est = self.estimator_
        pairs = sum(len(f) == 2 for f in est.term_features_)
        return (
            f"objective {est.objective}, {len(est.term_features_) - pairs} mains, "
            f"{pairs} pairs, {est.outer_bags} outer bags"
        )
