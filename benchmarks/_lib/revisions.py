"""Steps and fits of this working tree against a git revision, in one process.

Single timings on a shared or virtual machine vary by 20 % and more between
runs, so a kernel change is measured as a ratio of two versions timed
alternately in one process: the revision's ``autoglm_graph`` is extracted
(``git archive``) into a temporary folder as the package
``autoglm_graph_baseline`` (its imports are relative), both networks get the
same weights, inputs and (random) neighbour lists, and their full-batch training steps
(forward, backward, AdamW) alternate, ``--repeats`` times each. The table gives
the median step of each and the ratio this tree / baseline (below 1: faster).
With ``--fit``, whole default fits of ``GraphGLMRegressor`` alternate instead
(``scale.py``'s synthetic data: d = 32, gaussian, 20,000 test rows), with their
epochs and test deviance: the random streams of two versions may differ, so
the epochs may too. With ``--fit --datasets NAME ...``, the fits are the
benchmark suite's (``run.py``: its split of each dataset at a seed, its
model settings and test deviance; ``--seed`` picks run.py's seed) instead of
synthetic sizes.

    python benchmarks/ablation.py speed --baseline HEAD~1 --sizes 3400 15000 40000
    python benchmarks/ablation.py speed --baseline HEAD~1 --fit --sizes 100000 \\
        --threads 2
    python benchmarks/ablation.py speed --baseline HEAD~1 --fit --datasets hi star
    python benchmarks/ablation.py speed --baseline HEAD~1 --fit --seed 2 \\
        --datasets diamonds

Timings are for reading, never asserted in tests.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import io
import subprocess
import sys
import tarfile
import tempfile
import time
from functools import partial
from pathlib import Path

import numpy as np
import torch

from benchmarks._lib import models
from benchmarks._lib.common import command_line, cpu_name, to_markdown, write_record
from benchmarks._lib.suite import family_parameters, score

ROOT = Path(__file__).resolve().parents[2]


def import_revision(revision: str, folder: Path, name: str = "autoglm_graph_baseline"):
    """``autoglm_graph`` as it was at ``revision``, imported as ``name``."""
    archive = subprocess.run(
        ["git", "archive", revision, "autoglm_graph"],
        cwd=ROOT,
        check=True,
        capture_output=True,
    ).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(folder, filter="data")
    (folder / "autoglm_graph").rename(folder / name)
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))
    return importlib.import_module(name)


def random_graph(n: int, k: int, seed: int):
    """Random ``[n, k]`` neighbour lists: a step's cost depends on how many
    neighbours a row has, not which (as in ``scale.py``), and no N x N search
    is needed at 100k rows."""
    generator = torch.Generator().manual_seed(seed)
    return (
        torch.randint(0, n, (n, k), generator=generator),
        torch.rand(n, k, generator=generator),
        torch.ones(n, k, dtype=torch.bool),
    )


def _first_module(package, *names: str):
    """The first of ``package``'s modules ``names`` that exists: the layout of
    this tree first, then that of revisions before the areas."""
    for name in names:
        try:
            return importlib.import_module(f"{package.__name__}.{name}")
        except ModuleNotFoundError:
            continue
    raise ModuleNotFoundError(f"none of {names} in {package.__name__}")


def make_step(
    package, n: int, n_features: int, seed: int, state=None, prepare=None, rows=None
):
    """A closure running one training step of ``package``'s network, and its weights.

    ``prepare(net)``, when given, runs on the network before the step is built.
    ``rows``, when given, is ``(context, graph)``: the rows and neighbour lists
    to step on instead of random ones.
    """
    modules = _first_module(package, "network.modules", "modules")
    graph_module = _first_module(package, "neighbors", "graph")
    generator = torch.Generator().manual_seed(seed)
    context = torch.randn(n, n_features, generator=generator)
    targets = torch.randn(n, 2, generator=generator)
    if rows is not None:
        context, graph = rows
    torch.manual_seed(seed)
    net = modules.GraphGLMNet(
        n_features, n_features + 1, target_channels=2, dropout=0.1
    )
    if state is not None:
        net.load_state_dict(state)
    net.generator = torch.Generator().manual_seed(seed)
    if rows is None:
        graph = graph_module.NeighborGraph(*random_graph(n, 16, seed))
    adjacency = net.adjacency(graph, n)
    if prepare is not None:
        prepare(net)
    # Fused, as training's (TrainingState.run): the step timed is the fit's.
    optimizer = torch.optim.AdamW(net.parameters(), lr=1e-6, fused=True)

    def step() -> float:
        start = time.perf_counter()
        net.train()
        delta, _ = net(context, targets, adjacency)
        loss = delta.pow(2).mean() + 1e-3 * delta.sum()
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        return time.perf_counter() - start

    return step, net.state_dict()


def make_fit(package, n: int, threads: int):
    """A closure fitting ``package``'s default regressor on ``n`` synthetic rows."""
    from autoglm_graph.datasets import make_varying_coefficients

    X, y, _ = make_varying_coefficients(
        n + 20_000, 32, 4, family="gaussian", noise=0.5, random_state=0
    )

    def fit() -> dict:
        model = package.GraphGLMRegressor(random_state=0, n_jobs=threads)
        start = time.perf_counter()
        model.fit(X[:n], y[:n])
        seconds = time.perf_counter() - start
        mean = model.predict(X[n:])
        return {
            "s": seconds,
            "epochs": model.n_iter_,
            "deviance": float(np.mean((y[n:] - mean) ** 2)),
        }

    return fit


