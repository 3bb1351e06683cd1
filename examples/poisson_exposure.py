"""
Poisson counts with an exposure: why the offset ``log(exposure)`` matters.
==========================================================================

Run:  python examples/poisson_exposure.py        (about 10-30 s on a 2-core CPU)

Claim counts of insurance policies that were observed for different lengths of
time (the exposure, 0.1 to 3 years). The expected count is
``exposure * rate(x)``, and the per-row rate follows a GLM whose coefficients
differ between three latent groups of policies (``make_varying_coefficients``).

The script fits the same graph GLM twice:

- with ``offset=log(exposure)``: the model learns the rate, and the exposure
  enters the prediction exactly, as a known multiplier;
- without it: the exposure is unknown to the model, so every policy gets the
  count of an average policy of its kind, however long it was observed.

It prints the test deviance of both (and of the global GLM with the offset), and
shows that predicting with ``offset=0`` (``log 1``) gives the rate per unit of
exposure, i.e. the claims per policy-year, next to the true rate.
"""

from __future__ import annotations

import time

import numpy as np
from sklearn.metrics import mean_poisson_deviance

from autoglm_graph import GraphGLMRegressor
from autoglm_graph.datasets import make_varying_coefficients

N_ROWS, N_TRAIN = 4000, 3000
SETTINGS = {"max_epochs": 100, "random_state": 0}

X, _, coef = make_varying_coefficients(
    N_ROWS, 4, n_groups=3, family="poisson", random_state=0, return_frame=True
)
rng = np.random.default_rng(0)
true_rate = np.exp(coef[:, 0] + np.sum(coef[:, 1:] * X.to_numpy(), axis=1))
exposure = rng.uniform(0.1, 3.0, N_ROWS)  # years each policy was observed
claims = rng.poisson(exposure * true_rate)
offset = np.log(exposure)

train, test = slice(0, N_TRAIN), slice(N_TRAIN, None)
X_train, X_test = X.iloc[train], X.iloc[test]
print(
    f"{N_ROWS} policies ({N_TRAIN} to train), exposure {exposure.min():.1f} to "
    f"{exposure.max():.1f} years, {claims.sum()} claims in all"
)

start = time.perf_counter()
with_offset = GraphGLMRegressor(family="poisson", **SETTINGS)
with_offset.fit(X_train, claims[train], offset=offset[train])
without_offset = GraphGLMRegressor(family="poisson", **SETTINGS)
without_offset.fit(X_train, claims[train])
glm = GraphGLMRegressor(family="poisson", local_penalty=np.inf)
glm.fit(X_train, claims[train], offset=offset[train])
print(f"three fits in {time.perf_counter() - start:.1f} s")

print("\ntest mean Poisson deviance of the counts (lower is better):")
for label, model, test_offset in [
    ("graph GLM with offset log(exposure)", with_offset, offset[test]),
    ("graph GLM ignoring the exposure", without_offset, None),
    ("global GLM with offset", glm, offset[test]),
]:
    predicted = model.predict(X_test, offset=test_offset)
    deviance = mean_poisson_deviance(claims[test], predicted)
    kept = "global GLM" if model.is_global_only_ else "network kept"
    print(f"  {label:<36s} {deviance:.4f}  ({kept})")

truth = mean_poisson_deviance(claims[test], exposure[test] * true_rate[test])
print(f"  {'the true means (a floor)':<36s} {truth:.4f}")

# offset=0 is one unit of exposure: the prediction is the rate per policy-year.
rate = with_offset.predict(X_test, offset=np.zeros(len(X_test)))
counts = with_offset.predict(X_test, offset=offset[test])
np.testing.assert_allclose(counts, rate * exposure[test], rtol=1e-5)
log_error = np.log(rate) - np.log(true_rate[test])
print(
    "\nrate per policy-year (predict with offset=0) against the true rate: "
    f"RMSE on the log scale {np.sqrt(np.mean(log_error**2)):.3f}"
)
print("  exposure  claims  predicted count  predicted rate  true rate")
for i in range(4):
    j = N_TRAIN + i
    print(
        f"  {exposure[j]:8.2f}  {claims[j]:6d}  {counts[i]:15.3f}  "
        f"{rate[i]:14.3f}  {true_rate[j]:9.3f}"
    )
