"""The phases of a fit (``fit_times_``)."""

from __future__ import annotations

import numpy as np
import pytest

from autoglm_graph import GraphGLMRegressor
from autoglm_graph.datasets import make_varying_coefficients
from autoglm_graph.utils._timing import PHASES, PhaseTimes


@pytest.fixture(scope="module")
def data():
    X, y, _ = make_varying_coefficients(600, 3, 2, family="poisson", random_state=0)
    return X, y


def test_fit_times_split_the_fit_into_phases(data):
    model = GraphGLMRegressor(
        family="poisson", hidden_channels=8, heads=2, max_epochs=4, random_state=0
    ).fit(*data)
    times = model.fit_times_
    assert list(times) == [*PHASES, "total"]
    assert all(seconds >= 0 for seconds in times.values())
    assert times["steps"] > 0 and times["graphs"] > 0 and times["validation"] > 0
    parts = sum(seconds for name, seconds in times.items() if name != "total")
    assert parts == pytest.approx(times["total"], rel=1e-6)
    # The loop's phases lie inside the epochs' own clock.
    epochs = sum(h.get("seconds", 0.0) for h in model.history_)
    assert times["steps"] + times["validation"] <= epochs + 1e-6


def test_a_global_glm_fit_has_no_steps(data):
    model = GraphGLMRegressor(family="poisson", local_penalty=np.inf).fit(*data)
    assert model.fit_times_["steps"] == 0.0
    assert model.fit_times_["graphs"] == 0.0
    assert model.fit_times_["global_glm"] > 0


def test_an_unknown_phase_is_named():
    with pytest.raises(ValueError, match="Unknown phase 'search'"):
        with PhaseTimes().phase("search"):
            pass


def test_resume_reads_the_times_of_an_earlier_version():
    """Times recorded before a phase was removed (``refit``, ``keep_check``,
    issue #59) go on: the removed phases' seconds count in ``other`` and in the
    total."""
    earlier = {**dict.fromkeys(PHASES, 0.0), "steps": 1.0, "refit": 1.5}
    earlier.update(keep_check=0.5, other=0.5, total=3.5)
    times = PhaseTimes.resume(earlier)
    with times.phase("interval_bias"):
        pass
    result = times.result()
    assert list(result) == [*PHASES, "total"]
    assert result["steps"] == 1.0
    assert result["total"] >= 3.5
    assert result["other"] >= 2.5 - 1e-9
    assert sum(result.values()) - result["total"] == pytest.approx(result["total"])
