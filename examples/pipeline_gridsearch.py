"""
A graph GLM inside a scikit-learn Pipeline, tuned with GridSearchCV.
====================================================================

Run:  python examples/pipeline_gridsearch.py      (about 20-40 s on a 2-core CPU)

The estimators are ordinary scikit-learn estimators: they clone, take
``set_params``, sit at the end of a ``Pipeline`` and are scored by
``GridSearchCV`` (with the model's own ``score``, D² for regressors).

The data (``synthetic_gaussian``, 1500 rows) has coefficients that differ
between latent groups of rows. A global GLM can only approximate that with
hand-made interactions; the graph GLM learns it. The grid (2 x 2 = 4 settings,
3-fold CV) compares both ideas and their combination: a first step that adds
all squares and pairwise products (``PolynomialFeatures``) or passes the
columns through, and the network switched on (``local_penalty=1e-3``) or off
(``local_penalty=inf``: exactly the global GLM). For a larger space use Optuna
through ``autoglm_graph.GraphGLMSearchCV`` (``examples/search.py``).
"""

from __future__ import annotations

import time

import numpy as np
import pandas as pd
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import PolynomialFeatures

from autoglm_graph import GraphGLMRegressor
from autoglm_graph.datasets import load_dataset

data = load_dataset("synthetic_gaussian", max_rows=1500)
print(
    f"synthetic_gaussian: {len(data.X_train)} training rows, "
    f"{data.X_train.shape[1]} columns, {len(data.X_test)} test rows"
)

quadratic = PolynomialFeatures(degree=2, include_bias=False)
model = GraphGLMRegressor(hidden_channels=32, heads=2, max_epochs=80, random_state=0)
# pandas output: the design's feature names survive the first step.
pipeline = Pipeline([("features", quadratic), ("model", model)])
pipeline.set_output(transform="pandas")
grid = {
    "features": [quadratic, "passthrough"],
    "model__local_penalty": [1e-3, np.inf],
}
search = GridSearchCV(pipeline, grid, cv=3)
start = time.perf_counter()
search.fit(data.X_train, data.y_train)
print(f"4 settings x 3 folds + refit in {time.perf_counter() - start:.1f} s\n")

results = pd.DataFrame(search.cv_results_)
table = pd.DataFrame(
    {
        "features": [
            "raw" if f == "passthrough" else "raw + squares + products"
            for f in results["param_features"]
        ],
        "local_penalty": results["param_model__local_penalty"],
        "model": [
            "global GLM" if np.isinf(p) else "graph GLM"
            for p in results["param_model__local_penalty"]
        ],
        "mean CV D²": results["mean_test_score"].round(4),
        "std": results["std_test_score"].round(4),
        "rank": results["rank_test_score"],
    }
)
print(table.sort_values("rank").to_string(index=False))

best = search.best_estimator_
fitted = best.named_steps["model"]
kind = "the global GLM" if fitted.is_global_only_ else "a graph GLM (network kept)"
print(
    f"\nbest: {search.best_params_} -> {kind} on "
    f"{len(fitted.feature_names_out_)} design columns"
)
score = search.score(data.X_test, data.y_test)
print(f"test D² of the refitted best pipeline: {score:.4f}")
