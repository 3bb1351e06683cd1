"""A default under test: suite fits at several values of one estimator parameter.

Each fit is ``run.py``'s GraphGLM (``step_ab.make_suite_fit``) on its split
of a suite dataset at one seed (the split and the model seed), with the
parameter set; the table gives, per dataset and seed, the epochs run, the
fit seconds and the test deviance at each value, and the change of deviance
and seconds against the first value. The values of one row are fitted one
after the other in one process, so their seconds are comparable; rows are not.

    python benchmarks/defaults.py --param learning_rate --values 0.003 0.006 \\
        --seeds 0 1 --out benchmarks/results/learning_rate
    python benchmarks/defaults.py --param hidden_channels --values 64 32 \\
        --datasets hi star --seeds 0 1

A dotted ``--param`` names a module constant of the package instead of an
estimator parameter, set for the fit and restored after it:

    python benchmarks/defaults.py --param training.SCREENING_EPOCHS --values 5 3 \\
        --datasets rwm5yr randhie wa_churn nass_cds doctor_contacts --seeds 0 1

Which value is the better default is read from the deviances over seeds (one
seed's fit moves by several per cent with its random stream).
"""

from __future__ import annotations

import argparse
import importlib
import json
import shlex
import sys
from pathlib import Path

import numpy as np
import torch
from _common import cpu_name, to_markdown, write_record
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
#: The suite's datasets on which the default fit returns the global GLM.
FALLBACK_DATASETS = ("rwm5yr", "randhie", "wa_churn", "nass_cds")


def parse_value(text: str):
    """``"32"`` -> 32, ``"0.006"`` -> 0.006, ``"none"`` -> None, else the text."""
    if text.lower() == "none":
        return None
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def fit_once(name: str, seed: int, param: str, value) -> dict:
    """One default fit of ``run.py``'s GraphGLM with ``param=value``
    (``module.CONSTANT=value`` for a dotted ``param``)."""
    if "." not in param:
        fit = make_suite_fit(autoglm_graph, name, 1, seed, **{param: value})()
    else:
        module_name, constant = param.rsplit(".", 1)
        module = importlib.import_module(f"autoglm_graph.{module_name}")
        saved = getattr(module, constant)
        setattr(module, constant, value)
        try:
            fit = make_suite_fit(autoglm_graph, name, 1, seed)()
        finally:
            setattr(module, constant, saved)
    return {**fit, "deviance": float(f"{fit['deviance']:.5g}")}


def summarise(rows: list[dict], values: list) -> list[str]:
    """One line per value after the first: epochs, seconds and deviance change."""
    first = values[0]
    lines = []
    for value in values[1:]:
        epochs = sum(r[f"epochs {value}"] for r in rows)
        base = sum(r[f"epochs {first}"] for r in rows)
        seconds = sum(r[f"s {value}"] for r in rows)
        base_seconds = sum(r[f"s {first}"] for r in rows)
        changes = [float(r[f"change {value}"].rstrip("%")) for r in rows]
        lines.append(
            f"- {value} against {first}: {epochs} epochs against {base} "
            f"({epochs / base - 1:+.0%}), {seconds:.0f} s against "
            f"{base_seconds:.0f} s ({seconds / base_seconds:.2f}x); test "
            f"deviance change mean {np.mean(changes):+.2f} %, median "
            f"{np.median(changes):+.2f} %, lower in "
            f"{sum(c < 0 for c in changes)} of {len(changes)} fits, worst "
            f"{max(changes):+.2f} %."
        )
    return lines


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--param", default="learning_rate")
    parser.add_argument("--values", nargs="+", default=["0.003", "0.006"])
    parser.add_argument("--datasets", nargs="+", default=list(DATASETS))
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    parser.add_argument("--out", type=Path, default=None, help="write <out>.md")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    values = [parse_value(v) for v in args.values]
    first = values[0]
    rows = []
    for name in args.datasets:
        for seed in args.seeds:
            row = {"dataset": name, "seed": seed}
            fits = {value: fit_once(name, seed, args.param, value) for value in values}
            for value, fit in fits.items():
                row[f"epochs {value}"] = fit["epochs"]
                row[f"s {value}"] = round(fit["s"], 2)
                row[f"deviance {value}"] = fit["deviance"]
            for value in values[1:]:
                change = fits[value]["deviance"] / fits[first]["deviance"] - 1
                row[f"change {value}"] = f"{change:+.2%}"
            row["network kept"] = " / ".join(
                "yes" if fits[value]["kept"] else "no" for value in values
            )
            rows.append(row)
            print(json.dumps(row), flush=True)
    command = "python " + shlex.join(["benchmarks/defaults.py", *sys.argv[1:]])
    write_record(
        f"Default fits at several values of `{args.param}`",
        command,
        f"Machine: {cpu_name()}, one torch thread; run.py's split and model "
        "seed per row.",
        [to_markdown(rows), "", *summarise(rows, values)],
        args.out,
    )
    return rows


if __name__ == "__main__":
    main()
