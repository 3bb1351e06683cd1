"""The package's layout (docs/developers/index.md): areas with public faces.

Another area is reached through its face only: no module imports a private
module or an underscore name of another area; modules and functions stay
short; the estimators are composed of collaborators, not project mixins.
"""

from __future__ import annotations

import ast
from pathlib import Path

import autoglm_graph

PACKAGE = Path(__file__).resolve().parents[1] / "autoglm_graph"
#: The functions allowed over 80 lines, each for its reason: a flat parameter
#: list (scikit-learn's estimators), or a numpydoc docstring that alone is
#: about 80 lines (their bodies are under 30).
LONG_FUNCTIONS = {
    ("estimators/_base.py", "__init__"),
    ("estimators/_estimators.py", "__init__"),
    ("glm/_inference.py", "coef_table"),
    ("glm/_summary.py", "glm_summary"),
    ("datasets/_synthetic.py", "make_varying_coefficients"),
}


def _area(path: Path) -> str | None:
    parts = path.relative_to(PACKAGE).parts
    return parts[0] if len(parts) > 1 else None


def _imported(path: Path):
    """``(module, names)`` of each import of the package in ``path``."""
    package = path.relative_to(PACKAGE.parent).with_suffix("").parts[:-1]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level:
            base = package[: len(package) - node.level + 1]
            module = [*base, *(node.module.split(".") if node.module else [])]
            yield module, [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
            "autoglm_graph"
        ):
            yield node.module.split("."), [alias.name for alias in node.names]


def test_no_private_name_crosses_areas():
    crossing = []
    for path in sorted(PACKAGE.rglob("*.py")):
        own = _area(path)
        for module, names in _imported(path):
            target = module[1] if len(module) > 1 else None
            if target is None or target == own or not (PACKAGE / target).is_dir():
                continue
            private = [m for m in module[2:] if m.startswith("_")]
            private += [n for n in names if n.startswith("_") and n != "__version__"]
            if private:
                crossing.append(f"{path.relative_to(PACKAGE)}: {private}")
    assert crossing == []


def test_modules_and_functions_stay_short():
    long_modules, long_functions = [], set()
    for path in sorted(PACKAGE.rglob("*.py")):
        source = path.read_text(encoding="utf-8")
        if len(source.splitlines()) > 800:
            long_modules.append(str(path.relative_to(PACKAGE)))
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                if node.end_lineno - node.lineno + 1 > 80:
                    long_functions.add((str(path.relative_to(PACKAGE)), node.name))
    assert long_modules == []
    assert long_functions <= LONG_FUNCTIONS, long_functions - LONG_FUNCTIONS


def test_a_few_areas_and_modules_at_the_top():
    areas = [p.parent.name for p in PACKAGE.glob("*/__init__.py")]
    assert 4 <= len(set(areas) - {"datasets"}) <= 10
    assert len(list(PACKAGE.glob("*.py"))) <= 12


def test_estimators_are_composed_not_mixed_in():
    for cls in (autoglm_graph.GraphGLMRegressor, autoglm_graph.GraphGLMClassifier):
        ours = [c for c in cls.__mro__ if c.__module__.startswith("autoglm_graph")]
        assert [c.__name__ for c in ours] == [cls.__name__, "BaseGraphGLM"]
