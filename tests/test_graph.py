"""Tests for autoglm_graph.neighbors: exact chunked cosine top-k with a threshold."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from autoglm_graph.neighbors import CosineNeighbors, cosine_topk
from autoglm_graph.neighbors._graph import NeighborGraph
from autoglm_graph.neighbors._topk import _n_folds, fill_topk
from autoglm_graph.neighbors.refresh import refresh_graphs
from autoglm_graph.policy import TileSettings


def _clustered(n: int, d: int = 8, seed: int = 0) -> np.ndarray:
    """Small Gaussian-mixture data (no exact ties in similarity)."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((4, d)) * 2.0
    return centres[rng.integers(0, 4, n)] + rng.standard_normal((n, d))


def _brute_force(
    X: np.ndarray, Y: np.ndarray, k: int, exclude_self: bool
) -> tuple[np.ndarray, np.ndarray]:
    """Reference top-(k + 1) from the full similarity matrix, in float64."""
    Xn = X / np.linalg.norm(X, axis=1, keepdims=True)
    Yn = Y / np.linalg.norm(Y, axis=1, keepdims=True)
    sim = Xn @ Yn.T
    if exclude_self:
        np.fill_diagonal(sim, -np.inf)
    order = np.argsort(-sim, axis=1, kind="stable")[:, : k + 1]
    return order, np.take_along_axis(sim, order, axis=1)


def _untied(sim: np.ndarray, gap: float = 1e-5) -> np.ndarray:
    """Where a ranked similarity is more than ``gap`` from both of its neighbours."""
    apart = np.abs(np.diff(sim, axis=1)) > gap
    ones = np.ones((sim.shape[0], 1), dtype=bool)
    return np.hstack([ones, apart]) & np.hstack([apart, ones])


def _assert_same_neighbours(
    indices: torch.Tensor,
    similarities: torch.Tensor,
    ref_idx: np.ndarray,
    ref_sim: np.ndarray,
) -> None:
    """Similarities equal to 1e-5; indices equal wherever there is no near-tie."""
    k = indices.shape[1]
    np.testing.assert_allclose(similarities.numpy(), ref_sim[:, :k], atol=1e-5)
    clear = _untied(ref_sim)[:, :k]
    assert clear.mean() > 0.9  # the index comparison is not vacuous
    np.testing.assert_array_equal(indices.numpy()[clear], ref_idx[:, :k][clear])


def _assert_matches_reference(graph: NeighborGraph, X, Y, k, exclude_self) -> None:
    ref_idx, ref_sim = _brute_force(X, Y, k, exclude_self)
    _assert_same_neighbours(graph.indices, graph.similarities, ref_idx, ref_sim)


@pytest.mark.parametrize("n", [5, 60, 3000])
def test_self_excluded_matches_brute_force(n):
    X = _clustered(n)
    graph = cosine_topk(X, n_neighbors=4)
    assert graph.indices.shape == (n, 4)
    assert graph.indices.dtype == torch.int64
    assert graph.mask.all()
    _assert_matches_reference(graph, X, X, 4, exclude_self=True)


@pytest.mark.parametrize("m", [7, 3000])
def test_query_vs_base_matches_brute_force(m):
    X, Y = _clustered(40, seed=1), _clustered(m, seed=2)
    graph = cosine_topk(X, Y, n_neighbors=5)
    assert graph.indices.shape == (40, 5)
    _assert_matches_reference(graph, X, Y, 5, exclude_self=False)


def test_similarities_sorted_descending():
    graph = cosine_topk(_clustered(300), n_neighbors=10)
    assert (graph.similarities[:, :-1] >= graph.similarities[:, 1:]).all()


def test_self_never_listed_even_with_duplicates():
    X = _clustered(50)
    X = np.concatenate([X, X])  # row i and row i + 50 are identical
    graph = cosine_topk(X, n_neighbors=3)
    rows = torch.arange(100).unsqueeze(1)
    assert not (graph.indices == rows).any()
    # The duplicate (similarity 1) is a valid, and the best, neighbour.
    np.testing.assert_array_equal(
        graph.indices[:, 0].numpy(), (np.arange(100) + 50) % 100
    )
    np.testing.assert_allclose(graph.similarities[:, 0].numpy(), 1.0, atol=1e-6)


