"""Saving over a model is atomic: a child process saving two models in turn over
one path is killed with SIGKILL at random moments; what is left at the path
must load and equal one of the two models, never a mix or nothing."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from autoglm_graph import GraphGLMRegressor, load
from autoglm_graph.datasets import make_varying_coefficients
from autoglm_graph.persistence._io import ModelFileError

pytestmark = pytest.mark.skipif(
    not hasattr(os, "fork"), reason="needs fork and SIGKILL (POSIX)"
)

SMALL = dict(hidden_channels=16, heads=2, device="cpu", max_epochs=5)

# The child loads both models, says it is ready, then saves them in turn over
# the target until it is killed.
CHILD = """
import sys
from autoglm_graph import load
target, a, b = sys.argv[1:]
models = [load(a), load(b)]
print("ready", flush=True)
i = 0
while True:
    models[i % 2].save(target)
    i += 1
"""


@pytest.fixture(scope="module")
def two_models(tmp_path_factory):
    """Two models of the same columns that predict differently."""
    X, y, _ = make_varying_coefficients(400, 3, n_groups=3, random_state=0)
    first = GraphGLMRegressor(random_state=0, **SMALL).fit(X, y)
    second = GraphGLMRegressor(random_state=1, n_neighbors=8, **SMALL).fit(X, -y)
    folder = tmp_path_factory.mktemp("models")
    a, b = first.save(folder / "a"), second.save(folder / "b")
    expected = [first.predict(X), second.predict(X)]
    assert not np.allclose(expected[0], expected[1])
    return a, b, X, expected


def _fork_saver(target, models):
    """A forked child saving the models in turn until it is killed: it starts in
    milliseconds (the models are in memory), so many kills stay fast."""
    pid = os.fork()
    if pid == 0:  # the child never returns into pytest
        try:
            i = 0
            while True:
                models[i % 2].save(target)
                i += 1
        finally:
            os._exit(1)
    return pid


def _exec_saver(target, a, b, env):
    """A fresh interpreter (no state shared with pytest) doing the same."""
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(target), str(a), str(b)],
        stdout=subprocess.PIPE,
        env=env,
    )
    assert child.stdout.readline().strip() == b"ready"
    child.stdout.close()
    return child.pid


def _kill_during_saves(tmp_path, two_models, suffix, n_kills, spawn) -> dict:
    a, b, X, expected = two_models
    models = [load(a), load(b)]
    target = tmp_path / f"model{suffix}"
    models[0].save(target)  # an existing model to save over
    rng = np.random.default_rng(0)
    env = dict(os.environ, OMP_NUM_THREADS="1")
    counts = {"old or new": 0, "damaged": 0, "missing": 0}
    errors = []
    for _ in range(n_kills):
        if spawn == "fork":
            pid = _fork_saver(target, models)
        else:
            pid = _exec_saver(target, a, b, env)
        time.sleep(rng.uniform(0.0, 0.3))  # a few saves, then a random moment
        os.kill(pid, signal.SIGKILL)
        _, status = os.waitpid(pid, 0)
        assert os.WIFSIGNALED(status), "the child ended by itself"
        try:
            loaded = load(target)
        except FileNotFoundError:
            counts["missing"] += 1
            continue
        except ModelFileError as exc:
            counts["damaged"] += 1
            errors.append(str(exc))
            continue
        got = loaded.predict(X)
        if any(np.array_equal(got, e) for e in expected):
            counts["old or new"] += 1
        else:
            counts["damaged"] += 1
            errors.append("predicts neither model")
    leftovers = [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
    counts["temporary leftovers"] = len(leftovers)
    print(f"{n_kills} kills ({spawn}) during save to {target.name}: {counts}")
    assert not errors, errors
    return counts


@pytest.mark.parametrize("suffix", ["", ".zip"])
def test_killed_save_leaves_old_or_new_model(tmp_path, two_models, suffix):
    counts = _kill_during_saves(tmp_path, two_models, suffix, 20, "fork")
    assert counts["old or new"] == 20


@pytest.mark.slow
@pytest.mark.parametrize("suffix", ["", ".zip"])
def test_killed_save_in_a_fresh_interpreter(tmp_path, two_models, suffix):
    counts = _kill_during_saves(tmp_path, two_models, suffix, 20, "exec")
    assert counts["old or new"] == 20
