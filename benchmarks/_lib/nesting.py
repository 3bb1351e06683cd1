"""Two figures of record for the estimators: nesting error and synthetic gains.

1. Nesting: with ``local_penalty=inf`` the model is the GLM; the maximum
   relative difference of its coefficients from scikit-learn's solution of the
   same penalised problem, per family.
2. Heterogeneous data (``make_varying_coefficients``, 3 latent groups): held-out
   mean deviance of the global GLM, the graph GLM (defaults) and the true model,
   and the RMSE of per-row coefficients to the truth, per family.

    python benchmarks/properties.py nesting --out benchmarks/results/estimators
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import torch
from sklearn.linear_model import (
    GammaRegressor,
    LogisticRegression,
    PoissonRegressor,
    Ridge,
    TweedieRegressor,
)
from sklearn.preprocessing import StandardScaler

from autoglm_graph import GraphGLMClassifier, GraphGLMRegressor
from autoglm_graph.datasets import make_varying_coefficients
from benchmarks._lib.common import command_line, to_markdown

ALPHA = 1e-2


def nesting_rows(seed: int = 0) -> list[dict]:
    rng = np.random.default_rng(seed)
    X = StandardScaler().fit_transform(rng.normal(size=(500, 5)))
    eta = 0.3 + X @ np.linspace(-0.4, 0.5, 5)
    n = len(eta)
    cases = {
        "poisson": (rng.poisson(np.exp(eta)), PoissonRegressor(alpha=ALPHA)),
        "gamma": (rng.gamma(2.0, np.exp(eta) / 2.0), GammaRegressor(alpha=ALPHA)),
        "tweedie(1.5)": (
            rng.poisson(np.exp(eta)) * rng.gamma(2.0, 1.0),
            TweedieRegressor(power=1.5, link="log", alpha=ALPHA),
        ),
        "gaussian": (eta + rng.normal(size=n), Ridge(alpha=ALPHA * n)),
        "binomial": (
            (rng.random(n) < 1 / (1 + np.exp(-eta))).astype(int),
            LogisticRegression(C=1 / (ALPHA * n)),
        ),
        "multinomial": (
            np.digitize(eta + rng.logistic(size=n), [0.0, 0.8]),
            LogisticRegression(C=1 / (ALPHA * n)),
        ),
    }
    rows = []
    for name, (y, reference) in cases.items():
        reference.set_params(tol=1e-12, max_iter=10_000).fit(X, y)
        family = name.split("(")[0]
        if family in ("binomial", "multinomial"):
            model = GraphGLMClassifier(alpha=ALPHA, local_penalty=np.inf)
        else:
            model = GraphGLMRegressor(family=family, alpha=ALPHA, local_penalty=np.inf)
        model.fit(
            X, y.astype(float) if family not in ("binomial", "multinomial") else y
        )
        ref_intercept = np.atleast_1d(reference.intercept_)
        ours_intercept = np.atleast_1d(model.intercept_)
        if family == "multinomial":  # only differences between classes identified
            ref_intercept = ref_intercept - ref_intercept.mean()
        ours = np.concatenate([np.ravel(model.coef_), ours_intercept])
        ref = np.concatenate([np.ravel(reference.coef_), ref_intercept])
        rel = np.max(np.abs(ours - ref) / np.maximum(np.abs(ref), 1e-12))
        rows.append(
            {
                "family": name,
                "reference": type(reference).__name__,
                "max_rel_error": f"{rel:.1e}",
            }
        )
    return rows


def synthetic_rows(seed: int = 0) -> list[dict]:
    rows = []
    for family in ["gaussian", "poisson", "binomial", "gamma", "negative_binomial"]:
        X, y, coef = make_varying_coefficients(
            2000, 4, 3, family=family, noise=0.5, random_state=seed
        )
        train, test = slice(0, 1500), slice(1500, None)
        classifier = family == "binomial"
        est = GraphGLMClassifier if classifier else GraphGLMRegressor
        params = {} if classifier else {"family": family}
        # local_coef is in the user's units, as the true coefficients are.
        truth = coef[test]
        row = {"family": family}
        for label, extra in [("glm", {"local_penalty": np.inf}), ("graph", {})]:
            start = time.perf_counter()
            model = est(random_state=seed, **params, **extra).fit(X[train], y[train])
            seconds = time.perf_counter() - start
            row[f"{label}_deviance"] = round(_deviance(model, X[test], y[test]), 4)
            error = model.local_coef(X[test]).to_numpy() - truth
            row[f"{label}_coef_rmse"] = round(float(np.sqrt((error**2).mean())), 4)
            if label == "graph":
                row["graph_fit_s"] = round(seconds, 1)
        family_ = model.family_
        eta_true = coef[test, 0] + (X[test] * coef[test, 1:]).sum(axis=1)
        y_test = torch.as_tensor(y[test], dtype=torch.float64)
        row["true_model_deviance"] = round(
            family_.deviance(y_test, torch.as_tensor(eta_true)).item(), 4
        )
        rows.append(row)
    return rows


def _deviance(model, X, y) -> float:
    family = model.family_
    if isinstance(model, GraphGLMClassifier):
        eta = torch.logit(torch.as_tensor(model.predict_proba(X)[:, 1]))
    else:
        eta = family.link(torch.as_tensor(model.predict(X)))
    return family.deviance(torch.as_tensor(y, dtype=torch.float64), eta).item()


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    nesting = to_markdown(nesting_rows(args.seed))
    print(nesting, flush=True)
    synthetic = to_markdown(synthetic_rows(args.seed))
    print()
    print(synthetic)
    if args.out is not None:
        command = command_line("properties.py nesting", argv)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.with_suffix(".md").write_text(
            f"# Estimator figures of record\n\nCommand: `{command}`\n\n"
            f"## Nesting (local_penalty=inf vs scikit-learn, alpha={ALPHA})\n\n"
            f"{nesting}\n\n## Heterogeneous synthetic data (3 groups, 1500 train "
            f"/ 500 test rows, defaults)\n\n{synthetic}\n"
        )
