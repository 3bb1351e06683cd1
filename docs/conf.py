"""Sphinx configuration of the autoglm_graph documentation.

Build: ``python -m sphinx -W --keep-going -b html docs docs/_build/html`` (the
``docs`` extra). sphinx + numpydoc + sphinx-gallery, as scikit-learn and glum:
the docstrings are numpydoc already and the examples stay plain scripts that
the build runs for their output and figures.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the checkout's package, installed or not

import autoglm_graph  # noqa: E402

project = "autoglm_graph"
author = "autoglm_graph developers"
copyright = "autoglm_graph developers"
release = version = autoglm_graph.__version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "sphinx.ext.viewcode",
    "numpydoc",
    "sphinx_gallery.gen_gallery",
    "myst_parser",
]

source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
templates_path = ["_templates"]
# decisions/README.md is the Decisions page's text, included by decisions.md.
exclude_patterns = ["_build", "decisions/README.md", "**.ipynb_checkpoints"]

# API reference: one page per public name (api.rst), members listed by autodoc.
autosummary_generate = True
autodoc_default_options = {"members": True}
autodoc_typehints = "none"  # the numpydoc sections say the types
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False

# Markdown pages: $...$ maths, ::: fences; headings get anchors for links.
myst_enable_extensions = ["dollarmath", "colon_fence"]
myst_heading_anchors = 3

# The gallery: every script of examples/ runs at build time (each takes
# seconds); AUTOGLM_DOCS_NO_GALLERY=1 builds the pages without running them.
# tariff.py is shown, not run: it needs the insurance data beside the checkout,
# and without it calls sys.exit(0), which sphinx-gallery does not catch (the
# SystemExit ends the whole build, with status 0 and no pages).
sphinx_gallery_conf = {
    "examples_dirs": str(ROOT / "examples"),
    "gallery_dirs": "auto_examples",
    "filename_pattern": r"/(?!tariff\.py$)[a-z_]+\.py$",
    "ignore_pattern": r"/_",
    "abort_on_example_error": True,
    "plot_gallery": "False" if os.environ.get("AUTOGLM_DOCS_NO_GALLERY") else "True",
    "backreferences_dir": "gen_modules/backreferences",
    "doc_module": ("autoglm_graph",),
    "download_all_examples": False,
    "show_memory": False,
    "min_reported_time": 1,
    "write_computation_times": False,
}

html_theme = "pydata_sphinx_theme"
html_title = "autoglm_graph"
html_theme_options = {
    "navigation_with_keys": False,
    "show_toc_level": 2,
    "secondary_sidebar_items": ["page-toc"],
}
html_static_path: list[str] = []
html_show_sourcelink = False


def _skip_member(app, what, name, obj, skip, options):
    # What the classes inherit from scikit-learn (get_params, set_output,
    # set_{method}_request, ...) is documented there.
    if name.startswith("set_") and name.endswith("_request"):
        return True
    if getattr(obj, "__module__", None) and obj.__module__.startswith("sklearn"):
        return True
    return skip


def setup(app):
    app.connect("autodoc-skip-member", _skip_member)
