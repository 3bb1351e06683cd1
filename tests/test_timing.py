"""The phases of a fit (``fit_times_``)."""

from __future__ import annotations

import numpy as np
import pytest

from autoglm_graph import FitPolicy, GraphGLMRegressor
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
    """Times recorded before a phase was removed (``refit``, issue #59) go on:
    the removed phase's seconds count in ``other`` and in the total."""
    earlier = {**dict.fromkeys(PHASES, 0.0), "steps": 1.0, "refit": 2.0}
    earlier.update(other=0.5, total=3.5)
    times = PhaseTimes.resume(earlier)
    with times.phase("interval_bias"):
        pass
    result = times.result()
    assert list(result) == [*PHASES, "total"]
    assert result["steps"] == 1.0
    assert result["total"] >= 3.5
    assert result["other"] >= 2.5 - 1e-9
    assert sum(result.values()) - result["total"] == pytest.approx(result["total"])


def test_the_keep_check_has_a_phase_of_its_own(data):
    """Its trainings count in ``keep_check``, not in the fit's own ``steps``,
    ``graphs`` and ``validation``."""
    policy = FitPolicy(
        keep_check_standard_errors=1e9,  # every kept network is checked
        keep_standard_errors=0.0,
    )
    model = GraphGLMRegressor(
        family="poisson",
        hidden_channels=8,
        heads=2,
        max_epochs=15,
        random_state=0,
        fit_policy=policy,
    ).fit(*data)
    assert not model.is_global_only_
    times = model.fit_times_
    assert times["keep_check"] > 0
    epochs = sum(h.get("seconds", 0.0) for h in model.history_)
    assert times["steps"] + times["validation"] <= epochs + 1e-6
    parts = sum(seconds for name, seconds in times.items() if name != "total")
    assert parts == pytest.approx(times["total"], rel=1e-6)
