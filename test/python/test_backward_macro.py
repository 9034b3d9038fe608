"""Backward passes replayed whole (python/terra/backward.py): once a
replayed pass has run through the autograd engine with nothing else
running, later replays make its results without the engine.

Every test compares with eager PyTorch after every step (coexec_helpers.
compare) and counts the passes replayed whole, so a macro that silently
stopped being used, or was used where the engine would have done something
else (a hook, another graph, another gradient state), fails."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import terra
from terra import backward
from terra.native import NativeModuleMissing, load

try:
    load()
except NativeModuleMissing as exc:  # pragma: no cover - the build makes it
    pytest.skip(str(exc), allow_module_level=True)

from coexec_helpers import batches, compare, images, mlp, sgd_program  # noqa: E402


def _training(model: nn.Module, opt: torch.optim.Optimizer, before: Any = None, forward: Any = None,
              set_to_none: bool = False) -> tuple:
    """(step, model, opt) of a plain training step: `before(n)` runs first
    at the n-th step, `forward(x)` gives the logits (the model's by default)."""
    n = [0]

    def step(x, y):
        n[0] += 1
        if before is not None:
            before(n[0])
        loss = F.cross_entropy((forward or model)(x), y)
        opt.zero_grad(set_to_none=set_to_none)
        loss.backward()
        opt.step()
        return loss
    return step, model, opt


def _macros(stats: dict) -> list[int]:
    return [s.get("backward_macros", 0) for s in stats["steps"] if s["phase"] == "coexec"]


@pytest.mark.parametrize("optimizer", [torch.optim.SGD, torch.optim.Adam])
@pytest.mark.parametrize("set_to_none", [False, True])
def test_a_backward_pass_is_replayed_whole_after_its_validation(optimizer: Any, set_to_none: bool) -> None:
    def make() -> tuple:
        model = mlp()
        return _training(model, optimizer(model.parameters(), lr=0.05), set_to_none=set_to_none)
    stats = compare(make, batches(10), max_fallbacks=0)
    macros = _macros(stats)
    # recorded, validated, then every later step replays its pass whole
    assert macros[:2] == [0, 0] and macros[2:] == [1] * (len(macros) - 2), macros
    validations = [s.get("backward_validations", 0) for s in stats["steps"] if s["phase"] == "coexec"]
    assert validations == [0, 1] + [0] * (len(macros) - 2), validations


def test_the_macro_leaves_exactly_what_the_engine_driven_replay_leaves(monkeypatch: pytest.MonkeyPatch) -> None:
    finals = []
    for enabled in (True, False):
        monkeypatch.setattr(backward, "ENABLED", enabled)
        torch.manual_seed(0)
        step, model, opt = sgd_program(momentum=0.9)()
        fn = terra.function(step, cache_dir=None)
        losses = [fn(x, y).item() for x, y in batches(8)]
        finals.append((losses, [p.detach().clone() for p in model.parameters()],
                       [p.grad.detach().clone() for p in model.parameters()], sum(_macros(terra.stats(fn)))))
    (la, pa, ga, ma), (lb, pb, gb, mb) = finals
    assert ma > 0 and mb == 0
    assert la == lb
    assert all(torch.equal(a, b) for a, b in zip(pa + ga, pb + gb))


def test_two_passes_per_step_with_gradients_accumulated_in_between() -> None:
    def make() -> tuple:
        model = mlp()
        opt = torch.optim.SGD(model.parameters(), lr=0.1)

        def step(x, y):
            opt.zero_grad()
            F.cross_entropy(model(x[:4]), y[:4]).backward()
            F.cross_entropy(model(x[4:]), y[4:]).backward()
            opt.step()
        return step, model, opt
    stats = compare(make, batches(8), max_fallbacks=0)
    assert _macros(stats)[-1] == 2, _macros(stats)


@pytest.mark.parametrize("set_to_none", [False, True])
def test_gradients_the_program_keeps_hold_each_steps_values(set_to_none: bool) -> None:
    """The program keeps every step's `.grad` tensors (and, without
    set_to_none, the same tensor each step): what a pass replayed whole
    leaves unmade must not be what the program reads later."""
    kept: dict = {}

    def make() -> tuple:
        model = mlp()
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        history = kept.setdefault(len(kept), [])

        def step(x, y):
            loss = F.cross_entropy(model(x), y)
            opt.zero_grad(set_to_none=set_to_none)
            loss.backward()
            history.append([p.grad for p in model.parameters()])
            opt.step()
            return loss
        return step, model, opt
    stats = compare(make, batches(10), max_fallbacks=0)
    assert _macros(stats)[-4:] == [1] * 4, _macros(stats)
    eager, co = kept[0], kept[1]  # compare() runs eager first
    assert len(eager) == len(co)
    for n, (a, b) in enumerate(zip(eager, co)):
        for ga, gb in zip(a, b):
            assert torch.allclose(ga, torch.as_tensor(gb), rtol=1e-5, atol=1e-7), f"step {n}"


@pytest.mark.parametrize("set_to_none", [False, True])
def test_gradients_accumulated_over_two_steps_take_the_pass_that_fits(set_to_none: bool) -> None:
    """zero_grad every other step: a pass into `None` gradients (taken over)
    and one into existing ones (added) have the same forward; the macro
    must tell them apart by the gradients' state."""
    def make() -> tuple:
        model = mlp()
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        count = [0]

        def step(x, y):
            F.cross_entropy(model(x), y).backward()
            count[0] += 1
            if count[0] % 2 == 0:
                opt.step()
                opt.zero_grad(set_to_none=set_to_none)
        return step, model, opt
    stats = compare(make, batches(14), max_fallbacks=2)
    if not set_to_none:
        assert sum(_macros(stats)[-6:]) == 6, _macros(stats)
    # With set_to_none the tapes end before the backward pass (a catch-up
    # there cannot record aten.t: docs/frontend.md, "Known limits"): only
    # the results are compared.


def test_a_hook_registered_mid_training_runs_as_in_eager() -> None:
    calls: dict = {}

    def make() -> tuple:
        model = mlp()
        seen = calls.setdefault(id(model), [])

        def before(n: int) -> None:
            if n == 6:  # halves the first layer's gradient from now on, and counts
                model[0].weight.register_hook(lambda g: (seen.append(1), g * 0.5)[1])
        return _training(model, torch.optim.SGD(model.parameters(), lr=0.1), before)
    stats = compare(make, batches(10), max_fallbacks=2)
    counts = sorted(len(v) for v in calls.values())
    assert counts == [5, 5], counts
    assert _macros(stats)[-1] == 0  # the hook's pass always runs through the engine


def test_a_c_callable_hook_is_called_as_in_eager() -> None:
    kept: dict = {}

    def make() -> tuple:
        model = mlp()
        grads = kept.setdefault(id(model), [])

        def before(n: int) -> None:
            if n == 6:
                model[2].bias.register_hook(grads.append)  # a C method: no Python frame runs
        return _training(model, torch.optim.SGD(model.parameters(), lr=0.1), before)
    compare(make, batches(10), max_fallbacks=2)
    assert sorted(len(v) for v in kept.values()) == [5, 5]


def test_a_custom_function_with_python_in_its_backward() -> None:
    runs: list = []

    class Scale(torch.autograd.Function):
        @staticmethod
        def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
            return x * 2

        @staticmethod
        def backward(ctx: Any, g: torch.Tensor) -> torch.Tensor:
            runs.append(1)
            return g * 2

    def make() -> tuple:
        model = mlp()
        return _training(model, torch.optim.SGD(model.parameters(), lr=0.05),
                         forward=lambda x: Scale.apply(model(x)))
    stats = compare(make, batches(8), max_fallbacks=8)
    assert len(runs) == 16  # eager's 8 and terra's 8
    assert sum(_macros(stats)) == 0


def test_a_module_backward_hook_runs_every_step() -> None:
    runs: list = []

    def make() -> tuple:
        model = mlp()
        model[2].register_full_backward_hook(lambda mod, gin, gout: runs.append(1))
        return _training(model, torch.optim.SGD(model.parameters(), lr=0.1))
    stats = compare(make, batches(8), max_fallbacks=8)
    assert len(runs) == 16
    assert sum(_macros(stats)) == 0


def test_a_parameter_frozen_mid_training() -> None:
    def make() -> tuple:
        model = mlp()
        return _training(model, torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9),
                         lambda n: model[0].weight.requires_grad_(n < 6), set_to_none=True)
    stats = compare(make, batches(12), max_fallbacks=2)
    assert _macros(stats)[-1] == 1, _macros(stats)


