"""
Term shapes: a column's non-linear effect with ``splines=True``.
================================================================

Run:  python examples/term_shapes.py        (a few seconds on a 2-core CPU)

A small motor portfolio: claim counts over an exposure, a driver's age whose
effect is U-shaped (young and old drivers claim more) and a car's power whose
effect is a straight line. With ``splines=True`` every numeric column keeps its
linear term in the global GLM and gains a penalised cubic B-spline basis; one
smoothing penalty, chosen by generalised cross-validation on the global GLM
(``splines_penalty_``), sets how far each shape may bend, and a penalty of
infinity is the linear GLM.

:func:`autoglm_graph.explain.plotting.plot_term` draws a column's shape, its
contribution to the linear predictor (its linear term plus its basis, centred
over the column's training range), with a 95 % pointwise band from the
penalised fit's covariance when it is given the training data. Here the true
shapes, centred the same way, are drawn over them: the age's U is found, and
the power's true straight line lies within its band, around which the fitted
curve bends a little: one penalty serves every column (the age's bend sets
it), so read a shape together with its band. The data has one rate formula
for every policy, so the fitted model is its global GLM (a GAM): the network
found nothing to localise.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from autoglm_graph import GraphGLMRegressor
from autoglm_graph.explain.plotting import plot_term

rng = np.random.default_rng(0)
n = 2000
policies = pd.DataFrame(
    {
        "age": rng.uniform(18, 85, n),
        "power": rng.uniform(40, 200, n),  # kW
    }
)
log_exposure = np.log(rng.uniform(0.2, 1.0, n))  # policy-years


def true_age(age):
    return 0.0009 * (age - 50) ** 2


def true_power(power):
    return 0.004 * power


log_rate = -1.2 + true_age(policies["age"]) + true_power(policies["power"])
claims = rng.poisson(np.exp(log_exposure + log_rate)).astype(float)

model = GraphGLMRegressor(
    family="poisson", splines=True, max_epochs=10, random_state=0
).fit(policies, claims, offset=log_exposure)
print(f"terms of the global GLM: {len(model.feature_names_out_)}")
print(f"smoothing penalty (least GCV score): {model.splines_penalty_:g}")
if model.is_global_only_:  # one rate formula for everyone: nothing to localise
    print(f"the fitted model is its global GLM: {model.global_only_reason_}")

fig, axes = plt.subplots(1, 2, figsize=(11, 4))
for ax, column, truth in zip(
    axes, ["age", "power"], [true_age, true_power], strict=True
):
    plot_term(model, column, policies, claims, offset=log_exposure, ax=ax)
    grid = np.linspace(policies[column].min(), policies[column].max(), 200)
    ax.plot(grid, truth(grid) - truth(grid).mean(), "k--", label="true shape")
    ax.legend(loc="best")
    shape = ax.get_lines()[0].get_ydata()
    print(f"{column}: the fitted shape spans {np.ptp(shape):.2f} on the log scale")
fig.tight_layout()
