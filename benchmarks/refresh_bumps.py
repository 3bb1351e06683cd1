"""Where the validation deviance's jump at an embedding-graph refresh comes from.

A default fit refreshes its graphs every ``graph_refresh`` epochs: the training
rows' lists among themselves and the validation rows' lists among the training
rows, both searched in the current embedding. Its validation curve jumps at
most refreshes, and the patience often ends a fit inside such a jump. At each
refresh after the first, this script scores the validation rows under the
weights being validated (the averaged ones) with each pairing of the previous
and the new graphs, before the epoch's step, relative to both previous ones:

- ``new train graph``: the training rows' states from the new lists, the
  validation rows' previous lists;
- ``new validation graph``: the previous training states, the validation
  rows' new lists;
- ``both new``: what the epoch's validation then sees (before its step).

    python benchmarks/refresh_bumps.py --datasets synthetic_gamma synthetic_tweedie \\
        --out benchmarks/results/refresh_bumps

Each fit is ``run.py``'s GraphGLM on its split at ``--seed``; the extra scores
leave the fit itself unchanged (no gradients, evaluation mode, no random
draws).
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

import bench_models
import torch
from _common import cpu_name, to_markdown, write_record
from run import family_parameters

from autoglm_graph import training
from autoglm_graph.datasets import load_dataset


def _mean(unit: torch.Tensor, weight: torch.Tensor) -> float:
    weight = weight.double()
    return float((unit.double() * weight).sum() / weight.sum())


def scored_refreshes(name: str, seed: int) -> tuple[list[dict], object]:
    """One default fit of ``name``: a row per refresh after the first, and
    the fitted estimator."""
    rows: list[dict] = []
    build = training.TrainingState.build_graphs

    def spy(self, train, val):
        old_train, old_val = self.train_graph, self._val_graph
        new_train, new_val = build(self, train, val)
        if old_train is None or val is None:
            return new_train, new_val
        scores = {}
        with torch.no_grad(), self._ema_weights():
            for train_name, train_graph in (("old", old_train), ("new", new_train)):
                states = self.source_states(train, train_graph)
                for val_name, val_graph in (("old", old_val), ("new", new_val)):
                    n_src = train.context.shape[0]
                    adjacency = self.net.adjacency(val_graph, n_src=n_src)
                    delta = self.query_delta(val.context, states, adjacency)
                    unit = self._unit_deviance(delta, val)
                    scores[train_name, val_name] = _mean(unit, val.weight)
        before = scores["old", "old"]
        rows.append(
            {
                "dataset": name,
                "epoch": self.epoch + 1,
                "new train graph": f"{scores['new', 'old'] / before - 1:+.2%}",
                "new validation graph": f"{scores['old', 'new'] / before - 1:+.2%}",
                "both new": f"{scores['new', 'new'] / before - 1:+.2%}",
            }
        )
        return new_train, new_val

    ds = load_dataset(name, random_state=seed)
    task = bench_models.Task(ds.family, seed=seed, threads=1, **family_parameters(name))
    model = bench_models.GraphGLMModel(task)
    training.TrainingState.build_graphs = spy
    try:
        model.fit(ds.X_train, ds.y_train, ds.offset_train, groups=ds.groups_train)
    finally:
        training.TrainingState.build_graphs = build
    return rows, model.estimator


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", nargs="+", default=["synthetic_gamma"])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=None, help="write <out>.md")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    rows = []
    for name in args.datasets:
        rows += scored_refreshes(name, args.seed)[0]
    arguments = argv if argv is not None else sys.argv[1:]
    command = shlex.join(["python", "benchmarks/refresh_bumps.py", *arguments])
    write_record(
        "Validation deviance at each refresh, by which graph changed",
        command,
        f"Machine: {cpu_name()}, one torch thread; run.py's split and model seed "
        f"{args.seed}. Changes relative to the previous training and validation "
        "graphs, under the averaged weights before the refresh epoch's step.",
        [to_markdown(rows)],
        args.out,
    )
    return rows


if __name__ == "__main__":
    main()
