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
seed's fit moves by several per cent with its random stream). ``--model-seeds``
fits each split (``--seeds``) at several model seeds (the estimator's
``random_state``: its validation rows, initial weights and dropout masks) and
adds a table per dataset: the mean deviance at each value, the change of the
means, and the spread of one fit (its standard deviation over the seeds), the
noise that a single fit's change is read against
(``benchmarks/results/seed_spread.md``):

    python benchmarks/defaults.py --param learning_rate --values 0.006 \\
        --model-seeds 0 1 2 3 4 5 --out benchmarks/results/seed_spread
"""

from __future__ import annotations

import argparse
import importlib
import itertools
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
    """``"32"`` -> 32, ``"0.006"`` -> 0.006, ``"none"`` -> None, ``"4,8"`` ->
    ``(4, 8)`` (a module constant's tuple), else the text."""
    if text.lower() == "none":
        return None
    if "," in text:
        return tuple(parse_value(part) for part in text.split(","))
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def fit_once(
    name: str, seed: int, param: str, value, model_seed: int | None = None
) -> dict:
    """One default fit of ``run.py``'s GraphGLM with ``param=value``
    (``module.CONSTANT=value`` for a dotted ``param``) on the split of
    ``seed``, at ``random_state=model_seed`` (None: ``seed``, as ``run.py``)."""
    params = {} if model_seed is None else {"random_state": model_seed}
    if "." not in param:
        params[param] = value
        fit = make_suite_fit(autoglm_graph, name, 1, seed, **params)()
    else:
        module_name, constant = param.rsplit(".", 1)
        module = importlib.import_module(f"autoglm_graph.{module_name}")
        saved = getattr(module, constant)
        setattr(module, constant, value)
        try:
            fit = make_suite_fit(autoglm_graph, name, 1, seed, **params)()
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


def model_seed_spread(fits: list[dict], key: str) -> float:
    """Standard deviation of ``key`` over the model seeds of a split, pooled
    over the splits, relative to the mean: the noise of one fit's result on a
    given split (NaN with a single fit per split)."""
    values = np.array([r[key] for r in fits], dtype=float)
    splits = np.array([r["seed"] for r in fits])
    residuals = np.concatenate(
        [values[splits == s] - values[splits == s].mean() for s in np.unique(splits)]
    )
    dof = len(values) - len(np.unique(splits))
    if dof < 1:
        return np.nan
    return float(np.sqrt(residuals @ residuals / dof) / values.mean())


def per_dataset(rows: list[dict], values: list) -> list[dict]:
    """Per dataset (over its splits and model seeds): each value's mean
    deviance, epochs and seconds; the change of the mean deviance against the
    first value; the spread of one fit at the first value (its standard
    deviation over the model seeds of a split, :func:`model_seed_spread`) and
    the standard error of the change of means that this spread implies."""
    first = values[0]
    table = []
    for name in dict.fromkeys(r["dataset"] for r in rows):
        fits = [r for r in rows if r["dataset"] == name]
        line = {"dataset": name, "fits": len(fits)}
        means = {}
        for value in values:
            deviances = np.array([r[f"deviance {value}"] for r in fits])
            means[value] = deviances.mean()
            line[f"mean deviance {value}"] = float(f"{deviances.mean():.5g}")
            line[f"epochs {value}"] = round(
                float(np.mean([r[f"epochs {value}"] for r in fits])), 1
            )
            seconds = np.mean([r[f"s {value}"] for r in fits])
            line[f"s {value}"] = round(float(seconds), 2)
        spread = model_seed_spread(fits, f"deviance {first}")
        line[f"one fit's spread {first}"] = f"{spread:.2%}"
        for value in values[1:]:
            line[f"change of means {value}"] = f"{means[value] / means[first] - 1:+.2%}"
        if len(values) > 1:
            # Two independent sets of fits: the difference of their means.
            line["se of a change"] = f"{spread * np.sqrt(2 / len(fits)):.2%}"
        table.append(line)
    return table


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--param", default="learning_rate")
    parser.add_argument("--values", nargs="+", default=["0.003", "0.006"])
    parser.add_argument("--datasets", nargs="+", default=list(DATASETS))
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    parser.add_argument(
        "--model-seeds",
        type=int,
        nargs="+",
        default=None,
        help="random_state values fitted on each split (default: the split's seed)",
    )
    parser.add_argument("--out", type=Path, default=None, help="write <out>.md")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    values = [parse_value(v) for v in args.values]
    first = values[0]
    rows = []
    model_seeds = args.model_seeds or [None]
    for name in args.datasets:
        for seed, model_seed in itertools.product(args.seeds, model_seeds):
            row = {"dataset": name, "seed": seed}
            if model_seed is not None:
                row["model seed"] = model_seed
            fits = {
                value: fit_once(name, seed, args.param, value, model_seed)
                for value in values
            }
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
        f"Machine: {cpu_name()}, one torch thread; run.py's split per row, "
        + ("at each model seed." if args.model_seeds else "and its model seed."),
        [
            to_markdown(rows),
            "",
            *summarise(rows, values),
            *(["", to_markdown(per_dataset(rows, values))] if args.model_seeds else []),
        ],
        args.out,
    )
    return rows


if __name__ == "__main__":
    main()