def make_suite_fit(
    package,
    name: str,
    threads: int,
    seed: int = 0,
    *,
    train_rows: int | None = None,
    **params,
):
    """A closure fitting ``package``'s estimator as ``run.py`` does on ``name``
    (its split and model seed ``seed``), with ``params`` set on the estimator;
    ``train_rows``: on that many of the split's training rows, drawn at
    random (seeded by ``seed``), scored on the whole test split."""
    from autoglm_graph import get_family
    from autoglm_graph.datasets import load_dataset

    ds = load_dataset(name, random_state=seed)
    if train_rows is not None and train_rows < len(ds.y_train):
        ds = training_subset(ds, train_rows, seed)
    family_params = family_parameters(name)
    task = models.Task(ds.family, seed=seed, threads=threads, **family_params)
    family = get_family(ds.family, **family_params)
    n_classes = None if ds.classes is None else len(ds.classes)

    def fit() -> dict:
        # run.py's adapter with this package's estimators.
        model = models.GraphGLMModel(task, package=package)
        model.estimator.set_params(**params)
        start = time.perf_counter()
        model.fit(ds.X_train, ds.y_train, ds.offset_train, groups=ds.groups_train)
        seconds = time.perf_counter() - start
        mean = np.asarray(model.predict(ds.X_test, ds.offset_test))
        scores = score(family, ds, mean, n_classes)
        return {
            "s": seconds,
            "epochs": model.estimator.n_iter_,
            "kept": not model.estimator.is_global_only_,
            "deviance": scores["deviance"],
            "mean": mean,
        }

    def test_deviance(mean: np.ndarray) -> float:
        """Test deviance of a prediction on this split (an ensemble's)."""
        return score(family, ds, mean, n_classes)["deviance"]

    fit.family = ds.family
    fit.test_deviance = test_deviance

    return fit


def training_subset(ds, rows: int, seed: int):
    """``ds`` with ``rows`` of its training rows drawn without replacement (in
    their order): small-data fits scored on the same test split."""
    keep = np.sort(np.random.default_rng(seed).choice(len(ds.y_train), rows, False))
    subset = {
        f"{part}_train": None if value is None else value[keep]
        for part in ("y", "offset", "groups", "coef")
        for value in [getattr(ds, f"{part}_train")]
    }
    X = ds.X_train.iloc[keep].reset_index(drop=True)
    return dataclasses.replace(ds, X_train=X, **subset)


