"""The global GLM: the families and links, the exact solver, the terms
(treatment coding, formulas, splines) and its inference tables (``coef_table``,
``wald_test_terms``, ``glm_summary``; the ``GLMStatistics`` a fit keeps for
them). May import ``preprocessing``, ``utils`` and ``policy``; no torch module
at import.

The names below are this area's public face; its modules load at a name's first
use (:func:`autoglm_graph.utils.lazy_exports`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..utils import lazy_exports

#: Public name -> the module of this area that defines it.
_EXPORTS = {
    "CATEGORICAL_CODINGS": "_terms",
    "FAMILIES": "families",
    "Family": "_family",
    "FormulaDesign": "_formula",
    "GLMStatistics": "_statistics",
    "GLMSummary": "_summary",
    "GLMTerms": "_terms",
    "GlobalGLM": "_solver",
    "NegativeBinomialFamily": "families",
    "SPLINES_LOCAL": "_splines",
    "SplineDesign": "_splines",
    "balance_glm": "_solver",
    "check_formula": "_formula",
    "check_splines": "_splines",
    "choose_columns": "_terms",
    "choose_penalty": "_splines",
    "coef_table": "_inference",
    "encode_target": "_inference",
    "fit_global_glm": "_solver",
    "fit_negative_binomial": "_solver",
    "get_family": "families",
    "glm_statistics": "_statistics",
    "glm_summary": "_summary",
    "left_side_columns": "_formula",
    "local_coef_summary": "_inference",
    "split_target": "_formula",
    "wald_test_terms": "_inference",
}
__all__ = [
    "CATEGORICAL_CODINGS",
    "FAMILIES",
    "SPLINES_LOCAL",
    "Family",
    "FormulaDesign",
    "GLMStatistics",
    "GLMSummary",
    "GLMTerms",
    "GlobalGLM",
    "NegativeBinomialFamily",
    "SplineDesign",
    "balance_glm",
    "check_formula",
    "check_splines",
    "choose_columns",
    "choose_penalty",
    "coef_table",
    "encode_target",
    "fit_global_glm",
    "fit_negative_binomial",
    "get_family",
    "glm_statistics",
    "glm_summary",
    "left_side_columns",
    "local_coef_summary",
    "split_target",
    "wald_test_terms",
]
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

if TYPE_CHECKING:  # static analysers (and import-linter) see the names
    from ._family import Family
    from ._formula import (
        FormulaDesign,
        check_formula,
        left_side_columns,
        split_target,
    )
    from ._inference import (
        coef_table,
        encode_target,
        local_coef_summary,
        wald_test_terms,
    )
    from ._solver import (
        GlobalGLM,
        balance_glm,
        fit_global_glm,
        fit_negative_binomial,
    )
    from ._splines import SPLINES_LOCAL, SplineDesign, check_splines, choose_penalty
    from ._statistics import GLMStatistics, glm_statistics
    from ._summary import GLMSummary, glm_summary
    from ._terms import CATEGORICAL_CODINGS, GLMTerms, choose_columns
    from .families import FAMILIES, NegativeBinomialFamily, get_family
