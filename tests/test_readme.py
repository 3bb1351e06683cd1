"""Every code block of README.md runs as written (#16), and so do the docs'.

The Python blocks run in order, as one program, in a fresh interpreter in a
scratch folder (they write ``model/``). The Markdown pages of the documentation
(``docs/``) run the same way, in the order of their table of contents, in a
slow test that skips the search block (30 Optuna trials, minutes). Bash
blocks are checked without running them: ``bash -n``, the ``autoglm-graph``
lines against the command's parser, the extras and scripts they name against
this checkout. ``tests/test_fresh_install.py`` runs the install and test
commands for real, and the wheel.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

import autoglm_graph
from autoglm_graph.cli import build_parser

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = ROOT / "docs"
# The documentation's Markdown pages with Python blocks, in reading order.
DOC_PAGES = (
    "getting_started.md",
    "user_guide/families.md",
    "user_guide/glm_features.md",
    "user_guide/interpretation.md",
    "user_guide/insurance.md",
    "user_guide/search.md",
    "user_guide/saving.md",
    "user_guide/scale.md",
)
FENCE = re.compile(r"^```(\w+)\n(.*?)^```$", re.MULTILINE | re.DOTALL)
# Blocks too slow for the default run: they are run by the slow test.
SLOW_MARKERS = ("GraphGLMSearchCV(",)


def readme_blocks(language: str, text: str | None = None) -> list[str]:
    """The code blocks of README.md in ``language``, in order."""
    text = README.read_text(encoding="utf-8") if text is None else text
    return [code for lang, code in FENCE.findall(text) if lang == language]


def _run_python(blocks: list[str], cwd: Path) -> subprocess.CompletedProcess:
    script = "\n".join(f"# --- README block {i}\n{b}" for i, b in enumerate(blocks))
    (cwd / "readme_script.py").write_text(script, encoding="utf-8")
    env = {**os.environ, "MPLBACKEND": "Agg", "OMP_NUM_THREADS": "1"}
    return subprocess.run(
        [sys.executable, "readme_script.py"],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
        check=False,
    )


def test_readme_has_the_blocks():
    python = readme_blocks("python")
    assert len(python) >= 3
    assert any("coef_table" in b for b in python)
    assert readme_blocks("bash")
    assert readme_blocks("python", "x\n```python\na = 1\n```\n") == ["a = 1\n"]


def test_python_blocks_run(tmp_path):
    blocks = [
        b for b in readme_blocks("python") if not any(m in b for m in SLOW_MARKERS)
    ]
    result = _run_python(blocks, tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert (tmp_path / "model").is_dir()  # the save block ran


def _doc_blocks(language: str) -> list[str]:
    return [
        block
        for page in DOC_PAGES
        for block in readme_blocks(language, (DOCS / page).read_text(encoding="utf-8"))
    ]


@pytest.mark.slow
def test_docs_python_blocks_run(tmp_path):
    blocks = [b for b in _doc_blocks("python") if not any(m in b for m in SLOW_MARKERS)]
    assert any("coef_table" in b for b in blocks)
    result = _run_python(blocks, tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert (tmp_path / "model").is_dir()


def test_api_reference_lists_every_public_name():
    """docs/api/index.rst has an autosummary entry for each name of __all__."""
    api = (DOCS / "api" / "index.rst").read_text(encoding="utf-8")
    listed = set(re.findall(r"^   (\w+)$", api, re.MULTILINE))
    missing = set(autoglm_graph.__all__) - listed - {"__version__"}
    assert not missing, f"not in docs/api/index.rst: {sorted(missing)}"


def _commands(block: str) -> list[list[str]]:
    """Simple commands of a bash block: lines joined at ``\\``, split at ``&&``."""
    commands = []
    for line in block.replace("\\\n", " ").splitlines():
        line = line.split(" #", 1)[0].strip()
        for part in filter(None, (p.strip() for p in line.split("&&"))):
            commands.append(shlex.split(part))
    return commands


def _extras() -> set[str]:
    tomllib = pytest.importorskip("tomllib")  # Python >= 3.11
    with open(ROOT / "pyproject.toml", "rb") as f:
        return set(tomllib.load(f)["project"]["optional-dependencies"])


BASH_BLOCKS = readme_blocks("bash") + _doc_blocks("bash")


@pytest.mark.parametrize("index", range(len(BASH_BLOCKS)))
def test_bash_blocks_are_valid(index):
    block = BASH_BLOCKS[index]
    check = subprocess.run(["bash", "-n"], input=block, capture_output=True, text=True)
    assert check.returncode == 0, check.stderr
    parser = build_parser()
    for words in _commands(block):
        if words[0] == "autoglm-graph":
            parser.parse_args(words[1:])  # SystemExit(2) on an unknown option
        elif words[:2] == ["pip", "install"]:
            for word in words[2:]:
                if match := re.fullmatch(r"\.\[([\w,-]+)\]", word):
                    assert set(match.group(1).split(",")) <= _extras(), word
        elif words[0] == "python" and words[1].endswith(".py"):
            assert (ROOT / words[1]).is_file(), words[1]
        elif words[0] == "python":
            assert words[1] == "-m", words
        else:
            pytest.fail(f"README runs an unknown command: {words}")


def readme_fresh_machine_commands() -> list[str]:
    """The README's two commands for a fresh machine (install + quickstart, tests)."""
    text = README.read_text(encoding="utf-8")
    section = text.split("## Two commands for a fresh machine", 1)[1]
    section = section.split("\n## ", 1)[0]
    commands = [block.strip() for block in readme_blocks("bash", section)][:2]
    assert len(commands) == 2, section
    return commands


def test_ci_runs_the_readme_commands_first():
    lines = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    commands = [
        line
        for line in lines
        if line.strip() and not line.startswith(("#", "set ", "cd ", "[ $? "))
    ]
    assert commands[:2] == readme_fresh_machine_commands()
    assert commands[1] == "python -m pytest -q"
