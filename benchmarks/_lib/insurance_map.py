"""Map of the Belgian portfolio: where the claim frequency departs from the GLM.

Fits the Poisson frequency model (offset ``log(exposure)``) on a subsample of
the Belgian policies and draws two maps over the municipality centres
(``long``/``lat``) with :func:`autoglm_graph.explain.plotting.plot_coefficient_map`:
the model's linear predictor less the national GLM's (the log relativity of
the base frequency) and the per-row bonus-malus slope less the GLM's.

``--location`` fits ``location_columns=["long", "lat"]`` (the location effect,
:mod:`autoglm_graph.network.location`), which the defaults lack: without it the fitted
model is mostly the GLM on this data (early stopping keeps no network that
beats it; see ``insurance.md``) and the maps are flat. ``--no-early-stopping``
keeps the network trained for ``--epochs`` epochs to show what it learns. The
script prints the test deviance beside the GLM's, so the picture is read with
that figure, and :func:`autoglm_graph.heterogeneity_test` on the test policies
(which effects vary), written next to the map as ``OUT.md``.

    python benchmarks/insurance.py map --location \
        --out benchmarks/results/insurance_map.png
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import numpy as np
from sklearn.metrics import mean_poisson_deviance

from autoglm_graph import GraphGLMRegressor, heterogeneity_test
from benchmarks._lib.common import command_line, to_markdown
from benchmarks._lib.insurance_data import DEFAULT_DATA, load_task


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, default=None)
    parser.add_argument("--subsample", type=int, default=40000)
    parser.add_argument("--epochs", type=int, default=40)
    parser.add_argument("--no-early-stopping", action="store_true")
    parser.add_argument(
        "--location", action="store_true", help="location_columns=['long', 'lat']"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path("insurance_map.png"))
    args = parser.parse_args(argv)
    folder = args.data or Path(os.environ.get("AUTOGLM_INSURANCE_DATA", DEFAULT_DATA))
    if not folder.is_dir():
        print(f"insurance data not found at {folder}; skipping (pass --data).")
        return 0
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from autoglm_graph.explain.plotting import plot_coefficient_map

    data = load_task(folder, "belgian", "frequency", args.subsample, args.seed)
    n_test = len(data.y) // 5
    train, test = (
        data.take(np.arange(n_test, len(data.y))),
        data.take(np.arange(n_test)),
    )
    params = {"max_epochs": args.epochs}
    if args.no_early_stopping:
        params["early_stopping"] = False
    if args.location:
        params["location_columns"] = ["long", "lat"]
    model = GraphGLMRegressor(
        family="poisson", random_state=args.seed, n_jobs=1, **params
    )
    model.fit(train.X, train.y, offset=train.offset)
    glm = GraphGLMRegressor(family="poisson", local_penalty=np.inf)
    glm.fit(train.X, train.y, offset=train.offset)
    deviances = {
        name: mean_poisson_deviance(test.y, m.predict(test.X, offset=test.offset))
        for name, m in [("model", model), ("GLM", glm)]
    }
    summary = (
        f"{len(train.y)} training / {len(test.y)} test policies; test Poisson "
        f"deviance: model {deviances['model']:.5f}, GLM {deviances['GLM']:.5f} "
        f"({100 * (deviances['model'] / deviances['GLM'] - 1):+.2f}%); "
        f"global only: {model.is_global_only_}; location effect: "
        f"{model.location_effect_ is not None}; network: {model.network_ is not None}"
    )
    print(summary)
    table = heterogeneity_test(model, test.X, test.y, offset=test.offset)
    text = to_markdown(
        [
            {"term": term, **{k: _cell(v) for k, v in row.items()}}
            for term, row in table.iterrows()
        ]
    )
    print(text)
    command = command_line("insurance.py map", argv)
    args.out.with_suffix(".md").write_text(
        f"# Which effects vary on the Belgian test policies\n\n    {command}\n\n"
        f"{summary}\n\n`heterogeneity_test(model, X_test, y_test, offset=...)`:\n\n"
        f"{text}\n"
    )
    fig, axes = plt.subplots(1, 2, figsize=(13, 5.5), layout="constrained")
    plot_coefficient_map(model, train.X, "linear_predictor", ax=axes[0])
    plot_coefficient_map(model, train.X, "bm", ax=axes[1])
    axes[0].set_title("log relativity of the frequency vs the GLM")
    axes[1].set_title("bonus-malus slope vs the GLM's")
    fig.suptitle(f"Belgian MTPL, {summary}", fontsize=9)
    fig.savefig(args.out, dpi=110)
    print(f"wrote {args.out}")
    return 0


def _cell(value) -> str:
    return str(value) if isinstance(value, (bool, np.bool_)) else f"{value:.4g}"
