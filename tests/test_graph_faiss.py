"""Tests for the approximate (faiss HNSW) backend of autoglm_graph.neighbors."""

from __future__ import annotations

import pickle
from functools import partial

import numpy as np
import pytest
import torch

faiss = pytest.importorskip("faiss")

from autoglm_graph import FitPolicy  # noqa: E402
from autoglm_graph.neighbors import (  # noqa: E402
    CosineNeighbors,
    NeighborCache,
    _faiss,
    cosine_topk,
    recall_at_k,
)
from autoglm_graph.neighbors import _search as graph_module  # noqa: E402
from autoglm_graph.neighbors._search import _resolve_backend  # noqa: E402
from autoglm_graph.neighbors._topk import faiss_topk  # noqa: E402
from autoglm_graph.neighbors._topk import fill_topk as fill  # noqa: E402
from autoglm_graph.neighbors.refresh import refresh_graphs  # noqa: E402
from autoglm_graph.policy import IndexSettings  # noqa: E402


def _clustered(n: int, d: int = 16, seed: int = 0) -> np.ndarray:
    """Gaussian mixture: the easy, tabular-like case."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((20, d)) * 3.0
    return centres[rng.integers(0, 20, n)] + rng.standard_normal((n, d))


def _isotropic(n: int, d: int = 32, seed: int = 0) -> np.ndarray:
    """Standard Gaussian rows: the hard case for graph indexes."""
    return np.random.default_rng(seed).standard_normal((n, d))


def _has_self(graph, rows: int) -> bool:
    return bool((graph.indices == torch.arange(rows).unsqueeze(1)).any())


@pytest.mark.parametrize("make", [_clustered, _isotropic])
def test_recall_against_exact(make):
    X = make(3000)
    exact = cosine_topk(X, n_neighbors=16)
    approx = cosine_topk(X, n_neighbors=16, backend="faiss")
    assert approx.indices.shape == (3000, 16)
    assert approx.indices.dtype == torch.int64
    assert approx.similarities.dtype == torch.float32
    assert approx.mask.all()
    assert recall_at_k(approx, exact) >= 0.95
    assert not _has_self(approx, 3000)
    # Sorted descending, and the similarities are the true cosines of the pairs.
    assert (approx.similarities[:, :-1] >= approx.similarities[:, 1:]).all()
    Xn = torch.nn.functional.normalize(torch.as_tensor(X, dtype=torch.float32))
    true = (Xn.unsqueeze(1) * Xn[approx.indices]).sum(-1)
    torch.testing.assert_close(approx.similarities, true, atol=1e-5, rtol=0)


def test_query_vs_base_recall():
    X, Y = _isotropic(200, seed=1), _isotropic(3000, seed=2)
    exact = cosine_topk(X, Y, n_neighbors=8)
    approx = cosine_topk(X, Y, n_neighbors=8, backend="faiss")
    assert recall_at_k(approx, exact) >= 0.95


def test_self_never_listed_with_duplicates():
    X = _clustered(100)
    X = np.concatenate([X, X])  # row i and row i + 100 are identical
    graph = cosine_topk(X, n_neighbors=3, backend="faiss")
    assert not _has_self(graph, 200)
    np.testing.assert_array_equal(
        graph.indices[:, 0].numpy(), (np.arange(200) + 100) % 200
    )
    # Forty copies of one row: self is often crowded out of the k + 1 found.
    same = np.ones((40, 4))
    graph = cosine_topk(same, n_neighbors=5, backend="faiss")
    assert graph.n_neighbors == 5
    assert not _has_self(graph, 40)


def test_exclude_self_false_and_explicit_base():
    X = _clustered(300)
    included = cosine_topk(X, n_neighbors=3, exclude_self=False, backend="faiss")
    np.testing.assert_array_equal(included.indices[:, 0].numpy(), np.arange(300))
    explicit = cosine_topk(X, X.copy(), n_neighbors=3, exclude_self=True)
    assert not _has_self(explicit, 300)


@pytest.mark.parametrize("tau", [-1.0, 0.5, 0.9, 1.5])
def test_threshold_mask_semantics(tau):
    X = _clustered(500)
    graph = cosine_topk(X, n_neighbors=8, threshold=tau, backend="faiss")
    torch.testing.assert_close(graph.mask, graph.similarities >= tau)
    plain = cosine_topk(X, n_neighbors=8, backend="faiss")
    torch.testing.assert_close(graph.indices, plain.indices)
    torch.testing.assert_close(graph.similarities, plain.similarities)


def test_width_clipped_when_k_exceeds_base_rows():
    X, Y = _clustered(6, seed=1), _clustered(4, seed=2)
    graph = cosine_topk(X, Y, n_neighbors=10, backend="faiss")
    assert graph.n_neighbors == 4
    assert graph.mask.all()
    assert (graph.indices.sort(dim=1).values == torch.arange(4)).all()
    own = cosine_topk(X, n_neighbors=10, backend="faiss")
    assert own.n_neighbors == 5
    assert own.mask.all() and not _has_self(own, 6)
    empty = cosine_topk(np.ones((1, 3)), n_neighbors=4, backend="faiss")
    assert empty.indices.shape == empty.mask.shape == (1, 0)


def test_missing_results_are_masked_and_last():
    # faiss pads with id -1 when it finds fewer than k rows.
    ids = np.array([[0, 2, 5, -1], [3, 4, -1, -1], [-1, -1, -1, -1]])
    dist = np.array(
        [[1.0, 0.5, 0.7, -3e38], [0.9, 0.8, -3e38, -3e38], [-3e38] * 4],
        dtype=np.float32,
    )
    sim, idx = _faiss.finish(*_faiss.drop_self(dist, ids, 3), "cpu", torch.float64)
    assert sim.dtype == torch.float64
    # Row 0 drops itself; row 1 lacks itself, so drops its last (a -1).
    assert idx.tolist() == [[5, 2, -1], [3, 4, -1], [-1, -1, -1]]
    assert sim[0].tolist()[:2] == [pytest.approx(0.7), 0.5]
    assert torch.isneginf(sim[idx < 0]).all()


def test_missing_results_reach_the_mask(monkeypatch):
    def fake_search(self, queries, k, exclude_self):
        n = queries.shape[0]
        # Two neighbours found (never the row itself), then -1 padding.
        ids = np.full((n, k + int(exclude_self)), -1)
        ids[:, 0], ids[:, 1] = (np.arange(n) + 1) % n, (np.arange(n) + 2) % n
        dist = np.where(ids < 0, -3e38, 0.5).astype(np.float32)
        if exclude_self:
            dist, ids = _faiss.drop_self(dist, ids, k)
        return _faiss.finish(dist, ids, queries.device, queries.dtype)

    monkeypatch.setattr(_faiss.HNSWIndex, "search", fake_search)
    graph = cosine_topk(_clustered(10), n_neighbors=3, backend="faiss")
    assert graph.indices[:, -1].tolist() == [-1] * 10
    assert not graph.mask[:, -1].any() and graph.mask[:, :-1].all()
    thresholded = cosine_topk(
        _clustered(10), n_neighbors=3, threshold=-10.0, backend="faiss"
    )
    assert not thresholded.mask[:, -1].any()
    edge_index, _ = graph.to_edge_index()
    assert edge_index.shape == (2, 20) and (edge_index >= 0).all()


def test_dtype_device_and_detach():
    X = torch.randn(400, 8, dtype=torch.float64, requires_grad=True)
    graph = cosine_topk(X, n_neighbors=4, dtype=torch.float64, backend="faiss")
    assert graph.similarities.dtype == torch.float64
    assert not graph.similarities.requires_grad
    assert graph.indices.device == X.device


def test_auto_backend_choice(monkeypatch):
    cpu, cuda = torch.device("cpu"), torch.device("cuda")
    resolve = partial(_resolve_backend, policy=FitPolicy())
    assert resolve("auto", 1000, 1000, cpu) == "exact"
    assert resolve("auto", 10**6, 10**6, cpu) == "faiss"
    assert resolve("auto", 10, 10**6, cpu) == "exact"  # few queries
    assert resolve("auto", 10**6, 10**6, cuda) == "exact"
    assert resolve("auto", 2 * 10**7, 2 * 10**7, cuda) == "faiss"
    monkeypatch.setattr(_faiss, "faiss_available", lambda: False)
    assert resolve("auto", 10**6, 10**6, cpu) == "exact"


def test_auto_small_input_is_exact():
    X = _isotropic(500)
    auto = cosine_topk(X, n_neighbors=5, backend="auto")
    exact = cosine_topk(X, n_neighbors=5)
    torch.testing.assert_close(auto.indices, exact.indices)
    torch.testing.assert_close(auto.similarities, exact.similarities)
    assert CosineNeighbors(backend="auto").fit(X).backend_ == "exact"


def test_index_params_are_used():
    X = _isotropic(2000)
    exact = cosine_topk(X, n_neighbors=16)
    weak = cosine_topk(
        X,
        n_neighbors=16,
        backend="faiss",
        index_params={"m": 4, "ef_construction": 8, "ef_search": 1},
    )
    assert recall_at_k(weak, exact) < 0.95  # a tiny graph misses neighbours
    assert weak.mask.all()  # efSearch is raised to k + 1, so all k are found


def _count_index_builds(monkeypatch) -> list:
    built = []
    original = _faiss.HNSWIndex.__init__

    def counting_init(self, *args, **kwargs):
        built.append(1)
        original(self, *args, **kwargs)

    monkeypatch.setattr(_faiss.HNSWIndex, "__init__", counting_init)
    return built


def test_cosine_neighbors_faiss_builds_index_once(monkeypatch):
    X, Q = _isotropic(2000, seed=1), _isotropic(50, seed=2)
    built = _count_index_builds(monkeypatch)
    nn = CosineNeighbors(n_neighbors=8, threshold=0.3, backend="faiss").fit(X)
    assert nn.backend_ == "faiss" and nn.index_ is not None
    own, queries = nn.kneighbors(), nn.kneighbors(Q, n_neighbors=4)
    assert len(built) == 1
    assert not _has_self(own, 2000)
    assert recall_at_k(own, cosine_topk(X, n_neighbors=8, threshold=0.3)) >= 0.95
    assert queries.n_neighbors == 4
    assert recall_at_k(queries, cosine_topk(Q, X, n_neighbors=4)) >= 0.95
    torch.testing.assert_close(own.mask, own.similarities >= 0.3)
    restored = pickle.loads(pickle.dumps(nn))
    torch.testing.assert_close(restored.kneighbors(Q, 4).indices, queries.indices)


def test_neighbor_cache_passes_backend():
    cache = NeighborCache(backend="faiss")
    X = torch.as_tensor(_clustered(500), dtype=torch.float32)
    wide = cache.search(X, n_neighbors=8, threshold=None)
    narrow = cache.search(X, n_neighbors=3, threshold=0.5)
    assert cache.n_searches == 1
    assert recall_at_k(wide, cosine_topk(X, n_neighbors=8)) >= 0.95
    torch.testing.assert_close(narrow.indices, wide.indices[:, :3])


def test_neighbor_cache_reuses_one_index_per_base(monkeypatch):
    built = _count_index_builds(monkeypatch)
    cache = NeighborCache(backend="faiss")
    X = torch.as_tensor(_clustered(600), dtype=torch.float32)
    V = torch.as_tensor(_clustered(80, seed=3), dtype=torch.float32)
    own = cache.search(X, n_neighbors=6, threshold=None)
    val = cache.search(V, X, n_neighbors=6, threshold=0.2)
    assert len(built) == 1 and cache.n_searches == 2
    assert not _has_self(own, 600)
    assert recall_at_k(val, cosine_topk(V, X, n_neighbors=6, threshold=0.2)) >= 0.95
    index = cache.index_for(X)
    assert isinstance(index, CosineNeighbors) and index.threshold is None
    assert cache.index_for(V) is None
    # The exact backend keeps no index.
    exact = NeighborCache(backend="exact")
    exact.search(X, n_neighbors=6, threshold=None)
    assert exact.index_for(X) is None and len(built) == 1


def test_fit_hands_its_index_to_prediction(monkeypatch):
    from autoglm_graph import GraphGLMRegressor
    from autoglm_graph.datasets import make_varying_coefficients

    X, y, _ = make_varying_coefficients(700, 4, 2, random_state=0)
    built = _count_index_builds(monkeypatch)
    model = GraphGLMRegressor(
        graph_backend="faiss", graph_space="input", max_epochs=3, random_state=0
    )
    model.fit(X[:600], y[:600])
    assert not model.is_global_only_
    assert len(built) == 1  # training rows among themselves, then validation
    first = model.predict(X[600:])
    assert len(built) == 1  # prediction searched the fit's index
    base, index = model._fitted.index
    assert base is model._fitted.rows.context
    assert index.backend_ == "faiss"
    np.testing.assert_allclose(model.predict(X[600:]), first)


def test_faiss_threads_restored():
    before = faiss.omp_get_max_threads()
    cosine_topk(_clustered(100), n_neighbors=3, backend="faiss")
    assert faiss.omp_get_max_threads() == before


def test_ef_search_is_calibrated_to_the_target_recall():
    X, Q = _isotropic(6000, seed=4), _isotropic(800, seed=5)
    exact = cosine_topk(Q, X, n_neighbors=16)
    recalls, efs = {}, {}
    for target in (0.6, 0.95):
        nn = CosineNeighbors(
            n_neighbors=16, backend="faiss", index_params={"target_recall": target}
        ).fit(X)
        got = nn.kneighbors(Q)
        efs[target], estimate = nn.index_.calibration[(16, False)]
        recalls[target] = recall_at_k(got, exact)
        # The estimate is the recall on (a sample of) these very queries.
        assert abs(estimate - recalls[target]) < 0.03
        assert estimate >= target
    assert efs[0.6] < efs[0.95]
    assert recalls[0.95] >= 0.95
    # Searches of the indexed rows themselves are calibrated apart.
    nn.kneighbors()
    assert (17, True) in nn.index_.calibration


@pytest.mark.parametrize("bad", [0, 1.5, -0.1, True, "high"])
def test_bad_target_recall_raises(bad):
    with pytest.raises(ValueError, match="target_recall"):
        CosineNeighbors(backend="faiss", index_params={"target_recall": bad}).fit(
            _isotropic(50)
        )


def test_the_policy_s_index_settings_reach_the_hnsw_index():
    """The HNSW degree, insertion candidates and the calibration's ladder are
    the policy's (``FitPolicy.index``); ``index_params`` override them."""
    X = _isotropic(1500)
    settings = IndexSettings(
        m=8, ef_construction=20, ef_ladder=(2, 3), target_recall=0.5
    )
    policy = FitPolicy(index=settings)
    nn = CosineNeighbors(n_neighbors=4, backend="faiss", policy=policy).fit(X)
    hnsw = nn.index_.index.hnsw
    assert (hnsw.nb_neighbors(1), hnsw.efConstruction) == (8, 20)
    nn.kneighbors()
    ef, _ = nn.index_.calibration[(5, True)]
    assert ef in (10, 15)  # 2 or 3 times the 5 results asked for
    given = CosineNeighbors(
        n_neighbors=4, backend="faiss", policy=policy, index_params={"m": 12}
    ).fit(X)
    assert given.index_.index.hnsw.nb_neighbors(1) == 12
    assert given.index_.target_recall == 0.5
    default = CosineNeighbors(n_neighbors=4, backend="faiss").fit(X)
    assert default.index_.index.hnsw.nb_neighbors(1) == IndexSettings().m


