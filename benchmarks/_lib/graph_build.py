"""Exact kNN-graph build: autoglm_graph.cosine_topk against faiss and scikit-learn.

For each N, the self-excluded top-k cosine graph among N rows (d = 32, k = 16 by
default; synthetic clustered Gaussian mixture, seeded) is built by

* ``ours``: ``autoglm_graph.cosine_topk(X, n_neighbors=k)`` (normalisation
  included);
* ``faiss``: ``faiss.IndexFlatIP`` on L2-normalised float32 rows (normalisation
  included), searching k + 1 and dropping the row itself;
* ``sklearn``: ``NearestNeighbors(metric="cosine", algorithm="brute")``, k + 1,
  dropping the row itself.

Memory, honestly measured: every (method, repeat) runs in a fresh process
started with multiprocessing's "spawn", so no method inherits another's
allocator caches. The child imports all libraries, loads the data from a .npy
file and warms the method up on a tiny problem (thread pools, BLAS init); then
it reads its current RSS, runs the method once, and reports ``ru_maxrss`` (the
kernel's exact high-water mark, which no sampling can miss) minus that RSS: the
peak memory the method added on top of its input. ``ru_maxrss`` before the run
is also recorded; when it exceeds the RSS (an earlier transient) the increase can
be overstated by that gap, which is reported as ``slack_mb`` in the JSON.

Time is the wall-clock time of the timed call, for each thread setting of
``--threads``: ``default`` leaves every library its own default; a number sets
that count for all of them (environment variables of the spawned child, plus
``torch.set_num_threads``, ``faiss.omp_set_num_threads`` and threadpoolctl). The
process CPU time of the same call is recorded too: on a shared, oversubscribed
machine multi-threaded wall time mostly measures waiting (an OpenMP barrier waits
for a descheduled thread), while single-threaded CPU time still measures the
work done. Repeats are interleaved (ours, faiss, sklearn, ours, ...) so that load
changes hit all methods alike; the tables show the fastest repeat.

With ``--approximate`` the script instead compares the exact backend of
``cosine_topk`` with its approximate ``backend="faiss"`` (an HNSW index with the
package defaults), in this process, with one thread for torch, faiss and BLAS
(``--threads`` is ignored): for each N of ``--sizes`` and each data set
(``clustered``, as above, and ``isotropic``, standard Gaussian rows: the hard
case for graph indexes), it times the exact search and the approximate one
(index build and search, timed separately through ``CosineNeighbors``) and
reports recall@k of the approximate graph against the exact one. For each N of
``--approx-only-sizes`` (exact search of all rows being too slow there) only the
approximate graph is built, and its recall is checked on ``--recall-sample``
random rows against an exact search of those rows among all N.

Run ``python benchmarks/neighbors.py build --help`` for the options.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import platform
import queue as queue_module
import resource
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks._lib.common import command_line, cpu_name

METHODS = ("ours", "faiss", "sklearn")


def make_data(n: int, d: int, seed: int, n_clusters: int = 50) -> np.ndarray:
    """Clustered Gaussian mixture: unit-variance blobs around spread centres."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((n_clusters, d)) * 3.0
    scales = rng.uniform(0.5, 1.5, n_clusters)
    labels = rng.integers(0, n_clusters, n)
    noise = rng.standard_normal((n, d)) * scales[labels, None]
    return (centres[labels] + noise).astype(np.float32)


def drop_self(indices: np.ndarray, k: int) -> np.ndarray:
    """From k + 1 neighbours per row, drop the row itself (else the last one)."""
    n = indices.shape[0]
    is_self = indices == np.arange(n)[:, None]
    keep = ~is_self
    keep[~is_self.any(axis=1), -1] = False
    return indices[keep].reshape(n, k)


def run_ours(X: np.ndarray, k: int) -> np.ndarray:
    """Self-excluded top-k with autoglm_graph."""
    import torch

    from autoglm_graph import cosine_topk

    return cosine_topk(torch.from_numpy(X), n_neighbors=k).indices.numpy()


