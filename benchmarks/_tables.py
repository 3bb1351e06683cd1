"""A markdown table from a list of flat dicts (shared by the small benchmarks)."""

from __future__ import annotations


def to_markdown(rows: list[dict]) -> str:
    """One column per key of the first row, one line per row."""
    keys = list(rows[0])
    lines = ["| " + " | ".join(keys) + " |", "|" + "---|" * len(keys)]
    lines += ["| " + " | ".join(str(r[k]) for k in keys) + " |" for r in rows]
    return "\n".join(lines)