def test_the_policy_s_index_settings_reach_the_ivf_calibration():
    X = torch.as_tensor(_clustered(3000), dtype=torch.float32)
    settings = IndexSettings(nprobe_ladder=(3,), ivf_calibration_rows=50)
    own, _ = refresh_graphs(
        X, None, n_neighbors=8, backend="ivf", policy=FitPolicy(index=settings)
    )
    nn = CosineNeighbors(
        n_neighbors=8, backend="ivf", policy=FitPolicy(index=settings)
    ).fit(X)
    nn.kneighbors()
    assert nn.index_.calibration[0] in (3, None)  # the ladder's one setting
    assert recall_at_k(own, cosine_topk(X, n_neighbors=8)) >= 0.9


# ------------------------------------------------------------------------ IVF


@pytest.mark.parametrize("make", [_clustered, _isotropic])
def test_ivf_recall_against_exact(make, monkeypatch):
    X = make(4000)
    exact = cosine_topk(X, n_neighbors=16)
    exact_searches = []
    monkeypatch.setattr(
        graph_module, "fill_topk", lambda *a: exact_searches.append(1) or fill(*a)
    )
    monkeypatch.setattr(
        graph_module,
        "faiss_topk",
        lambda *a: exact_searches.append(1) or faiss_topk(*a),
    )
    approx = cosine_topk(X, n_neighbors=16, backend="ivf")
    assert approx.indices.shape == (4000, 16)
    assert not _has_self(approx, 4000)
    assert (approx.similarities[:, :-1] >= approx.similarities[:, 1:]).all()
    assert recall_at_k(approx, exact) >= 0.95  # the calibration's target
    # Clustered rows are searched in a few lists; isotropic ones (nothing to
    # partition by) would need most lists, so they are searched exactly.
    assert exact_searches == ([] if make is _clustered else [1])
    Xn = torch.nn.functional.normalize(torch.as_tensor(X, dtype=torch.float32))
    found = approx.mask
    true = (Xn.unsqueeze(1) * Xn[approx.indices.clamp(min=0)]).sum(-1)
    torch.testing.assert_close(
        approx.similarities[found], true[found], atol=1e-5, rtol=0
    )


