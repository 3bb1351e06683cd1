"""Early stopping: which epoch to keep, and when to stop.

:class:`EpochSelector` tracks the best epoch against the global GLM (the
one-standard-error rule of :func:`paired_gain`); :class:`EarlyStopping` is the
callback that ends a fit. Its rules are a
:class:`~autoglm_graph.policy.FitPolicy`'s.
"""

from __future__ import annotations

import numpy as np
from torch import Tensor

from ..policy import FitPolicy
from .rows import FittedGraphState, weighted_mean

__all__ = ["EarlyStopping", "EpochSelector", "paired_gain"]


class EpochSelector:
    """Tracks the best epoch on validation and decides network vs global GLM.

    ``baseline`` is the global GLM's per-row validation deviance (epoch 0);
    the network is kept when its best epoch's gain exceeds ``standard_errors``
    standard errors (``FitPolicy.keep_standard_errors``).
    """

    def __init__(
        self, baseline: Tensor, weight: Tensor, standard_errors: float
    ) -> None:
        self.standard_errors = standard_errors
        self.baseline = baseline.double()
        self.weight = weight.double()
        self.baseline_value = self._mean(self.baseline)
        self.best_value = self.baseline_value
        self.best_unit: Tensor | None = None
        self.best: FittedGraphState | None = None
        self.gain = 0.0
        self.gain_se = 0.0

    def _mean(self, values: Tensor) -> float:
        return weighted_mean(values, self.weight).item()

    def update(self, unit: Tensor, snapshot) -> float:
        """Record one epoch's per-row deviance; returns its weighted mean."""
        value = self._mean(unit.double())
        if value < self.best_value:
            self.best_value, self.best_unit, self.best = (
                value,
                unit.double(),
                snapshot(),
            )
        return value

    def ahead(self) -> bool:
        """Whether the best epoch so far beats the global GLM by more than
        ``standard_errors`` standard errors (the rule :meth:`select` applies at
        the end)."""
        if self.best_unit is None:
            return False
        gain, gain_se = paired_gain(self.baseline, self.best_unit, self.weight)
        return gain > self.standard_errors * gain_se

    def select(self) -> FittedGraphState | None:
        """The best epoch's state if it beats the global GLM by
        ``standard_errors`` SE, else None."""
        if self.best is None:
            return None
        self.gain, self.gain_se = paired_gain(
            self.baseline, self.best_unit, self.weight
        )
        keep = self.gain > self.standard_errors * self.gain_se
        return self.best if keep else None


def paired_gain(baseline: Tensor, candidate: Tensor, weight: Tensor) -> tuple:
    """Weighted mean of ``baseline - candidate`` per row, and its standard error.

    The standard error is that of a weighted mean over ``1 / sum(w_norm**2)``
    effective rows. A network is kept over the global GLM only when its gain
    exceeds ``FitPolicy.keep_standard_errors`` of them, at the end
    (:meth:`EpochSelector.select`) and for the full patience
    (:meth:`EpochSelector.ahead`).
    """
    diff = baseline.double() - candidate.double()
    w = weight.double() / weight.double().sum()
    gain = float((w * diff).sum())
    variance = float((w * (diff - gain) ** 2).sum())
    n_effective = 1.0 / float((w**2).sum())
    return gain, float(np.sqrt(variance / n_effective))


