"""The default Optuna search space of the graph GLM estimators."""

from __future__ import annotations

from optuna.distributions import (
    BaseDistribution,
    CategoricalDistribution,
    FloatDistribution,
    IntDistribution,
)


def default_search_space(family: str | None = None) -> dict[str, BaseDistribution]:
    """Optuna distributions over the hyperparameters that matter most.

    ``hidden_channels`` moves in multiples of 16 and ``heads`` in {1, 2, 4}, so
    every combination is valid (the heads divide the width).

    Parameters
    ----------
    family : str or None, default=None
        The estimator's family; ``"tweedie"`` adds its ``power``.

    Returns
    -------
    dict of str to optuna.distributions.BaseDistribution
        Keyed by estimator parameter name.
    """
    space: dict[str, BaseDistribution] = {
        "threshold": FloatDistribution(-0.2, 0.6),
        "n_neighbors": IntDistribution(4, 48, log=True),
        "graph_space": CategoricalDistribution(["embedding", "input"]),
        "graph_refresh": IntDistribution(2, 30, log=True),
        "hidden_channels": IntDistribution(16, 128, step=16),
        "heads": CategoricalDistribution([1, 2, 4]),
        "num_layers": IntDistribution(1, 3),
        "dropout": FloatDistribution(0.0, 0.4),
        "learning_rate": FloatDistribution(3e-4, 3e-2, log=True),
        "local_penalty": FloatDistribution(1e-5, 1e-1, log=True),
        "use_neighbor_targets": CategoricalDistribution([True, False]),
        # The encoding that helps depends on the data
        # (docs/decisions/numeric_embedding.md).
        "numeric_embedding": CategoricalDistribution(["piecewise_linear", "linear"]),
    }
    if family == "tweedie" or getattr(family, "name", None) == "tweedie":
        space["power"] = FloatDistribution(1.05, 1.95)
    return space
