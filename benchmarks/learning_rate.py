"""Default fits at several learning rates: epochs and test deviance over seeds.

Each fit is ``run.py``'s GraphGLM (``step_ab.make_suite_fit``) on its split
of a suite dataset at one seed (the split and the model seed), with
``learning_rate`` set; the table gives, per dataset and seed, the epochs run
and the test deviance at each rate, and the change against the first rate.

    python benchmarks/learning_rate.py --rates 0.003 0.006 --seeds 0 1 \\
        --out benchmarks/results/learning_rate

Which rate is the better default is read from the deviances over seeds (one
seed's fit moves by several per cent with its random stream); seconds are for
reading only.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path

import numpy as np
import torch
from _common import cpu_name, to_markdown
from step_ab import make_suite_fit

import autoglm_graph

#: The suite's datasets on which the default fit keeps a network.
DATASETS = (
    "doctor_contacts",
    "cps1988",
    "tuna",
    "hi",
    "star",
    "diamonds",
    "synthetic_gaussian",
    "synthetic_poisson",
    "synthetic_binomial",
    "synthetic_gamma",
    "synthetic_tweedie",
    "synthetic_negative_binomial",
    "synthetic_multinomial",
)


def fit_once(name: str, seed: int, learning_rate: float) -> dict:
    """One default fit of ``run.py``'s GraphGLM with ``learning_rate``."""
    fit = make_suite_fit(autoglm_graph, name, 1, seed, learning_rate=learning_rate)()
    return {**fit, "deviance": float(f"{fit['deviance']:.5g}")}


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rates", type=float, nargs="+", default=[3e-3, 6e-3])
    parser.add_argument("--datasets", nargs="+", default=list(DATASETS))
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    parser.add_argument("--out", type=Path, default=None, help="write <out>.md")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    first = args.rates[0]
    rows = []
    for name in args.datasets:
        for seed in args.seeds:
            row = {"dataset": name, "seed": seed}
            fits = {rate: fit_once(name, seed, rate) for rate in args.rates}
            for rate, fit in fits.items():
                row[f"epochs {rate:g}"] = fit["epochs"]
                row[f"deviance {rate:g}"] = fit["deviance"]
            for rate in args.rates[1:]:
                change = fits[rate]["deviance"] / fits[first]["deviance"] - 1
                row[f"change {rate:g}"] = f"{change:+.2%}"
            row["network kept"] = " / ".join(
                "yes" if fits[rate]["kept"] else "no" for rate in args.rates
            )
            rows.append(row)
            print(json.dumps(row), flush=True)
    summary = []
    for rate in args.rates[1:]:
        epochs = sum(r[f"epochs {rate:g}"] for r in rows)
        base = sum(r[f"epochs {first:g}"] for r in rows)
        changes = [float(r[f"change {rate:g}"].rstrip("%")) for r in rows]
        summary.append(
            f"- {rate:g} against {first:g}: {epochs} epochs against {base} "
            f"({epochs / base - 1:+.0%}); test deviance change mean "
            f"{np.mean(changes):+.2f} %, median {np.median(changes):+.2f} %, "
            f"lower in {sum(c < 0 for c in changes)} of {len(changes)} fits."
        )
    command = "python " + shlex.join(["benchmarks/learning_rate.py", *sys.argv[1:]])
    text = "\n".join(
        [
            "# Default fits at several learning rates",
            "",
            f"Command: `{command}`",
            "",
            f"Machine: {cpu_name()}, one torch thread; run.py's split and model "
            "seed per row.",
            "",
            to_markdown(rows),
            "",
            *summary,
            "",
        ]
    )
    print(text)
    if args.out is not None:
        args.out.with_suffix(".md").write_text(text)
    return rows


if __name__ == "__main__":
    main()
