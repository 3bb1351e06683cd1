"""Insurance pricing on real motor portfolios: frequency and severity, 5-fold CV.

Frequency: Poisson on the claim count with offset ``log(exposure)``. Severity:
gamma on the average claim amount of the policies with claims, with
``sample_weight`` = the claim count. K-fold cross-validation with a fixed seed
(5 folds by default, as the Belgian data's literature); every model sees the
same folds. Models:

- ``glum``: glum's GLM of the family on the same columns (our preprocessing's
  design: one-hot categories, standardised numbers), the offset, L2 1e-4;
- ``glum_cv``: glum's GLM with its L2 penalty chosen by 5-fold CV in each
  training fold (``GeneralizedLinearRegressorCV``);
- ``graphglm``: GraphGLMRegressor with its defaults;
- ``graphglm_location``: the same with ``location_columns`` set to the
  portfolio's coordinates (Belgian: ``long``, ``lat``; the others have none
  and fit ``graphglm``'s model);
- ``glm_location``: the GLM and its location effect alone (``max_epochs=0``:
  no network), balanced;
- ``graphglm_search``: GraphGLMSearchCV over the default space, ``--trials``
  trials scored on the estimator's validation split (``cv=None``);
- ``lightgbm``: LightGBM with early stopping (50 rounds) on a seeded 10 %
  inner validation split, the offset as ``init_score``;
- ``lightgbm_optuna``: the same, its hyperparameters tuned by Optuna (TPE)
  on that inner split with the same number of trials as the GraphGLM search.

Metrics per fold, then mean and sd over folds: mean test deviance (Poisson
of the counts, weighted gamma of the averages), the normalised Gini of the
ordered Lorenz curve (frequency: observed frequency vs predicted frequency,
exposure-weighted; severity: average claim, claim-count-weighted), the balance
ratio ``sum(w * predicted) / sum(w * observed)`` on the training and on the
test rows, and fit seconds.

The data are read from ``--data`` (default ``$AUTOGLM_INSURANCE_DATA``, else
``shared/data/insurance`` next to the repository); when the folder is absent
the script says so and exits 0. They are never copied into the repository.

    python benchmarks/insurance.py --quick                       # CI smoke run
    python benchmarks/insurance.py --subsample 30000 --out benchmarks/results/insurance
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
import warnings
from pathlib import Path

if not __package__:  # ``python benchmarks/X.py``: import ``benchmarks`` from the root
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np
import pandas as pd
from sklearn.metrics import mean_gamma_deviance, mean_poisson_deviance
from sklearn.model_selection import KFold, train_test_split

from autoglm_graph import (
    GraphGLMRegressor,
    GraphGLMSearchCV,
    TabularPreprocessor,
    gini,
)
from benchmarks._lib import insurance_map
from benchmarks._lib.common import cpu_name, to_markdown
from benchmarks._lib.insurance_data import DEFAULT_DATA, PORTFOLIOS, Data, load_task
from benchmarks._lib.models import ALPHA

MODELS = ("glum", "graphglm", "graphglm_search", "lightgbm", "lightgbm_optuna")
TASKS = ("frequency", "severity")


# ------------------------------------------------------------------ models
class Glum:
    def __init__(self, family: str, seed: int, threads: int, trials: int, quick):
        import glum

        self.estimator = glum.GeneralizedLinearRegressor(
            family=family, alpha=ALPHA, l1_ratio=0.0
        )

    def fit(self, data: Data):
        self.pre = TabularPreprocessor()
        design = self.pre.fit_transform(data.X).astype(np.float64)
        self.estimator.fit(
            design, data.y, sample_weight=data.weight, offset=data.offset
        )
        return self

    def predict(self, data: Data) -> np.ndarray:
        design = self.pre.transform(data.X).astype(np.float64)
        return self.estimator.predict(design, offset=data.offset)

    def note(self) -> str:
        return ""


class GlumCV(Glum):
    """glum's GLM with its L2 penalty chosen by 5-fold cross-validation on the
    training rows (``GeneralizedLinearRegressorCV``, 13 penalties from 1e-4,
    the others' penalty, to 1e2, where the GLM is nearly its intercept)."""

    def __init__(self, family: str, seed: int, threads: int, trials: int, quick):
        import glum

        self.estimator = glum.GeneralizedLinearRegressorCV(
            family=family,
            l1_ratio=0.0,
            alphas=np.logspace(np.log10(ALPHA), 2, 13),
            cv=5,
        )

    def note(self) -> str:
        return f"alpha {self.estimator.alpha_:.2g}"


class GraphGLM:
    def __init__(self, family: str, seed: int, threads: int, trials: int, quick):
        params = {"max_epochs": 30} if quick else {}
        # Balanced on both tasks, as a tariff must be (the default "auto"
        # leaves the gamma severity GLM at its maximum likelihood fit).
        self.estimator = GraphGLMRegressor(
            family=family, random_state=seed, n_jobs=threads, balance=True, **params
        )

    def fit(self, data: Data):
        self.estimator.fit(
            data.X, data.y, sample_weight=data.weight, offset=data.offset
        )
        return self

    def predict(self, data: Data) -> np.ndarray:
        return self.estimator.predict(data.X, offset=data.offset)

    def note(self) -> str:
        est = getattr(self.estimator, "best_estimator_", self.estimator)
        if est.is_global_only_:
            return "global GLM"
        parts = []
        if getattr(est, "location_effect_", None) is not None:
            effect = est.location_effect_
            parts.append(
                f"location effect (K {effect.n_neighbors}, "
                f"coefficient {effect.coefficient:.2f})"
            )
        if est.network_ is not None:
            parts.append(f"network (best epoch {est.best_epoch_})")
        return " + ".join(parts)


class GraphGLMLocation(GraphGLM):
    """GraphGLM with the portfolio's coordinates as ``location_columns``."""

    def fit(self, data: Data):
        self.estimator.set_params(location_columns=list(data.location) or None)
        return super().fit(data)


class GLMLocation(GraphGLMLocation):
    """The GLM and its location effect, no network (``max_epochs=0``)."""

    def __init__(self, family: str, seed: int, threads: int, trials: int, quick):
        super().__init__(family, seed, threads, trials, quick)
        self.estimator.set_params(max_epochs=0)


class GraphGLMUnbalanced(GraphGLM):
    """GraphGLM with ``balance=False`` (the fit as trained; run on request)."""

    def __init__(self, family: str, seed: int, threads: int, trials: int, quick):
        super().__init__(family, seed, threads, trials, quick)
        self.estimator.set_params(balance=False)


class GraphGLMSearch(GraphGLM):
    def __init__(self, family: str, seed: int, threads: int, trials: int, quick):
        super().__init__(family, seed, threads, trials, quick)
        self.estimator = GraphGLMSearchCV(
            self.estimator, n_trials=trials, cv=None, random_state=seed
        )


class LightGBM:
    """Early stopping on a seeded 10 % inner split; offset as ``init_score``."""

    def __init__(self, family: str, seed: int, threads: int, trials: int, quick):
        self.family, self.seed, self.threads = family, seed, threads
        self.trials = 0
        self.max_trees = 200 if quick else 5000

    def _fit_one(self, params: dict, parts) -> tuple[object, float]:
        import lightgbm

        X_tr, X_val, y_tr, y_val, w_tr, w_val, o_tr, o_val = parts
        model = lightgbm.LGBMRegressor(
            objective=self.family,
            n_estimators=self.max_trees,
            random_state=self.seed,
            n_jobs=self.threads,
            verbose=-1,
            **params,
        )
        init = {}
        if o_tr is not None:
            # With an init_score LightGBM does not boost from the average: start
            # from the portfolio's mean frequency, not from 1 claim per year.
            self.base = np.log(np.sum(w_tr * y_tr) / np.sum(w_tr * np.exp(o_tr)))
            init = {
                "init_score": o_tr + self.base,
                "eval_init_score": [o_val + self.base],
            }
        model.fit(
            X_tr,
            y_tr,
            sample_weight=w_tr,
            eval_set=[(X_val, y_val)],
            eval_sample_weight=[w_val],
            callbacks=[lightgbm.early_stopping(50, verbose=False)],
            **init,
        )
        raw = model.predict(X_val, raw_score=True)
        mu = np.exp(raw + (0.0 if o_val is None else o_val + self.base))
        return model, deviance(self.family, y_val, mu, w_val)

    def _parts(self, data: Data):
        offset = np.zeros(len(data.y)) if data.offset is None else data.offset
        parts = train_test_split(
            data.X,
            data.y,
            data.weight,
            offset,
            test_size=0.1,
            random_state=self.seed,
        )
        X_tr, X_val, y_tr, y_val, w_tr, w_val, o_tr, o_val = parts
        if data.offset is None:
            o_tr = o_val = None
        return X_tr, X_val, y_tr, y_val, w_tr, w_val, o_tr, o_val

    def fit(self, data: Data):
        self.model, _ = self._fit_one({}, self._parts(data))
        return self

    def predict(self, data: Data) -> np.ndarray:
        raw = self.model.predict(data.X, raw_score=True)
        return np.exp(raw + (0.0 if data.offset is None else data.offset + self.base))

    def note(self) -> str:
        return f"{self.model.best_iteration_} trees"


class LightGBMOptuna(LightGBM):
    """LightGBM tuned by Optuna (TPE) on the inner split, ``trials`` trials."""

    def __init__(self, family: str, seed: int, threads: int, trials: int, quick):
        super().__init__(family, seed, threads, trials, quick)
        self.trials = trials

    def fit(self, data: Data):
        import optuna

        parts = self._parts(data)
        models = {}

        def objective(trial):
            params = {
                "learning_rate": trial.suggest_float(
                    "learning_rate", 0.01, 0.3, log=True
                ),
                "num_leaves": trial.suggest_int("num_leaves", 4, 128, log=True),
                "min_child_samples": trial.suggest_int(
                    "min_child_samples", 5, 500, log=True
                ),
                "reg_lambda": trial.suggest_float("reg_lambda", 1e-3, 10.0, log=True),
                "colsample_bytree": trial.suggest_float("colsample_bytree", 0.5, 1.0),
            }
            models[trial.number], score = self._fit_one(params, parts)
            return score

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        study = optuna.create_study(
            direction="minimize", sampler=optuna.samplers.TPESampler(seed=self.seed)
        )
        study.optimize(objective, n_trials=self.trials)
        self.model = models[study.best_trial.number]
        return self


FACTORIES = {
    "glum": Glum,
    "glum_cv": GlumCV,
    "graphglm": GraphGLM,
    "graphglm_location": GraphGLMLocation,
    "glm_location": GLMLocation,
    "graphglm_search": GraphGLMSearch,
    "graphglm_unbalanced": GraphGLMUnbalanced,
    "lightgbm": LightGBM,
    "lightgbm_optuna": LightGBMOptuna,
}


# ----------------------------------------------------------------- metrics
def deviance(family: str, y, mu, weight) -> float:
    metric = mean_poisson_deviance if family == "poisson" else mean_gamma_deviance
    return float(metric(y, mu, sample_weight=weight))


def metrics(data: Data, mu: np.ndarray) -> dict:
    if data.offset is None:  # severity: the average claim, per claim
        ranking = gini(data.y, mu, data.weight)
    else:  # frequency: claims per unit of exposure, per unit of exposure
        exposure = np.exp(data.offset)
        ranking = gini(data.y / exposure, mu / exposure, exposure)
    return {
        "deviance": deviance(data.family, data.y, mu, data.weight),
        "gini": ranking,
        "balance": float(np.sum(data.weight * mu) / np.sum(data.weight * data.y)),
    }


def run_fold(model_name, data, train, test, args, fold) -> dict:
    model = FACTORIES[model_name](
        data.family, args.seed, args.threads, args.trials, args.quick
    )
    train_data, test_data = data.take(train), data.take(test)
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # convergence notes of short quick runs
        model.fit(train_data)
    seconds = time.perf_counter() - start
    on_train = metrics(train_data, model.predict(train_data))
    on_test = metrics(test_data, model.predict(test_data))
    return {
        "model": model_name,
        "fold": fold,
        "deviance": on_test["deviance"],
        "gini": on_test["gini"],
        "balance_train": on_train["balance"],
        "balance_test": on_test["balance"],
        "fit_s": seconds,
        "note": model.note(),
    }


def summarise(records: list[dict]) -> list[dict]:
    """Mean and sd over folds, per (portfolio, task, model)."""
    frame = pd.DataFrame(records)
    rows = []
    keys = ["portfolio", "task", "model"]
    for (portfolio, task, model), group in frame.groupby(keys, sort=False):
        glm = frame[
            (frame.portfolio == portfolio)
            & (frame.task == task)
            & (frame.model == "glum")
        ]
        row = {"portfolio": portfolio, "task": task, "model": model}
        for col, fmt in [("deviance", ".5f"), ("gini", ".4f")]:
            row[col] = f"{group[col].mean():{fmt}} ± {group[col].std(ddof=1):{fmt}}"
        if len(glm) == len(group):
            change = 100 * (group.deviance.to_numpy() / glm.deviance.to_numpy() - 1)
            row["vs glum %"] = f"{change.mean():+.2f} ± {change.std(ddof=1):.2f}"
        else:
            row["vs glum %"] = "n/a"
        worst = group.balance_train.sub(1).abs().max()
        row["balance train (max abs dev.)"] = f"{worst:.1e}"
        row["balance test"] = f"{group.balance_test.mean():.4f}"
        row["fit s"] = f"{group.fit_s.mean():.1f}"
        row["notes"] = "; ".join(sorted(set(group.note)))
        rows.append(row)
    return rows


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["map"]:
        return insurance_map.main(argv[1:])
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, default=None)
    parser.add_argument("--portfolios", nargs="+", default=list(PORTFOLIOS))
    parser.add_argument("--tasks", nargs="+", default=list(TASKS), choices=TASKS)
    parser.add_argument(
        "--models", nargs="+", default=list(MODELS), choices=list(FACTORIES)
    )
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument(
        "--only-folds",
        type=int,
        nargs="+",
        default=None,
        help="run these folds only (to split a long run over processes)",
    )
    parser.add_argument("--subsample", type=int, default=None, help="policies")
    parser.add_argument("--trials", type=int, default=20, help="search budget")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument(
        "--quick", action="store_true", help="3000 policies, 2 folds, 2 trials"
    )
    parser.add_argument("--out", type=Path, default=None, help="OUT.md, OUT.json")
    args = parser.parse_args(argv)
    command = "python benchmarks/insurance.py " + " ".join(argv)
    if args.quick:
        args.subsample = args.subsample or 3000
        args.folds, args.trials = 2, 2
    folder = args.data or Path(os.environ.get("AUTOGLM_INSURANCE_DATA", DEFAULT_DATA))
    if not folder.is_dir():
        print(f"insurance data not found at {folder}; skipping (pass --data).")
        return 0
    unknown = sorted(set(args.portfolios) - set(PORTFOLIOS))
    if unknown:
        parser.error(f"unknown portfolio(s): {', '.join(unknown)}")
    os.environ.setdefault("OMP_NUM_THREADS", str(args.threads))
    import torch

    torch.set_num_threads(args.threads)
    records = []
    for portfolio in args.portfolios:
        for task in args.tasks:
            data = load_task(folder, portfolio, task, args.subsample, args.seed)
            folds = KFold(args.folds, shuffle=True, random_state=args.seed)
            for fold, (train, test) in enumerate(folds.split(data.X)):
                if args.only_folds is not None and fold not in args.only_folds:
                    continue
                for model in args.models:
                    record = run_fold(model, data, train, test, args, fold)
                    record.update(portfolio=portfolio, task=task, rows=len(data.y))
                    records.append(record)
                    print(
                        f"{portfolio} {task} fold {fold} {model}: deviance "
                        f"{record['deviance']:.5f} gini {record['gini']:.4f} "
                        f"balance {record['balance_train']:.6f}/"
                        f"{record['balance_test']:.4f} {record['fit_s']:.1f}s "
                        f"{record['note']}",
                        flush=True,
                    )
    table = to_markdown(summarise(records))
    print(table)
    if args.out is not None:
        machine = f"{cpu_name()}, {os.cpu_count()} cores, {platform.platform()}"
        text = "\n".join(
            [
                "# Insurance pricing: frequency and severity, cross-validated",
                "",
                f"    {command}",
                "",
                f"{args.folds}-fold CV (seed {args.seed}), "
                f"{args.subsample or 'all'} policies per portfolio, search budget "
                f"{args.trials} trials, {args.threads} thread(s); {machine}. "
                "Mean ± sd over folds; `vs glum %`: the test deviance relative to "
                "glum's on the same fold; balance: sum(w * predicted) / sum(w * "
                "observed).",
                "",
                table,
                "",
            ]
        )
        args.out.with_suffix(".md").write_text(text)
        payload = {"command": command, "records": records}
        args.out.with_suffix(".json").write_text(json.dumps(payload, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
