"""Where a fit's time goes: wall seconds by phase (the fitted ``fit_times_``)."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator

from ._lazy import torch

__all__ = ["PHASES", "PhaseTimes"]

#: The phases of a fit, in the order they first run.
PHASES = (
    "preprocessing",  # validation of the inputs and the preprocessor's fit
    "global_glm",  # the exact global GLM (and the negative binomial's theta)
    "graphs",  # neighbour searches of the training loop (first graph, refreshes)
    "steps",  # optimiser steps (forward, backward, update) and weight averaging
    "validation",  # the validation rows' deviance after each epoch
    "prediction_index",  # what prediction reuses: search index, training states
    "balance",  # the balance correction's pass over all rows
    "interval_members",  # the bootstrap members' fits (interval_members)
    "interval_bias",  # the intervals' bias estimate, or a global GLM's covariance
    "other",  # the rest: splits, location effect, bookkeeping
)


class PhaseTimes:
    """Wall seconds of one fit by phase.

    On CUDA a phase ends with a synchronisation of the device, so that the
    kernels it launched count in it and not in the phase that next waits for
    them (a few per epoch: the loop reads its losses on the host anyway).
    """

    def __init__(self, device: torch.device | str = "cpu") -> None:
        self.device = torch.device(device)
        self.seconds = dict.fromkeys(PHASES, 0.0)
        self._start = time.perf_counter()

    @classmethod
    def resume(
        cls, result: dict[str, float], device: torch.device | str = "cpu"
    ) -> PhaseTimes:
        """Times that go on from a finished clock's ``result()``.

        The phases keep their seconds and the total runs on from the old
        total, so that work done after ``result()`` (the interval members, after
        the model's own fit) is added to the same phases and total.
        """
        times = cls(device)
        for name in PHASES:
            times.seconds[name] = float(result.get(name, 0.0))
        times._start -= float(result.get("total", 0.0))
        return times

    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Add the block's wall seconds to ``name``."""
        if name not in self.seconds:
            raise ValueError(f"Unknown phase {name!r}; expected one of {PHASES}.")
        start = time.perf_counter()
        try:
            yield
        finally:
            if self.device.type == "cuda":
                torch.cuda.synchronize(self.device)
            self.seconds[name] += time.perf_counter() - start

    def result(self) -> dict[str, float]:
        """Seconds by phase, ``other`` being the total less the timed phases,
        and ``total`` since construction."""
        total = time.perf_counter() - self._start
        timed = sum(s for name, s in self.seconds.items() if name != "other")
        return {**self.seconds, "other": max(0.0, total - timed), "total": total}
