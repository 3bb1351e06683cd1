"""Ablation: suite fits under several variants of one setting, or of the code.

A variant is a value of one estimator parameter (``--param NAME --values ...``),
of one field of the fit policy (``--param policy.FIELD --values ...``, i.e.
``fit_policy=FitPolicy(FIELD=value)``; ``--policy FIELD=VALUE ...`` compares the
default policy with one that changes those fields) or a git revision of the
package (``--revisions REV ...``; ``worktree`` is this working tree). Each fit
is ``run.py``'s GraphGLM on its split of a suite dataset at one seed (the split
and the model seed); the table gives, per dataset and seed, the epochs run, the
fit seconds and the test deviance under each variant, and the change of
deviance and seconds against the first. The variants of one row are fitted one
after the other in one process, so their seconds are comparable; rows are not.

    python benchmarks/ablation.py --param learning_rate --values 0.003 0.006 \\
        --seeds 0 1 --out benchmarks/results/learning_rate
    python benchmarks/ablation.py --param policy.screening_epochs --values 5 3 \\
        --datasets rwm5yr randhie wa_churn nass_cds doctor_contacts --seeds 0 1
    python benchmarks/ablation.py --policy distinct_rows=False --datasets hi star
    python benchmarks/ablation.py --revisions HEAD~1 worktree --datasets hi star

Which variant is the better default is read from the deviances over seeds (one
seed's fit moves by several per cent with its random stream). ``--model-seeds``
fits each split (``--seeds``) at several model seeds (the estimator's
``random_state``: its validation rows, initial weights and dropout masks) and
adds a table per dataset: the mean deviance under each variant, the change of
the means, and the spread of one fit (its standard deviation over the seeds),
the noise that a single fit's change is read against
(``docs/decisions/README.md``, "Reading a change"):

    python benchmarks/ablation.py --param learning_rate --values 0.006 \\
        --model-seeds 0 1 2 3 4 5

The part ``speed`` times training steps or whole fits of this working tree
against a git revision, alternating in one process
(``benchmarks/_lib/revisions.py``; its own ``--help``):

    python benchmarks/ablation.py speed --baseline HEAD~1 --sizes 3400 15000 40000

The part ``fallback`` asks whether a GAM would serve better than the GLM where
the network is dropped (``benchmarks/_lib/gam_fallback.py``).
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import sys
import tempfile
from pathlib import Path

if not __package__:  # ``python benchmarks/X.py``: import ``benchmarks`` from the root
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np
import torch

import autoglm_graph
from benchmarks._lib import fingerprint, gam_fallback, revisions
from benchmarks._lib.common import (
    command_line,
    cpu_name,
    dispatch,
    to_markdown,
    write_record,
)
from benchmarks._lib.revisions import import_revision, make_suite_fit
from benchmarks._lib.suite import ensemble_mean

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
    """``"32"`` -> 32, ``"0.006"`` -> 0.006, ``"none"`` -> None, ``"false"`` ->
    False, ``"4,8"`` -> ``(4, 8)`` (a tuple field of the policy), else the text."""
    if text.lower() in ("none", "true", "false"):
        return {"none": None, "true": True, "false": False}[text.lower()]
    if "," in text:
        return tuple(parse_value(part) for part in text.split(","))
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def variant_params(param: str, value) -> dict:
    """The estimator parameters of one variant: ``{param: value}``, or a fit
    policy with one field changed for ``policy.FIELD``."""
    if param.startswith("policy."):
        field = param.removeprefix("policy.")
        return {"fit_policy": autoglm_graph.FitPolicy(**{field: value})}
    return {param: value}


def policy_params(changes: list[str]) -> dict:
    """``["distinct_rows=False", ...]`` -> a fit policy with those fields."""
    fields = dict(change.split("=", 1) for change in changes)
    policy = {key: parse_value(value) for key, value in fields.items()}
    return {"fit_policy": autoglm_graph.FitPolicy(**policy)}


def fit_once(
    name: str,
    seed: int,
    params: dict,
    model_seed: int | None = None,
    package=None,
    train_rows: int | None = None,
) -> dict:
    """One default fit of ``run.py``'s GraphGLM with ``params`` set (of
    ``package``: a git revision's ``autoglm_graph``, None for this one) on the
    split of ``seed`` (``train_rows`` of its training rows, None: all), at
    ``random_state=model_seed`` (None: ``seed``)."""
    params = dict(params)
    if model_seed is not None:
        params["random_state"] = model_seed
    make = make_suite_fit(
        package or autoglm_graph, name, 1, seed, train_rows=train_rows, **params
    )
    fit = make()
    return {
        **fit,
        "deviance": float(f"{fit['deviance']:.5g}"),
        "family": make.family,
        "test_deviance": make.test_deviance,
    }


def ensemble_row(name: str, seed: int, fits: dict[str, list[dict]]) -> dict:
    """Per variant, the mean test deviance of one split's model seeds and the
    test deviance of their ensemble: the model whose per-row coefficients
    (linear predictors) are the average of the fits'."""
    row = {"dataset": name, "seed": seed}
    for label, runs in fits.items():
        single = float(np.mean([r["deviance"] for r in runs]))
        mean = ensemble_mean(runs[0]["family"], [r["mean"] for r in runs])
        joint = runs[0]["test_deviance"](mean)
        row[f"mean of {len(runs)} {label}"] = float(f"{single:.5g}")
        row[f"ensemble {label}"] = float(f"{joint:.5g}")
        row[f"ensemble change {label}"] = f"{joint / single - 1:+.2%}"
    return row


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
            f"({epochs / base - 1 if base else 0:+.0%}), {seconds:.0f} s against "
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