def run_faiss(X: np.ndarray, k: int) -> np.ndarray:
    """Exact inner-product search on L2-normalised rows, k + 1 then drop self."""
    import faiss

    Xn = np.ascontiguousarray(X, dtype=np.float32).copy()
    faiss.normalize_L2(Xn)
    index = faiss.IndexFlatIP(Xn.shape[1])
    index.add(Xn)
    _, indices = index.search(Xn, k + 1)
    return drop_self(indices, k)


def run_sklearn(X: np.ndarray, k: int) -> np.ndarray:
    """scikit-learn brute-force cosine neighbours, k + 1 then drop self."""
    from sklearn.neighbors import NearestNeighbors

    nn = NearestNeighbors(n_neighbors=k + 1, metric="cosine", algorithm="brute")
    _, indices = nn.fit(X).kneighbors(X)
    return drop_self(indices, k)


RUNNERS = {"ours": run_ours, "faiss": run_faiss, "sklearn": run_sklearn}


def _rss_mb() -> float:
    import psutil

    return psutil.Process().memory_info().rss / 2**20


def _maxrss_mb() -> float:
    # Linux reports ru_maxrss in KiB.
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _set_threads(threads: int | None) -> None:
    """Limit every library's thread pool to ``threads`` (None: leave defaults)."""
    if threads is None:
        return
    import faiss
    import torch
    from threadpoolctl import threadpool_limits

    torch.set_num_threads(threads)
    faiss.omp_set_num_threads(threads)
    threadpool_limits(limits=threads)


def _child(
    method: str, data_path: str, k: int, out_path: str, threads: int | None, queue
) -> None:
    """Time one method once in this fresh process and report its peak memory."""
    import faiss  # noqa: F401  (import every library before the baseline)
    import sklearn.neighbors  # noqa: F401
    import torch

    from autoglm_graph import cosine_topk  # noqa: F401

    _set_threads(threads)
    X = np.load(data_path)
    RUNNERS[method](make_data(300, X.shape[1], seed=1), k)  # warm-up
    rss_before, maxrss_before = _rss_mb(), _maxrss_mb()
    start, cpu_start = time.perf_counter(), time.process_time()
    indices = RUNNERS[method](X, k)
    seconds = time.perf_counter() - start
    cpu_seconds = time.process_time() - cpu_start
    peak = _maxrss_mb()
    np.save(out_path, indices.astype(np.int64))
    queue.put(
        {
            "seconds": seconds,
            "cpu_seconds": cpu_seconds,
            "peak_increase_mb": peak - rss_before,
            "slack_mb": max(0.0, maxrss_before - rss_before),
            "torch_threads": torch.get_num_threads(),
            "loadavg": os.getloadavg()[0],
        }
    )


def run_in_fresh_process(
    method: str, data_path: str, k: int, out_path: str, threads: int | None
) -> dict:
    """Run ``method`` in a spawned process; return its timing and memory."""
    _set_thread_env(threads)
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    args = (method, data_path, k, out_path, threads, queue)
    proc = ctx.Process(target=_child, args=args)
    proc.start()
    while True:
        try:
            result = queue.get(timeout=5)
            break
        except queue_module.Empty:
            if not proc.is_alive():
                raise RuntimeError(
                    f"{method} child died with exit code {proc.exitcode}"
                ) from None
    proc.join()
    return result


_THREAD_ENV = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")
_ORIGINAL_ENV = {var: os.environ.get(var) for var in _THREAD_ENV}


def _set_thread_env(threads: int | None) -> None:
    """Thread variables that a child spawned next inherits before any import."""
    for var in _THREAD_ENV:
        value = _ORIGINAL_ENV[var] if threads is None else str(threads)
        if value is None:
            os.environ.pop(var, None)
        else:
            os.environ[var] = value


def recall(found: np.ndarray, reference: np.ndarray) -> float:
    """Mean fraction of each row's reference neighbours that were found."""
    hits = (found[:, :, None] == reference[:, None, :]).any(axis=2)
    return float(hits.mean())


