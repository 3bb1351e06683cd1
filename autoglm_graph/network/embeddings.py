"""Embeddings of numeric context columns before the encoder.

A numeric column enters an MLP as one number through one linear layer; tabular
networks do better when each numeric column first gets a vector of its own.
:class:`PiecewiseLinearEncoding` is the PLE of Gorishniy et al. (2022, "On
embeddings for numerical features in tabular deep learning"): each numeric
column becomes one value per quantile bin, ``0`` below the bin, ``1`` above it
and linear inside, so the encoder's first layer sees any piecewise-linear
function of the column, the column itself included. The other columns
(indicators, one-hot levels) pass through unchanged. Only the network's
context is embedded: the GLM's terms stay the user's columns.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

import torch
from torch import Tensor, nn

__all__ = [
    "PiecewiseLinearEncoding",
    "numeric_columns",
    "quantile_edges",
]


def numeric_columns(context: Tensor) -> tuple[int, ...]:
    """Positions of the columns of ``context`` that are not 0/1 indicators.

    Parameters
    ----------
    context : Tensor of shape (n_samples, n_columns)
        The network's context (standardised numeric columns, indicators and
        one-hot levels).

    Returns
    -------
    tuple of int
        The columns holding a value other than 0 and 1.
    """
    binary = ((context == 0) | (context == 1)).all(dim=0)
    return tuple(int(j) for j in torch.nonzero(~binary).flatten())


def quantile_edges(
    context: Tensor, numeric: Sequence[int], n_bins: int
) -> tuple[tuple[float, ...], ...]:
    """Bin edges of each numeric column: its distinct quantiles.

    Parameters
    ----------
    context : Tensor of shape (n_samples, n_columns)
        The training rows' context.
    numeric : sequence of int
        The columns to bin.
    n_bins : int
        Bins per column at most (a column with fewer distinct quantiles gets
        fewer).

    Returns
    -------
    tuple of tuple of float
        Per column, its increasing edges (at least two).
    """
    levels = torch.linspace(0.0, 1.0, n_bins + 1, dtype=torch.float64)
    edges = []
    for j in numeric:
        column = context[:, j].detach().to("cpu", torch.float64)
        points = torch.unique(torch.quantile(column, levels)).tolist()
        if len(points) < 2:  # a constant column: one unit bin
            points = [points[0], points[0] + 1.0]
        edges.append(tuple(float(v) for v in points))
    return tuple(edges)


class PiecewiseLinearEncoding(nn.Module):
    r"""PLE of some columns (Gorishniy et al. 2022); the others unchanged.

    A column with edges ``b_0 < ... < b_T`` becomes ``T`` values, bin ``t``'s
    being ``(x - b_{t-1}) / (b_t - b_{t-1})`` clipped to ``[0, 1]``; the first
    bin is not clipped below nor the last above, so the encoding extends
    linearly beyond the training range. ``x - b_0`` is a linear function of
    the encoding: the linear encoder's input is in its span.

    Parameters
    ----------
    in_channels : int
        Width of the input rows.
    numeric : sequence of int
        The columns to encode.
    edges : sequence of sequence of float
        Per column of ``numeric`` (in increasing column order), its increasing
        bin edges (:func:`quantile_edges`).

    Shapes
    ------
    - input: ``[n, in_channels]``
    - output: ``[n, out_channels]``: the other columns first, in their order
      then each encoded column's bins.
    """

    def __init__(
        self,
        in_channels: int,
        numeric: Sequence[int],
        edges: Sequence[Sequence[float]],
    ) -> None:
        super().__init__()
        numeric = [int(j) for j in numeric]
        if numeric != sorted(set(numeric)) or any(
            j < 0 or j >= in_channels for j in numeric
        ):
            raise ValueError(
                f"numeric columns must be increasing in [0, {in_channels}); got "
                f"{numeric}."
            )
        if len(edges) != len(numeric) or any(
            len(e) < 2 or any(b <= a for a, b in itertools.pairwise(e)) for e in edges
        ):
            raise ValueError(
                "edges must give each numeric column at least two increasing edges."
            )
        self.in_channels = in_channels
        others = sorted(set(range(in_channels)) - set(numeric))
        index = {"dtype": torch.long}
        self.register_buffer("numeric", torch.tensor(numeric, **index), False)
        self.register_buffer("others", torch.tensor(others, **index), False)
        # Bins padded to the widest column; a padding bin is masked to 0.
        n_bins = max(len(e) - 1 for e in edges)
        left = torch.zeros(len(numeric), n_bins)
        width = torch.ones(len(numeric), n_bins)
        low = torch.zeros(len(numeric), n_bins)
        high = torch.ones(len(numeric), n_bins)
        mask = torch.zeros(len(numeric), n_bins)
        for i, e in enumerate(edges):
            t = len(e) - 1
            e = torch.tensor(e, dtype=torch.float64)
            left[i, :t] = e[:-1].float()
            width[i, :t] = (e[1:] - e[:-1]).float()
            low[i, 0] = -math.inf
            high[i, t - 1] = math.inf
            mask[i, :t] = 1.0
        for name, value in (
            ("left", left),
            ("width", width),
            ("low", low),
            ("high", high),
            ("mask", mask),
        ):
            self.register_buffer(name, value, False)
        self.edges = tuple(tuple(float(v) for v in e) for e in edges)

    @property
    def out_channels(self) -> int:
        return int(self.others.numel() + self.mask.sum().item())

    def forward(self, x: Tensor) -> Tensor:
        if self.numeric.numel() == 0:
            return x
        ratio = (x[:, self.numeric, None] - self.left) / self.width
        bins = torch.clamp(ratio, self.low, self.high)
        encoded = bins.flatten(1)[:, self.mask.flatten() > 0]
        return torch.cat([x[:, self.others], encoded], dim=1)

    @torch.no_grad()
    def start_as_linear(self, layer: nn.Linear) -> None:
        """Initialise ``layer``, the linear layer reading this encoding, so
        that the two compute what a freshly initialised ``nn.Linear`` reading
        the raw columns would: each column's bin weights are that layer's
        weight of the column times the bins' widths (``x = b_0 + sum_t
        width_t bin_t``). Training starts from the linear encoder's function
        and departs from it only where the data ask for a bend."""
        raw = nn.Linear(self.in_channels, layer.out_features).to(layer.weight)
        weight, bias = raw.weight[:, self.others], raw.bias
        if self.numeric.numel():
            columns = raw.weight[:, self.numeric]  # [out, m]
            bins = (columns[:, :, None] * self.width).flatten(1)
            weight = torch.cat([weight, bins[:, self.mask.flatten() > 0]], dim=1)
            bias = bias + columns @ self.left[:, 0]
        layer.weight.copy_(weight)
        layer.bias.copy_(bias)

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}({self.in_channels} -> {self.out_channels}, "
            f"numeric={self.numeric.numel()})"
        )