def compare_fits(baseline, n, threads: int, repeats: int, seed: int = 0) -> dict:
    """Alternating fits of both versions: ``n`` synthetic rows, or a suite
    dataset when ``n`` is its name (its split and model seed ``seed``)."""
    import autoglm_graph

    if isinstance(n, str):
        make = partial(make_suite_fit, seed=seed)
    else:
        make = make_fit
    new, old = make(autoglm_graph, n, threads), make(baseline, n, threads)
    runs = {"tree": [], "baseline": []}
    for _ in range(repeats):
        runs["tree"].append(new())
        runs["baseline"].append(old())
    row = {"dataset" if isinstance(n, str) else "n": n}
    for name in ("baseline", "tree"):
        row[f"{name} fit s"] = round(float(np.median([r["s"] for r in runs[name]])), 1)
        row[f"{name} epochs"] = runs[name][0]["epochs"]
        row[f"{name} test deviance"] = float(f"{runs[name][0]['deviance']:.5g}")
    row["tree / baseline"] = round(row["tree fit s"] / row["baseline fit s"], 3)
    return row


def main(argv: list[str]) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", default="HEAD", help="git revision to compare")
    parser.add_argument("--sizes", type=int, nargs="+", default=[3400, 15000, 40000])
    parser.add_argument("--features", type=int, default=12)
    parser.add_argument("--repeats", type=int, default=8)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--fit", action="store_true", help="whole fits, not steps")
    parser.add_argument(
        "--datasets", nargs="+", default=None, help="with --fit: suite datasets"
    )
    parser.add_argument(
        "--seed", type=int, default=0, help="with --datasets: run.py's seed"
    )
    parser.add_argument("--out", type=Path, default=None, help="write <out>.md")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    import autoglm_graph

    rows = []
    with tempfile.TemporaryDirectory() as folder:
        baseline = import_revision(args.baseline, Path(folder))
        for n in args.datasets if args.fit and args.datasets else args.sizes:
            if args.fit:
                rows.append(
                    compare_fits(baseline, n, args.threads, args.repeats, args.seed)
                )
                print(rows[-1], flush=True)
                continue
            new, state = make_step(autoglm_graph, n, args.features, seed=0)
            old, _ = make_step(baseline, n, args.features, seed=0, state=state)
            for step in (new, old, new, old):  # warm-up: caches, allocator
                step()
            times = {"tree": [], "baseline": []}
            for _ in range(args.repeats):
                times["tree"].append(new())
                times["baseline"].append(old())
            tree, base = (float(np.median(times[k])) for k in ("tree", "baseline"))
            rows.append(
                {
                    "n": n,
                    "baseline step ms": round(base * 1e3, 1),
                    "tree step ms": round(tree * 1e3, 1),
                    "tree / baseline": round(tree / base, 3),
                }
            )
            print(rows[-1], flush=True)
    command = command_line("ablation.py speed", argv)
    resolved = subprocess.run(
        ["git", "rev-parse", "--short", args.baseline],
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    write_record(
        f"{'Fits' if args.fit else 'Training step'}: working tree against a "
        "git revision (in-process A/B)",
        command.strip(),
        f"Machine: {cpu_name()}, {args.threads} torch thread(s), "
        f"torch {torch.__version__}; baseline `{args.baseline}` = {resolved}, "
        + (
            f"the suite's default fits (run.py, seed {args.seed}), median of "
            f"{args.repeats} alternating fits"
            if args.fit and args.datasets
            else "default fits, scale.py's synthetic data (d = 32), "
            f"median of {args.repeats} alternating fits"
            if args.fit
            else f"{args.features} features, k = 16, 2 layers x 4 heads x 16 "
            f"channels, median of {args.repeats} alternating steps"
        ),
        [to_markdown(rows)],
        args.out,
    )
    return rows
