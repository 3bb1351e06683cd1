"""Small helpers shared by the benchmark entry points."""

from __future__ import annotations

import math
import platform
import shlex
import sys
from pathlib import Path


def to_markdown(rows: list[dict]) -> str:
    """One column per key of the first row, one line per row."""
    keys = list(rows[0])
    lines = ["| " + " | ".join(keys) + " |", "|" + "---|" * len(keys)]
    lines += ["| " + " | ".join(str(r[k]) for k in keys) + " |" for r in rows]
    return "\n".join(lines)


def cpu_name() -> str:
    """The processor's model name (from /proc/cpuinfo where it exists)."""
    try:
        with open("/proc/cpuinfo") as f:
            return next(
                line.split(":", 1)[1].strip() for line in f if "model name" in line
            )
    except (OSError, StopIteration):
        return platform.processor() or platform.machine()


def write_record(
    title: str, command: str, machine: str, body: list[str], out: Path | None
) -> str:
    """A result of record: its title, the command that made it, the machine
    and the body (tables, summary lines); printed, and written to
    ``<out>.md`` when ``out`` is given."""
    text = "\n".join(
        [f"# {title}", "", f"Command: `{command}`", "", machine, "", *body, ""]
    )
    print(text)
    if out is not None:
        Path(out).with_suffix(".md").write_text(text)
    return text


def command_line(entry: str, argv: list[str]) -> str:
    """The command that made a record: ``python benchmarks/<entry> <argv>``."""
    return shlex.join(["python", *f"benchmarks/{entry}".split(), *argv])


def dispatch(argv: list[str] | None, parts: dict, default=None):
    """Run the part named by the first argument with the rest of them.

    Without a part's name the arguments go to ``default`` (when given).
    """
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv and argv[0] in parts:
        return parts[argv[0]](argv[1:])
    if default is None:
        raise SystemExit(f"expected one of {sorted(parts)} as the first argument")
    return default(argv)


def json_safe(value):
    """NaN and infinity become None (strict JSON), in nested dicts and lists."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(v) for v in value]
    return value
