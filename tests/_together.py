"""Child processes released at one moment, as a cluster scheduler starts workers.

Each child imports what it needs, says it is ready (a file) and waits for one
"go" file: the part under test then starts in all of them within a millisecond
or so. Shared by the storage race tests and the PostgreSQL sweep test.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

PRELUDE = """
import os, sys, time
ready, go = sys.argv[1], sys.argv[2]
{imports}
open(ready, "w").close()
while not os.path.exists(go):
    time.sleep(0.001)
{body}
"""


def start_together(
    folder: Path, n: int, imports: str, body: str, args=(), *, name: str = "child"
) -> list[subprocess.Popen]:
    """Start ``n`` children running ``imports`` then, all at once, ``body``;
    ``sys.argv[3:]`` is ``args``. Returns them running, released."""
    script = folder / f"{name}.py"
    script.write_text(
        PRELUDE.format(imports=textwrap.dedent(imports), body=textwrap.dedent(body))
    )
    go = folder / f"go-{name}"
    stamp = time.monotonic_ns()  # a later start in the same folder: new names
    ready = [folder / f"ready-{name}-{i}-{stamp}" for i in range(n)]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    children = [
        subprocess.Popen(
            [sys.executable, str(script), str(r), str(go), *map(str, args)],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        for r in ready
    ]
    deadline = time.monotonic() + 300
    while not all(r.exists() for r in ready):
        assert time.monotonic() < deadline, "children did not start"
        for child in children:
            assert child.poll() is None, child.stderr.read().decode()[-3000:]
        time.sleep(0.01)
    go.touch()
    return children


def outcomes(children: list[subprocess.Popen], timeout: float = 300) -> list:
    """Wait for each child; its (return code, last 3000 characters of stderr)."""
    out = []
    for child in children:
        _, err = child.communicate(timeout=timeout)
        out.append((child.returncode, err.decode()[-3000:]))
    return out