def bench_size(
    n: int, threads: int | None, args: argparse.Namespace, workdir: Path
) -> dict:
    """All methods, interleaved repeats, at one N and thread setting."""
    data_path = workdir / f"X_{n}.npy"
    np.save(data_path, make_data(n, args.dim, args.seed))
    skip_sklearn = args.skip_sklearn_above is not None and n > args.skip_sklearn_above
    methods = [m for m in METHODS if not (m == "sklearn" and skip_sklearn)]
    runs: dict[str, list[dict]] = {m: [] for m in methods}
    for _ in range(args.repeats):
        for method in methods:
            out = workdir / f"{method}_{n}.npy"
            run = run_in_fresh_process(method, str(data_path), args.k, out, threads)
            runs[method].append(run)
            print(
                f"  threads={threads or 'default'} N={n} {method}: "
                f"{run['seconds']:.2f} s wall, "
                f"{run['cpu_seconds']:.2f} s CPU, load {run['loadavg']:.1f}",
                flush=True,
            )
    indices = {m: np.load(workdir / f"{m}_{n}.npy") for m in methods}
    result: dict = {"n": n, "runs": runs}
    for method in methods:
        result[method] = summarise(runs[method])
        result[method]["recall_vs_faiss"] = recall(indices[method], indices["faiss"])
    return result


def summarise(runs: list[dict]) -> dict:
    """Best and median times, median peak memory, of a method's repeats."""
    wall = [r["seconds"] for r in runs]
    cpu = [r["cpu_seconds"] for r in runs]
    return {
        "best_s": min(wall),
        "median_s": statistics.median(wall),
        "best_cpu_s": min(cpu),
        "median_cpu_s": statistics.median(cpu),
        "peak_increase_mb": statistics.median(r["peak_increase_mb"] for r in runs),
    }


def machine_info() -> dict:
    """What the numbers were measured on."""
    import faiss
    import sklearn
    import torch

    cpu = cpu_name()
    return {
        "cpu": cpu,
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "faiss": faiss.__version__,
        "sklearn": sklearn.__version__,
        "numpy": np.__version__,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "loadavg_start": os.getloadavg(),
    }


def _fmt(value: float | None, spec: str) -> str:
    return "—" if value is None else format(value, spec)


def _ratio(result: dict, method: str, key: str) -> float | None:
    """``method``'s time over ours (> 1: ours is faster), or None if not run."""
    if method not in result:
        return None
    return result[method][key] / result["ours"][key]