class EarlyStopping:
    """Stop when validation deviance has not improved for ``n_iter_no_change``
    epochs (the patience).

    An improvement must beat the best value by ``tol`` (relative). The count
    starts from the global GLM's validation deviance (epoch 0 of the history),
    and until the best epoch beats it by more than
    ``FitPolicy.keep_standard_errors`` (the trainer's ``selector``, the rule
    that keeps a network at the end),
    training stops after ``screening_epochs`` epochs without improvement
    (``screening_epochs_below_glm`` once the best epoch is below the GLM) as
    soon as the validation deviance does not fall: a network that cannot beat
    the GLM is found out in a few epochs, while one that is clearly ahead, or
    closing in, gets the full patience. A network that has beaten the GLM
    stops as soon as its best epoch of the last ``n_iter_no_change`` epochs
    beats the best epoch before them by no more than ``stall_standard_errors``
    standard errors (paired over the validation rows; the trainer's
    ``selector`` holds their deviances). A network that has beaten the GLM
    and whose validation deviance has fallen for ``recovery_epochs`` epochs in
    a row is not stopped by the patience, nor by the stall, until it stops
    falling. The best epoch itself is tracked by the trainer regardless of
    ``tol``.

    Parameters
    ----------
    n_iter_no_change : int, default=10
        The patience: the estimators' parameter of the same name.
    tol : float, default=1e-4
        The relative improvement that resets it: the estimators' ``tol``.
    policy : FitPolicy, default=None
        The rules above, its fields of the same names (None: the defaults);
        ``screening_epochs_below_glm`` is at most ``screening_epochs``.
    """

    def __init__(
        self,
        n_iter_no_change: int = 10,
        tol: float = 1e-4,
        *,
        policy: FitPolicy | None = None,
    ) -> None:
        policy = policy or FitPolicy()
        self.n_iter_no_change = n_iter_no_change
        self.tol = tol
        self.screening_epochs = policy.screening_epochs
        self.screening_epochs_below_glm = min(
            policy.screening_epochs, policy.screening_epochs_below_glm
        )
        self.recovery_epochs = policy.recovery_epochs
        self.stall_standard_errors = policy.stall_standard_errors
        self._best = np.inf
        self._last = np.inf
        self._bad_epochs = 0
        self._beaten_glm = False
        self._falls = 0  # consecutive epochs of falling validation deviance
        # The selector's best per-row deviances after each of the last
        # n_iter_no_change + 1 epochs (None before a best epoch).
        self._best_units: list[Tensor | None] = []

    @classmethod
    def from_policy(
        cls, policy: FitPolicy, n_iter_no_change: int = 10, tol: float = 1e-4
    ) -> EarlyStopping:
        """Early stopping with ``policy``'s rules (``EarlyStopping(n_iter_no_change,
        tol, policy=policy)``)."""
        return cls(n_iter_no_change, tol, policy=policy)

    _STATE = (
        "_best",
        "_last",
        "_bad_epochs",
        "_beaten_glm",
        "_falls",
        "_best_units",
    )

    def state_dict(self) -> dict:
        """The counters a resumed fit continues from (:class:`Checkpoint`)."""
        return {name: getattr(self, name) for name in self._STATE}

    def load_state_dict(self, state: dict) -> None:
        # Older records have none of these.
        state = {"_falls": 0, "_best_units": [], **state}
        for name in self._STATE:
            setattr(self, name, state[name])

    def _recovering(self) -> bool:
        """A network that has beaten the GLM and is still falling steadily."""
        return self._beaten_glm and self._falls >= self.recovery_epochs

    def _stalled(self, trainer) -> bool:
        """Whether the best epoch of the last ``n_iter_no_change`` epochs beats the
        best one before them by no more than ``stall_standard_errors``
        standard errors (False before a best epoch that far back, and while
        the network recovers)."""
        before, now = self._best_units[0], self._best_units[-1]
        if (
            len(self._best_units) <= self.n_iter_no_change
            or not self._beaten_glm
            or before is None
            or now is None
            or self._recovering()
        ):
            return False
        gain, gain_se = paired_gain(before, now, trainer.selector.weight)
        return gain <= self.stall_standard_errors * gain_se

    def on_epoch_end(self, trainer, logs: dict) -> bool:
        value = logs.get("val_deviance")
        if value is None:
            return False
        if not np.isfinite(self._best):
            start = trainer.history[0] if trainer.history else {}
            if start.get("epoch") == 0:
                self._best = start.get("val_deviance", np.inf)
            else:  # no global GLM to beat: count from the first epoch
                self._beaten_glm = True
        falling, self._last = value < self._last, value
        self._falls = self._falls + 1 if falling else 0
        if not np.isfinite(self._best) or value < self._best * (1 - self.tol):
            self._best = value
            self._bad_epochs = 0
            self._beaten_glm = True
        else:
            self._bad_epochs += 1
        best_unit = getattr(getattr(trainer, "selector", None), "best_unit", None)
        self._best_units = [*self._best_units, best_unit][
            -(self.n_iter_no_change + 1) :
        ]
        if self._stalled(trainer):
            return True
        if self._bad_epochs >= self.n_iter_no_change:
            return not self._recovering()
        screening = (
            self.screening_epochs_below_glm
            if self._beaten_glm
            else self.screening_epochs
        )
        screened_out = self._bad_epochs >= screening and not falling
        if not screened_out:
            return False
        # Full patience only for a network that would be kept now: ahead of
        # the GLM by more than keep_standard_errors. One merely below it was
        # given up at the end anyway (nass_cds: best epoch 9, ran to 19).
        selector = getattr(trainer, "selector", None)
        not_ahead = selector is not None and not selector.ahead()
        return not self._beaten_glm or not_ahead
