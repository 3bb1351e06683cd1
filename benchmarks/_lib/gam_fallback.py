r"""``ablation.py fallback``: would a GAM serve better than the GLM where the
network is dropped?

For each dataset (``run.py``'s split 0) and model seed, the default fit. Where
it returns the global GLM, the GLM and the GAM (``splines=True``, the global
model alone: ``local_penalty=inf``) are fitted on 90 % of the training rows and
scored on the other 10 % (drawn with the model seed, whole groups where the
split has them; the fit's own ``validation_fraction``, whose rows are not
public), and two rules pick the fallback: the GAM where its validation deviance is lower
("lower"), or lower by more than one standard error of the rows' paired
differences ("one se", the rule that keeps a network). Each rule's model is
then the chosen global model fitted on all training rows, scored on the test
split. Fits that keep a network are the same under every rule.

    python benchmarks/ablation.py fallback --model-seeds 0 1 2 \\
        --datasets rwm5yr randhie wa_churn nass_cds doctor_contacts

(``docs/decisions/gam_fallback.md``.)
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import torch
from sklearn.model_selection import GroupShuffleSplit, ShuffleSplit

from autoglm_graph import get_family
from autoglm_graph.datasets import load_dataset
from benchmarks._lib import models
from benchmarks._lib.common import command_line, cpu_name, to_markdown
from benchmarks._lib.suite import family_parameters, score, unit_deviances

GLOBAL_ONLY = {"local_penalty": float("inf")}
RULES = ("glm", "lower", "one se")


class _Split:
    """One dataset's split 0 with the suite's adapter and scores."""

    def __init__(self, name: str):
        self.ds = ds = load_dataset(name, random_state=0)
        params = family_parameters(name)
        self.task = models.Task(ds.family, seed=0, threads=1, **params)
        self.family = get_family(ds.family, **params)
        self.n_classes = None if ds.classes is None else len(ds.classes)

    def fit(self, params: dict, rows: np.ndarray | None = None):
        """run.py's GraphGLM with ``params``, on ``rows`` of the training split
        (None: all); the adapter and its seconds."""
        ds = self.ds
        rows = np.arange(len(ds.y_train)) if rows is None else rows
        model = models.GraphGLMModel(self.task)
        model.estimator.set_params(**params)
        start = time.perf_counter()
        model.fit(
            ds.X_train.iloc[rows].reset_index(drop=True),
            ds.y_train[rows],
            _take(ds.offset_train, rows),
            groups=_take(ds.groups_train, rows),
        )
        return model, time.perf_counter() - start

    def holdout(self, seed: int) -> tuple[np.ndarray, np.ndarray]:
        """10 % of the training rows held out, whole groups where the split
        has them (as the estimator's validation split); (rest, held out)."""
        positions = np.arange(len(self.ds.y_train))
        if self.ds.groups_train is None:
            splitter = ShuffleSplit(n_splits=1, test_size=0.1, random_state=seed)
        else:
            splitter = GroupShuffleSplit(n_splits=1, test_size=0.1, random_state=seed)
        return next(splitter.split(positions, groups=self.ds.groups_train))

    def training_deviances(self, model, rows: np.ndarray) -> np.ndarray:
        """Unit deviances of ``model`` on ``rows`` of the training split."""
        ds = self.ds
        X = ds.X_train.iloc[rows].reset_index(drop=True)
        mean = np.asarray(model.predict(X, _take(ds.offset_train, rows)))
        return unit_deviances(self.family, ds.y_train[rows], mean)

    def test_deviance(self, model) -> float:
        mean = np.asarray(model.predict(self.ds.X_test, self.ds.offset_test))
        return score(self.family, self.ds, mean, self.n_classes)["deviance"]


def _take(values, rows):
    return None if values is None else values[rows]


def dataset_rows(name: str, model_seeds: list[int]) -> list[dict]:
    """One row per model seed: the network kept or the two global models'
    validation deviances, and each rule's test deviance."""
    split = _Split(name)
    glm, glm_s = split.fit(GLOBAL_ONLY)
    gam, gam_s = split.fit({**GLOBAL_ONLY, "splines": True})
    test = {"glm": split.test_deviance(glm), "gam": split.test_deviance(gam)}
    global_seconds = {"GLM s": round(glm_s, 2), "GAM s": round(gam_s, 2)}
    rows = []
    for seed in model_seeds:
        model, seconds = split.fit({"random_state": seed})
        row = {"dataset": name, "model seed": seed, "fit s": round(seconds, 2)}
        row["network kept"] = not model.estimator.is_global_only_
        if row["network kept"]:
            kept = float(f"{split.test_deviance(model):.5g}")
            blank = dict.fromkeys(
                ("validation GLM", "in-sample GLM", "GAM change", "se"), "-"
            )
            rows.append({**row, **blank, **{f"test {r}": kept for r in RULES}})
            continue
        training, validation = split.holdout(seed)
        glm_rows, gam_rows = (
            split.training_deviances(split.fit(params, training)[0], validation)
            for params in (GLOBAL_ONLY, {**GLOBAL_ONLY, "splines": True})
        )
        # The GLM fitted on all rows, validation rows included: in sample there.
        in_sample = split.training_deviances(glm, validation).mean()
        difference = gam_rows - glm_rows
        se = float(difference.std(ddof=1) / np.sqrt(len(difference)))
        gain = -float(difference.mean())
        choice = {"glm": "glm", "lower": "gam" if gain > 0 else "glm"}
        choice["one se"] = "gam" if gain > se else "glm"
        row |= {
            "validation GLM": float(f"{glm_rows.mean():.5g}"),
            "in-sample GLM": f"{in_sample / glm_rows.mean() - 1:+.2%}",
            "GAM change": f"{-gain / glm_rows.mean():+.2%}",
            "se": f"{se / glm_rows.mean():.2%}",
        }
        for rule in RULES:
            row[f"test {rule}"] = float(f"{test[choice[rule]]:.5g}")
        rows.append(row)
    for row in rows:
        row |= global_seconds
    return rows


def summary(rows: list[dict]) -> list[dict]:
    """Per dataset: each rule's mean test deviance over the model seeds and its
    change against the GLM fallback."""
    out = []
    for name in dict.fromkeys(r["dataset"] for r in rows):
        mine = [r for r in rows if r["dataset"] == name]
        means = {
            rule: float(np.mean([r[f"test {rule}"] for r in mine])) for rule in RULES
        }
        line = {"dataset": name, "fits": len(mine)}
        line["network kept"] = sum(r["network kept"] for r in mine)
        line["GLM fallback"] = float(f"{means['glm']:.5g}")
        for rule in RULES[1:]:
            line[f"GAM if {rule}"] = float(f"{means[rule]:.5g}")
            line[f"change ({rule})"] = f"{means[rule] / means['glm'] - 1:+.2%}"
        out.append(line)
    return out


def main(argv: list[str]) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", nargs="+", default=["wa_churn"])
    parser.add_argument("--model-seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    rows = []
    for name in args.datasets:
        rows += dataset_rows(name, args.model_seeds)
        print(to_markdown(rows[-len(args.model_seeds) :]), flush=True)
    lines = [
        "# The fallback: the GLM, or a GAM chosen on the validation rows",
        "",
        f"Command: `{command_line('ablation.py fallback', argv)}`",
        "",
        f"Machine: {cpu_name()}, one torch thread; run.py's split 0.",
        "",
        to_markdown(summary(rows)),
        "",
        "Per fit (validation: 10 % of the training rows drawn with the model "
        "seed, whole groups where there are groups, the global models fitted "
        "on the rest; in-sample GLM: the GLM "
        "fitted on all training rows, these included, on the same rows, "
        "against the one fitted on the rest):",
        "",
        to_markdown(rows),
    ]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out is not None:
        args.out.with_suffix(".md").write_text(text)
    return rows
