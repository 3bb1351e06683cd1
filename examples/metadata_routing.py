"""
Offsets through a Pipeline, cross_val_score and GridSearchCV
=============================================================

Run:  python examples/metadata_routing.py        (about 10-20 s on a 2-core CPU)

A Poisson count observed over an exposure takes ``offset=log(exposure)``.
scikit-learn's meta-estimators pass such per-row arguments on only when
metadata routing is on: ``sklearn.set_config(enable_metadata_routing=True)``,
and the estimator says which of its methods want the offset
(``set_fit_request(offset=True)``, ``set_score_request(offset=True)``). Without
that, ``cross_val_score`` would fit and score without the offset.
"""

# %%
import numpy as np
import sklearn
from sklearn.model_selection import GridSearchCV, KFold, cross_val_score
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from autoglm_graph import GraphGLMRegressor
from autoglm_graph.datasets import make_varying_coefficients

X, _, coef = make_varying_coefficients(1200, 3, family="poisson", random_state=0)
rng = np.random.default_rng(0)
rate = np.exp(coef[:, 0] + np.sum(coef[:, 1:] * X, axis=1))  # claims per year
exposure = rng.uniform(0.1, 3.0, len(X))  # years each row was observed
y = rng.poisson(exposure * rate)
offset = np.log(exposure)  # the offset is log(exposure), not the exposure

sklearn.set_config(enable_metadata_routing=True)
model = (
    GraphGLMRegressor(family="poisson", max_epochs=50, random_state=0)
    .set_fit_request(offset=True)
    .set_score_request(offset=True)
)
pipe = make_pipeline(StandardScaler(), model)
cv = KFold(3, shuffle=True, random_state=0)
print("D² per fold:", cross_val_score(pipe, X, y, cv=cv, params={"offset": offset}))

grid = GridSearchCV(pipe, {"graphglmregressor__local_penalty": [1e-3, np.inf]}, cv=cv)
grid.fit(X, y, offset=offset)
print("best:", grid.best_params_, f"D² {grid.best_score_:.3f}")
sklearn.set_config(enable_metadata_routing=False)