def test_a_part_of_the_forward_without_gradients_every_third_step() -> None:
    """The same forward ops, with and without autograd nodes: the pass of
    one must not stand for the other's."""
    def make() -> tuple:
        model = mlp()
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        n = [0]

        def step(x, y):
            n[0] += 1
            with torch.set_grad_enabled(n[0] % 3 != 0):
                h = model[0](x)
            loss = F.cross_entropy(model[2](torch.tanh(h)), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            return loss
        return step, model, opt
    stats = compare(make, batches(14), max_fallbacks=3)
    assert sum(_macros(stats)) > 0


def test_a_deviation_after_a_pass_replayed_whole_replays_its_ops() -> None:
    """A step that leaves its tape after a pass replayed whole: the pass's
    records and log are made then (backward.expand), so the catch-up and
    the eager replay of a deviation see what the engine would have left."""
    def make() -> tuple:
        model = mlp()
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        n = [0]

        def step(x, y):
            n[0] += 1
            loss = F.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            g = model[0].weight.grad
            if n[0] == 7:  # a new path after the pass: reads the gradient
                print("grad norm", round(float(g.norm()), 4))
            opt.step()
            return loss
        return step, model, opt
    stats = compare(make, batches(10), max_fallbacks=1)
    assert _macros(stats)[3] == 1, _macros(stats)  # step 7: replayed whole, then the new path


def test_a_convolutional_program_with_batch_norm() -> None:
    def make() -> tuple:
        # (no bias before the norm: Adam would turn its ~0 gradient into
        # full steps of random sign, eager's as much as terra's)
        model = nn.Sequential(nn.Conv2d(2, 4, 3, padding=1, bias=False), nn.BatchNorm2d(4), nn.ReLU(inplace=True),
                              nn.Flatten(), nn.Linear(4 * 8 * 8, 3))
        return _training(model, torch.optim.Adam(model.parameters(), lr=1e-3))
    stats = compare(make, images(8), max_fallbacks=0)
    assert _macros(stats)[-1] == 1, _macros(stats)


def test_a_thread_waiting_in_the_wrapped_engine_is_seen_waiting_in_the_engine() -> None:
    """CUDA backwards run on the engine's device threads; their ops are the
    step's while its thread waits in `torch.autograd`'s entry
    (sites.engine_frame). The engine wrapper's frames sit between that
    entry and the engine: they must not hide it."""
    import threading

    from terra import sites

    backward.install()
    w = torch.randn(1500, 1500, requires_grad=True)
    x = torch.randn(1500, 1500)
    loss = (x @ w @ w @ w @ w).sum()
    seen: list = []
    started = threading.Event()

    def run() -> None:
        started.set()
        loss.backward()
    t = threading.Thread(target=run)
    t.start()
    started.wait()
    while t.is_alive() and not seen:
        f = sites.engine_frame(t.ident)
        if f is not None:
            seen.append(f.f_code.co_name)
    t.join()
    assert seen and seen[0] in ("backward", "_engine_run_backward"), seen


def test_a_graph_retained_for_a_second_pass() -> None:
    """`backward(retain_graph=True)` then `backward()` through the same
    graph: two passes with other flags, each replayed whole."""
    def make() -> tuple:
        model = mlp()
        opt = torch.optim.SGD(model.parameters(), lr=0.1)

        def step(x, y):
            loss = F.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward(retain_graph=True)
            (loss * 0.5).backward()
            opt.step()
            return loss
        return step, model, opt
    stats = compare(make, batches(8), max_fallbacks=0)
    assert _macros(stats)[-1] == 2, _macros(stats)


def test_a_gradient_penalty_through_autograd_grad() -> None:
    """`torch.autograd.grad(..., create_graph=True)` is not a pass the macro
    stands for (it makes a graph); the `backward()` through that graph is."""
    def make() -> tuple:
        model = mlp()
        opt = torch.optim.SGD(model.parameters(), lr=0.05)

        def step(x, y):
            x = x.clone().requires_grad_()
            loss = F.cross_entropy(model(x), y)
            gx, = torch.autograd.grad(loss, x, create_graph=True)
            total = loss + 0.1 * gx.pow(2).sum()
            opt.zero_grad()
            total.backward()
            opt.step()
            return total
        return step, model, opt
    stats = compare(make, batches(8), max_fallbacks=0)
    assert _macros(stats)[-1] == 1, _macros(stats)


class _PooledNet(nn.Module):
    """A convolution after an average pooling whose output size the step
    chooses (SDPoint's stochastic downsampling): the merged graph's
    convolutions have dynamic spatial sizes, and the backward passes hold
    relaxed scalars (the final mean's divisor) and sizes that follow the
    pooled size."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Conv2d(2, 4, 3, padding=1)
        self.conv = nn.Conv2d(4, 4, 3, stride=2, padding=1)
        self.fc = nn.Linear(4, 3)
        self.fc3 = nn.Linear(36, 3)
        self.side = 8

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.relu(self.stem(x))
        x = F.adaptive_avg_pool2d(x, self.side)
        x = F.relu(self.conv(x))
        # (A 3x3 pooling of the 4x4, 3x3 or 2x2 map: uneven windows, more
        # outputs than inputs.)
        return (self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))
                + self.fc3(torch.flatten(F.adaptive_avg_pool2d(x, 3), 1)))


def test_passes_with_relaxed_scalars_and_dynamic_spatial_sizes_are_replayed_whole() -> None:
    sides = [8, 4, 8, 4, 8, 6, 8, 4, 6, 8, 4, 6, 8, 4, 6, 8, 4, 6]

    def make() -> tuple:
        model = _PooledNet()
        return _training(model, torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9),
                         before=lambda n: setattr(model, "side", sides[n - 1]))
    data = [(x, y) for x, y in images(len(sides))]
    stats = compare(make, data, max_fallbacks=3)
    # The convolutions and poolings run in the graph, not as host callbacks.
    assert stats["host_ops"] == [], stats["host_ops"]
    assert stats["relaxed_scalars"], stats
    # Each pooled size's pass, once validated (and its scalars learnt), is
    # replayed whole.
    assert _macros(stats)[-6:] == [1] * 6, _macros(stats)


def test_a_relaxed_forward_scalar_gives_its_backward_scalar_per_value() -> None:
    """A multiply by a Python float that alternates between steps (relaxed,
    fed) makes its backward multiply by the same float: a pass replayed
    whole takes the value learnt for this step's forward scalars, not the
    last one."""
    scales = [0.5, 2.0] * 7

    def make() -> tuple:
        model, s = mlp(), [1.0]
        return _training(model, torch.optim.SGD(model.parameters(), lr=0.05),
                         before=lambda n: s.__setitem__(0, scales[n - 1]), forward=lambda x: model(x).mul(s[0]))
    stats = compare(make, batches(len(scales)), max_fallbacks=0)
    assert any(r.startswith("aten.mul.Tensor.other at <unknown>") for r in stats["relaxed_scalars"]), stats
    assert _macros(stats)[-6:] == [1] * 6, _macros(stats)


def _picks_program(after_backward: Any = None) -> Any:
    """`make` of a step whose loss reads the rows its boolean `picks` select
    (YOLO/Faster R-CNN-style targets chosen in NumPy): the count of picks is
    a data-dependent size, and the backward pass's `new_zeros` / `expand`
    sizes follow it. `after_backward(n, model)` runs after the pass."""
    def make() -> tuple:
        model = mlp(classes=4)
        opt = torch.optim.SGD(model.parameters(), lr=0.05)
        n = [0]

        def step(x, y, picks):
            n[0] += 1
            out = model(x)
            pos = out[torch.from_numpy(picks)]
            loss = F.cross_entropy(out, y) + pos[:, :2].sigmoid().square().sum()
            opt.zero_grad()
            loss.backward()
            if after_backward is not None:
                after_backward(n[0], model)
            opt.step()
            return loss
        return step, model, opt
    return make


def _picked(counts: list, b: int) -> list:
    data = []
    for i, (x, y) in enumerate(batches(len(counts), b=b)):
        picks = np.zeros(b, dtype=bool)
        picks[np.random.RandomState(i).permutation(b)[:counts[i]]] = True
        data.append((x, y, picks))
    return data


def test_a_pass_whose_sizes_follow_a_count_with_many_values_is_replayed_whole_once_each_was_met(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # Faster R-CNN's RoI and foreground counts take a new combination most
    # steps: the pass's sizes (and the recipes of the ops after the count)
    # are kept per combination, and keeping too few of them (16 once) sent
    # every combination past the cap through the engine and shape inference
    # for good. (Derived sizes off: this is about what is kept.)
    monkeypatch.setattr(backward, "_DERIVE_AFTER", 10**9)
    counts = list(range(1, 31)) * 2  # 30 counts, each met twice
    stats = compare(_picks_program(), _picked(counts, 32), max_fallbacks=0)
    # The first time round, the steps after the pass's validation learn 20+
    # counts' sizes; the second time round, each of those is replayed whole.
    macros = _macros(stats)
    assert macros[-25:] == [1] * 25, macros


_NEW_COUNTS = [5, 9, 2, 14, 7, 11, 3, 16, 1, 12, 8, 15, 4, 10, 6, 13]  # a new count every step


def test_a_pass_at_a_count_not_met_yet_is_replayed_whole_with_sizes_from_the_graphs_forms() -> None:
    # Once two counts' sizes came from the engine (and matched the graph's
    # size forms), a new count's pass is replayed whole: its sizes are the
    # forms evaluated on this step's shapes, its shapes inferred.
    stats = compare(_picks_program(), _picked(_NEW_COUNTS, 16), max_fallbacks=0)
    macros = _macros(stats)
    validated = [s.get("backward_validations", 0) for s in stats["steps"] if s["phase"] == "coexec"].index(1)
    # the validation (the first count's sizes), a step learning the
    # second's through the engine, then every step (each at a new count)
    # replayed whole
    assert macros[validated:validated + 2] == [0, 0] and macros[validated + 2:] == [1] * (
        len(macros) - validated - 2), macros


def test_derived_sizes_leave_exactly_what_the_engine_driven_replay_leaves(monkeypatch: pytest.MonkeyPatch) -> None:
    finals = []
    data = _picked(_NEW_COUNTS, 16)
    for derive in (True, False):
        monkeypatch.setattr(backward, "_DERIVE_AFTER", 2 if derive else 10**9)
        torch.manual_seed(0)
        step, model, opt = _picks_program()()
        fn = terra.function(step, cache_dir=None)
        losses = [fn(*args).item() for args in data]
        finals.append((losses, [p.detach().clone() for p in model.parameters()],
                       [p.grad.detach().clone() for p in model.parameters()], sum(_macros(terra.stats(fn)))))
    (la, pa, ga, ma), (lb, pb, gb, mb) = finals
    assert ma > mb + 5
    assert la == lb
    assert all(torch.equal(a, b) for a, b in zip(pa + ga, pb + gb))


def test_a_deviation_after_a_pass_with_derived_sizes_replays_its_ops_with_them() -> None:
    """A step at a new count whose pass was replayed whole with derived
    sizes, then leaves its tape: the catch-up and the eager replay of the
    pass's ops (`new_zeros` of the count, ...) take the derived sizes."""
    def report(n: int, model: nn.Module) -> None:
        if n in (11, 14):  # a new path after the pass: reads a gradient
            print("grad norm", round(float(model[0].weight.grad.norm()), 4))
    stats = compare(_picks_program(report), _picked(_NEW_COUNTS, 16), max_fallbacks=2)
    assert stats["fallbacks"] >= 1, stats
    fell = stats["fallback_log"][0]["iteration"]
    # (the deviating step had replayed its pass whole, at a count not met before)
    assert fell == 10 and stats["steps"][fell].get("backward_macros") == 1, stats["steps"]


def test_a_pass_whose_sizes_cannot_be_derived_runs_through_the_engine_without_trying_again(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # A failed derivation (a real result, a failed inference) would cost its
    # attempt at every new key: the pass goes to the engine from then on.
    calls = []

    def fails(ex: Any, tape: Any, block: Any) -> None:
        calls.append(block.start)
        return None
    monkeypatch.setattr(backward, "_derived", fails)
    stats = compare(_picks_program(), _picked(_NEW_COUNTS, 16), max_fallbacks=0)
    assert len(calls) == 1, calls
    macros = _macros(stats)
    assert sum(macros) == 0 and len(macros) > 8, macros



def test_terra_derive_sizes_0_leaves_new_keys_to_the_engine() -> None:
    code = "import sys, terra.backward as b; sys.exit(0 if b._DERIVE_AFTER == sys.maxsize else 1)"
    python_dir = str(Path(terra.__file__).resolve().parents[1])
    env = {**os.environ, "TERRA_DERIVE_SIZES": "0", "PYTHONPATH": python_dir}
    assert subprocess.run([sys.executable, "-c", code], env=env).returncode == 0