def test_ivf_calibration_sample_search_is_faiss_exhaustive_search():
    rng = np.random.default_rng(0)
    data = rng.normal(size=(700, 8)).astype(np.float32)
    data /= np.linalg.norm(data, axis=1, keepdims=True)
    sample = data[::7].copy()
    values, ids = _faiss._sample_topk(sample, data, 9)
    inner_product = faiss.METRIC_INNER_PRODUCT
    want_values, want_ids = faiss.knn(sample, data, 9, metric=inner_product)
    np.testing.assert_allclose(values, want_values, atol=1e-6)
    assert np.array_equal(np.sort(ids, axis=1), np.sort(want_ids, axis=1))
    # Fewer rows than results asked for: padded as faiss pads.
    values, ids = _faiss._sample_topk(sample[:3], data[:5], 7)
    assert ids.shape == (3, 7) and (ids[:, 5:] == -1).all()
    assert np.isneginf(values[:, 5:]).all() and np.isfinite(values[:, :5]).all()


def test_ivf_index_params_trade_recall_for_time():
    X = _isotropic(3000)
    exact = cosine_topk(X, n_neighbors=8)
    weak = cosine_topk(X, n_neighbors=8, backend="ivf", index_params={"nprobe": 1})
    full = cosine_topk(
        X, n_neighbors=8, backend="ivf", index_params={"nlist": 4, "nprobe": 4}
    )
    assert recall_at_k(weak, exact) < 0.6
    assert recall_at_k(full, exact) == 1.0  # every list scanned: exact
    with pytest.raises(ValueError, match="Unknown key 'm'"):
        cosine_topk(X, backend="ivf", index_params={"m": 8})
    with pytest.raises(ValueError, match="Unknown key 'nprobe'"):
        cosine_topk(X, backend="faiss", index_params={"nprobe": 8})


