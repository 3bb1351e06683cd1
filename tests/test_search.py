"""GraphGLMSearchCV: search, pruning, graph cache, shared and resumed storages."""

from __future__ import annotations

import datetime
import logging
import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import optuna
import pandas as pd
import pytest
from optuna.distributions import (
    CategoricalDistribution,
    FloatDistribution,
    IntDistribution,
)
from optuna.trial import TrialState
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from autoglm_graph import (
    GraphGLMClassifier,
    GraphGLMRegressor,
    GraphGLMSearchCV,
    OptunaPruningCallback,
    auto_fit,
)
from autoglm_graph.datasets import make_varying_coefficients
from autoglm_graph.search import make_storage

FAST = dict(max_epochs=8, hidden_channels=16, heads=2, n_iter_no_change=5)
SMALL_SPACE = {
    "n_neighbors": IntDistribution(4, 12),
    "threshold": FloatDistribution(0.0, 0.5),
    "learning_rate": FloatDistribution(1e-3, 1e-2, log=True),
}


@pytest.fixture(scope="module")
def poisson_data():
    X, y, _ = make_varying_coefficients(300, 3, family="poisson", random_state=0)
    return X, y


def test_default_search_space():
    space = GraphGLMRegressor.default_search_space()
    assert "power" not in space
    assert {"threshold", "n_neighbors", "graph_space", "use_neighbor_targets"} <= set(
        space
    )
    # Both encodings of the numeric columns, the default first.
    assert space["numeric_embedding"].choices == ("piecewise_linear", "linear")
    tweedie = GraphGLMRegressor.default_search_space(family="tweedie")
    assert isinstance(tweedie["power"], FloatDistribution)
    hidden = tweedie["hidden_channels"]
    widths = range(hidden.low, hidden.high + 1, hidden.step)
    assert all(w % h == 0 for w in widths for h in tweedie["heads"].choices)
    assert "power" not in GraphGLMClassifier.default_search_space()


def test_search_default_space_predicts_and_pipelines(poisson_data):
    X, y = poisson_data
    est = GraphGLMRegressor(family="poisson", **FAST)
    search = GraphGLMSearchCV(est, n_trials=6, random_state=0, cv=None)
    pipe = make_pipeline(StandardScaler(), search).fit(X, y)
    assert pipe.predict(X[:5]).shape == (5,)
    assert np.isfinite(pipe.score(X, y))
    assert search.n_trials_ == 6
    assert set(search.best_params_) == set(est.default_search_space("poisson"))
    assert search.direction_ == "maximize"  # negated deviances, as scikit-learn's
    assert search.global_score_ - 1e-9 <= search.best_score_ < 0
    best = search.best_trial_
    assert best.value == pytest.approx(search.best_score_)
    assert search.best_estimator_.callbacks is None
    assert not hasattr(search.best_estimator_, "_neighbor_cache")
    assert len(search.trials_dataframe_) == 6
    first = search.study_.trials[0].params  # starts from the estimator's values
    assert (first["hidden_channels"], first["heads"], first["n_neighbors"]) == (
        16,
        2,
        16,
    )
    assert "best parameters" in search.summary()


def test_classifier_cv_scoring(poisson_data):
    X, _ = poisson_data
    _, yc, _ = make_varying_coefficients(300, 3, family="binomial", random_state=1)
    est = GraphGLMClassifier(**FAST)
    search = GraphGLMSearchCV(
        est, SMALL_SPACE, n_trials=2, cv=2, scoring="accuracy", random_state=0
    ).fit(X, yc)
    assert search.direction_ == "maximize"
    assert 0 <= search.best_score_ <= 1
    assert search.predict_proba(X[:4]).shape == (4, 2)
    assert list(search.classes_) == [0, 1]
    # scoring=None with cv: mean log-loss, minimised
    search = GraphGLMSearchCV(est, SMALL_SPACE, n_trials=2, cv=2, random_state=0)
    search.fit(X, yc)
    assert search.direction_ == "maximize" and search.best_score_ < 0
    assert "negated cross-validated log-loss" in search.summary()


