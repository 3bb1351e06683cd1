"""Checks of a saved model's configuration against its tensors, before
anything is built from them (see :mod:`autoglm_graph.persistence`)."""

from __future__ import annotations

import dataclasses
import functools
import itertools
import math
from typing import TYPE_CHECKING

from ..glm import FAMILIES, Family
from ..utils import MESSAGE_PASSING
from ._container import TENSORS_NAME, ModelFileError, _int, _number

if TYPE_CHECKING:
    import torch

# The network's modules (torch) are imported by the checks of a file with a
# network only: a GLM-only model loads without them.

#: Largest ``num_layers`` and ``heads`` a file may ask for (the tensors bound
#: the widths; these bound the modules built before the tensors are checked).
MAX_LAYERS = 256

#: The location effect's arrays, stored as ``location.<name>`` tensors.
LOCATION_ARRAYS = ("points", "counts", "score", "info")

#: The arrays of the global GLM's kept figures (``GLMStatistics``), stored as
#: ``glm_statistics.<name>`` tensors of shape ``(n_coef, n_coef)``.
STATISTICS_ARRAYS = ("fisher", "sandwich", "sandwich_frequency")


@functools.cache
def trainer_keys() -> frozenset[str]:
    """The settings of a fitted network's "trainer" record besides "graph"."""
    from ..network import Trainer

    return frozenset({"n_outputs", "precision", *Trainer.SETTINGS})


@functools.cache
def _row_fields() -> frozenset[str]:
    """The training rows' fields a file may store."""
    from ..network import RowData

    return frozenset(f.name for f in dataclasses.fields(RowData))


def family_from_json(spec) -> Family:
    """A family from the fixed registry; its parameters must be plain numbers."""
    if not isinstance(spec, dict) or not isinstance(spec.get("name"), str):
        raise ModelFileError(
            f"A family must be {{'name': ..., 'params': ...}}; got {spec!r}."
        )
    name, params = spec["name"], spec.get("params", {})
    if name not in FAMILIES:
        raise ModelFileError(
            f"Unknown family {name!r}; expected one of {', '.join(sorted(FAMILIES))}."
        )
    if not isinstance(params, dict) or not all(
        isinstance(v, (int, float)) and not isinstance(v, bool) for v in params.values()
    ):
        raise ModelFileError(f"Family parameters must be numbers; got {params!r}.")
    try:
        family = FAMILIES[name](**params)
    except TypeError as exc:
        raise ModelFileError(f"Bad parameters of the {name} family: {exc}") from exc
    return family


def expected_shapes(
    fitted: dict, tensors: dict[str, torch.Tensor], family: Family, model
) -> dict[str, tuple]:
    """Name -> shape (None: any size) of every tensor the configuration implies."""
    p = len(fitted["feature_names_out_"])
    coef = tensors.get("global_glm.coef")
    n_outputs = 1 if coef is None or coef.ndim != 2 else int(coef.shape[0])
    if family.multi_output != (n_outputs > 1):
        raise ModelFileError(
            f"The {family.name} family does not fit {n_outputs} linear predictors."
        )
    expected: dict[str, tuple] = {
        "global_glm.coef": (n_outputs, p),
        "global_glm.intercept": (n_outputs,),
    }
    for key in ("classes_", "train_index"):
        spec = fitted.get(key)
        if isinstance(spec, dict) and "tensor" in spec:
            if spec["tensor"] != key:
                raise ModelFileError(f"{key} must be stored in the tensor {key!r}.")
            expected[key] = (None,)
    expected.update(_location_shapes(fitted.get("location_effect"), tensors))
    if "glm_statistics" in fitted:  # files written before it lack it
        n_coef = n_table_coef(fitted, n_outputs, model.fit_intercept)
        for name in STATISTICS_ARRAYS:
            expected[f"glm_statistics.{name}"] = (n_coef, n_coef)
    network = fitted.get("network")
    if network is not None:
        expected.update(_network_shapes(fitted, network, tensors, model, n_outputs))
    return expected


def n_table_coef(fitted: dict, n_outputs: int, fit_intercept: bool) -> int:
    """The rows of the coefficient table: intercept and terms per output,
    the multinomial's outputs but the reference class."""
    per_output = len(fitted["feature_names_out_"]) + int(fit_intercept)
    return per_output * (1 if n_outputs == 1 else n_outputs - 1)


def _location_shapes(location, tensors: dict[str, torch.Tensor]) -> dict:
    """The location effect's arrays (none without it)."""
    if location is None:
        return {}
    if not isinstance(location, dict) or not isinstance(location.get("columns"), list):
        raise ModelFileError("fitted.location_effect must be a JSON object.")
    points = tensors.get("location.points")
    n_points = None if points is None or points.ndim != 2 else points.shape[0]
    expected = {"location.points": (n_points, len(location["columns"]))}
    for name in LOCATION_ARRAYS[1:]:
        expected[f"location.{name}"] = (n_points,)
    return expected


