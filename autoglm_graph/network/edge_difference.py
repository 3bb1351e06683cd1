"""TabR's edge function: a learned non-linear message on two rows' difference.

GAT's message from a neighbour ``j`` to a row ``i`` is ``alpha_ij W h_j``: a
function of the neighbour alone, weighted by how much the row attends to it.
TabR (Gorishniy et al. 2023, "TabR: tabular deep learning meets nearest
neighbors") adds a learned function of the difference of the two rows' keys,
``T(k_i - k_j)``, so that a message also says how the neighbour differs from
the row. :class:`EdgeDifferenceMessage` adds to the last attention layer's
output (the layer whose messages carry the neighbours' outcomes, TabR's one
retrieval step)

.. math::

    m_i = U \\left[\\sum_j \\alpha^h_{ij}\\, \\mathrm{ReLU}(V (h_i - h_j) + b)
    \\right]_{h = 1 \\dots H}

with ``V`` of ``[hidden -> r]`` and ``U`` of ``[H r -> hidden]``: the
non-linearity acts on ``r`` channels per edge, and each head's attention
weights (the layer's own, after their dropout) average it. As ``V (h_i - h_j)
= V h_i - V h_j``, every row is projected once and an edge only gathers,
subtracts and activates ``r`` numbers; the sources' projection is cached with
the layer's others (``GraphGLMNet.source_projection``). Memory: one ``[n, k,
r]`` tensor in training. ``h`` are the layer's input states; the
outcome features appended to the last layer's sources are not part of the
difference (the row's own outcome is never an input).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

__all__ = ["EdgeDifferenceMessage"]


class EdgeDifferenceMessage(nn.Module):
    """The difference message of one attention layer.

    Parameters
    ----------
    hidden_channels : int
        Width of the layer's states (and of its output).
    heads : int
        Attention heads of the layer; each averages the edge features with
        its own weights.
    channels : int
        Width ``r`` of each edge's difference feature.
    """

    def __init__(self, hidden_channels: int, heads: int, channels: int) -> None:
        super().__init__()
        self.hidden_channels = hidden_channels
        # Plain parameters, not nn.Linear: the network's reset_parameters
        # resets every submodule that has one, which would undo U's zeros.
        #: ``V``, ``[r, hidden]``.
        self.project = nn.Parameter(torch.empty(channels, hidden_channels))
        #: ``b``, ``[r]``.
        self.bias = nn.Parameter(torch.empty(channels))
        #: ``U``, ``[hidden, heads * r]``.
        self.out = nn.Parameter(torch.empty(hidden_channels, heads * channels))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """``V`` as ``nn.Linear``'s weight, ``b = 0`` and ``U = 0``: the
        untrained message is zero, so a network with it starts as the one
        without (as the head's zero last layer makes the untrained network
        the GLM)."""
        nn.init.kaiming_uniform_(self.project, a=5**0.5)
        nn.init.zeros_(self.bias)
        nn.init.zeros_(self.out)

    def sources(self, x_src: Tensor) -> Tensor:
        """``V h_j`` of the sources ``[m, r]``; ``x_src`` is the layer's
        source input (the states first, outcome features after them)."""
        return x_src[:, : self.hidden_channels] @ self.project.t()

    def fixed_degree(
        self, h_dst: Tensor, sources: Tensor, indices: Tensor, alpha: Tensor
    ) -> Tensor:
        """The message on a fixed layout: ``indices [n, k]`` of the sources,
        ``alpha [n, heads, k]`` the attention weights (zero at a slot that is
        not a neighbour, whose index may be any source)."""
        n, k = indices.shape
        dst_part = h_dst @ self.project.t() + self.bias  # [n, r]
        gathered = sources.index_select(0, indices.reshape(-1)).view(n, k, -1)
        edges = torch.relu(dst_part.unsqueeze(1) - gathered)  # [n, k, r]
        aggregated = torch.bmm(alpha.to(edges.dtype), edges)  # [n, heads, r]
        return aggregated.reshape(n, -1) @ self.out.t()

    def edge_list(
        self, h_dst: Tensor, sources: Tensor, edge_index: Tensor, alpha: Tensor
    ) -> Tensor:
        """The message on an edge list: ``edge_index [2, E]`` (source,
        destination), ``alpha [E, heads]``."""
        src, dst = edge_index
        n = h_dst.shape[0]
        dst_part = h_dst @ self.project.t() + self.bias
        edges = torch.relu(dst_part[dst] - sources[src])  # [E, r]
        messages = alpha.to(edges.dtype).unsqueeze(-1) * edges.unsqueeze(1)
        aggregated = messages.new_zeros(n, *messages.shape[1:])
        aggregated = aggregated.index_add(0, dst, messages)
        return aggregated.reshape(n, -1) @ self.out.t()
