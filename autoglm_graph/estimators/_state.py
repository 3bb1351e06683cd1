"""A fitted estimator's state, and the estimator built from one.

:func:`to_state` and :func:`from_state` are the estimators' ``to_state()`` and
``from_state(state)``: :mod:`autoglm_graph.persistence` writes a state to a
file and builds the loaded estimator from the state it reads, through
``from_state`` alone. A state is a dict:

``"estimator"``
    The class name.
``"params"``
    The constructor's parameters (``get_params(deep=False)``). An unfitted
    estimator's state holds these two only.
``"fitted"``
    The fitted attributes of :data:`FITTED` that the estimator has: plain
    data, arrays and the fitted parts (``family_``, ``preprocessor_``,
    ``global_glm_``, ``location_effect_``), each stored in a file its own way.
``"glm_terms"``
    The global GLM's terms (:class:`~autoglm_graph.glm.GLMTerms`).
``"train_index"``
    The training rows' labels (``explain`` reports them), or None.
``"network"``
    The :class:`~autoglm_graph.network.FittedNetwork`, or None.
``"interval_members"``
    The bootstrap members' states (``interval_members_``).

A state shares the estimator's objects (no copy).
"""

from __future__ import annotations

#: The fitted attributes a state carries as they are (those an estimator
#: has: ``classes_`` is a classifier's, ``best_epoch_`` a network's, ...).
FITTED = (
    "n_features_in_",
    "feature_names_in_",
    "feature_names_out_",
    "base_levels_",
    "classes_",
    "family_",
    "device_",
    "preprocessor_",
    "global_glm_",
    "splines_penalty_",
    "splines_scores_",
    "location_effect_",
    "location_report_",
    "is_global_only_",
    "global_only_reason_",
    "history_",
    "fit_times_",
    "n_iter_",
    "best_epoch_",
    "validation_gain_",
    "validation_gain_se_",
    "balance_correction_",
    "offset_used_",
    "offset_range_",
    "interval_bias_",
    "interval_cov_",
    "glm_statistics_",
)


def to_state(estimator) -> dict:
    """The state of ``estimator`` (see the module's docstring)."""
    state = {
        "estimator": type(estimator).__name__,
        "params": estimator.get_params(deep=False),
    }
    if not hasattr(estimator, "global_glm_"):
        return state  # unfitted: its parameters
    state["fitted"] = {
        name: getattr(estimator, name) for name in FITTED if hasattr(estimator, name)
    }
    state["glm_terms"] = estimator.predictor().glm_terms
    state["train_index"] = getattr(estimator, "_train_index", None)
    state["network"] = getattr(estimator, "_fitted", None)
    members = getattr(estimator, "interval_members_", None) or []
    state["interval_members"] = [member.to_state() for member in members]
    return state


def from_state(cls, state: dict):
    """The estimator of class ``cls`` that ``state`` describes: constructed
    from its parameters, validated as ``fit`` validates them, then given the
    fitted state, if any."""
    model = cls(**state["params"])
    model._validate_params()
    fitted = state.get("fitted")
    if fitted is None:
        return model
    unknown = sorted(set(fitted) - set(FITTED))
    if unknown:
        raise ValueError(f"Unknown fitted attribute(s): {', '.join(unknown)}.")
    for name, value in fitted.items():
        setattr(model, name, value)
    network = state["network"]
    model._terms = state["glm_terms"]
    model._train_index = state["train_index"]
    model._fitted = network
    model.network_ = None if network is None else network.net
    model._validation_positions = None  # not kept: only a search reads it
    model._set_global_coefficients(model.global_glm_)
    model.interval_members_ = [
        cls.from_state(member) for member in state.get("interval_members", [])
    ]
    return model
