"""The learning rate lowered when the validation deviance stops falling.

:class:`PlateauLearningRate` is a training callback around torch's
``ReduceLROnPlateau``: the fit's rules (``FitPolicy.plateau_lr_factor`` and
``plateau_lr_epochs``) add it after the early stopping, so that a network
whose validation deviance has stalled takes smaller steps before the patience
runs out (``docs/decisions/plateau_learning_rate.md``).
"""

from __future__ import annotations

from torch.optim.lr_scheduler import ReduceLROnPlateau

from ..policy import FitPolicy

__all__ = ["PlateauLearningRate"]


class PlateauLearningRate:
    """Multiply the learning rate by ``factor`` once more than ``epochs``
    epochs in a row have not lowered the validation deviance (by the
    relative ``tol``); the count starts again at the new rate.

    Parameters
    ----------
    factor : float
        The multiplier, in (0, 1).
    epochs : int
        Epochs without improvement tolerated at one rate.
    tol : float, default=1e-4
        The relative improvement that counts (the estimators' ``tol``).
    """

    def __init__(self, factor: float, epochs: int, tol: float = 1e-4) -> None:
        self.factor = factor
        self.epochs = epochs
        self.tol = tol
        self.scheduler: ReduceLROnPlateau | None = None
        self._pending: dict | None = None  # a checkpoint's state, before the start

    @classmethod
    def from_policy(cls, policy: FitPolicy, tol: float = 1e-4) -> PlateauLearningRate:
        """The schedule of ``policy``'s ``plateau_lr_*`` fields."""
        return cls(policy.plateau_lr_factor, policy.plateau_lr_epochs, tol)

    def on_train_begin(self, trainer, train, val) -> None:
        self.scheduler = ReduceLROnPlateau(
            trainer.optimizer,
            factor=self.factor,
            patience=self.epochs,
            threshold=self.tol,
        )
        if self._pending is not None:
            self.scheduler.load_state_dict(self._pending)
            self._pending = None

    def on_epoch_end(self, trainer, logs: dict) -> bool:
        value = logs.get("val_deviance")
        if value is not None:
            self.scheduler.step(value)
        return False

    def state_dict(self) -> dict:
        """What a resumed fit continues from (:class:`Checkpoint`)."""
        return {} if self.scheduler is None else self.scheduler.state_dict()

    def load_state_dict(self, state: dict) -> None:
        if self.scheduler is None:
            self._pending = dict(state)
        else:
            self.scheduler.load_state_dict(state)
