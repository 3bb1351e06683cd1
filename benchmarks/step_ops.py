"""Where a training step's time goes, operator by operator (#13).

``torch.profiler`` inflates every operator of a training step (a step of
127 ms read 190-580 ms under it, with the element-wise kernels several times
their own time), so its shares mislead. Here each aten call of
``step_ab.make_step``'s full-batch step (forward, backward, fused AdamW) is
timed with a wall clock from a ``TorchDispatchMode``: about 10 % is added to
the step at 16.7k rows (40 % at 3.75k rows, where the calls are short), and
each operator keeps about its own time. The table gives the
step's milliseconds by operator (summed over its calls and shapes, the mean
over ``--repeats`` steps) and by kind:

- ``dense products``: ``mm``, and ``addmm`` on dense operands (the linear
  layers and the attention scores' ``[in, heads]`` products);
- ``sparse attention``: the CSR product and its transpose (``addmm`` with a
  sparse operand), the sampled product and the gathers of the attention
  values and logits (``index_select``, ``index_add_``);
- ``dropout masks``: the random bits and their comparison (``random_``,
  ``lt``);
- ``element-wise and other``: the rest (activations, layer norms, softmax,
  additions, products, reductions, the optimiser's update).

    python benchmarks/step_ops.py --sizes 3750 16704 --out benchmarks/results/step_ops
"""

from __future__ import annotations

import argparse
import collections
import shlex
import statistics
import sys
import time
from pathlib import Path

import torch
from torch.utils._python_dispatch import TorchDispatchMode

SPARSE_OPS = {"sparse_sampled_addmm", "index_select", "index_add_"}
DENSE_OPS = {"mm", "addmm"}
MASK_OPS = {"random_", "lt"}


def kind(name: str, args: tuple) -> str:
    """The kind of an aten call (see the module's docstring)."""
    tensors = [a for a in args if isinstance(a, torch.Tensor)]
    sparse = any(t.layout != torch.strided for t in tensors)
    if name in SPARSE_OPS or (name == "addmm" and sparse):
        return "sparse attention"
    if name in DENSE_OPS:
        return "dense products"
    if name in MASK_OPS:
        return "dropout masks"
    return "element-wise and other"


class OperatorTimer(TorchDispatchMode):
    """Wall-clock seconds of every aten call made inside it, by name and kind."""

    def __init__(self) -> None:
        super().__init__()
        self.seconds: dict[tuple[str, str], float] = collections.defaultdict(float)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        start = time.perf_counter()
        out = func(*args, **(kwargs or {}))
        name = func.overloadpacket.__name__
        self.seconds[(kind(name, args), name)] += time.perf_counter() - start
        return out


def profile_step(n: int, repeats: int) -> tuple[float, float, dict]:
    """(plain step s, timed step s, {(kind, op): s per step}) at ``n`` rows."""
    from step_ab import make_step

    import autoglm_graph

    step, _ = make_step(autoglm_graph, n, 12, 0)
    for _ in range(5):
        step()
    plain = statistics.median(step() for _ in range(repeats))
    timer = OperatorTimer()
    with timer:
        timed = statistics.mean(step() for _ in range(repeats))
    per_step = {key: s / repeats for key, s in timer.seconds.items()}
    return plain, timed, per_step


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[3750, 16704])
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--top", type=int, default=12, help="operators listed")
    parser.add_argument("--out", type=Path, default=None, help="write <out>.md")
    args = parser.parse_args(argv)
    from _common import cpu_name, to_markdown, write_record

    torch.set_num_threads(1)
    kinds, operators = [], []
    for n in args.sizes:
        plain, timed, per_step = profile_step(n, args.repeats)
        total = sum(per_step.values())
        by_kind = collections.defaultdict(float)
        for (k, _), s in per_step.items():
            by_kind[k] += s
        row = {"rows": n, "step ms": round(plain * 1e3, 1)}
        row["timed step ms"] = round(timed * 1e3, 1)
        for k, s in sorted(by_kind.items(), key=lambda item: -item[1]):
            row[k] = f"{s * 1e3:.1f} ({s / total:.0%})"
        kinds.append(row)
        top = sorted(per_step.items(), key=lambda item: -item[1])[: args.top]
        operators += [
            {"rows": n, "operator": op, "kind": k, "ms": round(s * 1e3, 2)}
            for (k, op), s in top
        ]
    keys = ["rows", "step ms", "timed step ms"]
    keys += sorted({k for row in kinds for k in row} - set(keys))
    kinds = [{k: row.get(k, "-") for k in keys} for row in kinds]
    write_record(
        "A training step's time by operator",
        "python benchmarks/step_ops.py " + shlex.join(argv or sys.argv[1:]),
        f"Machine: {cpu_name()}, one torch thread; `step_ab.make_step`'s network"
        " (12 features, dropout 0.1) on random lists of 16 neighbours.",
        [
            "By kind (ms per step, share of the timed operators):",
            "",
            to_markdown(kinds),
            "",
            f"The {args.top} costliest operators per size (ms per step):",
            "",
            to_markdown(operators),
        ],
        args.out,
    )
    return kinds


if __name__ == "__main__":
    main()
