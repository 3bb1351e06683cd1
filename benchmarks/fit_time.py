"""Fit time of GraphGLM with default parameters (issue: defaults must be usable).

Fits ``GraphGLMRegressor`` with its defaults on synthetic varying-coefficient
data (default: 10k rows x 20 features) beside its own global GLM, in one
process, and prints a markdown table: fit and predict seconds, epochs, and test
deviance of both. Timings are for reading, never asserted in tests.

    python benchmarks/fit_time.py --out benchmarks/results/fit_time
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

import numpy as np
import torch
from _common import to_markdown

from autoglm_graph import GraphGLMRegressor
from autoglm_graph.datasets import make_varying_coefficients


def run(n_samples: int, n_features: int, family: str, seed: int) -> list[dict]:
    X, y, _ = make_varying_coefficients(
        n_samples + 2000, n_features, 4, family=family, noise=0.5, random_state=seed
    )
    X_train, y_train, X_test, y_test = X[:-2000], y[:-2000], X[-2000:], y[-2000:]
    rows = []
    for name, params in [("global GLM", {"local_penalty": np.inf}), ("GraphGLM", {})]:
        model = GraphGLMRegressor(family=family, random_state=seed, **params)
        start = time.perf_counter()
        model.fit(X_train, y_train)
        fit_s = time.perf_counter() - start
        start = time.perf_counter()
        pred = model.predict(X_test)
        predict_s = time.perf_counter() - start
        eta = model.family_.link(torch.as_tensor(pred))
        deviance = model.family_.deviance(
            torch.as_tensor(y_test, dtype=torch.float64), eta
        )
        rows.append(
            {
                "model": name,
                "family": family,
                "n_train": n_samples,
                "n_features": n_features,
                "fit_s": round(fit_s, 2),
                "predict_s": round(predict_s, 3),
                "epochs": model.n_iter_,
                "best_epoch": getattr(model, "best_epoch_", None),
                "test_deviance": round(float(deviance), 4),
            }
        )
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-samples", type=int, default=10_000)
    parser.add_argument("--n-features", type=int, default=20)
    parser.add_argument("--families", nargs="+", default=["gaussian", "poisson"])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    rows = []
    for family in args.families:
        rows += run(args.n_samples, args.n_features, family, args.seed)
    table = to_markdown(rows)
    print(table)
    if args.out is not None:
        command = "python " + " ".join(sys.argv)
        machine = (
            f"{platform.processor() or platform.machine()}, "
            f"{torch.get_num_threads()} torch threads, torch {torch.__version__}"
        )
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.with_suffix(".md").write_text(
            f"# Fit time with default parameters\n\nCommand: `{command}`\n\n"
            f"Machine: {machine}\n\n{table}\n"
        )
        args.out.with_suffix(".json").write_text(
            json.dumps({"command": command, "machine": machine, "rows": rows}, indent=2)
        )


if __name__ == "__main__":
    main()
