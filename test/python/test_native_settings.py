"""The native runtime's process-wide settings and the environment variables
that set them (python/terra/native.py)."""
from __future__ import annotations

import pytest

from terra import native

NATIVE = native.load()


def test_wait_spin_from_the_environment(monkeypatch) -> None:
    monkeypatch.delenv("TERRA_WAIT_SPIN_US", raising=False)
    assert native.wait_spin_us() is None  # the runtime's default stays
    monkeypatch.setenv("TERRA_WAIT_SPIN_US", "250")
    assert native.wait_spin_us() == 250.0
    monkeypatch.setenv("TERRA_WAIT_SPIN_US", "0")
    assert native.wait_spin_us() == 0.0
    for bad in ("-1", "fast", "nan"):
        monkeypatch.setenv("TERRA_WAIT_SPIN_US", bad)
        with pytest.raises(ValueError, match=f"TERRA_WAIT_SPIN_US must be .* not '{bad}'"):
            native.wait_spin_us()


def test_wait_spin_setter_round_trips_and_refuses_negative_values() -> None:
    saved = NATIVE.wait_spin_us()
    try:
        NATIVE.set_wait_spin_us(12.5)
        assert NATIVE.wait_spin_us() == 12.5
        NATIVE.set_wait_spin_us(0)
        assert NATIVE.wait_spin_us() == 0.0
        with pytest.raises(ValueError, match="must be >= 0"):
            NATIVE.set_wait_spin_us(-3)
        assert NATIVE.wait_spin_us() == 0.0
    finally:
        NATIVE.set_wait_spin_us(saved)


def test_graph_threads_from_the_environment(monkeypatch) -> None:
    monkeypatch.setenv("TERRA_GRAPH_THREADS", "3")
    assert native.graph_threads() == 3
    for bad in ("0", "two"):
        monkeypatch.setenv("TERRA_GRAPH_THREADS", bad)
        with pytest.raises(ValueError, match="TERRA_GRAPH_THREADS must be a positive integer"):
            native.graph_threads()


def test_host_cache_from_the_environment(monkeypatch) -> None:
    monkeypatch.delenv("TERRA_HOST_CACHE_MB", raising=False)
    assert native.host_cache_mb() is None
    monkeypatch.setenv("TERRA_HOST_CACHE_MB", "512")
    assert native.host_cache_mb() == 512.0
    for bad in ("-1", "lots"):
        monkeypatch.setenv("TERRA_HOST_CACHE_MB", bad)
        with pytest.raises(ValueError, match=f"TERRA_HOST_CACHE_MB must be .* not '{bad}'"):
            native.host_cache_mb()


def test_host_cache_keeps_a_graphs_buffers_for_the_next_run() -> None:
    # A graph that allocates a 1 MiB intermediate: the second run takes the
    # buffer the first freed from the cache instead of the system.
    import numpy as np
    import torch

    import terra

    saved = NATIVE.host_cache_stats()["limit_bytes"] / 1048576
    NATIVE.host_cache_release()
    try:
        w = torch.nn.Parameter(torch.randn(512, 512))

        @terra.function
        def step(x):
            return ((x @ w) * 2).sum().item()

        x = torch.randn(512, 512)
        for _ in range(8):
            step(x)
        step.wait_compiled()
        before = NATIVE.host_cache_stats()
        assert np.isclose(step(x), ((x @ w) * 2).sum().item(), rtol=1e-4)
        after = NATIVE.host_cache_stats()
        assert after["hits"] > before["hits"]
        with pytest.raises(ValueError, match="must be >= 0"):
            NATIVE.set_host_cache_mb(-1)
        NATIVE.set_host_cache_mb(0)
        assert NATIVE.host_cache_stats()["cached_bytes"] == 0
    finally:
        NATIVE.set_host_cache_mb(saved)
