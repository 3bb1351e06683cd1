"""Checkpoint: a fit stopped mid-way and resumed equals one never stopped."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import warnings

import numpy as np
import pytest

from autoglm_graph import Checkpoint, FitPolicy, GraphGLMRegressor

SMALL = dict(
    family="poisson",
    hidden_channels=16,
    heads=2,
    max_epochs=12,
    n_iter_no_change=50,
    graph_refresh=5,
    random_state=0,
    # Bit-for-bit resumption is the CPU's guarantee: CUDA's atomic sums
    # (the attention's backward) may add in another order.
    device="cpu",
)


class _FirstEpoch:
    epoch = None

    def on_epoch_end(self, trainer, logs) -> bool:
        self.epoch = self.epoch or logs["epoch"]
        return False


class _Killed(Exception):
    pass


class _KillAt:
    def __init__(self, epoch: int) -> None:
        self.epoch = epoch

    def on_epoch_end(self, trainer, logs) -> bool:
        if logs["epoch"] == self.epoch:
            raise _Killed
        return False


@pytest.mark.parametrize(
    "params", [{}, {"message_passing": "pyg"}, {"batch_size": 200}], ids=str
)
def test_resumed_fit_equals_the_uninterrupted_one(poisson_600, tmp_path, params):
    X, y = poisson_600
    whole = GraphGLMRegressor(
        **SMALL, **params, callbacks=[Checkpoint(tmp_path / "whole.ckpt", every=4)]
    ).fit(X, y)
    path = tmp_path / "fit.ckpt"
    stopped = GraphGLMRegressor(
        **SMALL, **params, callbacks=[Checkpoint(path, every=4), _KillAt(7)]
    )
    with pytest.raises(_Killed):
        stopped.fit(X, y)
    assert path.exists()  # written at epoch 4, not at the kill
    resumed = GraphGLMRegressor(
        **SMALL, **params, callbacks=[Checkpoint(path, every=4)]
    ).fit(X, y)
    np.testing.assert_array_equal(resumed.predict(X), whole.predict(X))
    assert [h["epoch"] for h in resumed.history_] == list(range(13))
    assert resumed.best_epoch_ == whole.best_epoch_
    assert resumed.n_iter_ == whole.n_iter_ == 12


def test_resumed_cached_state_fit_equals_the_uninterrupted_one(poisson_600, tmp_path):
    # The cached states (partition and layer inputs) are part of the record:
    # resumed mid-way between refreshes, the steps read the same caches.
    policy = FitPolicy(cached_state_min_rows=100)
    test_resumed_fit_equals_the_uninterrupted_one(
        poisson_600, tmp_path, {"fit_policy": policy}
    )


def test_checkpoint_of_another_fit_warns_and_starts_afresh(poisson_600, tmp_path):
    X, y = poisson_600
    path = tmp_path / "fit.ckpt"
    GraphGLMRegressor(**SMALL, callbacks=[Checkpoint(path, every=4)]).fit(X, y)
    plain = GraphGLMRegressor(**{**SMALL, "learning_rate": 1e-2}).fit(X, y)
    with pytest.warns(UserWarning, match="written by another fit"):
        other = GraphGLMRegressor(
            **{**SMALL, "learning_rate": 1e-2},
            callbacks=[Checkpoint(path, every=4)],
        ).fit(X, y)
    np.testing.assert_array_equal(other.predict(X), plain.predict(X))


def test_bad_every_is_refused(poisson_600, tmp_path):
    X, y = poisson_600
    with pytest.raises(ValueError, match="every"):
        GraphGLMRegressor(**SMALL, callbacks=[Checkpoint(tmp_path / "c", every=0)]).fit(
            X, y
        )


CHILD = """
import json, sys, time
from autoglm_graph import Checkpoint, GraphGLMRegressor
from autoglm_graph.network import training
from autoglm_graph.datasets import make_varying_coefficients

class Slow:
    def on_epoch_end(self, trainer, logs):
        if logs["epoch"] > 4:
            print("past", logs["epoch"], flush=True)
            time.sleep(60)  # killed here
        return False

X, y, _ = make_varying_coefficients(600, 3, family="poisson", random_state=0)
params = json.loads(sys.argv[2])
callbacks = [Checkpoint(sys.argv[1], every=4), Slow()]
GraphGLMRegressor(**params, callbacks=callbacks).fit(X, y)
"""


def test_sigkilled_fit_resumes_to_the_same_model(poisson_600, tmp_path):
    X, y = poisson_600
    path = tmp_path / "fit.ckpt"
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    child = subprocess.Popen(
        [sys.executable, str(script), str(path), json.dumps(SMALL)],
        stdout=subprocess.PIPE,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    try:
        assert child.stdout.readline().startswith(b"past 5")
        os.kill(child.pid, signal.SIGKILL)  # mid-way, after the epoch-4 checkpoint
    finally:
        child.wait(timeout=60)
    first = _FirstEpoch()
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*another fit")
        resumed = GraphGLMRegressor(
            **SMALL, callbacks=[Checkpoint(path, every=4), first]
        ).fit(X, y)
    assert first.epoch == 5  # resumed after the epoch-4 checkpoint
    whole = GraphGLMRegressor(**SMALL).fit(X, y)
    np.testing.assert_array_equal(resumed.predict(X), whole.predict(X))