def test_exclude_self_with_explicit_base():
    X = _clustered(30)
    graph = cosine_topk(X, X.copy(), n_neighbors=3, exclude_self=True)
    assert not (graph.indices == torch.arange(30).unsqueeze(1)).any()
    included = cosine_topk(X, n_neighbors=3, exclude_self=False)
    np.testing.assert_array_equal(included.indices[:, 0].numpy(), np.arange(30))


def test_exclude_self_requires_square():
    with pytest.raises(ValueError, match="exclude_self=True needs as many"):
        cosine_topk(np.ones((3, 2)), np.ones((4, 2)), exclude_self=True)


@pytest.mark.parametrize("tau", [-1.0, 0.5, 0.9, 1.5])
def test_threshold_mask(tau):
    X = _clustered(200)
    graph = cosine_topk(X, n_neighbors=8, threshold=tau)
    torch.testing.assert_close(graph.mask, graph.similarities >= tau)
    plain = cosine_topk(X, n_neighbors=8)
    # Masked slots keep the neighbour found.
    torch.testing.assert_close(graph.indices, plain.indices)
    torch.testing.assert_close(graph.similarities, plain.similarities)


def test_threshold_is_inclusive():
    plain = cosine_topk(_clustered(50), n_neighbors=4)
    tau = float(plain.similarities[0, 2])
    graph = cosine_topk(_clustered(50), n_neighbors=4, threshold=tau)
    assert graph.mask[0].tolist() == [True, True, True, False]


def test_threshold_allows_rows_without_neighbours():
    X = np.array([[1.0, 0.0], [0.99, 0.01], [-1.0, 0.0], [0.0, 1.0]])
    graph = cosine_topk(X, n_neighbors=2, threshold=0.9)
    per_row = graph.mask.sum(dim=1).tolist()
    assert per_row == [1, 1, 0, 0]


@pytest.mark.parametrize("exclude", [True, False])
def test_chunk_size_does_not_change_result(exclude):
    X, Y = _clustered(500, seed=3), _clustered(500, seed=4)
    base = None if exclude else Y
    reference = cosine_topk(X, base, n_neighbors=7, chunk_size=1000)
    ref_idx, ref_sim = reference.indices.numpy(), reference.similarities.numpy()
    for chunk_size in (1, 7):
        graph = cosine_topk(X, base, n_neighbors=7, chunk_size=chunk_size)
        _assert_same_neighbours(
            graph.indices[:, :6], graph.similarities[:, :6], ref_idx, ref_sim
        )


@pytest.mark.parametrize("k", [2, 16])
def test_bucket_preselection_path_matches_full_topk(k):
    # m = 5000 is folded at least once for k = 16, twice for k = 2, with padding.
    assert _n_folds(5000, k, TileSettings()) >= (2 if k == 2 else 1)
    X, Y = _clustered(64, seed=5), _clustered(5000, seed=6)
    graph = cosine_topk(X, Y, n_neighbors=k, chunk_size=13, dtype=torch.float64)
    Xn = torch.nn.functional.normalize(torch.as_tensor(X), dim=1)
    Yn = torch.nn.functional.normalize(torch.as_tensor(Y), dim=1)
    values, indices = torch.topk(Xn @ Yn.T, k + 1, dim=1)
    _assert_same_neighbours(
        graph.indices, graph.similarities, indices.numpy(), values.numpy()
    )


def test_zero_norm_rows_give_zero_similarity_not_nan():
    X = _clustered(20)
    X[[3, 7]] = 0.0
    graph = cosine_topk(X, n_neighbors=5)
    assert torch.isfinite(graph.similarities).all()
    assert (graph.similarities[[3, 7]] == 0).all()
    zero_as_neighbour = graph.similarities[graph.indices == 3]
    assert (zero_as_neighbour == 0).all()


def test_tiny_and_huge_rows_are_normalised():
    X = _clustered(30)
    scaled = X * np.where(np.arange(30) % 2 == 0, 1e-30, 1e30)[:, None]
    graph = cosine_topk(torch.as_tensor(scaled, dtype=torch.float32), n_neighbors=4)
    reference = cosine_topk(X, n_neighbors=4)
    torch.testing.assert_close(graph.indices, reference.indices)
    torch.testing.assert_close(graph.similarities, reference.similarities)


