"""Shared studies: workers started together on a fresh storage, and studies
that know what they are a study of (their fingerprint)."""

from __future__ import annotations

import numpy as np
import optuna
import pytest
from _together import outcomes, start_together
from optuna.distributions import FloatDistribution, IntDistribution
from optuna.trial import TrialState

from autoglm_graph import GraphGLMRegressor, GraphGLMSearchCV
from autoglm_graph.datasets import make_varying_coefficients
from autoglm_graph.search import make_storage

TINY = dict(max_epochs=3, hidden_channels=8, heads=2, n_iter_no_change=3)
SPACE = {
    "n_neighbors": IntDistribution(4, 12),
    "learning_rate": FloatDistribution(1e-3, 1e-2, log=True),
}


def _start_together(tmp_path, n: int, imports: str, body: str, args=()):
    """Run ``n`` children released at the same moment; their (rc, stderr)."""
    return outcomes(start_together(tmp_path, n, imports, body, args))


def test_storages_opened_together_on_a_fresh_database(tmp_path):
    """Of 6 workers opening a new SQLite database at once, without the retry
    several die of the alembic UNIQUE race (measured: 12 of 20 workers)."""
    url = f"sqlite:///{tmp_path / 'sweep.db'}"
    results = _start_together(
        tmp_path,
        6,
        # _optuna imports optuna, not torch: six children start in seconds
        "import optuna\nfrom autoglm_graph.search._optuna import make_storage",
        """
        storage = make_storage(sys.argv[3])
        optuna.create_study(storage=storage, study_name="s", load_if_exists=True,
                            direction="maximize")
        """,
        [url],
    )
    failed = [err for rc, err in results if rc != 0]
    assert not failed, failed[0]
    assert [s.study_name for s in optuna.get_all_study_summaries(url)] == ["s"]


def test_a_queued_trial_is_run_by_one_worker(tmp_path):
    """Six workers pop the one queued trial of a SQLite study at once: one gets
    it. Without serialised transactions SQLite ignores the row lock and
    several got it (measured: 6 of 8 rounds), so the same trial ran twice and
    the second result failed with "Cannot tell a COMPLETE trial"."""
    for round_ in range(2):
        url = f"sqlite:///{tmp_path / f'queue{round_}.db'}"
        optuna.create_study(storage=url, study_name="s").enqueue_trial({"x": 1})
        folder = tmp_path / str(round_)
        folder.mkdir()
        results = _start_together(
            folder,
            6,
            """
            import optuna
            from autoglm_graph.search._optuna import make_storage
            study = optuna.load_study(study_name="s", storage=make_storage(sys.argv[3]))
            study.get_trials()  # connected before the release
            """,
            "sys.stderr.write(repr(study._pop_waiting_trial_id()))",
            [url],
        )
        assert all(rc == 0 for rc, _ in results), results
        popped = [err.strip().splitlines()[-1] for _, err in results]
        assert popped.count("None") == 5, popped  # the other got the trial's id


SEARCH_IMPORTS = """
from autoglm_graph import GraphGLMRegressor, GraphGLMSearchCV
from autoglm_graph.datasets import make_varying_coefficients
from optuna.distributions import FloatDistribution, IntDistribution
X, y, _ = make_varying_coefficients(150, 3, family="poisson", random_state=0)
est = GraphGLMRegressor(
    family="poisson", max_epochs=3, hidden_channels=8, heads=2, n_iter_no_change=3
)
space = {
    "n_neighbors": IntDistribution(4, 12),
    "learning_rate": FloatDistribution(1e-3, 1e-2, log=True),
}
"""


@pytest.mark.slow
def test_search_workers_started_together(tmp_path):
    """Four GraphGLMSearchCV processes on a fresh SQLite file, released at
    once, without a study name: all start, and all join one study."""
    url = f"sqlite:///{tmp_path / 'sweep.db'}"
    results = _start_together(
        tmp_path,
        4,
        SEARCH_IMPORTS,
        "GraphGLMSearchCV(est, space, n_trials=4, storage=sys.argv[3], cv=None)"
        ".fit(X, y)",
        [url],
    )
    failed = [err for rc, err in results if rc != 0]
    assert not failed, failed[0]
    (summary,) = optuna.get_all_study_summaries(url)
    assert summary.study_name.startswith("autoglm-")
    study = optuna.load_study(study_name=summary.study_name, storage=url)
    states = [t.state for t in study.trials]
    assert states.count(TrialState.COMPLETE) + states.count(TrialState.PRUNED) >= 4
    assert TrialState.RUNNING not in states and TrialState.FAIL not in states
    # every worker used the same validation split
    assert len({t.user_attrs["global_score"] for t in study.trials}) == 1
    starts = [t for t in study.trials if "fixed_params" in t.system_attrs]
    print(
        f"4 workers started together: {len(study.trials)} trials, "
        f"{len(starts)} enqueued start point(s)"  # measured: 1 (no duplicate)
    )
    assert starts