def _network_shapes(
    fitted: dict, network, tensors: dict[str, torch.Tensor], model, n_outputs: int
) -> dict:
    """The fitted network's tensors, its configuration checked against the
    estimator's parameters, the design and the GLM's terms."""
    if not isinstance(network, dict):
        raise ModelFileError("fitted.network must be a JSON object.")
    _check_net_config(network["net"], model, tensors)
    spec = checked_net_spec(network["net"])
    p = len(fitted["feature_names_out_"])
    terms = fitted.get("glm_terms")
    n_columns = terms.get("n_columns", p) if isinstance(terms, dict) else p
    # The base levels the network varies besides the GLM's terms (io checks them).
    bases = terms.get("network_bases", []) if isinstance(terms, dict) else []
    n_bases = len(bases) if isinstance(bases, list) else 0
    if (
        spec["in_channels"] != n_columns
        or spec["out_channels"] != (p + n_bases + 1) * n_outputs
    ):
        raise ModelFileError(
            f"The network maps {spec['in_channels']} -> {spec['out_channels']} "
            f"channels; the design has {n_columns} features, the GLM {p} terms "
            f"(the network {n_bases} base levels more) and {n_outputs} output(s)."
        )
    width = network.get("design_width", p)
    if width != p:
        raise ModelFileError(
            f"network.design_width must be the GLM's {p} terms; got {width!r}."
        )
    from ..network import FittedNetwork

    _int(network["n_train"], "n_train")
    present = network["train_rows"]
    required = set(FittedNetwork.REQUIRED_ROWS)
    if spec["target_channels"]:
        required.add("targets")
    if (
        not isinstance(present, list)
        or not required <= set(present)
        or not set(present) <= _row_fields()
    ):
        raise ModelFileError(f"train_rows lists {present!r}.")
    return FittedNetwork.expected_shapes({**network, "net": spec})


def check_tensors(tensors: dict[str, torch.Tensor], expected: dict) -> None:
    missing = sorted(set(expected) - set(tensors))
    extra = sorted(set(tensors) - set(expected))
    if missing or extra:
        raise ModelFileError(
            f"{TENSORS_NAME} does not match model.json: missing "
            f"{missing or 'none'}, unexpected {extra or 'none'}."
        )
    for key, shape in expected.items():
        got = tuple(tensors[key].shape)
        if len(got) != len(shape) or any(
            s is not None and s != g for s, g in zip(shape, got, strict=True)
        ):
            raise ModelFileError(
                f"The tensor {key!r} has shape {got}; the configuration implies "
                f"{tuple('*' if s is None else s for s in shape)}."
            )
    for key in ("train_positions", "train_rows.group"):
        if key in tensors and tensors[key].is_floating_point():
            raise ModelFileError(f"The tensor {key!r} must hold integers.")


def _check_net_config(spec, model, tensors: dict[str, torch.Tensor]) -> None:
    """The network's configuration is the estimator's (as ``fit`` builds it)
    and fits the stored tensors, checked before any module is built: a file
    cannot make loading build a huge network."""
    if not isinstance(spec, dict):
        raise ModelFileError("network.net must be a JSON object.")
    for key in ("hidden_channels", "heads", "num_layers", "conv", "dropout"):
        if spec.get(key) != getattr(model, key) or type(spec.get(key)) is bool:
            raise ModelFileError(
                f"The network's {key}={spec.get(key)!r} is not the estimator's "
                f"{key}={getattr(model, key)!r}."
            )
    if spec.get("message_passing", model.message_passing) != model.message_passing:
        raise ModelFileError(
            "The network's message_passing is not the estimator's "
            f"{model.message_passing!r}."
        )
    _int(spec["num_layers"], "num_layers", low=1, high=MAX_LAYERS)
    layers = sum(key.startswith("source_states.layers.") for key in tensors)
    pooled = tensors.get("source_states.pooled")
    if (
        layers != spec["num_layers"]
        or pooled is None
        or (tuple(pooled.shape) != (spec["hidden_channels"],))
    ):
        raise ModelFileError(
            f"The network (num_layers={spec['num_layers']}, hidden_channels="
            f"{spec['hidden_channels']}) does not fit the shapes of the stored "
            f"source states ({layers} layers, pooled of shape "
            f"{None if pooled is None else tuple(pooled.shape)})."
        )
    hidden = _int(spec["hidden_channels"], "hidden_channels", low=1)
    last = tensors.get(f"source_states.layers.{layers - 1}")
    width = int(last.shape[-1]) if last is not None and last.ndim == 2 else -1
    if _int(spec["target_channels"], "target_channels", low=0) != width - hidden:
        raise ModelFileError(
            f"target_channels={spec['target_channels']} does not fit the last "
            f"source state's width {width}."
        )
    n_in = _int(spec["in_channels"], "in_channels", low=1)
    n_out = _int(spec["out_channels"], "out_channels", low=1)
    # The weight matrices the network must have (a lower bound of its size)
    # against the network tensors really stored: the file pays for what it asks.
    needed = hidden * (n_in + hidden) + spec["num_layers"] * hidden * hidden
    needed += hidden * (2 * hidden + n_out)
    stored = sum(t.numel() for k, t in tensors.items() if k.startswith("network."))
    if stored < needed:
        raise ModelFileError(
            f"The network's configuration implies at least {needed} weights; "
            f"{TENSORS_NAME} stores {stored}."
        )
    if hidden % _int(spec["heads"], "heads", low=1, high=hidden):
        raise ModelFileError("heads must divide hidden_channels.")