def test_ivf_small_inputs_and_queries_among_base():
    X, Y = _clustered(30, seed=1), _clustered(100, seed=2)
    graph = cosine_topk(X, Y, n_neighbors=5, backend="ivf")  # 2 lists
    assert graph.indices.shape == (30, 5)
    assert recall_at_k(graph, cosine_topk(X, Y, n_neighbors=5)) >= 0.9
    fitted = CosineNeighbors(n_neighbors=4, backend="ivf").fit(Y)
    assert fitted.backend_ == "ivf" and isinstance(fitted.index_, _faiss.IVFIndex)
    assert not _has_self(fitted.kneighbors(), 100)


def test_ivf_index_pickles():
    X = _clustered(2000)
    fitted = CosineNeighbors(n_neighbors=5, backend="ivf").fit(X)
    restored = pickle.loads(pickle.dumps(fitted))
    assert torch.equal(
        restored.kneighbors(X[:50]).indices, fitted.kneighbors(X[:50]).indices
    )


def test_refresh_backend_choice(monkeypatch):
    from autoglm_graph.neighbors.refresh import refresh_backend

    cpu, cuda = torch.device("cpu"), torch.device("cuda")
    assert refresh_backend("auto", 20_000, cpu) == "ivf"
    assert refresh_backend("auto", 1_000, cpu) == "auto"  # small: exact search
    assert refresh_backend("auto", 20_000, cuda) == "auto"
    assert refresh_backend("exact", 20_000, cpu) == "exact"
    assert refresh_backend("faiss", 20_000, cpu) == "faiss"
    monkeypatch.setattr(_faiss, "faiss_available", lambda: False)
    assert refresh_backend("auto", 20_000, cpu) == "auto"


