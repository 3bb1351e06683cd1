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


def test_the_gallery_shows_tariff_without_running_it() -> None:
    """sphinx-gallery does not catch SystemExit: tariff.py, which exits when
    its data is absent, would end the whole documentation build with status 0
    and no pages, so the gallery shows it without running it.
    """
    import re
    import runpy

    conf = runpy.run_path(str(EXAMPLES[0].parent.parent / "docs" / "conf.py"))
    gallery = conf["sphinx_gallery_conf"]
    run = [
        path
        for path in EXAMPLES
        if re.search(gallery["filename_pattern"], str(path))
        and not re.search(gallery["ignore_pattern"], str(path))
    ]
    assert run and "tariff.py" not in {path.name for path in run}