def variants(args, stack: contextlib.ExitStack) -> dict:
    """Label -> (estimator parameters, package) of every variant compared."""
    if args.revisions:
        folder = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        return {
            revision: (
                {},
                None
                if revision == "worktree"
                else import_revision(revision, folder, f"autoglm_graph_{i}"),
            )
            for i, revision in enumerate(args.revisions)
        }
    if args.policy:
        return {
            "default": ({}, None),
            " ".join(args.policy): (policy_params(args.policy), None),
        }
    return {
        str(value): (variant_params(args.param, value), None)
        for value in map(parse_value, args.values)
    }


def main(argv: list[str] | None = None) -> list[dict]:
    """The part ``speed``, ``fingerprint`` or ``fallback`` when ``argv[0]``
    names it, else an ablation."""
    parts = {
        "speed": revisions.main,
        "fingerprint": fingerprint.main,
        "fallback": gam_fallback.main,
    }
    return dispatch(argv, parts, default=ablation)


def ablation(argv: list[str]) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--param", default="learning_rate")
    parser.add_argument("--values", nargs="+", default=["0.003", "0.006"])
    parser.add_argument("--policy", nargs="+", default=None, metavar="FIELD=VALUE")
    parser.add_argument("--revisions", nargs="+", default=None)
    parser.add_argument(
        "--set",
        nargs="+",
        default=[],
        metavar="NAME=VALUE",
        help="estimator parameters held at VALUE in every variant "
        "(local_penalty=inf: the global model alone)",
    )
    parser.add_argument("--datasets", nargs="+", default=list(DATASETS))
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    parser.add_argument(
        "--model-seeds",
        type=int,
        nargs="+",
        default=None,
        help="random_state values fitted on each split (default: the split's seed)",
    )
    parser.add_argument(
        "--ensemble",
        action="store_true",
        help="also score, per split and variant, the ensemble of the model "
        "seeds' fits (their linear predictors averaged)",
    )
    parser.add_argument(
        "--train-rows",
        type=int,
        default=None,
        help="fit on this many of each split's training rows (drawn at random, "
        "seeded by the split), scored on the whole test split: small data",
    )
    parser.add_argument("--out", type=Path, default=None, help="write <out>.md")
    args = parser.parse_args(argv)
    if args.ensemble and len(args.model_seeds or []) < 2:
        parser.error("--ensemble needs at least two --model-seeds")
    torch.set_num_threads(1)
    with contextlib.ExitStack() as stack:
        compared = variants(args, stack)
        held = {k: parse_value(v) for k, v in (c.split("=", 1) for c in args.set)}
        compared = {k: ({**held, **p}, pkg) for k, (p, pkg) in compared.items()}
        rows, ensembles = compare(compared, args)
    labels = list(compared)
    title = (
        "revisions"
        if args.revisions
        else "the fit policy"
        if args.policy
        else f"`{args.param}`"
    )
    write_record(
        f"Default fits under several variants of {title}",
        command_line("ablation.py", argv),
        f"Machine: {cpu_name()}, one torch thread; run.py's split per row"
        + (f" ({args.train_rows} of its training rows), " if args.train_rows else ", ")
        + ("at each model seed." if args.model_seeds else "and its model seed."),
        [
            to_markdown(rows),
            "",
            *summarise(rows, labels),
            *(["", to_markdown(per_dataset(rows, labels))] if args.model_seeds else []),
            *(
                [
                    "",
                    "Ensembles of the model seeds (linear predictors averaged):",
                    "",
                    to_markdown(ensembles),
                ]
                if ensembles
                else []
            ),
        ],
        args.out,
    )
    return rows


def compare(compared: dict, args) -> tuple[list[dict], list[dict]]:
    """One row per dataset, split and model seed: every variant's fit; and,
    with ``args.ensemble``, one row per dataset and split: the model seeds'
    ensembles (:func:`ensemble_row`)."""
    first = next(iter(compared))
    rows, ensembles = [], []
    model_seeds = args.model_seeds or [None]
    for name in args.datasets:
        split_fits: dict = {}
        for seed, model_seed in itertools.product(args.seeds, model_seeds):
            row = {"dataset": name, "seed": seed}
            if model_seed is not None:
                row["model seed"] = model_seed
            fits = {
                label: fit_once(
                    name, seed, params, model_seed, package, args.train_rows
                )
                for label, (params, package) in compared.items()
            }
            for label, fit in fits.items():
                row[f"epochs {label}"] = fit["epochs"]
                row[f"s {label}"] = round(fit["s"], 2)
                row[f"deviance {label}"] = fit["deviance"]
            for label in list(fits)[1:]:
                change = fits[label]["deviance"] / fits[first]["deviance"] - 1
                row[f"change {label}"] = f"{change:+.2%}"
            row["network kept"] = " / ".join(
                "yes" if fit["kept"] else "no" for fit in fits.values()
            )
            rows.append(row)
            print(json.dumps(row), flush=True)
            if args.ensemble:  # keep the predictions only where they are used
                for label, fit in fits.items():
                    split_fits.setdefault(seed, {}).setdefault(label, []).append(fit)
        if args.ensemble:
            ensembles += [ensemble_row(name, s, f) for s, f in split_fits.items()]
    return rows, ensembles


if __name__ == "__main__":
    main()