@pytest.mark.parametrize(
    ("n_neighbors", "Y_rows", "width"), [(10, None, 5), (10, 4, 4), (3, None, 3)]
)
def test_width_clipped_to_available_rows(n_neighbors, Y_rows, width):
    X = _clustered(6)
    Y = None if Y_rows is None else _clustered(Y_rows, seed=9)
    graph = cosine_topk(X, Y, n_neighbors=n_neighbors)
    assert graph.n_neighbors == width
    assert graph.indices.shape == graph.similarities.shape == (6, width)


def test_width_zero_gives_empty_tensors():
    graph = cosine_topk(np.ones((1, 3)), n_neighbors=4)
    assert graph.indices.shape == (1, 0)
    assert graph.mask.shape == (1, 0)
    edge_index, edge_weight = graph.to_edge_index()
    assert edge_index.shape == (2, 0)
    assert edge_weight.shape == (0,)


def test_to_edge_index_direction_order_and_count():
    X, Y = _clustered(30, seed=1), _clustered(50, seed=2)
    graph = cosine_topk(X, Y, n_neighbors=4, threshold=0.8)
    edge_index, edge_weight = graph.to_edge_index()
    assert edge_index.dtype == torch.int64
    assert edge_index.shape == (2, int(graph.mask.sum()))
    assert edge_weight.shape == (int(graph.mask.sum()),)
    assert (edge_weight >= 0.8).all()
    rows, ranks = graph.mask.nonzero(as_tuple=True)  # row-major: row, then rank
    torch.testing.assert_close(edge_index[1], rows)
    torch.testing.assert_close(edge_index[0], graph.indices[rows, ranks])
    torch.testing.assert_close(edge_weight, graph.similarities[rows, ranks])


def test_edge_index_drives_bipartite_gatconv():
    from torch_geometric.nn import GATConv

    torch.manual_seed(0)
    queries, base = torch.randn(12, 6), torch.randn(40, 6)
    graph = cosine_topk(queries, base, n_neighbors=3)
    edge_index, _ = graph.to_edge_index()
    conv = GATConv((6, 6), 5, heads=2, add_self_loops=False)
    out, (att_index, alpha) = conv(
        (base, queries), edge_index, return_attention_weights=True
    )
    assert out.shape == (12, 10)
    # Messages flow from base rows (sources) into query rows (targets).
    torch.testing.assert_close(att_index, edge_index)
    total = torch.zeros(12, 2).index_add_(0, att_index[1], alpha)
    torch.testing.assert_close(total, torch.ones(12, 2))


def test_graph_to_device_and_shape_check():
    graph = cosine_topk(_clustered(10), n_neighbors=2)
    moved = graph.to("cpu")
    torch.testing.assert_close(moved.indices, graph.indices)
    with pytest.raises(ValueError, match="one 2-D shape"):
        NeighborGraph(graph.indices, graph.similarities[:, :1], graph.mask)


def test_cosine_neighbors_equals_cosine_topk():
    X, Q = _clustered(80, seed=1), _clustered(15, seed=2)
    nn = CosineNeighbors(n_neighbors=5, threshold=0.7).fit(X)
    assert nn.n_samples_fit_ == 80
    assert nn.n_features_in_ == 8
    torch.testing.assert_close(nn.base_.norm(dim=1), torch.ones(80))
    for got, want in [
        (nn.kneighbors(), cosine_topk(X, n_neighbors=5, threshold=0.7)),
        (nn.kneighbors(Q), cosine_topk(Q, X, n_neighbors=5, threshold=0.7)),
    ]:
        torch.testing.assert_close(got.indices, want.indices)
        torch.testing.assert_close(got.similarities, want.similarities)
        torch.testing.assert_close(got.mask, want.mask)