def test_training_refreshes_search_both_row_sets_in_one_ivf_index(monkeypatch):
    """A refresh builds one IVF index over the training rows' embedding; the
    validation rows are searched in it too (not in an exact search of their
    own)."""
    from autoglm_graph import GraphGLMRegressor
    from autoglm_graph.neighbors import refresh

    builds, searches = [], []
    build, search = refresh._build_index, refresh._search

    def spy_build(Yn, index_params, kind, settings):
        builds.append((Yn.shape[0], kind))
        return build(Yn, index_params, kind, settings)

    def spy_search(Xn, Yn, *args, index=None, **kwargs):
        searches.append((Xn.shape[0], index is not None))
        return search(Xn, Yn, *args, index=index, **kwargs)

    monkeypatch.setattr(refresh, "_build_index", spy_build)
    monkeypatch.setattr(refresh, "_search", spy_search)
    rng = np.random.default_rng(0)
    X = rng.standard_normal((400, 3))
    y = rng.poisson(np.exp(0.3 * X[:, 0]))
    GraphGLMRegressor(
        family="poisson",
        device="cpu",  # IVF refreshes are the CPU's (CUDA searches exactly)
        max_epochs=12,
        graph_refresh=5,
        random_state=0,
        fit_policy=FitPolicy(refresh_ivf_min_rows=100),
    ).fit(X, y)
    assert builds and set(builds) == {(360, "ivf")}  # one index per refresh
    in_index = [s for s in searches if s[1]]
    assert in_index == [(360, True), (40, True)] * len(builds)


@pytest.mark.parametrize("make", [_clustered, _isotropic])
def test_refresh_graphs_match_separate_searches(make):
    X = torch.as_tensor(make(4000), dtype=torch.float32)
    base, queries = X[:3500], X[3500:]
    own, other = refresh_graphs(base, queries, n_neighbors=16, backend="ivf")
    assert recall_at_k(own, cosine_topk(base, n_neighbors=16)) >= 0.95
    assert recall_at_k(other, cosine_topk(queries, base, n_neighbors=16)) >= 0.95
    assert other.indices.shape == (500, 16) and own.indices.shape == (3500, 16)
    assert refresh_graphs(base, None)[1] is None
    exact_own, exact_other = refresh_graphs(base, queries, backend="exact")
    assert torch.equal(exact_other.indices, cosine_topk(queries, base).indices)
    assert torch.equal(exact_own.indices, cosine_topk(base).indices)
