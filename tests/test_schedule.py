"""The learning rate lowered on a plateau (``FitPolicy.plateau_lr_*``)."""

from __future__ import annotations

import pytest
import torch

from autoglm_graph import FitPolicy
from autoglm_graph.network import PlateauLearningRate


class _Trainer:
    def __init__(self) -> None:
        self.optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)

    @property
    def rate(self) -> float:
        return self.optimizer.param_groups[0]["lr"]


def _run(schedule, values, trainer=None):
    trainer = trainer or _Trainer()
    schedule.on_train_begin(trainer, None, None)
    rates = []
    for epoch, value in enumerate(values, start=1):
        assert (
            schedule.on_epoch_end(trainer, {"epoch": epoch, "val_deviance": value})
            is False
        )
        rates.append(trainer.rate)
    return rates


def test_the_rate_falls_once_more_than_epochs_epochs_have_not_improved():
    schedule = PlateauLearningRate.from_policy(
        FitPolicy(plateau_lr_factor=0.5, plateau_lr_epochs=2)
    )
    # Improving, then three epochs without a lower value: the third lowers it;
    # the count starts again at the new rate.
    rates = _run(schedule, [5.0, 4.0, 4.0, 4.1, 4.0, 3.9, 3.95, 3.96, 3.97])
    assert rates == [1.0, 1.0, 1.0, 1.0, 0.5, 0.5, 0.5, 0.5, 0.25]


def test_a_change_below_tol_is_no_improvement():
    schedule = PlateauLearningRate(0.5, 0, tol=1e-2)
    # Against the best value: 0.991 is 0.9 % below 1.0, and 0.98 is 2 % below.
    assert _run(schedule, [1.0, 0.995, 0.991, 0.98]) == [1.0, 0.5, 0.25, 0.25]


def test_epochs_without_a_validation_value_count_for_nothing():
    schedule = PlateauLearningRate(0.5, 0)
    trainer = _Trainer()
    schedule.on_train_begin(trainer, None, None)
    for epoch in range(1, 4):
        schedule.on_epoch_end(trainer, {"epoch": epoch})
    assert trainer.rate == 1.0


def test_a_checkpoint_s_state_restored_before_the_start_is_applied():
    first = PlateauLearningRate(0.5, 1)
    _run(first, [1.0, 1.0])  # one bad epoch counted
    resumed = PlateauLearningRate(0.5, 1)
    resumed.load_state_dict(first.state_dict())
    assert _run(resumed, [1.0]) == [0.5]  # the second bad epoch lowers it
    fresh = PlateauLearningRate(0.5, 1)
    assert _run(fresh, [1.0, 1.0]) == [1.0, 1.0]


@pytest.mark.parametrize("factor", [0.0, -0.5, 1.5])
def test_the_factor_is_a_share(factor):
    with pytest.raises(ValueError, match="plateau_lr_factor"):
        FitPolicy(plateau_lr_factor=factor)


def test_the_policy_adds_the_schedule_after_the_stopping_rule():
    from autoglm_graph import GraphGLMRegressor
    from autoglm_graph.datasets import make_varying_coefficients
    from autoglm_graph.network import EarlyStopping

    X, y, _ = make_varying_coefficients(300, 2, family="poisson", random_state=0)
    seen = []

    class _Spy:
        def on_train_begin(self, trainer, train, val):
            seen.extend(type(cb) for cb in trainer.config.callbacks)

        def on_epoch_end(self, trainer, logs):
            return False

    policy = FitPolicy(plateau_lr_factor=0.5)
    GraphGLMRegressor(
        family="poisson", max_epochs=2, fit_policy=policy, callbacks=[_Spy()]
    ).fit(X, y)
    assert seen == [EarlyStopping, PlateauLearningRate, _Spy]
    seen.clear()
    GraphGLMRegressor(family="poisson", max_epochs=2, callbacks=[_Spy()]).fit(X, y)
    assert seen == [EarlyStopping, _Spy]
