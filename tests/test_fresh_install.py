"""The README's two commands pass in a fresh virtual environment (#16; slow).

A copy of this checkout (tracked and untracked, not ignored files) gets a new
``python -m venv`` without system site-packages; the README's commands, read
from README.md, run verbatim in it with the environment's ``bin`` first on the
PATH, as after ``source .venv/bin/activate``. pip's cache is shared with the
machine's, so torch's wheel is not downloaded again; nothing else is reused.
The second command runs the whole default suite: this test takes minutes.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest
from test_readme import ROOT, readme_fresh_machine_commands

# Per command; each took minutes on the 2-core CPU (install: pip's cache helps).
TIMEOUT_S = 3600


def _copy_checkout(dest: Path) -> None:
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.decode()
    for name in filter(None, listed.split("\0")):
        source = ROOT / name
        if source.is_file():  # listed but deleted in the work tree: skip
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / name)


def _venv_env(venv: Path) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYTEST_ADDOPTS")
        and not k.startswith(("PYTEST_", "PYENV_VERSION"))
    }
    env["VIRTUAL_ENV"] = str(venv)
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env["MPLBACKEND"] = "Agg"
    env.setdefault("OMP_NUM_THREADS", "1")
    return env


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("git") is None, reason="needs git to list files")
def test_readme_commands_in_a_fresh_venv(tmp_path):
    install, run_tests = readme_fresh_machine_commands()
    checkout = tmp_path / "autoglm_graph"
    _copy_checkout(checkout)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    env = _venv_env(venv)
    timings = {}
    for command in (install, run_tests):
        start = time.perf_counter()
        result = subprocess.run(
            ["bash", "-c", command],
            cwd=checkout,
            env=env,
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S,
            check=False,
        )
        timings[command] = time.perf_counter() - start
        assert result.returncode == 0, (
            f"{command!r} exited with {result.returncode}:\n"
            f"{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
        )
    # The commands used the fresh environment, not the one running this test.
    # Asked from an empty folder: in tmp_path, the checkout's folder (named
    # autoglm_graph, no __init__.py) would be imported as a namespace package
    # ahead of an editable install that works through an import hook.
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    where = subprocess.run(
        ["bash", "-c", "python -c 'import autoglm_graph, sys; print(sys.prefix); "
         "print(autoglm_graph.__file__)'"],
        cwd=elsewhere, env=env, capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    assert Path(where[0]) == venv
    assert Path(where[1]).is_relative_to(checkout)
    print({command: f"{seconds:.0f} s" for command, seconds in timings.items()})


def _run(args: list[str], cwd: Path, env: dict[str, str] | None = None) -> str:
    result = subprocess.run(
        args, cwd=cwd, env=env, capture_output=True, text=True,
        timeout=TIMEOUT_S, check=False,
    )  # fmt: skip
    assert result.returncode == 0, (
        f"{args} exited with {result.returncode}:\n"
        f"{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    )
    return result.stdout


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("git") is None, reason="needs git to list files")
def test_wheel_in_a_fresh_venv(tmp_path):
    """The sdist and wheel build, pass ``twine check``, and the wheel alone works.

    The wheel is installed in a new virtual environment (a CPU torch first) and
    used from an empty folder: it imports, fits the quickstart, and the
    ``autoglm-graph`` command answers ``--help``.
    """
    pytest.importorskip("build", reason="needs the release extra (build, twine)")
    pytest.importorskip("twine", reason="needs the release extra (build, twine)")
    checkout = tmp_path / "autoglm_graph"
    _copy_checkout(checkout)
    dist = tmp_path / "dist"
    # The sdist first, then the wheel from it: a file missing from the sdist fails.
    _run([sys.executable, "-m", "build", "--outdir", str(dist)], cwd=checkout)
    wheels, sdists = sorted(dist.glob("*.whl")), sorted(dist.glob("*.tar.gz"))
    assert len(wheels) == 1 and len(sdists) == 1, sorted(dist.iterdir())
    files = [str(path) for path in (*wheels, *sdists)]
    _run([sys.executable, "-m", "twine", "check", "--strict", *files], cwd=tmp_path)
    with zipfile.ZipFile(wheels[0]) as wheel:
        names = set(wheel.namelist())
    assert "autoglm_graph/py.typed" in names
    assert "autoglm_graph/datasets/__init__.py" in names
    assert any(n.endswith("entry_points.txt") for n in names)

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    env = _venv_env(venv)
    elsewhere = tmp_path / "elsewhere"  # no source tree in sight
    elsewhere.mkdir()
    # A CPU torch first: the wheel's bare torch requirement pulls a CUDA build.
    _run(["pip", "install", "torch==2.13.0"], cwd=elsewhere, env=env)
    _run(["pip", "install", str(wheels[0])], cwd=elsewhere, env=env)
    where = "import autoglm_graph; print(autoglm_graph.__file__)"
    where = _run(["python", "-c", where], cwd=elsewhere, env=env)
    assert Path(where.strip()).is_relative_to(venv), where
    shutil.copy2(ROOT / "examples" / "quickstart.py", elsewhere / "quickstart.py")
    assert "test" in _run(["python", "quickstart.py"], cwd=elsewhere, env=env)
    assert "usage" in _run(["autoglm-graph", "--help"], cwd=elsewhere, env=env)
