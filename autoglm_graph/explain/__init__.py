"""Reading a fitted model: intervals on the per-row coefficients, the
heterogeneity test, factor tables of tariffs and the plots. Takes fitted estimators
as arguments (it imports none); may import ``glm``, ``network``, ``neighbors``,
``preprocessing``, ``utils`` and ``policy``.

The names below are this area's public face; its modules load at a name's first
use (:func:`autoglm_graph.utils.lazy_exports`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..utils import lazy_exports

#: Public name -> the module of this area that defines it.
_EXPORTS = {
    "IntervalSettings": "intervals",
    "check_interval_members": "intervals",
    "check_interval_settings": "intervals",
    "estimate_interval_bias": "intervals",
    "factor_table": "tariffs",
    "fit_interval_members": "intervals",
    "fit_intervals": "intervals",
    "heterogeneity_test": "heterogeneity",
    "local_coef_interval": "intervals",
    "plot_coefficient_map": "plotting",
    "plot_history": "plotting",
    "plot_local_coef": "plotting",
    "plot_neighborhood": "plotting",
    "plot_param_importances": "plotting",
    "plot_search_history": "plotting",
    "plot_term": "plotting",
    "settings_from_fields": "intervals",
}
__all__ = [
    "IntervalSettings",
    "check_interval_members",
    "check_interval_settings",
    "estimate_interval_bias",
    "factor_table",
    "fit_interval_members",
    "fit_intervals",
    "heterogeneity_test",
    "local_coef_interval",
    "plot_coefficient_map",
    "plot_history",
    "plot_local_coef",
    "plot_neighborhood",
    "plot_param_importances",
    "plot_search_history",
    "plot_term",
    "settings_from_fields",
]
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

if TYPE_CHECKING:  # static analysers (and import-linter) see the names
    from .heterogeneity import heterogeneity_test
    from .intervals import (
        IntervalSettings,
        check_interval_members,
        check_interval_settings,
        estimate_interval_bias,
        fit_interval_members,
        fit_intervals,
        local_coef_interval,
        settings_from_fields,
    )
    from .plotting import (
        plot_coefficient_map,
        plot_history,
        plot_local_coef,
        plot_neighborhood,
        plot_param_importances,
        plot_search_history,
        plot_term,
    )
    from .tariffs import factor_table
