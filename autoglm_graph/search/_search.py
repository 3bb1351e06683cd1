"""Optuna hyperparameter search for the graph GLM estimators.

:class:`GraphGLMSearchCV` wraps a :class:`~autoglm_graph.GraphGLMRegressor` or
:class:`~autoglm_graph.GraphGLMClassifier` in an Optuna study. Without ``cv``
each trial is one fit scored on the estimator's own validation split (the fast
path); with ``cv`` a trial is a cross-validation. Bad trials are pruned while
they train (:class:`OptunaPruningCallback`), trials that differ only in
``n_neighbors`` or ``threshold`` share one input-space neighbour search (a
:class:`~autoglm_graph.neighbors.NeighborCache`), and a storage (a database URL or a
journal file) makes the sweep resumable and shareable between processes and
machines. :func:`auto_fit` is the one-call version for notebooks.
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
import threading
import warnings
from numbers import Integral, Real

import numpy as np
import optuna
from optuna.distributions import BaseDistribution
from optuna.study import MaxTrialsCallback
from optuna.trial import TrialState
from sklearn.base import BaseEstimator, MetaEstimatorMixin, clone, is_classifier
from sklearn.metrics import accuracy_score, check_scoring
from sklearn.model_selection import check_cv
from sklearn.utils import check_random_state, get_tags
from sklearn.utils.validation import check_is_fitted
from tqdm.auto import tqdm

from ..estimators import BaseGraphGLM, GraphGLMClassifier, GraphGLMRegressor
from ..glm import get_family
from ..neighbors import NeighborCache
from ._objective import CAUGHT, NUMERICAL_FAILURE, TrialObjective, _Data
from ._optuna import (
    JOURNAL_SUFFIXES,
    OptunaPruningCallback,
    check_fingerprint,
    default_study_name,
    fail_stale_trials,
    make_storage,
    start_point,
    study_fingerprint,
)

__all__ = [
    "JOURNAL_SUFFIXES",
    "GraphGLMSearchCV",
    "OptunaPruningCallback",
    "auto_fit",
    "make_storage",
]

_FINISHED = (TrialState.COMPLETE, TrialState.PRUNED)


class GraphGLMSearchCV(MetaEstimatorMixin, BaseEstimator):
    """Optuna search over the hyperparameters of a graph GLM estimator.

    Parameters
    ----------
    estimator : GraphGLMRegressor or GraphGLMClassifier
        The estimator whose parameters are searched; the others stay as set.
    param_distributions : dict of str to optuna distribution, default=None
        ``{"n_neighbors": optuna.distributions.IntDistribution(4, 32), ...}``;
        None uses ``type(estimator).default_search_space(family)``.
        The first trial of a new study takes the estimator's own values of
        the searched parameters (those inside the space).
    n_trials : int or None, default=20
        Trials the study should hold in total (complete or pruned), counting
        trials already in a storage: a resumed sweep runs only the missing
        ones, and several workers on one study stop together (each may finish
        the trial it is running, so the total can exceed ``n_trials`` by the
        number of workers minus one). None: until ``timeout``.
    timeout : float or None, default=None
        Seconds after which this process starts no new trial.
    cv : "auto", None, int, or cross-validation splitter, default="auto"
        None: each trial is one fit scored on the estimator's validation split
        (``validation_fraction`` of the rows, the same rows for every trial);
        the score is the negated validation deviance of the model the fit kept
        (where the network was not kept, that of the global GLM or of the GAM
        that ``FitPolicy(fallback="gam")`` put in its place). Otherwise as
        ``sklearn.model_selection.check_cv``: the score is the mean over folds.
        ``"auto"``: 5-fold cross-validation below 5,000
        rows, where a validation split of 10 % would hold a few hundred rows
        or fewer and pick noise (on 455 rows of breast cancer, ~43 validation
        rows chose a model worse on test than the defaults), or when
        ``scoring`` is given; the validation split above. The choice is
        ``cv_``.
        When the Tweedie ``power`` is searched, every deviance is computed at
        the power of ``estimator`` (deviances of different powers do not
        compare).
    scoring : None, str or callable, default=None
        With ``cv`` only. None: the negated mean family deviance on the
        held-out fold for regressors (under the family of ``estimator``), the
        negated mean log-loss for classifiers. A scikit-learn scorer name or
        callable ``scorer(estimator, X, y)``. Either way greater is better and
        the study maximises, as in ``GridSearchCV``.
    sampler : optuna.samplers.BaseSampler, default=None
        None: ``TPESampler`` seeded by ``random_state`` (and, with a storage,
        the process id, so that workers do not propose the same trials).
    pruner : optuna.pruners.BasePruner, default=None
        None: ``MedianPruner(n_startup_trials=5, n_warmup_steps=5)`` over
        epochs. ``optuna.pruners.HyperbandPruner(max_resource=max_epochs)``
        also fits. Pruning needs ``early_stopping=True``; with ``cv`` only the
        first fold reports epochs.
    storage : None, str, path or optuna storage, default=None
        Where the study lives; see :func:`make_storage`. Processes pointed at
        one storage and ``study_name`` share the sweep; a stopped sweep resumes.
        A database URL (``"sqlite:///sweep.db"``) gets heartbeats: the running
        trial of a killed worker is failed after 120 s without a heartbeat and
        retried (``make_storage(url, grace_period=...)`` for other settings). A
        journal file (``"journal:sweep.log"``, or a path ending in ``.log``,
        ``.jsonl`` or ``.journal``) has no heartbeat; such a trial stays RUNNING
        and does not count towards ``n_trials``.
    study_name : str or None, default=None
        Name of the study in the storage (created, or loaded if it exists).
        None with a storage: ``"autoglm-<hash>"``, derived from
        ``fingerprint_``, so that rerunning the same search resumes it. A
        study records its fingerprint (the data, target, weights, offset,
        groups, estimator class, family, search space, ``cv`` and scoring) and
        ``fit`` refuses, with a ``ValueError``, a study made for another one.
    n_jobs : int, default=1
        Threads running trials in this process (``study.optimize(n_jobs=...)``);
        for processes or machines, start several workers on one storage.
    refit : bool, default=True
        Fit ``best_estimator_`` with the best parameters on all rows (with
        ``cv=None`` the best trial's own fit is reused when it ran here).
    random_state : int, RandomState instance or None, default=None
        Seeds the sampler and, when the estimator's ``random_state`` is not an
        int, the one ``random_state`` every trial's estimator gets (stored in
        the study so that all workers use the same validation split; with a
        storage and ``random_state=None`` it is derived from the data, so
        that workers started together agree).
    verbose : int, default=0
        0: quiet. 1: a progress bar over trials. 2: also Optuna's log lines.

    Attributes
    ----------
    study_ : optuna.Study
    cv_ : None, int or cross-validation splitter
        The ``cv`` the trials used (``"auto"`` decided by the number of rows).
    best_trial_ : optuna.trial.FrozenTrial
    best_params_ : dict
        The searched parameters of the best trial.
    best_score_ : float
        The best trial's score; greater is better, as in ``GridSearchCV``.
        With ``scoring=None`` the negated mean deviance (or log-loss), so at
        most 0 (like scikit-learn's ``"neg_mean_poisson_deviance"``).
    direction_ : "maximize"
        The study's direction (always "maximize").
    global_score_ : float
        The same score for the global GLM alone (``local_penalty=inf``) on the
        same validation rows or folds.
    reference_family_ : Family or None
        The family whose deviance scores the folds of a regressor (None for a
        classifier). For ``negative_binomial`` with ``theta=None`` its theta is
        the global GLM's maximum-likelihood one on all the search's rows, the
        same for every trial (each trial's own estimate would score each trial
        on another scale).
    fingerprint_ : dict of str to str
        What the study is a study of (hashes of the data, the family, the
        search space, ...), recorded in its user attributes.
    best_estimator_ : estimator
        Refit with ``best_params_`` (when ``refit=True``).
    trials_dataframe_ : DataFrame
        ``study_.trials_dataframe()`` at the end of ``fit``.
    n_trials_ : int
        Complete or pruned trials in the study.
    neighbor_cache_ : NeighborCache
        The input-space neighbour searches shared by this fit's trials.
    estimator_random_state_ : int
        The ``random_state`` every trial's estimator had.

    Notes
    -----
    A trial whose fit fails numerically (a loss or score that is not finite,
    a ``FloatingPointError``, a ``ValueError`` about NaN or infinite values:
    too large a ``learning_rate``, say) is pruned, its reason in the trial's
    user attribute ``"numerical_failure"``, and reported in one line (no
    traceback) on the ``"autoglm_graph.search"`` logger at WARNING level; the
    search goes on. Any other caught error (a ``ValueError``) fails the trial
    as before (its ``"fail_reason"``). During ``fit`` each distinct warning
    (category and text, e.g. an ``UnseenCategoryWarning`` for a level a
    training fold never saw) is shown once, not once per trial and fold.
    ``summary()`` reports no gain where ``best_estimator_`` is the global GLM
    (its network was dropped), and says why (``global_only_reason_``).

    Examples
    --------
    >>> from autoglm_graph import GraphGLMRegressor, GraphGLMSearchCV
    >>> from autoglm_graph.datasets import make_varying_coefficients
    >>> X, y, _ = make_varying_coefficients(300, 3, family="poisson", random_state=0)
    >>> est = GraphGLMRegressor(family="poisson", max_epochs=5, hidden_channels=16)
    >>> search = GraphGLMSearchCV(est, n_trials=2, random_state=0).fit(X, y)
    >>> sorted(search.best_params_)[:3]
    ['dropout', 'graph_refresh', 'graph_space']
    """

    def __init__(
        self,
        estimator: BaseGraphGLM,
        param_distributions: dict | None = None,
        *,
        n_trials: int | None = 20,
        timeout: float | None = None,
        cv="auto",
        scoring=None,
        sampler: optuna.samplers.BaseSampler | None = None,
        pruner: optuna.pruners.BasePruner | None = None,
        storage=None,
        study_name: str | None = None,
        n_jobs: int = 1,
        refit: bool = True,
        random_state=None,
        verbose: int = 0,
    ) -> None:
        self.estimator = estimator
        self.param_distributions = param_distributions
        self.n_trials = n_trials
        self.timeout = timeout
        self.cv = cv
        self.scoring = scoring
        self.sampler = sampler
        self.pruner = pruner
        self.storage = storage
        self.study_name = study_name
        self.n_jobs = n_jobs
        self.refit = refit
        self.random_state = random_state
        self.verbose = verbose

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        sub = get_tags(self.estimator)
        tags.estimator_type = sub.estimator_type
        tags.input_tags = copy.deepcopy(sub.input_tags)
        tags.target_tags = copy.deepcopy(sub.target_tags)
        tags.classifier_tags = copy.deepcopy(sub.classifier_tags)
        tags.regressor_tags = copy.deepcopy(sub.regressor_tags)
        return tags

    # ------------------------------------------------------------ validation
    def _search_space(self) -> dict[str, BaseDistribution]:
        est = self.estimator
        space = self.param_distributions
        if space is None:
            return type(est).default_search_space(getattr(est, "family", None))
        if not isinstance(space, dict) or not space:
            raise ValueError(
                "The 'param_distributions' parameter must be None or a non-empty "
                f"dict of optuna distributions; got {space!r}."
            )
        valid = est.get_params(deep=False)
        for name, dist in space.items():
            if name not in valid:
                raise ValueError(
                    f"Unknown parameter {name!r} in param_distributions: "
                    f"{type(est).__name__} has no such parameter. Valid names: "
                    f"{', '.join(sorted(valid))}."
                )
            if not isinstance(dist, BaseDistribution):
                raise ValueError(
                    f"param_distributions[{name!r}] must be an optuna distribution "
                    f"(e.g. optuna.distributions.FloatDistribution); got "
                    f"{type(dist).__name__}."
                )
        return dict(space)

    def _validate_params(self) -> None:
        if not isinstance(self.estimator, BaseGraphGLM):
            raise ValueError(
                "The 'estimator' parameter must be a GraphGLMRegressor or "
                f"GraphGLMClassifier; got {type(self.estimator).__name__}."
            )
        n = self.n_trials
        if n is not None and (
            not isinstance(n, Integral) or isinstance(n, bool) or n < 1
        ):
            raise ValueError(
                f"The 'n_trials' parameter must be a positive int or None; got {n!r}."
            )
        t = self.timeout
        if t is not None and (not isinstance(t, Real) or isinstance(t, bool) or t <= 0):
            raise ValueError(
                f"The 'timeout' parameter must be a positive number or None; got {t!r}."
            )
        if n is None and t is None:
            raise ValueError(
                "The 'n_trials' and 'timeout' parameters are both None; give at "
                "least one, or the search would never end."
            )
        j = self.n_jobs
        if not isinstance(j, Integral) or isinstance(j, bool) or (j < 1 and j != -1):
            raise ValueError(
                f"The 'n_jobs' parameter must be an int >= 1 or -1; got {j!r}."
            )
        if self.study_name is not None and not isinstance(self.study_name, str):
            raise ValueError(
                "The 'study_name' parameter must be a str or None; got "
                f"{self.study_name!r}."
            )
        if isinstance(self.cv, str) and self.cv != "auto":
            raise ValueError(
                "The 'cv' parameter must be 'auto', None, an int or a "
                f"cross-validation splitter; got {self.cv!r}."
            )
        if self.cv is None:
            if self.scoring is not None:
                raise ValueError(
                    "The 'scoring' parameter needs cv: with cv=None a trial is "
                    f"scored by its validation deviance; got scoring={self.scoring!r}."
                )
            if not self.estimator.early_stopping:
                raise ValueError(
                    "cv=None scores trials on the estimator's validation split, "
                    "which needs early_stopping=True; got early_stopping=False. "
                    "Set it or pass cv."
                )

    # --------------------------------------------------------------- fitting
    def fit(
        self, X, y=None, sample_weight=None, offset=None, groups=None
    ) -> GraphGLMSearchCV:
        """Run the study (its missing trials), then refit the best parameters.

        Parameters
        ----------
        X : array-like or DataFrame of shape (n_samples, n_features)
        y : array-like of shape (n_samples,), default=None
            None when the estimator's formula names the target on its left
            side (as its ``fit`` takes it): the target is then read from
            ``X`` for the folds (stratified for a classifier) and the scores,
            and every fit gets ``X`` with its column.
        sample_weight, offset : array-like of shape (n_samples,), default=None
            Passed to every fit, and used in the scores.
        groups : array-like of shape (n_samples,), default=None
            Passed to every fit (validation split by group) and to a group-aware
            ``cv`` splitter.

        Returns
        -------
        self
        """
        self._validate_params()
        with _each_warning_once():
            return self._fit(X, y, sample_weight, offset, groups)

    def _fit(self, X, y, sample_weight, offset, groups) -> GraphGLMSearchCV:
        space = self._search_space()
        storage = make_storage(self.storage)
        data = _Data.of(self.estimator, X, y, sample_weight, offset, groups)
        self.cv_ = self._resolve_cv(len(data.y))
        folds = None
        if self.cv_ is not None:
            cv = check_cv(self.cv_, data.y, classifier=is_classifier(self.estimator))
            folds = list(cv.split(data.X, data.y, data.groups))
        if self.scoring is not None:
            check_scoring(self.estimator, self.scoring)
        # Greater is better, as in scikit-learn: deviances are negated.
        self.direction_ = "maximize"
        self.fingerprint_ = study_fingerprint(
            self.estimator,
            space,
            data,
            self.cv_,
            self.scoring,
            self._family_text(),
        )
        n_entries = 8 if folds is None else 2 * len(folds) + 4
        self.neighbor_cache_ = NeighborCache(max_entries=n_entries)
        verbosity = optuna.logging.get_verbosity()
        if self.verbose < 2:
            optuna.logging.set_verbosity(optuna.logging.WARNING)
        try:
            self.study_ = self._create_study(storage)
            check_fingerprint(self.study_, self.fingerprint_)
            self.estimator_random_state_ = self._shared_random_state(storage)
            self.reference_family_ = (
                None if is_classifier(self.estimator) else self._scoring_family(data)
            )
            objective = TrialObjective(
                self.estimator,
                space,
                data,
                folds,
                random_state=self.estimator_random_state_,
                neighbor_cache=self.neighbor_cache_,
                reference_family=self.reference_family_,
                scoring=self.scoring,
                keep_best=self.refit,
            )
            self._optimize(space, objective)
        finally:
            optuna.logging.set_verbosity(verbosity)
        return self._finish(objective)

    def _create_study(self, storage) -> optuna.Study:
        rng = check_random_state(self.random_state)
        seed = int(rng.randint(np.iinfo(np.int32).max))
        if storage is not None:
            seed = (seed + os.getpid()) % np.iinfo(np.int32).max
        sampler = self.sampler or optuna.samplers.TPESampler(seed=seed)
        pruner = self.pruner or optuna.pruners.MedianPruner(
            n_startup_trials=5, n_warmup_steps=5
        )
        name = self.study_name
        if name is None and storage is not None:
            # A stable name, so that a rerun (or another worker) resumes it.
            name = default_study_name(self.fingerprint_)
        return optuna.create_study(
            storage=storage,
            study_name=name,
            sampler=sampler,
            pruner=pruner,
            direction=self.direction_,
            load_if_exists=True,
        )

    def _shared_random_state(self, storage) -> int:
        stored = self.study_.user_attrs.get("estimator_random_state")
        if stored is not None:
            return int(stored)
        own = self.estimator.random_state
        if isinstance(own, Integral) and not isinstance(own, bool):
            seed = int(own)
        elif storage is not None and self.random_state is None:
            # Workers started together all derive the same seed (a random one
            # each would race to be stored, and splits would differ).
            seed = int(self.fingerprint_["X"][:8], 16) % (2**31 - 1)
        else:
            seed = int(check_random_state(self.random_state).randint(2**31 - 1))
        self.study_.set_user_attr("estimator_random_state", seed)
        return seed

    def _family_text(self) -> str:
        if is_classifier(self.estimator):
            return "classification"
        family = self._reference_family()
        return f"{family.name} {json.dumps(family._params(), sort_keys=True)}"

    def _reference_family(self):
        est = self.estimator
        return get_family(est.family, power=est.power, theta=est.theta)

    def _scoring_family(self, data: _Data):
        """:meth:`_reference_family`, with an estimated negative binomial theta
        fixed to the global GLM's on all rows (see ``reference_family_``)."""
        family = self._reference_family()
        if family.name != "negative_binomial" or self.estimator.theta is not None:
            return family
        glm = clone(self.estimator).set_params(
            local_penalty=np.inf, callbacks=None, verbose=0
        )
        data.fit(glm)
        return get_family(family.name, theta=glm.theta_)

    def _n_finished(self) -> int:
        return len(self.study_.get_trials(deepcopy=False, states=_FINISHED))

    def _resolve_cv(self, n_samples: int, *, max_rows: int = 5000, folds: int = 5):
        """``cv`` with ``"auto"`` decided for ``n_samples`` rows: ``folds``-fold
        cross-validation below ``max_rows`` rows (the estimator's 10 %
        validation split would hold under 500 rows)."""
        if not (isinstance(self.cv, str) and self.cv == "auto"):
            return self.cv
        small = n_samples < max_rows
        if small or self.scoring is not None or not self.estimator.early_stopping:
            return folds
        return None

    def _optimize(self, space, objective: TrialObjective) -> None:
        if not self.study_.get_trials(deepcopy=False):
            # A new study starts from the estimator's own values (the defaults
            # unless set), so the search does not end below its starting point.
            start = start_point(self.estimator.get_params(deep=False), space)
            if start:
                self.study_.enqueue_trial(start, skip_if_exists=True)
        fail_stale_trials(self.study_)  # before counting what is left to run
        remaining = None
        callbacks = []
        if self.n_trials is not None:
            remaining = self.n_trials - self._n_finished()
            if remaining <= 0:
                return
            callbacks.append(MaxTrialsCallback(self.n_trials, states=_FINISHED))
        bar = tqdm(total=remaining, desc="trials", disable=not self.verbose)

        def progress(study, trial) -> None:
            bar.update(1)
            finished = [t for t in study.get_trials(deepcopy=False, states=_FINISHED)]
            if any(t.state == TrialState.COMPLETE for t in finished):
                bar.set_postfix(best=f"{study.best_value:.5g}", refresh=False)

        callbacks.append(progress)
        try:
            self.study_.optimize(
                objective,
                n_trials=remaining,
                timeout=self.timeout,
                n_jobs=self.n_jobs,
                catch=CAUGHT,
                callbacks=callbacks,
            )
        finally:
            bar.close()

    # ------------------------------------------------------------- results
    def _finish(self, objective: TrialObjective) -> GraphGLMSearchCV:
        study = self.study_
        self.n_trials_ = self._n_finished()
        self.trials_dataframe_ = study.trials_dataframe()
        if not study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)):
            failed = study.get_trials(deepcopy=False, states=(TrialState.FAIL,))
            trials = study.get_trials(deepcopy=False)
            reasons = {t.user_attrs.get("fail_reason") for t in failed}
            reasons |= {t.user_attrs.get(NUMERICAL_FAILURE) for t in trials}
            reasons -= {None}
            raise ValueError(
                f"No trial of study {study.study_name!r} completed "
                f"({self.n_trials_} pruned, {len(failed)} failed). Failures: "
                f"{'; '.join(sorted(reasons)) or 'none recorded'}."
            )
        self.best_trial_ = study.best_trial
        self.best_params_ = dict(self.best_trial_.params)
        self.best_score_ = float(self.best_trial_.value)
        if objective.folds is None:
            self.global_score_ = self.best_trial_.user_attrs.get("global_score")
        else:
            glm = objective.make_estimator({"local_penalty": np.inf})
            self.global_score_ = objective.cv_score(glm)
        if self.refit:
            self.best_estimator_ = self._refit(objective)
        return self

    def _refit(self, objective: TrialObjective) -> BaseGraphGLM:
        kept = objective.best
        if objective.folds is None and kept is not None:
            if kept[0] == self.best_trial_.number:
                return kept[2]
        est = objective.make_estimator(self.best_params_)
        return objective.fit(est, objective.data)

    def trials_dataframe(self, **kwargs):
        """``study_.trials_dataframe(**kwargs)``, up to date (other workers too)."""
        check_is_fitted(self, "study_")
        return self.study_.trials_dataframe(**kwargs)

    def summary(self) -> str:
        """Trials run, the best score against the global GLM, the best parameters.

        Where ``best_estimator_`` is the global GLM (its network was dropped),
        no gain is reported: the summary says so, with its
        ``global_only_reason_``.

        Returns
        -------
        str
        """
        check_is_fitted(self, "best_trial_")
        counts = {s: 0 for s in ("COMPLETE", "PRUNED", "FAIL")}
        diverged = 0
        for t in self.study_.get_trials(deepcopy=False):
            if t.state.name in counts:
                counts[t.state.name] += 1
            diverged += NUMERICAL_FAILURE in t.user_attrs
        if self.cv_ is None:
            what = "negated validation deviance"
        elif self.scoring is not None:
            what = f"cross-validated {self.scoring}"
        elif is_classifier(self.estimator):
            what = "negated cross-validated log-loss"
        else:
            what = "negated cross-validated deviance"
        lines = [
            f"{type(self).__name__}: study {self.study_.study_name!r}, "
            f"{counts['COMPLETE']} complete, {counts['PRUNED']} pruned"
            + (f" ({diverged} diverged)" if diverged else "")
            + f", {counts['FAIL']} failed trials",
            f"best score, {what} (higher is better): {self.best_score_:.6g} "
            f"(trial {self.best_trial_.number})",
        ]
        lines += self._gain_lines()
        lines.append("best parameters:")
        lines += [f"  {k} = {v!r}" for k, v in sorted(self.best_params_.items())]
        return "\n".join(lines)

    def _gain_lines(self) -> list[str]:
        """The global GLM's score and the best trial's gain over it; no gain
        where the refit ``best_estimator_`` is the global GLM itself."""
        best = getattr(self, "best_estimator_", None)
        glm = None
        if self.global_score_ is not None:
            glm = f"global GLM on the same rows: {self.global_score_:.6g}"
        if best is not None and best.is_global_only_:
            return [
                *([glm] if glm else []),
                f"best_estimator_ is the global GLM ({best.global_only_reason_}); "
                "gain over it: not applicable",
            ]
        if glm is None:
            return []
        gain = self.best_score_ - self.global_score_
        pct = 100.0 * gain / abs(self.global_score_) if self.global_score_ else 0
        # No "-0" or "-0.00 %" for a gain that rounds to nothing.
        gain = float(f"{gain:.4g}") + 0.0
        pct = round(pct, 2) + 0.0
        return [f"{glm}; gain {gain:.4g} ({pct:+.2f} %)"]

    # ------------------------------------------------------------ pass-through
    def _best(self):
        check_is_fitted(self, "best_estimator_")
        return self.best_estimator_

    @property
    def classes_(self) -> np.ndarray:
        return self._best().classes_

    @property
    def n_features_in_(self) -> int:
        return self._best().n_features_in_

    def predict(self, X, offset=None) -> np.ndarray:
        """``best_estimator_.predict``."""
        return self._best().predict(X, offset=offset)

    def predict_proba(self, X, offset=None) -> np.ndarray:
        """``best_estimator_.predict_proba`` (classifiers)."""
        return self._best().predict_proba(X, offset=offset)

    def score(self, X, y, sample_weight=None, offset=None) -> float:
        """``best_estimator_.score``: D² for regressors, accuracy for classifiers."""
        best = self._best()
        if is_classifier(best):  # ClassifierMixin.score would drop the offset
            return float(
                accuracy_score(
                    y, best.predict(X, offset=offset), sample_weight=sample_weight
                )
            )
        return best.score(X, y, sample_weight=sample_weight, offset=offset)


