"""How many query rows a similarity tile holds, per device."""

from __future__ import annotations

import torch

from autoglm_graph.neighbors._topk import _auto_chunk_size


def test_a_cuda_tile_takes_a_share_of_the_free_memory(monkeypatch):
    # A device with 16 GiB free: a quarter of it, 4 GiB, per tile.
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device: (16 * 2**30, 0))
    rows = _auto_chunk_size(1_000_000, 4, torch.device("cuda"))
    assert rows == 4 * 2**30 // 4_000_000


def test_a_cuda_tile_is_capped(monkeypatch):
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device: (140 * 2**30, 0))
    assert (
        _auto_chunk_size(1_000_000, 4, torch.device("cuda")) == 8 * 2**30 // 4_000_000
    )


def test_a_cpu_tile_stays_in_the_cache_sized_target():
    assert _auto_chunk_size(100_000, 4, torch.device("cpu")) == 32 * 2**20 // 400_000
    assert _auto_chunk_size(10**9, 4, torch.device("cpu")) == 1