def test_cosine_neighbors_n_neighbors_override_and_feature_check():
    X = _clustered(40)
    nn = CosineNeighbors(n_neighbors=5).fit(X)
    wider = nn.kneighbors(n_neighbors=8)
    torch.testing.assert_close(wider.indices, cosine_topk(X, n_neighbors=8).indices)
    with pytest.raises(ValueError, match="X has 3 features, but CosineNeighbors"):
        nn.kneighbors(np.ones((2, 3)))


def test_cosine_neighbors_params_and_unfitted_error():
    from sklearn.base import clone
    from sklearn.exceptions import NotFittedError

    nn = CosineNeighbors(7, 0.5, chunk_size=3)
    assert clone(nn).get_params()["n_neighbors"] == 7
    with pytest.raises(NotFittedError):
        nn.kneighbors()
    with pytest.raises(ValueError, match="'n_neighbors' parameter"):
        CosineNeighbors(n_neighbors=0).fit(np.ones((3, 2)))


def test_float64_dtype():
    X = _clustered(100)
    graph = cosine_topk(X, n_neighbors=4, dtype=torch.float64)
    assert graph.similarities.dtype == torch.float64
    ref_idx, ref_sim = _brute_force(X, X, 4, exclude_self=True)
    np.testing.assert_allclose(graph.similarities.numpy(), ref_sim[:, :4], atol=1e-12)
    np.testing.assert_array_equal(graph.indices.numpy(), ref_idx[:, :4])


def test_input_requiring_grad_is_detached():
    X = torch.randn(20, 4, requires_grad=True)
    graph = cosine_topk(X, n_neighbors=3)
    assert not graph.similarities.requires_grad
    reference = cosine_topk(X.detach(), n_neighbors=3)
    torch.testing.assert_close(graph.indices, reference.indices)


def test_numpy_and_tensor_inputs_agree():
    X = _clustered(50)
    from_numpy = cosine_topk(X, n_neighbors=3)
    from_tensor = cosine_topk(torch.as_tensor(X), n_neighbors=3)
    assert from_numpy.indices.device.type == "cpu"
    assert from_numpy.similarities.dtype == torch.float32
    torch.testing.assert_close(from_numpy.indices, from_tensor.indices)
    torch.testing.assert_close(from_numpy.similarities, from_tensor.similarities)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"n_neighbors": 0}, "'n_neighbors' parameter"),
        ({"n_neighbors": 2.5}, "'n_neighbors' parameter"),
        ({"threshold": float("nan")}, "'threshold' parameter"),
        ({"threshold": "high"}, "'threshold' parameter"),
        ({"chunk_size": 0}, "'chunk_size' parameter"),
        ({"dtype": torch.int64}, "'dtype' parameter"),
    ],
)
def test_bad_parameters(kwargs, match):
    with pytest.raises(ValueError, match=match):
        cosine_topk(np.ones((3, 2)), **kwargs)


def test_bad_inputs():
    with pytest.raises(ValueError, match="X must be a 2-D array"):
        cosine_topk(np.ones(3))
    with pytest.raises(ValueError, match="X contains NaN"):
        cosine_topk(np.array([[1.0, np.nan], [1.0, 2.0]]))
    with pytest.raises(ValueError, match="Y contains NaN or infinity"):
        cosine_topk(np.ones((2, 2)), np.array([[np.inf, 1.0]]))
    with pytest.raises(ValueError, match="same number of columns"):
        cosine_topk(np.ones((2, 2)), np.ones((2, 3)))


def test_recall_at_k():
    from autoglm_graph.neighbors import recall_at_k

    exact = cosine_topk(_clustered(40), n_neighbors=4, threshold=0.5)
    assert recall_at_k(exact, exact) == 1.0
    half = NeighborGraph(
        torch.cat([exact.indices[:, :2], torch.full((40, 2), -1)], dim=1),
        exact.similarities,
        torch.ones(40, 4, dtype=torch.bool),
    )
    wanted = exact.mask
    expected = float(wanted[:, :2].sum()) / float(wanted.sum())
    assert recall_at_k(half, exact) == pytest.approx(expected)
    # Found but masked out does not count; widths may differ.
    masked = NeighborGraph(exact.indices, exact.similarities, ~exact.mask)
    assert recall_at_k(masked, exact) == 0.0
    wider = cosine_topk(_clustered(40), n_neighbors=8)
    assert recall_at_k(wider, exact) == 1.0
    with pytest.raises(ValueError, match="same number of query rows"):
        recall_at_k(cosine_topk(_clustered(10), n_neighbors=2), exact)


