"""Embeddings of numeric context columns before the encoder.

A numeric column enters an MLP as one number through one linear layer; tabular
networks do better when each numeric column first gets a vector of its own.
:class:`PeriodicEmbedding` is the PLR embedding of Gorishniy et al. (2022,
"On embeddings for numerical features in tabular deep learning"): per column,
``x -> ReLU(W [cos(2 pi c x), sin(2 pi c x)] + b)`` with trainable frequencies
``c`` drawn from ``N(0, sigma^2)``. The other columns (indicators, one-hot
levels) pass through unchanged. Only the network's context is embedded: the
GLM's terms stay the user's columns.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import Tensor, nn

__all__ = ["PeriodicEmbedding", "numeric_columns"]


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


class PeriodicEmbedding(nn.Module):
    r"""PLR embeddings of some columns; the others unchanged.

    Parameters
    ----------
    in_channels : int
        Width of the input rows.
    numeric : sequence of int
        The columns to embed.
    n_frequencies : int, default=16
        Frequencies per column (``k``).
    embedding_channels : int, default=8
        Width of a column's embedding (``d``).
    sigma : float, default=0.1
        Standard deviation of the initial frequencies, in cycles per unit of
        the (standardised) column.

    Shapes
    ------
    - input: ``[n, in_channels]``
    - output: ``[n, out_channels]`` with ``out_channels = in_channels -
      len(numeric) + len(numeric) * embedding_channels``: the other columns
      first, in their order, then each embedded column's vector.
    """

    def __init__(
        self,
        in_channels: int,
        numeric: Sequence[int],
        *,
        n_frequencies: int = 16,
        embedding_channels: int = 8,
        sigma: float = 0.1,
    ) -> None:
        super().__init__()
        numeric = sorted({int(j) for j in numeric})
        if any(j < 0 or j >= in_channels for j in numeric):
            raise ValueError(
                f"numeric columns must lie in [0, {in_channels}); got {numeric}."
            )
        self.in_channels = in_channels
        self.n_frequencies = n_frequencies
        self.embedding_channels = embedding_channels
        self.sigma = sigma
        others = sorted(set(range(in_channels)) - set(numeric))
        # Not weights (the configuration gives them): out of state_dict.
        index = {"dtype": torch.long}
        self.register_buffer("numeric", torch.tensor(numeric, **index), False)
        self.register_buffer("others", torch.tensor(others, **index), False)
        m = len(numeric)
        self.frequencies = nn.Parameter(torch.empty(m, n_frequencies))
        self.weight = nn.Parameter(
            torch.empty(m, 2 * n_frequencies, embedding_channels)
        )
        self.bias = nn.Parameter(torch.empty(m, embedding_channels))
        self.reset_parameters()

    @property
    def out_channels(self) -> int:
        m = int(self.numeric.numel())
        return self.in_channels - m + m * self.embedding_channels

    def reset_parameters(self) -> None:
        """Frequencies from ``N(0, sigma^2)``; each column's linear layer as
        ``nn.Linear(2k, d)`` initialises its weights."""
        nn.init.normal_(self.frequencies, 0.0, self.sigma)
        bound = 1.0 / math.sqrt(2 * self.n_frequencies)
        nn.init.uniform_(self.weight, -bound, bound)
        nn.init.uniform_(self.bias, -bound, bound)

    def forward(self, x: Tensor) -> Tensor:
        if self.numeric.numel() == 0:
            return x
        angles = 2 * math.pi * x[:, self.numeric, None] * self.frequencies
        periodic = torch.cat([torch.cos(angles), torch.sin(angles)], dim=-1)
        embedded = torch.relu(
            torch.einsum("nmf,mfd->nmd", periodic, self.weight) + self.bias
        )
        return torch.cat([x[:, self.others], embedded.flatten(1)], dim=1)

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}({self.in_channels} -> {self.out_channels}, "
            f"numeric={self.numeric.numel()}, n_frequencies={self.n_frequencies}, "
            f"embedding_channels={self.embedding_channels}, sigma={self.sigma})"
        )
