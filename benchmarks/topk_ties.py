"""What breaking ties by the lower training index costs the exact search.

``cosine_topk`` ranks equal similarities by the lower column (the rule that
makes a row's neighbours independent of the other rows of a call; see
``autoglm_graph._topk``). This times the search with that rule against the
same search with the plain ``torch.topk`` choice among ties, in one process,
one thread, interleaved repeats (fastest shown), on rows without duplicates and
on rows each repeated ``--copies`` times (every row then has ties).

    python benchmarks/topk_ties.py --rows 16000 --copies 40 --repeats 3
"""

from __future__ import annotations

import argparse
import functools
import time

import torch

from autoglm_graph import _topk
from autoglm_graph.graph import cosine_topk


def _timed(X: torch.Tensor, k: int, ties: bool) -> float:
    original = _topk._folded_topk
    if not ties:
        plain = functools.partial(original, lower_column_first=False)
        _topk._folded_topk = plain
    try:
        start = time.perf_counter()
        cosine_topk(X, n_neighbors=k)
        return time.perf_counter() - start
    finally:
        _topk._folded_topk = original


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=16000)
    parser.add_argument("--copies", type=int, default=40)
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    gen = torch.Generator().manual_seed(0)
    print("| rows | d | copies | plain top-k s | ties to the lower index s | ratio |")
    print("|---:|---:|---:|---:|---:|---:|")
    for d, copies in [(64, 1), (8, 1), (8, args.copies)]:
        X = torch.randn(args.rows // copies, d, generator=gen).repeat(copies, 1)
        times = {False: [], True: []}
        for _ in range(args.repeats):
            for ties in (False, True):
                times[ties].append(_timed(X, args.k, ties))
        plain, ours = min(times[False]), min(times[True])
        print(
            f"| {len(X)} | {d} | {copies} | {plain:.3f} | {ours:.3f} | "
            f"{ours / plain:.2f} |"
        )


if __name__ == "__main__":
    main()
