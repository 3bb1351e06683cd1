"""
Hyperparameter search: GraphGLMSearchCV against the defaults on a suite dataset.
================================================================================

Run:  python examples/search.py [dataset] [n_trials]

A small Optuna sweep (default: 8 trials on ``affairs``, 4,774 training rows of a
Tweedie dataset, so the search space includes the Tweedie ``power``) over the
estimator's default search space (``GraphGLMRegressor.default_search_space``).
Every trial is one fit (at most 40 epochs here) scored on the same validation
rows of the training part (``cv=None``; the default ``cv="auto"`` would
cross-validate below 5,000 rows, five times the cost); the first trial is the
estimator's own parameters, the median pruner stops unpromising trials early,
and the best parameters are refit. The script prints the search's summary (best
parameters, validation deviance against the global GLM's on the same rows), then
the test deviance of the defaults and of the searched model (both at the dataset's power
1.5). About 45 s on a 2-core CPU. With so few trials, expect the defaults
(trial 0) to win often; ``benchmarks/search.py`` runs 30 trials per dataset.

To share a sweep between processes or resume it after an interruption, give
the search a storage: ``GraphGLMSearchCV(..., storage="sqlite:///sweep.db",
study_name="affairs")`` (or a journal file, ``"journal:sweep.log"``).
"""

from __future__ import annotations

import sys
import time

import numpy as np
import torch
from sklearn.base import clone

from autoglm_graph import (
    GraphGLMClassifier,
    GraphGLMRegressor,
    GraphGLMSearchCV,
    get_family,
)
from autoglm_graph.datasets import get_card, load_dataset

name = sys.argv[1] if len(sys.argv) > 1 else "affairs"
n_trials = int(sys.argv[2]) if len(sys.argv) > 2 else 8
data = load_dataset(name)
power = get_card(name).family_params.get("power", 1.5)
print(f"{name}: {len(data.X_train)} training rows, family {data.family!r}")

fixed = {"max_epochs": 40, "n_iter_no_change": 10, "random_state": 0}
if data.classes is not None:
    estimator = GraphGLMClassifier(**fixed)
else:
    estimator = GraphGLMRegressor(family=data.family, power=power, **fixed)
fit_kwargs = {"offset": data.offset_train, "groups": data.groups_train}


def test_deviance(model) -> float:
    """Mean test deviance of the dataset's family (its own Tweedie power)."""
    family = get_family(data.family, power=power)
    if data.classes is not None:
        p = np.clip(model.predict_proba(data.X_test, offset=data.offset_test), 1e-15, 1)
        mu = torch.as_tensor(p if p.shape[1] > 2 else p[:, 1])
        y = np.eye(p.shape[1])[data.y_test] if p.shape[1] > 2 else data.y_test
    else:
        mu = torch.as_tensor(model.predict(data.X_test, offset=data.offset_test))
        y = data.y_test
    eta = family.link(mu.double())
    return float(family.deviance(torch.as_tensor(y, dtype=torch.float64), eta))


start = time.perf_counter()
default = clone(estimator).fit(data.X_train, data.y_train, **fit_kwargs)
default_s = time.perf_counter() - start

start = time.perf_counter()
search = GraphGLMSearchCV(
    estimator, n_trials=n_trials, cv=None, random_state=0, verbose=1
)
search.fit(data.X_train, data.y_train, **fit_kwargs)
search_s = time.perf_counter() - start

print(search.summary())
print(f"\ntest deviance, defaults:  {test_deviance(default):.5g}  ({default_s:.1f} s)")
print(
    f"test deviance, searched:  {test_deviance(search):.5g}  ({search_s:.1f} s, "
    f"{search.n_trials_} trials)"
)
