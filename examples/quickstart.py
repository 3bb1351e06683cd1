"""
Quickstart: a graph-contextualized GLM on a bundled dataset, beside its global GLM.
===================================================================================

Run:  python examples/quickstart.py [dataset]

The default, ``synthetic_poisson``, is generated with known per-row coefficients
(4 latent groups of rows with different Poisson GLMs), so the script can also say
how close the per-row coefficients come to the truth. Real data from the suite:
``python examples/quickstart.py randhie_visits`` (needs statsmodels; ~15k rows:
suite fits of this size take 20-30 s on an idle 2-core CPU).
``autoglm_graph.datasets.list_datasets()`` lists all.
"""

from __future__ import annotations

import sys
import time

import numpy as np

from autoglm_graph import GraphGLMClassifier, GraphGLMRegressor
from autoglm_graph.datasets import load_dataset

name = sys.argv[1] if len(sys.argv) > 1 else "synthetic_poisson"
data = load_dataset(name)
print(
    f"{name}: {len(data.X_train)} training rows, {data.X_train.shape[1]} columns, "
    f"family {data.family!r}"
)

if data.family in ("binomial", "multinomial"):
    make = lambda **kw: GraphGLMClassifier(random_state=0, **kw)  # noqa: E731
else:
    make = lambda **kw: GraphGLMRegressor(  # noqa: E731
        family=data.family, random_state=0, **kw
    )

fit_kwargs = {} if data.offset_train is None else {"offset": data.offset_train}
predict_kwargs = {} if data.offset_test is None else {"offset": data.offset_test}
# Shown in full up to this many terms; longer tables say how many are left out.
MAX_TERMS = 10
print(
    "fitting the graph GLM (10-30 s on a 2-core CPU) and its global GLM ...", flush=True
)
start = time.perf_counter()
model = make().fit(data.X_train, data.y_train, **fit_kwargs)
seconds = time.perf_counter() - start
glm = make(local_penalty=np.inf).fit(data.X_train, data.y_train, **fit_kwargs)

metric = "accuracy" if data.family in ("binomial", "multinomial") else "D^2"
print(
    f"test {metric}: graph GLM "
    f"{model.score(data.X_test, data.y_test, **predict_kwargs):.4f} "
    f"(fit {seconds:.1f}s, best epoch {getattr(model, 'best_epoch_', '-')}) | "
    f"global GLM {glm.score(data.X_test, data.y_test, **predict_kwargs):.4f}"
)
if model.is_global_only_:
    print(f"the fitted model is the global GLM: {model.global_only_reason_}")

if data.coef_test is not None and data.family != "multinomial":
    # local_coef is in the user's units, as the true coefficients are.
    truth = data.coef_test
    for label, fitted in [("graph GLM", model), ("global GLM", glm)]:
        error = fitted.local_coef(data.X_test).to_numpy() - truth
        print(
            f"per-row coefficient RMSE to the truth, {label}: "
            f"{np.sqrt((error**2).mean()):.3f}"
        )


def left_out(n_shown: int, n_all: int) -> str:
    return f"  ... and {n_all - n_shown} more" if n_all > n_shown else ""


coef = np.atleast_2d(model.coef_)[0]
which = " (first class)" if np.ndim(model.coef_) == 2 and len(model.coef_) > 1 else ""
print(f"\nglobal GLM coefficients{which}, {len(coef)} terms (per unit of each column):")
terms = list(zip(model.feature_names_out_, coef, strict=True))
for feature, value in terms[:MAX_TERMS]:
    print(f"  {feature:>12s} {value:+.3f}")
if note := left_out(MAX_TERMS, len(coef)):
    print(note)

local = model.local_coef(data.X_test.iloc[:3])
print(f"\nper-row coefficients of the first three test rows ({local.shape[1]} terms):")
print(local.iloc[:, :MAX_TERMS].round(3).to_string())
if note := left_out(MAX_TERMS, local.shape[1]):
    print(note)
neighbours = model.explain(data.X_test.iloc[:1])
print(
    f"\nthe training rows the first test row attended to (the first 5 of "
    f"{len(neighbours)}):"
)
print(neighbours.head(5).round(3).to_string(index=False))