class _PruneAfterFirst(optuna.pruners.BasePruner):
    """Prunes every trial but the first once it reports epoch 2."""

    def prune(self, study, trial) -> bool:
        return trial.number > 0 and trial.last_step is not None and trial.last_step >= 2


def test_pruning(poisson_data):
    X, y = poisson_data
    est = GraphGLMRegressor(family="poisson", **FAST)
    search = GraphGLMSearchCV(
        est, SMALL_SPACE, n_trials=4, pruner=_PruneAfterFirst(), random_state=0, cv=None
    ).fit(X, y)
    states = [t.state for t in search.study_.trials]
    assert states[0] == TrialState.COMPLETE
    assert states[1:] == [TrialState.PRUNED] * 3
    assert search.study_.trials[1].last_step == 2
    assert search.best_trial_.number == 0


def test_pruning_callback_reports_each_epoch():
    study = optuna.create_study()
    trial = study.ask()
    callback = OptunaPruningCallback(trial)
    assert callback.on_epoch_end(None, {"epoch": 1, "val_deviance": 0.5}) is False
    assert callback.on_epoch_end(None, {"epoch": 2}) is False  # nothing to report
    assert study.trials[0].intermediate_values == {1: 0.5}


def test_graph_cache_is_shared(poisson_data):
    X, y = poisson_data
    est = GraphGLMRegressor(family="poisson", graph_space="input", **FAST)
    space = {
        "n_neighbors": IntDistribution(4, 12),
        "threshold": FloatDistribution(0.0, 0.5),
    }
    storage = optuna.storages.InMemoryStorage()
    study = optuna.create_study(
        storage=storage, study_name="cache", direction="maximize"
    )
    study.enqueue_trial({"n_neighbors": 12, "threshold": 0.0})  # widest k first
    search = GraphGLMSearchCV(
        est,
        space,
        n_trials=5,
        storage=storage,
        study_name="cache",
        random_state=0,
        cv=None,
    ).fit(X, y)
    # one search of training rows among themselves, one of validation rows
    assert search.neighbor_cache_.n_searches == 2
    assert len({t.params["n_neighbors"] for t in search.study_.trials}) > 1


WORKER = """
import sys
import optuna
from autoglm_graph import GraphGLMRegressor, GraphGLMSearchCV
from autoglm_graph.datasets import make_varying_coefficients
from optuna.distributions import FloatDistribution, IntDistribution

X, y, _ = make_varying_coefficients(300, 3, family="poisson", random_state=0)
est = GraphGLMRegressor(
    family="poisson", max_epochs={epochs}, hidden_channels=16, heads=2,
    n_iter_no_change={epochs},
)
space = {{
    "n_neighbors": IntDistribution(4, 12),
    "learning_rate": FloatDistribution(1e-3, 1e-2, log=True),
}}
GraphGLMSearchCV(
    est, space, n_trials=int(sys.argv[2]), storage=sys.argv[1], study_name="sweep",
    random_state=0, pruner={pruner}, cv=None,
).fit(X, y)
"""