@pytest.mark.parametrize("backend", ["hnsw", "", None, "Exact"])
def test_bad_backend(backend):
    with pytest.raises(ValueError, match="'backend' parameter must be one of"):
        cosine_topk(np.ones((3, 2)), backend=backend)
    with pytest.raises(ValueError, match="'backend' parameter"):
        CosineNeighbors(backend=backend).fit(np.ones((3, 2)))


@pytest.mark.parametrize(
    ("index_params", "match"),
    [
        ([("m", 8)], "'index_params' parameter must be None or a dict"),
        ({"M": 8}, "Unknown key 'M'"),
        ({"m": 0}, r"index_params\['m'\] must be an int >= 1"),
        ({"ef_construction": None}, "must be an int >= 1"),
    ],
)
def test_bad_index_params(index_params, match):
    with pytest.raises(ValueError, match=match):
        cosine_topk(np.ones((3, 2)), index_params=index_params)


def test_auto_backend_small_input_is_exact():
    X = _clustered(200)
    auto = cosine_topk(X, n_neighbors=5, backend="auto")
    torch.testing.assert_close(auto.indices, cosine_topk(X, n_neighbors=5).indices)


def test_faiss_backend_without_faiss(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "faiss", None)  # import faiss now fails
    with pytest.raises(ImportError, match="pip install faiss-cpu"):
        cosine_topk(_clustered(20), n_neighbors=3, backend="faiss")
    with pytest.raises(ImportError, match="pip install faiss-cpu"):
        CosineNeighbors(backend="faiss").fit(_clustered(20))


def _lower_index_first(sims: np.ndarray, k: int) -> np.ndarray:
    """The reference rule: by similarity, equal ones by the lower index."""
    columns = np.arange(sims.shape[1])
    return np.stack([np.lexsort((columns, -row))[:k] for row in sims])


@pytest.mark.parametrize("n_distinct, copies, k", [(40, 10, 5), (250, 12, 7)])
@pytest.mark.parametrize("exclude_self", [False, True])
def test_ties_go_to_the_lower_training_index(n_distinct, copies, k, exclude_self):
    """Duplicated rows tie exactly; the neighbours are the lowest-indexed of the
    tied rows, in the folded search (m = 3000) as in the plain one (m = 400).
    torch.topk alone chose among them by the rest of the row (129 of 300 rows
    not the lowest ones, in the smaller case)."""
    gen = torch.Generator().manual_seed(0)
    base = torch.randn(n_distinct, 6, generator=gen).repeat(copies, 1)
    base = base[torch.randperm(len(base), generator=gen)]
    queries = base if exclude_self else torch.randn(300, 6, generator=gen)
    graph = cosine_topk(
        queries,
        None if exclude_self else base,
        n_neighbors=k,
        chunk_size=len(queries),
    )
    unit = torch.nn.functional.normalize
    sims = (unit(queries) @ unit(base).T).numpy()
    if exclude_self:
        np.fill_diagonal(sims, -np.inf)
    np.testing.assert_array_equal(graph.indices.numpy(), _lower_index_first(sims, k))


