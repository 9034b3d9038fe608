"""The native runtime's process-wide settings and the environment variables
that set them (python/terra/native.py); a Session used from several threads;
native backtraces of fatal signals (TERRA_NATIVE_BACKTRACE); a finished run freed
by its runner thread (Run.retire); state specs that stand crossing as the same
objects (SpecCache)."""
from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import torch

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
        g = torch.Generator().manual_seed(0)
        w = torch.nn.Parameter(torch.randn(512, 512, generator=g))

        @terra.function
        def step(x):
            return ((x @ w) * 2).sum().item()

        x = torch.randn(512, 512, generator=g)
        for _ in range(8):
            step(x)
        step.wait_compiled()
        before = NATIVE.host_cache_stats()
        # A sum of 262144 products in f32, in another order than ATen's: its
        # error scales with the sum of magnitudes, not with the (cancelling)
        # sum itself (with unseeded inputs it exceeded rtol=1e-4 at times).
        terms = (x @ w) * 2
        assert np.isclose(step(x), terms.sum().item(), rtol=0,
                          atol=1e-6 * terms.abs().sum().item())
        after = NATIVE.host_cache_stats()
        assert after["hits"] > before["hits"]
        with pytest.raises(ValueError, match="must be >= 0"):
            NATIVE.set_host_cache_mb(-1)
        NATIVE.set_host_cache_mb(0)
        assert NATIVE.host_cache_stats()["cached_bytes"] == 0
    finally:
        NATIVE.set_host_cache_mb(saved)


def test_a_session_compiles_on_one_thread_while_others_use_it(monkeypatch) -> None:
    """The front end compiles on a background thread with the GIL released;
    another compile, a trace added, or a key described meanwhile waits for
    it (the session's MLIR context is single-threaded: a GPU compile
    started while the function's own compile ran crashed in attribute
    uniquing)."""
    import terra
    from coexec_helpers import batches, sgd_program
    monkeypatch.setenv("TERRA_BACKGROUND_COMPILE", "1")  # the tests' default is 0
    torch.manual_seed(0)
    step, model, opt = sgd_program(momentum=0.9)()
    fn = terra.function(step, cache_dir=None)
    for x, y in batches(3):
        fn(x, y)  # the third call starts the function's compile
    session = fn.session
    errors = []

    def compile_often(device):
        try:
            for _ in range(2):
                graph, stages = session.compile("", 64, True, device)
                assert "linalg" in stages["linalg"]
        except Exception as exc:  # reported below
            if "no CUDA runtime" not in str(exc):
                errors.append(exc)

    # A GPU compile makes attributes a CPU one never made (in a build with
    # the CUDA runtime; one without refuses at once).
    threads = [threading.Thread(target=compile_often, args=(d,)) for d in ("cuda", "cpu")]
    for t in threads:
        t.start()
    compile_often("cuda")
    while any(t.is_alive() for t in threads):
        assert "terra.trace_graph" in session.trace_graph_text()
        session.describe_key(0)
    for t in threads:
        t.join()
    assert not errors, errors


CRASH = """
import ctypes, faulthandler, sys, threading
faulthandler.enable()
sys.path.insert(0, {python!r})
from terra import native
native.load()
t = threading.Thread(target=lambda: ctypes.string_at(8), name="crasher")
t.start()
t.join()
"""


@pytest.mark.parametrize("target", ["stderr", "file"])
def test_a_fatal_signal_on_a_native_thread_prints_its_native_stack(target: str, tmp_path: Path) -> None:
    """With TERRA_NATIVE_BACKTRACE the faulting thread's native stack comes
    first (to stderr, or appended to the named file: pytest captures
    stderr), then faulthandler's Python stacks: the handler it replaced
    still runs."""
    log = tmp_path / "bt.log"
    env = dict(os.environ, TERRA_NATIVE_BACKTRACE="1" if target == "stderr" else str(log))
    python = str(Path(native.__file__).resolve().parents[1])
    proc = subprocess.run([sys.executable, "-c", CRASH.format(python=python)], env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == -11, proc
    native_stack = proc.stderr if target == "stderr" else log.read_text()
    assert "terra: fatal signal 11 (Segmentation fault) at address 0x8" in native_stack, proc.stderr
    assert "libc.so" in native_stack and "#3 " in native_stack, native_stack
    assert "Fatal Python error: Segmentation fault" in proc.stderr
    assert "in <lambda>" in proc.stderr
    if target == "stderr":
        assert proc.stderr.index("terra: fatal signal") < proc.stderr.index("Fatal Python error")


def test_a_finished_run_is_freed_by_its_runner_and_its_tensors_are_released(monkeypatch) -> None:
    # Run.retire hands a finished run to the runner thread; the Python
    # objects it held (state and feed tensors) are released by the host at
    # the next run's start (pyOwner): none leaks, and a retired run refuses
    # to be used.
    import gc
    import weakref

    import terra
    from terra.coexec import CoExecutor

    runs = []
    release = CoExecutor.release

    def keep_run(self):
        runs.append(self.run)
        return release(self)

    w = torch.nn.Parameter(torch.randn(8, 8))

    @terra.function
    def step(x):
        return (x @ w).relu().sum()

    for _ in range(6):
        step(torch.randn(8, 8))
    step.wait_compiled()
    monkeypatch.setattr(CoExecutor, "release", keep_run)
    refs = []
    for _ in range(4):
        x = torch.randn(8, 8)
        refs.append(weakref.ref(x))
        assert torch.allclose(step(x), (x @ w).relu().sum())
        del x
    assert step.stats.steps[-1]["phase"] == "coexec"
    with pytest.raises(ValueError, match="retired"):
        runs[-1].fetch(0, 1)
    runs.clear()
    gc.collect()
    assert [r() is None for r in refs[:-1]] == [True] * 3  # the last may wait for the next step


def test_a_standing_state_crosses_as_the_same_specs() -> None:
    # With the dispatch hook, a co-executed step's state specs are the last
    # step's objects while they stand, and the runtime reuses what it read
    # from them (SpecCache); a parameter given new memory crosses as a new
    # spec: the graph reads and commits there, as eager updates it.
    if native.load_dispatch() is None:
        pytest.skip("the dispatch hook is not built")
    import terra

    def make():
        torch.manual_seed(0)
        w = torch.nn.Parameter(torch.randn(8, 8))
        opt = torch.optim.SGD([w], lr=0.1, momentum=0.9)

        def step(x):
            loss = (x @ w).tanh().sum()
            opt.zero_grad()
            loss.backward()
            opt.step()
            return loss
        return w, step

    w, fn = make()
    w_ref, ref = make()
    fn = terra.function(fn)
    g = torch.Generator().manual_seed(1)
    seen = []
    for i in range(12):
        if i == 9:
            fresh = torch.randn(8, 8, generator=g)
            w.data, w_ref.data = fresh.clone(), fresh.clone()
        x = torch.randn(8, 8, generator=g)
        torch.testing.assert_close(fn(x), ref(x))
        torch.testing.assert_close(w, w_ref)
        if i == 5:
            fn.wait_compiled()
        if fn.stats.steps[-1]["phase"] == "coexec":
            seen.append((i, list(fn.state_specs_seen)))
    assert [i for i, _ in seen][-4:] == [8, 9, 10, 11]
    specs = dict(seen)
    at = next(k for k, s in enumerate(specs[8]) if s[4] is w)
    assert specs[8][at] is not specs[9][at]  # new memory: a new spec
    assert all(a is b for a, b in zip(specs[10], specs[11]))  # standing: the same ones
