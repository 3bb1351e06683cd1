"""The exact neighbour search on a CPU: faiss's exhaustive search against the tiles.

``cosine_topk`` without a ``chunk_size`` runs in faiss's exhaustive
inner-product search; with one, in the library's own tiled search (a tile of
similarities of ``chunk_size`` query rows at a time, each tile's top-k kept).
Both are timed on the same random unit rows (the best of ``--repeats``
alternating runs, one process), and their neighbour lists compared: the table
gives the share of query rows whose lists are equal (1 but for float rounding
in near-ties). The tile size is the one ``chunk_size=None`` chose before (32 MB).
``chunk_size=None`` runs faiss from 5,000 base rows or 64 columns: keep
``--dims`` at 64 or more to time faiss at every size (the table is where
those thresholds come from, ``docs/decisions/neighbor_search.md``).

    python benchmarks/neighbors.py exact --sizes 3750:3400 18500:16700 20000:90000
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch

from autoglm_graph import cosine_topk
from benchmarks._lib.common import command_line, cpu_name, to_markdown, write_record

#: The tile that the tiled search chose by itself before faiss served it, in bytes.
TILE_BYTES = 32 * 2**20


def compare(n_queries: int, n_base: int, dim: int, repeats: int) -> dict:
    """Seconds of both searches of ``n_queries`` rows among ``n_base`` rows."""
    gen = torch.Generator().manual_seed(0)
    queries = torch.randn(n_queries, dim, generator=gen)
    base = torch.randn(n_base, dim, generator=gen)
    chunk = max(1, TILE_BYTES // (4 * n_base))
    seconds = {"faiss": [], "tiled": []}
    graphs = {}
    for chunk_size in (None, chunk):  # untimed: faiss's import, first calls
        cosine_topk(queries[:64], base, n_neighbors=16, chunk_size=chunk_size)
    for _ in range(repeats):
        for name, chunk_size in (("faiss", None), ("tiled", chunk)):
            start = time.perf_counter()
            graphs[name] = cosine_topk(
                queries, base, n_neighbors=16, chunk_size=chunk_size
            )
            seconds[name].append(time.perf_counter() - start)
    fast, tiled = min(seconds["faiss"]), min(seconds["tiled"])
    same = (graphs["faiss"].indices == graphs["tiled"].indices).all(dim=1)
    return {
        "queries": n_queries,
        "base rows": n_base,
        "d": dim,
        "faiss s": round(fast, 3),
        "tiled s": round(tiled, 3),
        "faiss / tiled": round(fast / tiled, 2),
        "equal lists": round(float(same.float().mean()), 4),
    }


def main(argv: list[str]) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--sizes",
        nargs="+",
        default=["3750:3400", "18500:16700", "20000:90000"],
        help="QUERIES:BASE pairs",
    )
    parser.add_argument("--dims", nargs="+", type=int, default=[64])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, default=None, help="write <out>.md")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    rows = []
    for size in args.sizes:
        n_queries, n_base = (int(part) for part in size.split(":"))
        for dim in args.dims:
            rows.append(compare(n_queries, n_base, dim, args.repeats))
            print(rows[-1], flush=True)
    command = command_line("neighbors.py exact", argv)
    write_record(
        "Exact neighbour search: faiss's exhaustive search against the tiles",
        command,
        f"Machine: {cpu_name()}, {args.threads} torch thread(s), k = 16.",
        [to_markdown(rows)],
        args.out,
    )
    return rows