# GraphConfig field -> the estimator parameter fit takes it from.
_GRAPH_PARAMS = {
    "space": "graph_space",
    "n_neighbors": "n_neighbors",
    "threshold": "threshold",
    "refresh": "graph_refresh",
    "backend": "graph_backend",
}


def check_trainer_config(config: dict, graph: dict, model, n_outputs: int) -> None:
    """The trainer's settings are the estimator's parameters, as ``fit`` passes
    them (so they passed its validation): a file cannot change the threshold
    or slip a string into a number."""
    params = model.get_params(deep=False)
    pairs = [(f"trainer.{k}", v, k) for k, v in config.items()]
    pairs += [(f"graph.{k}", v, _GRAPH_PARAMS.get(k)) for k, v in graph.items()]
    for what, value, param in pairs:
        if what == "trainer.n_outputs":
            ok = type(value) is int and value == n_outputs
        elif what == "trainer.precision":
            ok = value in ("fp32", "bf16", "fp16") and (
                model.precision in ("auto", value)
            )
        elif what == "graph.backend" and model.graph_backend == "auto":
            ok = value in ("auto", "exact", "faiss")
        elif param in params:
            expected = params[param]
            ok = value == expected and (type(value) is bool) == (type(expected) is bool)
        else:  # every recorded setting comes from a parameter
            ok = False
        if not ok:
            raise ModelFileError(
                f"The saved {what}={value!r} is not what fit makes of the "
                "estimator's parameters."
            )


def checked_net_spec(spec) -> dict:
    """The network's configuration, its types checked (``build_net``'s input)."""
    from ..network import CONVS

    if not isinstance(spec, dict):
        raise ModelFileError("network.net must be a JSON object.")
    if spec.get("conv") not in CONVS:
        raise ModelFileError(
            f"Unknown conv {spec.get('conv')!r}; expected one of {', '.join(CONVS)}."
        )
    ints = ("in_channels", "out_channels", "hidden_channels", "heads", "num_layers")
    out = {k: _int(spec[k], k) for k in (*ints, "target_channels")}
    out["dropout"] = _number(spec["dropout"], "dropout")
    out["conv"] = spec["conv"]
    if "message_passing" in spec:
        if spec["message_passing"] not in MESSAGE_PASSING:
            raise ModelFileError(
                f"Unknown message_passing {spec['message_passing']!r}; expected "
                f"one of {', '.join(MESSAGE_PASSING)}."
            )
        out["message_passing"] = spec["message_passing"]
    if "numeric_embedding" in spec:  # files from before it: "linear"
        out.update(_numeric_embedding_spec(spec, out["in_channels"]))
    return out


#: What loading says of a file fitted with ``numeric_embedding="periodic"``.
REMOVED_PERIODIC = (
    "numeric_embedding='periodic' (PLR embeddings) was removed in this version of "
    "autoglm_graph (issue #59); only an earlier version loads this file."
)


def _numeric_embedding_spec(spec: dict, in_channels: int) -> dict:
    """``numeric_embedding``, ``numeric_columns`` and ``numeric_edges`` of a
    network's config."""
    kind, columns = spec["numeric_embedding"], spec.get("numeric_columns", [])
    if kind == "periodic":
        raise ModelFileError(REMOVED_PERIODIC)
    kinds = ("linear", "piecewise_linear")
    if kind not in kinds:
        raise ModelFileError(
            f"Unknown numeric_embedding {kind!r}; expected one of {', '.join(kinds)}."
        )
    if not isinstance(columns, list) or not all(
        type(j) is int and 0 <= j < in_channels for j in columns
    ):
        raise ModelFileError(
            f"numeric_columns must list columns of the context (0 to "
            f"{in_channels - 1}); got {columns!r}."
        )
    out = {"numeric_embedding": kind, "numeric_columns": tuple(columns)}
    edges = spec.get("numeric_edges", [])
    if kind == "piecewise_linear" and columns:
        out["numeric_edges"] = _bin_edges(edges, len(columns))
    return out


def _bin_edges(edges, n_columns: int) -> tuple[tuple[float, ...], ...]:
    """Per numeric column, at least two increasing finite bin edges."""

    def increasing(column) -> bool:
        return (
            isinstance(column, list)
            and len(column) >= 2
            and all(type(v) in (int, float) and math.isfinite(v) for v in column)
            and all(b > a for a, b in itertools.pairwise(column))
        )

    if not (isinstance(edges, list) and len(edges) == n_columns):
        raise ModelFileError(
            f"numeric_edges must give bin edges for each of the {n_columns} "
            "numeric columns."
        )
    if not all(increasing(column) for column in edges):
        raise ModelFileError(
            "numeric_edges must be lists of at least two increasing finite numbers."
        )
    return tuple(tuple(float(v) for v in column) for column in edges)