@contextlib.contextmanager
def _each_warning_once():
    """Within the block, show each distinct warning (category and text) once.

    The trials and folds of a search fit and predict the same rows again and
    again, so a warning about the data (a level that a training fold never
    saw: ``UnseenCategoryWarning``) came once per trial and fold, ~20 times in
    one search. The filters in force still apply to the first one.
    """
    seen: set[tuple[type, str]] = set()
    lock = threading.Lock()  # trials run in threads with n_jobs > 1
    with warnings.catch_warnings():
        show = warnings.showwarning

        def show_once(message, category, filename, lineno, file=None, line=None):
            with lock:
                if (category, str(message)) in seen:
                    return
                seen.add((category, str(message)))
            show(message, category, filename, lineno, file, line)

        warnings.showwarning = show_once
        yield


def _is_classification(family) -> bool:
    """Whether ``auto_fit``'s ``family`` asks for :class:`GraphGLMClassifier`."""
    if not isinstance(family, str):  # a Family object: the regressor's
        return False
    if family == "classification":
        return True
    try:
        return get_family(family).is_classification
    except (TypeError, ValueError):  # the regressor's fit says what is wrong
        return False


def auto_fit(
    X,
    y,
    *,
    family: str = "gaussian",
    n_trials: int | None = None,
    timeout: float | None = None,
    cv="auto",
    storage=None,
    study_name: str | None = None,
    random_state=0,
    verbose: int = 1,
    sample_weight=None,
    offset=None,
    groups=None,
    return_search: bool = False,
    **params,
):
    """Search the default space and return the fitted best estimator.

    For notebooks: a family and a budget in, a model out, with a progress bar
    over trials and a summary (best parameters, score, gain over the global
    GLM) when ``verbose``.

    Parameters
    ----------
    X, y : array-like
    family : str, default="gaussian"
        A regression family for :class:`GraphGLMRegressor`, or ``"binomial"``,
        ``"multinomial"`` or ``"classification"`` for
        :class:`GraphGLMClassifier`.
    n_trials : int or None, default=None
        Trial budget; 20 when neither it nor ``timeout`` is given.
    timeout : float or None, default=None
        Budget in seconds.
    cv, storage, study_name, random_state, verbose
        As in :class:`GraphGLMSearchCV`.
    sample_weight, offset, groups : array-like, default=None
        Passed to ``fit``.
    return_search : bool, default=False
        Return the fitted :class:`GraphGLMSearchCV` instead.
    **params
        Fixed parameters of the estimator (``max_epochs=100``, ...).

    Returns
    -------
    GraphGLMRegressor, GraphGLMClassifier or GraphGLMSearchCV
    """
    if _is_classification(family):
        estimator = GraphGLMClassifier(**params)
    else:
        estimator = GraphGLMRegressor(family=family, **params)
    if n_trials is None and timeout is None:
        n_trials = 20
    search = GraphGLMSearchCV(
        estimator,
        n_trials=n_trials,
        timeout=timeout,
        cv=cv,
        storage=storage,
        study_name=study_name,
        random_state=random_state,
        verbose=verbose,
    )
    search.fit(X, y, sample_weight=sample_weight, offset=offset, groups=groups)
    if verbose:
        print(search.summary())
    return search if return_search else search.best_estimator_