# --------------------------------------------------------------- fingerprints
@pytest.fixture(scope="module")
def data():
    X, y, _ = make_varying_coefficients(150, 3, family="poisson", random_state=0)
    return X, y


def _search(storage, X, y, study_name="s", family="poisson", space=SPACE, **kw):
    est = GraphGLMRegressor(family=family, **TINY)
    kw.setdefault("cv", None)
    return GraphGLMSearchCV(
        est, space, n_trials=1, storage=storage, study_name=study_name, **kw
    ).fit(X, y)


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"y": "other"}, "other y than"),
        ({"X": "other"}, "other X than"),
        ({"family": "tweedie"}, "other family than"),
        ({"space": {"n_neighbors": IntDistribution(4, 8)}}, "other search space"),
        ({"cv": 2}, "other cv than"),
    ],
    ids=["target", "data", "family", "space", "cv"],
)
def test_a_study_refuses_other_data(tmp_path, data, change, match):
    X, y = data
    url = f"sqlite:///{tmp_path / 's.db'}"
    first = _search(url, X, y, random_state=0)
    assert first.study_.user_attrs["fingerprint"] == first.fingerprint_
    kwargs = {}
    if "y" in change:
        y = y[::-1].copy()
    if "X" in change:
        X = X + 1.0
    if "family" in change:
        kwargs["family"] = "tweedie"
    if "space" in change:
        kwargs["space"] = change["space"]
    if "cv" in change:
        kwargs["cv"] = 2
    with pytest.raises(ValueError, match=match):
        _search(url, X, y, random_state=0, **kwargs)
    # The study is untouched: still its one trial.
    study = optuna.load_study(study_name="s", storage=url)
    assert len(study.trials) == 1


def test_same_data_resumes_and_default_names_are_stable(tmp_path, data):
    X, y = data
    url = f"sqlite:///{tmp_path / 's.db'}"
    first = _search(url, X, y, study_name=None)
    again = _search(url, X, y, study_name=None)  # n_trials=1 reached: no new trial
    assert again.study_.study_name == first.study_.study_name
    assert len(again.study_.trials) == 1
    assert again.best_score_ == first.best_score_
    other = _search(url, X, y[::-1].copy(), study_name=None)  # other data
    assert other.study_.study_name != first.study_.study_name
    names = {s.study_name for s in optuna.get_all_study_summaries(url)}
    assert names == {first.study_.study_name, other.study_.study_name}


def test_a_study_without_fingerprint_or_minimising_is_refused(tmp_path, data):
    X, y = data
    storage = make_storage(f"sqlite:///{tmp_path / 's.db'}")
    legacy = optuna.create_study(
        storage=storage, study_name="legacy", direction="maximize"
    )
    legacy.optimize(lambda t: t.suggest_int("n_neighbors", 4, 12), n_trials=1)
    with pytest.raises(ValueError, match="no record of the data"):
        _search(storage, X, y, study_name="legacy")
    optuna.create_study(storage=storage, study_name="old", direction="minimize")
    with pytest.raises(ValueError, match="minimises"):
        _search(storage, X, y, study_name="old")


def test_cli_search_resumes_without_a_study_name(tmp_path, capsys):
    import pandas as pd

    from autoglm_graph.cli import main

    X, y, _ = make_varying_coefficients(
        150, 3, family="poisson", random_state=0, return_frame=True
    )
    path = tmp_path / "d.csv"
    X.assign(n=y).to_csv(path, index=False)
    args = ["search", str(path), "--target", "n", "--family", "poisson"]
    args += ["--trials", "1", "--max-epochs", "3", "--set", "hidden_channels=8"]
    args += ["--storage", f"sqlite:///{tmp_path / 'cli.db'}"]
    outs = []
    for run in range(2):
        assert main([*args, "--out", str(tmp_path / f"best{run}")]) == 0
        outs.append(capsys.readouterr().out)
    names = [out.split("study '")[1].split("'")[0] for out in outs]
    assert names[0] == names[1] and names[0].startswith("autoglm-")
    assert "1 complete" in outs[1]  # resumed: no second trial
    assert isinstance(pd.read_csv(path), pd.DataFrame)


def test_fingerprint_of_frames_and_arrays():
    import pandas as pd

    from autoglm_graph.search._optuna import array_digest

    a = np.arange(6.0).reshape(3, 2)
    assert array_digest(a) == array_digest(a.copy())
    assert array_digest(a) != array_digest(a.T.copy())  # shape counts
    assert array_digest(a) != array_digest(a.astype(np.float32))  # dtype counts
    frame = pd.DataFrame(a, columns=["p", "q"])
    assert array_digest(frame) != array_digest(frame.rename(columns={"q": "r"}))
    mixed = pd.DataFrame({"c": ["x", None, 3]})
    assert array_digest(mixed) == array_digest(mixed.copy())
    assert array_digest(np.array(["a", "b"], dtype=object)) != array_digest(None)
