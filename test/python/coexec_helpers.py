"""Shared by the co-execution tests: build a program twice from one seed, run
one copy eagerly and one under terra, and compare after every step."""
from __future__ import annotations

import io
import math
from contextlib import redirect_stdout
from typing import Any, Callable

import torch
import torch.nn as nn
import torch.nn.functional as F

import terra

TOL = dict(rtol=1e-4, atol=1e-5)


def state_of(model: nn.Module, opt: torch.optim.Optimizer) -> dict[str, torch.Tensor]:
    out = {}
    for n, p in model.named_parameters():
        out["param:" + n] = p.detach().clone()
        if p.grad is not None:
            out["grad:" + n] = p.grad.detach().clone()
    names = {id(p): n for n, p in model.named_parameters()}
    for p, st in opt.state.items():
        for k, v in st.items():
            if isinstance(v, torch.Tensor):
                out[f"optim:{names[id(p)]}:{k}"] = v.detach().clone()
    for n, b in model.named_buffers():
        out["buffer:" + n] = b.detach().clone()
    return out


def assert_same(a: Any, b: Any, what: str) -> None:
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        # torch's message says how much differs and where: kept after `what`.
        torch.testing.assert_close(torch.as_tensor(a), torch.as_tensor(b), **TOL, msg=lambda m: f"{what}: {m}")
    elif isinstance(a, float) or isinstance(b, float):
        assert math.isclose(a, b, rel_tol=1e-4, abs_tol=1e-5), f"{what}: {a} != {b}"
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), what
        for i, (x, y) in enumerate(zip(a, b)):
            assert_same(x, y, f"{what}[{i}]")
    else:
        assert a == b, f"{what}: {a!r} != {b!r}"


def compare(make: Callable[[], tuple], inputs: list[tuple], max_fallbacks: int, expect_coexec: bool = True,
            **options: Any) -> dict:
    """`make()` returns (step, model, optimizer) built from a fixed seed."""
    torch.manual_seed(0)
    step_e, model_e, opt_e = make()
    torch.manual_seed(0)
    step_t, model_t, opt_t = make()
    fn = terra.function(step_t, cache_dir=None, **options)
    for i, args in enumerate(inputs):
        out_e, out_t = io.StringIO(), io.StringIO()
        err_e = err_t = None
        torch.manual_seed(100 + i)
        with redirect_stdout(out_e):
            try:
                r_e = step_e(*args)
            except Exception as exc:  # noqa: BLE001 - compared below
                err_e, r_e = exc, None
        torch.manual_seed(100 + i)
        with redirect_stdout(out_t):
            try:
                r_t = fn(*args)
            except Exception as exc:  # noqa: BLE001
                err_t, r_t = exc, None
        assert type(err_e) is type(err_t) and str(err_e) == str(err_t), f"step {i}: {err_e!r} vs {err_t!r}"
        assert out_e.getvalue() == out_t.getvalue(), f"step {i}: printed output differs"
        se, st = state_of(model_e, opt_e), state_of(model_t, opt_t)
        assert se.keys() == st.keys(), f"step {i}: state names differ"
        differ = []
        for what, a, b in [("result", r_t, r_e)] + [(k, st[k], se[k]) for k in se]:
            try:
                assert_same(a, b, f"step {i} {what}")
            except AssertionError as exc:
                differ.append(str(exc))
        # Every entry that differs, and what the step did: one wrong value
        # alone says little about a rare failure.
        assert not differ, "\n".join(differ + [f"step {i} of {terra.stats(fn)['steps'][-1:]}"])
    stats = terra.stats(fn)
    assert stats["fallbacks"] <= max_fallbacks, stats["fallback_log"]
    if expect_coexec:
        assert stats["coexec_iterations"] > 0, stats
    return stats


def batches(n: int, b: int = 8, d: int = 6, classes: int = 3, seed: int = 1) -> list[tuple]:
    g = torch.Generator().manual_seed(seed)
    return [(torch.randn(b, d, generator=g), torch.randint(0, classes, (b,), generator=g)) for _ in range(n)]


def images(n: int) -> list[tuple]:
    """Batches of four 2x8x8 images and their labels (of 3 classes)."""
    g = torch.Generator().manual_seed(3)
    return [(torch.randn(4, 2, 8, 8, generator=g), torch.randint(0, 3, (4,), generator=g)) for _ in range(n)]


def mlp(d: int = 6, classes: int = 3) -> nn.Module:
    return nn.Sequential(nn.Linear(d, 16), nn.Tanh(), nn.Linear(16, classes))


def sgd_program(read_item: bool = False, loss: Callable = lambda model, x, y: F.cross_entropy(model(x), y),
                model_fn: Callable[[], nn.Module] = lambda: mlp(), optimizer: Callable = torch.optim.SGD,
                **sgd: Any) -> Callable[[], tuple]:
    """`make` for a step that computes `loss(model, x, y)`, then backward and
    SGD (the plain MLP classifier by default; `optimizer` another torch
    optimizer, with lr 0.1 unless given), returning the loss tensor or,
    with `read_item`, its Python value."""
    def make() -> tuple:
        model = model_fn()
        opt = optimizer(model.parameters(), **{"lr": 0.1, **sgd})

        def step(x, y):
            value = loss(model, x, y)
            opt.zero_grad()
            value.backward()
            opt.step()
            return value.item() if read_item else value
        return step, model, opt
    return make
