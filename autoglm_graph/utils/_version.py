"""The installed package's version (what model files and checkpoints record)."""

from __future__ import annotations

import sys


def package_version() -> str:
    """``autoglm_graph.__version__``, read without importing the package's top
    (it is always imported before any of its modules), whose lazy table names
    every area."""
    return sys.modules["autoglm_graph"].__version__
