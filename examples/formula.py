"""
Formulas: the global GLM's terms written as in R, statsmodels and glum.
=======================================================================

Run:  python examples/formula.py        (a few seconds on a 2-core CPU)

A small motor portfolio: claim counts over an exposure, an age whose effect is
not a straight line, a region and a fuel type. The formula
``claims ~ C(region, contr.treatment('north')) + bs(age, df=4) + fuel`` (parsed
by formulaic, as glum reads it) names the target on its left side, so ``fit``
takes the DataFrame alone; the region's base level is written in the formula,
and the age effect is a B-spline. The network's context stays the columns of
the DataFrame without the target.

The script prints the terms, one Wald test per term (the spline's columns
together), the relativities of the regions, the per-row coefficients of two
new policies, and checks that a saved and loaded model predicts the same.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

import autoglm_graph
from autoglm_graph import GraphGLMRegressor

rng = np.random.default_rng(0)
n = 600
policies = pd.DataFrame(
    {
        "age": rng.uniform(18, 80, n),
        "region": rng.choice(["north", "south", "east", "west"], n),
        "fuel": rng.choice(["petrol", "diesel"], n),
    }
)
log_exposure = np.log(rng.uniform(0.2, 1.0, n))  # policy-years
log_rate = (
    -0.3
    + 0.0008 * (policies["age"] - 45) ** 2  # young and old drivers claim more
    + policies["region"].map({"north": 0.0, "south": 0.2, "east": -0.1, "west": 0.4})
    + 0.3 * (policies["fuel"] == "diesel")
)
policies["claims"] = rng.poisson(np.exp(log_exposure + log_rate))

model = GraphGLMRegressor(
    family="poisson",
    formula="claims ~ C(region, contr.treatment('north')) + bs(age, df=4) + fuel",
    max_epochs=10,
    random_state=0,
)
model.fit(policies, offset=log_exposure)  # no y: the formula names the target
print("terms of the global GLM:")
for name, value in zip(model.feature_names_out_, model.coef_, strict=True):
    print(f"  {name:45s} {value:+.3f}")

print("\none Wald test per term:")
print(model.wald_test_terms(policies, policies["claims"], offset=log_exposure).round(4))

table = model.factor_table(policies, policies["claims"], offset=log_exposure)
region = table[table["column"] == "C(region, contr.treatment('north'))"]
print("\nrelativities of the regions (north is the base):")
print(region[["level", "relativity", "rows"]].to_string(index=False))

new = pd.DataFrame(
    {"age": [20.0, 60.0], "region": ["west", "north"], "fuel": ["diesel", "petrol"]}
)
per_year = np.zeros(len(new))  # offset log(1): the rate per policy-year
print("\nper-row coefficients of two new policies:")
print(model.local_coef(new, offset=per_year).round(3).T.to_string())
if model.is_global_only_:  # the data has one rate formula: nothing to localise
    print(f"(the fitted model is the global GLM: {model.global_only_reason_})")

with tempfile.TemporaryDirectory() as folder:
    loaded = autoglm_graph.load(model.save(Path(folder) / "model.zip"))
    same = np.array_equal(
        loaded.predict(new, offset=per_year), model.predict(new, offset=per_year)
    )
print(f"\nthe loaded model predicts the same: {same}")
