"""Where a default fit's time goes: its phases, per suite dataset.

Each fit is ``run.py``'s GraphGLM on its split of a suite dataset (seed 0,
``step_ab.make_suite_fit``). The methods that make up a fit are wrapped with
wall-clock timers for its duration:

- ``glm``: the global GLM (``fit_global_glm``, or the negative binomial's);
- ``refresh``: the graph searches at each refresh (``TrainingState.build_graphs``);
- ``step``: the training steps (forward, backward, optimiser);
- ``validation``: each epoch's validation pass, the training rows' states
  under the averaged weights included (and their last computation, for
  prediction, once per fit);
- ``balance``: the intercept correction, a prediction over the training rows;
- ``other``: the rest (preprocessing, the kept states, bookkeeping).

The seconds are one fit's, on a possibly shared machine: read the shares,
not the absolute figures. What it is for: deciding what to make faster
(``benchmarks/results/fit_profile.md``).

    python benchmarks/fit_profile.py --datasets synthetic_gaussian hi star
    python benchmarks/fit_profile.py --datasets synthetic:100000 --threads 2
"""

from __future__ import annotations

import argparse
import contextlib
import shlex
import sys
import time
from pathlib import Path

import torch
from _common import cpu_name, to_markdown, write_record
from step_ab import make_fit, make_suite_fit

import autoglm_graph
from autoglm_graph import _base, training

#: Phase name -> (owner, attribute) of the callable timed as that phase.
PHASES = {
    "glm": [(_base, "fit_global_glm"), (_base, "fit_negative_binomial")],
    "refresh": [(training.TrainingState, "build_graphs")],
    "step": [(training.TrainingState, "_train_step")],
    "validation": [
        (training.TrainingState, "_validate"),
        (training.TrainingState, "source_states"),
    ],
    "balance": [(_base._BaseGraphGLM, "_balance")],
}


@contextlib.contextmanager
def timed_phases(seconds: dict):
    """Wrap every phase's callables; their wall time accumulates in ``seconds``.

    A phase that runs inside another (validation inside a training step, when
    the step's forward is reused) is subtracted from the outer one.
    """
    saved = []
    stack: list[str] = []

    def wrap(phase, function):
        def timed(*args, **kwargs):
            stack.append(phase)
            start = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                spent = time.perf_counter() - start
                stack.pop()
                seconds[phase] = seconds.get(phase, 0.0) + spent
                if stack:
                    seconds[stack[-1]] = seconds.get(stack[-1], 0.0) - spent

        return timed

    for phase, targets in PHASES.items():
        for owner, name in targets:
            function = getattr(owner, name)
            saved.append((owner, name, function))
            setattr(owner, name, wrap(phase, function))
    try:
        yield
    finally:
        for owner, name, function in saved:
            setattr(owner, name, function)


def profile(name: str, threads: int = 1) -> dict:
    """One default fit of ``name`` (a suite dataset, or ``synthetic:N``), its
    seconds split by phase."""
    if name.startswith("synthetic:"):
        fit = make_fit(autoglm_graph, int(name.split(":")[1]), threads)
    else:
        fit = make_suite_fit(autoglm_graph, name, threads=threads, seed=0)
    seconds: dict = {}
    with timed_phases(seconds):
        result = fit()
    row = {"dataset": name, "epochs": result["epochs"], "fit s": round(result["s"], 2)}
    known = 0.0
    for phase in PHASES:
        spent = seconds.get(phase, 0.0)
        known += spent
        row[phase] = f"{spent:.2f} ({spent / result['s']:.0%})"
    other = result["s"] - known
    row["other"] = f"{other:.2f} ({other / result['s']:.0%})"
    if result["epochs"]:
        row["s / step"] = round(seconds.get("step", 0.0) / result["epochs"], 4)
    return row


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--datasets",
        nargs="+",
        default=["synthetic_gaussian", "hi"],
        help="suite datasets, or synthetic:N (scale.py's rows, d = 32)",
    )
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", type=Path, default=None, help="write <out>.md")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    rows = []
    for name in args.datasets:
        rows.append(profile(name, args.threads))
        print(rows[-1], flush=True)
    command = "python " + shlex.join(["benchmarks/fit_profile.py", *sys.argv[1:]])
    write_record(
        "Where a default fit's time goes",
        command,
        f"Machine: {cpu_name()}, {args.threads} torch thread(s); run.py's split, "
        "seed 0.",
        [to_markdown(rows)],
        args.out,
    )
    return rows


if __name__ == "__main__":
    main()
