"""Every script in examples/ runs to the end (slow: run with ``-m slow``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = sorted((Path(__file__).resolve().parent.parent / "examples").glob("*.py"))
# Each example takes 20-45 s on an idle 2-core CPU; the margin is for a loaded
# machine (examples/search.py took over 180 s while a 1M-row fit ran beside it).
TIMEOUT_S = 600


@pytest.mark.slow
@pytest.mark.parametrize("script", EXAMPLES, ids=[p.name for p in EXAMPLES])
def test_example_runs(script: Path, tmp_path: Path) -> None:
    # In a scratch folder: files an example writes (temp dirs included) land there.
    env = {**os.environ, "MPLBACKEND": "Agg", "TMPDIR": str(tmp_path)}
    result = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        check=False,
    )
    assert result.returncode == 0, (
        f"{script.name} exited with {result.returncode}:\n{result.stderr[-3000:]}"
    )
    assert result.stdout.strip(), f"{script.name} printed nothing"