@pytest.mark.parametrize("copies", [1, 3, 30])
@pytest.mark.parametrize("exclude_self", [False, True])
def test_faiss_search_gives_the_tiled_search_result(copies, exclude_self, monkeypatch):
    """The CPU's default exact search (faiss, ``chunk_size=None``) against the
    tiled one: the same neighbours, ties to the lower index included. 30
    copies tie past faiss's margin, so those rows take the tiled search."""
    from autoglm_graph import FitPolicy
    from autoglm_graph.neighbors import _topk

    policy = FitPolicy(faiss_exact_min_rows=0)  # 1,200 rows, d = 6
    gen = torch.Generator().manual_seed(2)
    base = torch.randn(1200 // copies, 6, generator=gen).repeat(copies, 1)
    base = base[torch.randperm(len(base), generator=gen)]
    queries = base if exclude_self else torch.randn(400, 6, generator=gen)
    other = None if exclude_self else base
    calls = []
    monkeypatch.setattr(
        _topk, "fill_topk", lambda *a: calls.append(a[0].shape[0]) or fill_topk(*a)
    )
    fast = cosine_topk(queries, other, n_neighbors=10, policy=policy)
    tiled = cosine_topk(queries, other, n_neighbors=10, chunk_size=len(queries))
    np.testing.assert_array_equal(fast.indices.numpy(), tiled.indices.numpy())
    np.testing.assert_allclose(
        fast.similarities.numpy(), tiled.similarities.numpy(), atol=1e-6
    )
    # Only rows whose tie outlasts the margin were searched again.
    assert bool(calls) == (copies == 30)


def test_faiss_search_keeps_the_ties_of_duplicated_rows():
    """faiss's products of equal base rows can differ in their last bit across
    its BLAS blocks (1,086 of these 10,000 rows had other neighbours than the
    tiled search before they were computed again row by row)."""
    gen = torch.Generator().manual_seed(0)
    distinct = torch.randn(2500, 16, generator=gen)
    base = distinct[torch.randint(0, 2500, (10_000,), generator=gen)]
    fast = cosine_topk(base, n_neighbors=10)
    tiled = cosine_topk(base, n_neighbors=10, chunk_size=len(base))
    np.testing.assert_array_equal(fast.indices.numpy(), tiled.indices.numpy())


def test_neighbours_of_a_row_do_not_depend_on_the_other_rows():
    gen = torch.Generator().manual_seed(1)
    base = torch.randn(500, 8, generator=gen).repeat(8, 1)
    queries = torch.randn(200, 8, generator=gen)
    full = cosine_topk(queries, base, n_neighbors=6)
    for chunk in (1, 7):
        part = cosine_topk(queries, base, n_neighbors=6, chunk_size=chunk)
        np.testing.assert_array_equal(part.indices.numpy(), full.indices.numpy())
    for i in (0, 57, 199):
        alone = cosine_topk(queries[i : i + 1], base, n_neighbors=6)
        np.testing.assert_array_equal(alone.indices[0].numpy(), full.indices[i].numpy())


@pytest.mark.parametrize(
    "n_distinct, n_rows, k, threshold",
    [(50, 2000, 16, None), (300, 3000, 16, 0.2), (5, 400, 16, None), (40, 90, 8, 0.5)],
)
def test_a_refresh_over_few_distinct_rows_is_the_exact_search(
    n_distinct, n_rows, k, threshold
):
    # Rows repeat a few vectors (as a table with few distinct rows does): the
    # refresh searches the distinct vectors and expands them, and must give
    # the exact search's lists, ties (duplicates) to the lower row.
    generator = torch.Generator().manual_seed(n_distinct)
    vectors = torch.randn(n_distinct, 12, generator=generator)
    base = vectors[torch.randint(0, n_distinct, (n_rows,), generator=generator)]
    queries = torch.cat(
        [
            vectors[torch.randint(0, n_distinct, (60,), generator=generator)],
            torch.randn(30, 12, generator=generator),  # vectors not in base
        ]
    )
    own, other = refresh_graphs(base, queries, n_neighbors=k, threshold=threshold)
    for got, want in (
        (own, cosine_topk(base, n_neighbors=k, threshold=threshold)),
        (other, cosine_topk(queries, base, n_neighbors=k, threshold=threshold)),
    ):
        torch.testing.assert_close(got.indices, want.indices)
        torch.testing.assert_close(got.similarities, want.similarities)
        torch.testing.assert_close(got.mask, want.mask)


def test_the_distinct_lower_bound_counts_repeated_rows_once():
    from autoglm_graph.neighbors.refresh import _distinct_lower_bound

    rows = torch.nn.functional.normalize(
        torch.randn(40, 8, generator=torch.Generator().manual_seed(0)), dim=1
    )
    repeated = rows[torch.arange(200) % 40]
    assert _distinct_lower_bound(repeated) == 40
    # Exactly equal rows (here two rows, three times each) count once.
    tied = torch.zeros(6, 3)
    tied[:, 0] = 1.0
    tied[3:, 1] = 1.0
    assert _distinct_lower_bound(tied) == 2