def time_table(results: list[dict]) -> str:
    """Wall and CPU seconds (best of the repeats) with ratios theirs/ours."""
    lines = [
        "| N | ours (s) | faiss (s) | faiss/ours | sklearn (s) | sklearn/ours "
        "| ours CPU (s) | faiss CPU (s) | faiss/ours CPU |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        skl = r.get("sklearn", {})
        lines.append(
            f"| {r['n']:,} | {r['ours']['best_s']:.2f} | {r['faiss']['best_s']:.2f} "
            f"| {_ratio(r, 'faiss', 'best_s'):.2f} | {_fmt(skl.get('best_s'), '.2f')} "
            f"| {_fmt(_ratio(r, 'sklearn', 'best_s'), '.2f')} "
            f"| {r['ours']['best_cpu_s']:.2f} | {r['faiss']['best_cpu_s']:.2f} "
            f"| {_ratio(r, 'faiss', 'best_cpu_s'):.2f} |"
        )
    return "\n".join(lines) + "\n"


def memory_table(results: list[dict]) -> str:
    """Median peak-RSS increase per method, and recall against faiss."""
    lines = [
        "| N | ours peak MB | faiss peak MB | sklearn peak MB "
        "| recall ours vs faiss | recall sklearn vs faiss |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        skl = r.get("sklearn", {})
        lines.append(
            f"| {r['n']:,} | {r['ours']['peak_increase_mb']:.0f} "
            f"| {r['faiss']['peak_increase_mb']:.0f} "
            f"| {_fmt(skl.get('peak_increase_mb'), '.0f')} "
            f"| {r['ours']['recall_vs_faiss']:.4f} "
            f"| {_fmt(skl.get('recall_vs_faiss'), '.4f')} |"
        )
    return "\n".join(lines) + "\n"


def report(command: str, info: dict, args: argparse.Namespace, sections) -> str:
    """The markdown report: command, machine, settings, tables per thread setting."""
    text = (
        "# Exact kNN graph build: ours vs faiss IndexFlatIP vs scikit-learn brute\n\n"
        f"Command:\n\n```\n{command}\n```\n\n"
        f"Machine: {info['cpu']}, {info['cpu_count']} CPUs; torch {info['torch']}, "
        f"faiss {info['faiss']}, scikit-learn {info['sklearn']}, "
        f"numpy {info['numpy']}. Load average {info['loadavg_start'][0]:.1f} at "
        f"start, {info['loadavg_end'][0]:.1f} at end.\n\n"
        f"Self-excluded top-k cosine graph among N rows, d = {args.dim}, "
        f"k = {args.k}, clustered Gaussian mixture (seed {args.seed}), "
        f"{args.repeats} interleaved repeats, each in a fresh spawned process. "
        "Time: best of the repeats, wall clock and the process CPU time of the "
        "same call; a ratio > 1 means ours is faster. Peak MB: median peak-RSS "
        "increase over the input (ru_maxrss; see the script's docstring). "
        "Recall: fraction of faiss's neighbours that were found (exact ties may "
        "be broken differently).\n"
    )
    for section in sections:
        threads = section["threads"] or "library defaults"
        text += (
            f"\n## Threads: {threads}\n\n"
            + time_table(section["sizes"])
            + "\n"
            + memory_table(section["sizes"])
        )
    return text


def write_report(out: Path, command: str, info: dict, args, sections) -> None:
    """Write ``out``.md and ``out``.json."""
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".md").write_text(report(command, info, args, sections))
    payload = {"command": command, "machine": info, "settings": vars(args)}
    payload["results"] = sections
    out.with_suffix(".json").write_text(json.dumps(payload, indent=2, default=str))


DATASETS = ("clustered", "isotropic")


def make_dataset(kind: str, n: int, d: int, seed: int) -> np.ndarray:
    """``clustered`` (:func:`make_data`) or ``isotropic`` standard Gaussian rows."""
    if kind == "clustered":
        return make_data(n, d, seed)
    return np.random.default_rng(seed).standard_normal((n, d), dtype=np.float32)


def _timed(fn):
    """``fn()``, its wall-clock seconds and its process CPU seconds."""
    start, cpu_start = time.perf_counter(), time.process_time()
    value = fn()
    return value, time.perf_counter() - start, time.process_time() - cpu_start


def _exact_for_rows(X, rows: np.ndarray, k: int):
    """Exact self-excluded top-k of the sampled ``rows`` among all rows of ``X``."""
    import torch

    from autoglm_graph import NeighborGraph, cosine_topk

    wide = cosine_topk(X[rows], X, n_neighbors=k + 1, exclude_self=False)
    idx, sim = wide.indices.numpy(), wide.similarities.numpy()
    # Drop the row itself by position (else the worst), as exclude_self does.
    drop = idx == rows[:, None]
    drop[~drop.any(axis=1), -1] = True
    keep = ~drop
    idx, sim = idx[keep].reshape(-1, k), sim[keep].reshape(-1, k)
    return NeighborGraph(
        torch.from_numpy(idx), torch.from_numpy(sim), torch.ones(idx.shape, dtype=bool)
    )


def hnsw_settings(index) -> dict:
    """The settings an HNSW index of ``CosineNeighbors(backend="faiss")`` was
    built with (the package defaults here): degree M, efConstruction and the
    recall its efSearch is calibrated to, read from the built index."""
    hnsw = index.index.hnsw  # faiss's graph: M links per node above layer 0
    return {
        "hnsw_m": int(hnsw.nb_neighbors(1)),
        "ef_construction": int(hnsw.efConstruction),
        "target_recall": float(index.target_recall),
    }


def bench_approx(kind: str, n: int, args: argparse.Namespace, exact: bool) -> dict:
    """Exact (if ``exact``) and approximate self-excluded graphs of one data set."""
    import torch

    from autoglm_graph import CosineNeighbors, cosine_topk, recall_at_k

    X = torch.from_numpy(make_dataset(kind, n, args.dim, args.seed))
    row: dict = {"kind": kind, "n": n}
    nn = CosineNeighbors(n_neighbors=args.k, backend="faiss")
    _, row["build_s"], row["build_cpu_s"] = _timed(lambda: nn.fit(X))
    approx, row["search_s"], row["search_cpu_s"] = _timed(nn.kneighbors)
    row["approx_s"] = row["build_s"] + row["search_s"]
    row["approx_cpu_s"] = row["build_cpu_s"] + row["search_cpu_s"]
    row["ef_search"] = nn.index_.calibration[(args.k + 1, True)][0]
    row.update(hnsw_settings(nn.index_))
    if exact:
        graph, row["exact_s"], row["exact_cpu_s"] = _timed(
            lambda: cosine_topk(X, n_neighbors=args.k)
        )
        row["recall"] = recall_at_k(approx, graph)
        row["recall_rows"] = n
        row["speedup"] = row["exact_s"] / row["approx_s"]
        row["speedup_cpu"] = row["exact_cpu_s"] / row["approx_cpu_s"]
    else:
        rng = np.random.default_rng(args.seed + 1)
        rows = np.sort(rng.choice(n, size=min(args.recall_sample, n), replace=False))
        reference = _exact_for_rows(X, rows, args.k)
        sample = torch.from_numpy(rows)
        approx_rows = type(approx)(
            approx.indices[sample], approx.similarities[sample], approx.mask[sample]
        )
        row["recall"] = recall_at_k(approx_rows, reference)
        row["recall_rows"] = len(rows)
    print(
        f"  {kind} N={n}: approx {row['approx_s']:.1f} s "
        f"(build {row['build_s']:.1f}, search {row['search_s']:.1f}), "
        f"exact {_fmt(row.get('exact_s'), '.1f')} s, recall {row['recall']:.4f}, "
        f"load {os.getloadavg()[0]:.1f}",
        flush=True,
    )
    return row


def approx_table(rows: list[dict]) -> str:
    """Exact vs approximate times, ratio and recall@k, one line per data set/N."""
    lines = [
        "| data | N | exact (s) | approx (s) | build (s) | search (s) "
        "| exact/approx | exact CPU (s) | approx CPU (s) | exact/approx CPU "
        "| recall@k | recall rows | ef |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['kind']} | {r['n']:,} | {_fmt(r.get('exact_s'), '.2f')} "
            f"| {r['approx_s']:.2f} | {r['build_s']:.2f} | {r['search_s']:.2f} "
            f"| {_fmt(r.get('speedup'), '.2f')} "
            f"| {_fmt(r.get('exact_cpu_s'), '.2f')} | {r['approx_cpu_s']:.2f} "
            f"| {_fmt(r.get('speedup_cpu'), '.2f')} | {r['recall']:.4f} "
            f"| {r['recall_rows']:,} | {r['ef_search']} |"
        )
    return "\n".join(lines) + "\n"


def approx_report(command: str, info: dict, args, rows: list[dict]) -> str:
    """The markdown report of the ``--approximate`` run."""
    built = rows[0] if rows else {}
    return (
        "# kNN graph build: exact vs approximate (faiss HNSW) backend\n\n"
        f"Command:\n\n```\n{command}\n```\n\n"
        f"Machine: {info['cpu']}, {info['cpu_count']} CPUs (shared with other "
        f"jobs); torch {info['torch']}, faiss {info['faiss']}, numpy "
        f"{info['numpy']}. One thread for torch, faiss and BLAS. Load average "
        f"{info['loadavg_start'][0]:.1f} at start, {info['loadavg_end'][0]:.1f} "
        "at end.\n\n"
        f"Self-excluded top-k cosine graph among N rows, d = {args.dim}, "
        f"k = {args.k}, seed {args.seed}, one run each. `exact`: "
        '`cosine_topk(X, n_neighbors=k)`; `approx`: `backend="faiss"` with the '
        f"default HNSW parameters (M = {built.get('hnsw_m')}, efConstruction = "
        f"{built.get('ef_construction')}, efSearch calibrated to recall "
        f"{built.get('target_recall')} on a sample of the queries, column ef; "
        "the calibration is part of the search time), timed as index build plus "
        "search of all N rows. exact/approx > 1: the approximate backend is "
        "faster. CPU: process CPU time of the same calls (less sensitive to the "
        "machine's other load). recall@k: `recall_at_k(approx, exact)` over all "
        f"rows, or, where exact is '—', over {args.recall_sample:,} random rows "
        "checked against an exact search of those rows among all N.\n\n"
        + approx_table(rows)
    )


def main_approximate(args: argparse.Namespace, command: str) -> None:
    """The ``--approximate`` benchmark: exact vs faiss HNSW backend, one thread."""
    _set_threads(1)
    info = machine_info()
    rows = []
    plan = [(n, True) for n in args.sizes] + [
        (n, False) for n in args.approx_only_sizes
    ]
    for n, exact in plan:
        for kind in DATASETS:
            rows.append(bench_approx(kind, n, args, exact))
            info["loadavg_end"] = os.getloadavg()
            if args.out is not None:  # after every row: a long run may be cut
                args.out.parent.mkdir(parents=True, exist_ok=True)
                args.out.with_suffix(".md").write_text(
                    approx_report(command, info, args, rows)
                )
                payload = {"command": command, "machine": info}
                payload.update(settings=vars(args), results=rows)
                args.out.with_suffix(".json").write_text(
                    json.dumps(payload, indent=2, default=str)
                )
    print(approx_table(rows), flush=True)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10000, 50000, 100000])
    parser.add_argument("--dim", type=int, default=32)
    parser.add_argument("--k", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--threads",
        nargs="+",
        default=["default"],
        help="thread settings to run, each 'default' (every library's own) or a "
        "count for torch, faiss and BLAS alike, e.g. --threads default 1",
    )
    parser.add_argument(
        "--skip-sklearn-above",
        type=int,
        default=None,
        metavar="N",
        help="leave scikit-learn out for sizes above N (it is slow and heavy)",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help="write OUT.md and OUT.json, e.g. benchmarks/results/graph_build",
    )
    parser.add_argument(
        "--approximate",
        action="store_true",
        help="compare the exact and faiss HNSW backends of cosine_topk instead",
    )
    parser.add_argument(
        "--approx-only-sizes",
        type=int,
        nargs="*",
        default=[],
        metavar="N",
        help="with --approximate: sizes at which only the approximate graph is "
        "built, its recall checked on --recall-sample rows",
    )
    parser.add_argument("--recall-sample", type=int, default=2000)
    return parser.parse_args(argv)


def _thread_setting(value: str) -> int | None:
    return None if value == "default" else int(value)


def main(argv: list[str]) -> None:
    args = parse_args(argv)
    command = command_line("neighbors.py build", argv)
    if args.approximate:
        main_approximate(args, command)
        return
    info = machine_info()
    sections = []
    with tempfile.TemporaryDirectory() as tmp:
        for setting in args.threads:
            threads = _thread_setting(setting)
            sizes = [bench_size(n, threads, args, Path(tmp)) for n in args.sizes]
            sections.append({"threads": threads, "sizes": sizes})
            print(f"threads: {setting}")
            print(time_table(sizes) + "\n" + memory_table(sizes), flush=True)
    info["loadavg_end"] = os.getloadavg()
    if args.out is not None:
        write_report(args.out, command, info, args, sections)
