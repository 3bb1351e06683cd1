"""The neighbour graph: each query row's top-k base rows (:class:`NeighborGraph`).

How a graph is found is :mod:`autoglm_graph.neighbors`' (the cosine top-k
search, exact or approximate) and :mod:`autoglm_graph.neighbors.refresh`'s (the
embedding graph's refreshes during training).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

__all__ = ["NeighborGraph"]


@dataclass
class NeighborGraph:
    """Top-k neighbours of query rows among base rows.

    Parameters
    ----------
    indices : torch.Tensor of shape (n_query, k), int64
        Positions of the neighbours in the base rows, sorted by similarity,
        highest first.
    similarities : torch.Tensor of shape (n_query, k), float
        Cosine similarity of each query row to each listed neighbour.
    mask : torch.Tensor of shape (n_query, k), bool
        ``True`` where the neighbour is real (its similarity reaches the
        threshold). Masked-out slots still hold the found index and similarity;
        a row may have no real neighbour at all.

    Examples
    --------
    >>> import torch
    >>> from autoglm_graph.neighbors import cosine_topk
    >>> graph = cosine_topk(torch.eye(3) + 0.1, n_neighbors=1)
    >>> graph.n_neighbors
    1
    >>> edge_index, edge_weight = graph.to_edge_index()
    >>> edge_index.shape
    torch.Size([2, 3])
    """

    indices: torch.Tensor
    similarities: torch.Tensor
    mask: torch.Tensor

    def __post_init__(self) -> None:
        shapes = {self.indices.shape, self.similarities.shape, self.mask.shape}
        if len(shapes) != 1 or self.indices.dim() != 2:
            raise ValueError(
                "NeighborGraph needs indices, similarities and mask of one 2-D shape; "
                f"got {tuple(self.indices.shape)}, {tuple(self.similarities.shape)} "
                f"and {tuple(self.mask.shape)}."
            )

    @property
    def n_neighbors(self) -> int:
        """Width ``k`` of the result (neighbour slots per query row)."""
        return int(self.indices.shape[1])

    def narrowed(
        self, n_neighbors: int | None = None, threshold: float | None = None
    ) -> NeighborGraph:
        """The first ``n_neighbors`` slots (all for ``None``), masked anew.

        Slots are sorted by similarity, so these are the top ``n_neighbors``;
        ``threshold`` additionally masks out those below it.
        """
        k = self.n_neighbors if n_neighbors is None else n_neighbors
        k = min(k, self.n_neighbors)
        similarities, mask = self.similarities[:, :k], self.mask[:, :k]
        if threshold is not None:
            mask = mask & (similarities >= threshold)
        return NeighborGraph(self.indices[:, :k], similarities, mask)

    def query_rows(self, rows: torch.Tensor) -> NeighborGraph:
        """The lists of the query rows at positions ``rows``, their indices
        still into the same base rows."""
        return NeighborGraph(
            self.indices[rows], self.similarities[rows], self.mask[rows]
        )

    def shared_by_duplicates(
        self, first: torch.Tensor, inverse: torch.Tensor, atol: float = 1e-6
    ) -> bool:
        """Whether copies of a row (``first[inverse[i]]`` is row ``i``'s first
        copy, as :func:`distinct_rows` gives) list copies of the same rows:
        the same multiset of neighbours' ``inverse`` values, at the same
        similarities (to ``atol``).

        Then any pass over features alone gives copies the same states
        (:class:`~autoglm_graph.network.modules.DistinctRows`). An embedding refresh
        of the distinct rows builds such lists (``cps1988``); masking a row's
        own group out does not (``tuna``'s copies lie in different groups).
        """
        real = self.mask
        ids = torch.where(real, inverse[self.indices.clamp(min=0)], -1)
        ids, order = torch.sort(ids, dim=1, stable=True)
        similarities = torch.where(real, self.similarities, 0.0).gather(1, order)
        copy_of = first[inverse]
        return torch.equal(ids, ids[copy_of]) and torch.allclose(
            similarities, similarities[copy_of], rtol=0.0, atol=atol
        )

    def without_own_group(self, group: torch.Tensor | None) -> NeighborGraph:
        """The rows among themselves with neighbours of a row's own group masked
        out (``group[i]`` is row ``i``'s); itself when ``group`` is None.

        Training then sees what a row of a new group will see, and a unit's
        other rows cannot stand in for its own outcome.
        """
        if group is None:
            return self
        same = group[self.indices] == group.unsqueeze(1)
        return NeighborGraph(self.indices, self.similarities, self.mask & ~same)

    def to_edge_index(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Real neighbours as a message-passing edge list.

        Returns
        -------
        edge_index : torch.Tensor of shape (2, n_edges), int64
            ``edge_index[0]`` is the neighbour (source, a base row) and
            ``edge_index[1]`` the query row (target), as torch_geometric's
            ``flow="source_to_target"`` expects. Only masked-in slots are kept,
            ordered by query row, then by rank.
        edge_weight : torch.Tensor of shape (n_edges,)
            The cosine similarity of each edge.
        """
        n_query, k = self.indices.shape
        keep = self.mask.reshape(-1)
        targets = torch.arange(n_query, device=self.indices.device)
        targets = targets.repeat_interleave(k)[keep]
        sources = self.indices.reshape(-1)[keep]
        edge_index = torch.stack([sources, targets])
        return edge_index, self.similarities.reshape(-1)[keep]

    def to(self, device: str | torch.device) -> NeighborGraph:
        """Return a copy with every tensor on ``device``."""
        return NeighborGraph(
            indices=self.indices.to(device),
            similarities=self.similarities.to(device),
            mask=self.mask.to(device),
        )