def _worker(
    tmp_path, storage: str, n_trials: int, epochs: int = 8, pruner: str = "None"
):
    script = tmp_path / "worker.py"
    script.write_text(textwrap.dedent(WORKER.format(epochs=epochs, pruner=pruner)))
    env = dict(os.environ, OMP_NUM_THREADS="1")
    return subprocess.Popen(
        [sys.executable, str(script), storage, str(n_trials)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


def _finished(storage, states=(TrialState.COMPLETE, TrialState.PRUNED)):
    study = optuna.load_study(study_name="sweep", storage=storage)
    return study.get_trials(states=states)


def test_two_workers_share_a_journal_study(tmp_path):
    url = f"journal:{tmp_path / 'sweep.log'}"
    workers = [_worker(tmp_path, url, 4) for _ in range(2)]
    for w in workers:
        _, err = w.communicate(timeout=120)
        assert w.returncode == 0, err.decode()[-2000:]
    study = optuna.load_study(study_name="sweep", storage=make_storage(url))
    states = [t.state for t in study.trials]
    finished = states.count(TrialState.COMPLETE) + states.count(TrialState.PRUNED)
    assert 4 <= finished <= 5  # each worker may finish the trial it runs
    assert states.count(TrialState.FAIL) == 0 and TrialState.RUNNING not in states
    assert study.user_attrs["estimator_random_state"] is not None


def _age(trial) -> float:
    return (datetime.datetime.now() - trial.datetime_start).total_seconds()


def test_killed_worker_resumes(tmp_path, poisson_data):
    url = f"sqlite:///{tmp_path / 'sweep.db'}"
    # Without pruning every trial runs its 30 epochs (2 s or more).
    worker = _worker(tmp_path, url, 200, epochs=30, pruner="optuna.pruners.NopPruner()")
    deadline = time.monotonic() + 90
    storage = make_storage(url)
    before = []
    while time.monotonic() < deadline and worker.poll() is None:
        time.sleep(0.3)
        try:
            before = _finished(storage, (TrialState.COMPLETE,))
            running = _finished(storage, (TrialState.RUNNING,))
        except KeyError:  # the study does not exist yet
            continue
        # kill mid-trial, once its first heartbeat has been written and well
        # before it can finish (a trial takes 2 s or more): a kill that lands
        # just after the trial completed would leave nothing to resume
        if len(before) >= 2 and running and 0.5 < _age(running[-1]) < 1.0:
            break
    assert worker.poll() is None, worker.stderr.read().decode()[-2000:]
    os.kill(worker.pid, signal.SIGKILL)
    worker.wait()
    before = _finished(storage, (TrialState.COMPLETE,))
    assert len(before) >= 2
    X, y = poisson_data
    est = GraphGLMRegressor(family="poisson", **FAST)
    # n_trials counts complete and pruned trials: two more than were finished.
    n_total = len(_finished(storage)) + 2
    # A short grace period: the killed worker's RUNNING trial is failed by its
    # stale heartbeat and retried with the same parameters.
    time.sleep(1.5)
    with pytest.warns(optuna.exceptions.ExperimentalWarning):
        fast_heartbeat = optuna.storages.RDBStorage(
            url,
            heartbeat_interval=1,
            grace_period=1,
            heartbeat_stale_trial_callback=(
                optuna.storages.RetryHeartbeatStaleTrialCallback(max_retry=1)
            ),
        )
    space = {
        "n_neighbors": IntDistribution(4, 12),
        "learning_rate": FloatDistribution(1e-3, 1e-2, log=True),
    }
    search = GraphGLMSearchCV(
        est,
        space,
        n_trials=n_total,
        storage=fast_heartbeat,
        study_name="sweep",
        random_state=0,
        cv=None,
    ).fit(X, y)
    trials = search.study_.get_trials()
    after = {t.number: t for t in trials if t.state == TrialState.COMPLETE}
    assert search.n_trials_ == n_total
    for t in before:
        assert after[t.number].value == t.value
        assert after[t.number].params == t.params
    states = [t.state for t in trials]
    assert TrialState.RUNNING not in states
    (stale,) = [t for t in trials if t.state == TrialState.FAIL]  # killed mid-trial
    retried = [t for t in trials if t.number > stale.number]
    assert any(t.params == stale.params for t in retried)
    # a resumed, finished study runs nothing more
    again = GraphGLMSearchCV(
        est,
        space,
        n_trials=n_total,
        storage=url,
        study_name="sweep",
        random_state=0,
        cv=None,
    ).fit(X, y)
    assert len(again.study_.trials) == len(trials)


@pytest.mark.parametrize(
    ("params", "match"),
    [
        (
            {"param_distributions": {"hiden_channels": IntDistribution(8, 16)}},
            "Unknown parameter 'hiden_channels' in param_distributions",
        ),
        (
            {"param_distributions": {"heads": [1, 2]}},
            r"param_distributions\['heads'\] must be an optuna distribution",
        ),
        ({"storage": "nosuchdb://x/y"}, "The 'storage' URL 'nosuchdb://x/y'"),
        ({"storage": "sweep.db"}, "The 'storage' parameter must be"),
        ({"n_trials": 0}, "The 'n_trials' parameter must be a positive int"),
        ({"n_trials": None}, "'n_trials' and 'timeout' parameters are both None"),
        ({"scoring": "r2"}, "The 'scoring' parameter needs cv"),
        ({"timeout": -1}, "The 'timeout' parameter must be a positive number"),
    ],
)
def test_bad_input(poisson_data, params, match):
    X, y = poisson_data
    est = GraphGLMRegressor(family="poisson", **FAST)
    with pytest.raises(ValueError, match=match):
        GraphGLMSearchCV(est, **params, cv=None).fit(X, y)


def test_bad_estimator(poisson_data):
    from sklearn.linear_model import PoissonRegressor

    with pytest.raises(ValueError, match="'estimator' parameter must be a GraphGLM"):
        GraphGLMSearchCV(PoissonRegressor()).fit(*poisson_data)


def test_categorical_space_and_auto_fit(poisson_data, capsys):
    X, y = poisson_data
    model = auto_fit(
        X,
        y,
        family="poisson",
        n_trials=2,
        verbose=1,
        random_state=0,
        **FAST,
    )
    assert isinstance(model, GraphGLMRegressor)
    out = capsys.readouterr().out
    assert "global GLM on the same rows" in out and "best parameters" in out
    est = GraphGLMRegressor(family="poisson", **FAST)
    space = {"graph_space": CategoricalDistribution(["input", "embedding"])}
    search = GraphGLMSearchCV(est, space, n_trials=2, random_state=0, cv=None).fit(X, y)
    assert search.best_params_["graph_space"] in ("input", "embedding")


@pytest.mark.parametrize("splines", [False, True], ids=["linear", "splines"])
def test_tweedie_power_scored_under_one_power(splines):
    """(With splines the global GLM's scores read the spline columns too.)"""
    X, y, _ = make_varying_coefficients(300, 3, family="tweedie", random_state=0)
    est = GraphGLMRegressor(family="tweedie", power=1.5, splines=splines, **FAST)
    space = {"power": FloatDistribution(1.1, 1.9)}
    search = GraphGLMSearchCV(est, space, n_trials=3, random_state=0, cv=None).fit(X, y)
    # the global GLMs of different powers are all scored with power=1.5
    globals_ = [t.user_attrs["global_score"] for t in search.study_.trials]
    assert np.all(np.isfinite(globals_))
    assert search.best_estimator_.power == search.best_params_["power"]


def test_negative_binomial_folds_are_scored_at_the_glms_theta():
    """theta=None is estimated per fit; the folds of every trial are scored
    with one theta, the global GLM's on all rows (it was 1.0 whatever the data).
    """
    rng = np.random.default_rng(0)
    X = rng.standard_normal((400, 2))
    mu = np.exp(0.5 + 0.4 * X[:, 0])
    theta = 0.25  # variance mu + theta mu^2, far from 1
    y = rng.negative_binomial(1 / theta, 1 / (1 + theta * mu))
    est = GraphGLMRegressor(family="negative_binomial", **FAST)
    search = GraphGLMSearchCV(
        est, {"dropout": FloatDistribution(0.0, 0.3)}, n_trials=2, cv=3
    ).fit(X, y)
    glm = GraphGLMRegressor(family="negative_binomial", local_penalty=np.inf)
    expected = glm.fit(X, y).theta_
    assert abs(expected - theta) < 0.15
    assert search.reference_family_.theta == pytest.approx(expected, rel=1e-12)
    fixed = GraphGLMRegressor(family="negative_binomial", theta=2.0, **FAST)
    fixed_search = GraphGLMSearchCV(
        fixed, {"dropout": FloatDistribution(0.0, 0.3)}, n_trials=1, cv=3
    ).fit(X, y)
    assert fixed_search.reference_family_.theta == 2.0


def test_auto_cv_cross_validates_small_data():
    est = GraphGLMRegressor(family="poisson", **FAST)
    search = GraphGLMSearchCV(est)
    assert search.cv == "auto"
    assert search._resolve_cv(455) == 5  # ~45 validation rows would pick noise
    assert search._resolve_cv(50_000) is None  # the validation split
    assert GraphGLMSearchCV(est, scoring="r2")._resolve_cv(50_000) == 5
    assert GraphGLMSearchCV(est, cv=3)._resolve_cv(455) == 3
    assert GraphGLMSearchCV(est, cv=None)._resolve_cv(455) is None


def test_auto_cv_is_recorded(poisson_data):
    X, y = poisson_data
    est = GraphGLMRegressor(family="poisson", **FAST)
    search = GraphGLMSearchCV(est, SMALL_SPACE, n_trials=1, random_state=0)
    search.fit(X, y)
    assert search.cv_ == 5
    assert "cross-validated" in search.summary()


def test_bad_cv_string_raises(poisson_data):
    est = GraphGLMRegressor(family="poisson", **FAST)
    with pytest.raises(ValueError, match="'cv' parameter must be 'auto'"):
        GraphGLMSearchCV(est, cv="five").fit(*poisson_data)


def test_summary_prints_no_negative_zero(poisson_data):
    X, y = poisson_data
    est = GraphGLMRegressor(family="poisson", local_penalty=np.inf, **FAST)
    # refit=False: a refit global GLM would have no gain to print at all
    search = GraphGLMSearchCV(
        est, SMALL_SPACE, n_trials=1, cv=2, refit=False, random_state=0
    )
    search.fit(X, y)
    search.best_score_, search.global_score_ = -0.0, 0.0  # a perfect fit, twice
    assert "gain 0 (+0.00 %)" in search.summary()
    search.best_score_, search.global_score_ = -1.00000001, -1.0
    assert "(+0.00 %)" in search.summary()


def _formula_frame():
    X, y, _ = make_varying_coefficients(
        240, 3, family="poisson", random_state=0, return_frame=True
    )
    return X.assign(
        region=np.where(X["x0"] > 0, "north", "south"),
        y=y,
        label=np.where(y > np.median(y), "high", "low"),
    )


@pytest.mark.parametrize(
    ("make", "formula", "target"),
    [
        (lambda: GraphGLMRegressor(family="poisson", **FAST), "x0 + C(region)", "y"),
        (lambda: GraphGLMClassifier(**FAST), "x1 + C(region)", "label"),
    ],
    ids=["poisson", "classifier"],
)
def test_a_two_sided_formula_searches_without_y(make, formula, target):
    """``fit(X)`` with the target on the formula's left side: the folds
    (stratified for a classifier) and the scores are those of the same search
    given y, and the best estimator keeps the formula."""
    frame = _formula_frame()
    other = "label" if target == "y" else "y"
    X = frame.drop(columns=other)
    search = GraphGLMSearchCV(
        make().set_params(formula=f"{target} ~ {formula}"),
        SMALL_SPACE,
        n_trials=2,
        cv=3,
        random_state=0,
    ).fit(X)
    given = GraphGLMSearchCV(
        make().set_params(formula=formula),
        SMALL_SPACE,
        n_trials=2,
        cv=3,
        random_state=0,
    ).fit(X.drop(columns=target), X[target])
    assert search.best_score_ == pytest.approx(given.best_score_, rel=1e-9)
    assert search.global_score_ == pytest.approx(given.global_score_, rel=1e-9)
    best = search.best_estimator_
    assert best.formula == f"{target} ~ {formula}"
    # The target's column may be passed to predict or not.
    np.testing.assert_array_equal(
        best.predict(X[:20]),
        given.predict(X[:20].drop(columns=target)),
    )


def test_no_y_without_a_left_side_is_an_error(poisson_data):
    X, _ = poisson_data
    est = GraphGLMRegressor(family="poisson", **FAST)
    with pytest.raises(ValueError, match="y is None"):
        GraphGLMSearchCV(est, SMALL_SPACE, n_trials=1).fit(X)


# ------------------------------------------------------------ #44, point 9
@pytest.fixture()
def optuna_logs(caplog):
    """Optuna's log records (a failed trial's traceback) in ``caplog`` too."""
    optuna.logging.enable_propagation()
    try:
        with caplog.at_level(logging.WARNING):
            yield caplog
    finally:
        optuna.logging.disable_propagation()


@pytest.mark.parametrize("cv", [None, 2], ids=["validation", "cv2"])
def test_a_diverging_trial_is_pruned_in_one_line(poisson_data, optuna_logs, cv):
    X, y = poisson_data
    storage = optuna.storages.InMemoryStorage()
    study = optuna.create_study(storage=storage, study_name="lr", direction="maximize")
    study.enqueue_trial({"learning_rate": 1e3})  # the loss is inf at epoch 2
    study.enqueue_trial({"learning_rate": 1e-2})
    space = {"learning_rate": FloatDistribution(1e-3, 1e3, log=True)}
    est = GraphGLMRegressor(family="poisson", **FAST)
    search = GraphGLMSearchCV(
        est, space, n_trials=2, storage=storage, study_name="lr", cv=cv
    ).fit(X, y)
    diverged, fine = search.study_.trials
    assert (diverged.state, fine.state) == (TrialState.PRUNED, TrialState.COMPLETE)
    assert diverged.user_attrs["numerical_failure"].startswith(
        "FloatingPointError: The training loss became inf at epoch 2"
    )
    assert "Traceback" not in optuna_logs.text
    (record,) = optuna_logs.records  # one line, from the search's logger
    assert (record.name, record.levelno) == ("autoglm_graph.search", logging.WARNING)
    message = record.getMessage()
    assert message.startswith(
        "Trial 0 pruned: its fit failed numerically (FloatingPointError: "
    )
    assert message.endswith("; parameters: {'learning_rate': 1000.0}")
    assert "\n" not in message and record.exc_info is None
    assert "1 pruned (1 diverged), 0 failed trials" in search.summary()


def test_a_non_finite_score_prunes_the_trial(poisson_data, optuna_logs, monkeypatch):
    from autoglm_graph.search._objective import TrialObjective

    monkeypatch.setattr(
        TrialObjective, "_validation_scores", lambda self, est: (np.nan, -1.0)
    )
    est = GraphGLMRegressor(family="poisson", **FAST)
    search = GraphGLMSearchCV(est, SMALL_SPACE, n_trials=1, cv=None, random_state=0)
    with pytest.raises(ValueError, match=r"1 pruned, 0 failed\). .*score is nan"):
        search.fit(*poisson_data)
    assert search.study_.trials[0].state == TrialState.PRUNED
    assert "Traceback" not in optuna_logs.text


@pytest.mark.parametrize(
    ("error", "numerical"),
    [
        (FloatingPointError("The training loss became nan at epoch 3"), True),
        (ValueError("Input contains NaN."), True),
        (ValueError("Input contains infinity or a value too large for dtype"), True),
        (ValueError("found invalid values: tensor([inf])"), True),
        (ValueError("The 'heads' parameter must divide hidden_channels=64"), False),
        (ValueError("Unknown financial category 'financed'"), False),
    ],
    ids=["fp", "nan", "infinity", "inf", "setting", "words-with-nan-inside"],
)
def test_numerical_failures_are_told_from_other_errors(error, numerical):
    from autoglm_graph.search._objective import is_numerical_failure

    assert is_numerical_failure(error) is numerical


def test_a_warning_is_shown_once_per_search(poisson_data):
    """A level in the first fold's held-out rows only: each trial's first
    fold, and the global GLM's, warned (3 times for 2 trials)."""
    from autoglm_graph.preprocessing import UnseenCategoryWarning

    X, y = poisson_data
    frame = pd.DataFrame(X, columns=["x0", "x1", "x2"])
    frame["region"] = np.where(np.arange(len(frame)) % 2, "north", "south")
    frame.loc[0, "region"] = "rare"  # KFold(2): in the first fold's test rows
    est = GraphGLMRegressor(family="poisson", **FAST)
    for n_trials in (2, 1):  # and once again in the next search
        search = GraphGLMSearchCV(
            est, SMALL_SPACE, n_trials=n_trials, cv=2, random_state=0
        )
        with pytest.warns(UnseenCategoryWarning, match="'region': 'rare'") as record:
            search.fit(frame, y)
        unseen = [w for w in record if w.category is UnseenCategoryWarning]
        assert len(unseen) == 1


def test_summary_of_a_global_glm_refit_reports_no_gain(poisson_data):
    X, y = poisson_data
    est = GraphGLMRegressor(family="poisson", local_penalty=np.inf, **FAST)
    search = GraphGLMSearchCV(est, SMALL_SPACE, n_trials=1, cv=2, random_state=0)
    best = search.fit(X, y).best_estimator_
    assert best.is_global_only_
    text = search.summary()
    assert f"global GLM on the same rows: {search.global_score_:.6g}\n" in text
    assert (
        f"best_estimator_ is the global GLM ({best.global_only_reason_}); "
        "gain over it: not applicable"
    ) in text
    assert "gain 0" not in text and "%" not in text


# A network trained and dropped (a huge penalty keeps its deviations near 0),
# on a curved effect the GAM fits and the GLM does not.
DROPPED_NETWORK = dict(local_penalty=1e6, max_epochs=3, hidden_channels=8, heads=2)


def _curved_age(n: int = 1500):
    rng = np.random.default_rng(0)
    X = pd.DataFrame({"age": rng.uniform(18, 80, n), "d": rng.normal(size=n)})
    return X, rng


def _gam_fallback_trial(est, X, y):
    """The one cv=None trial's fitted estimator (the GAM) and the trial."""
    space = {"n_neighbors": IntDistribution(8, 8)}
    search = GraphGLMSearchCV(est, space, n_trials=1, cv=None, random_state=0)
    best = search.fit(X, y).best_estimator_
    assert best.is_global_only_ and "the GAM" in best.global_only_reason_
    return best, search.study_.trials[0]


def test_a_gam_fallback_trial_is_scored_as_the_gam_it_returns():
    X, rng = _curved_age()
    y = rng.poisson(np.exp(0.6 * np.sin(X.age / 8) + 0.2 * X.d))
    est = GraphGLMRegressor(family="poisson", **DROPPED_NETWORK)
    best, trial = _gam_fallback_trial(est, X, y)
    rows = best._validation_positions
    mu = best.predict(X.iloc[rows])
    gam = np.mean(
        2 * (y[rows] * np.log(np.where(y[rows] > 0, y[rows] / mu, 1)) - (y[rows] - mu))
    )
    np.testing.assert_allclose(trial.value, -gam, rtol=1e-6)
    assert trial.value > trial.user_attrs["global_score"]  # the GLM's


def test_a_gam_fallback_classifier_trial_is_scored_by_its_log_loss():
    X, rng = _curved_age()
    y = rng.random(1500) < 1 / (1 + np.exp(-1.5 * np.sin(X.age / 8) - 0.2 * X.d))
    best, trial = _gam_fallback_trial(GraphGLMClassifier(**DROPPED_NETWORK), X, y)
    rows = best._validation_positions
    proba = best.predict_proba(X.iloc[rows])[:, 1]
    loss = -np.mean(np.where(y[rows], np.log(proba), np.log1p(-proba)))
    np.testing.assert_allclose(trial.value, -2 * loss, rtol=1e-6)
    assert trial.value > trial.user_attrs["global_score"]
