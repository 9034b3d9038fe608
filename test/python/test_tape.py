"""Tapes (python/terra/tape.py): co-executed iterations replayed without
being recorded again, and catching up when an iteration leaves its tape.

Every test compares with eager PyTorch after every step (coexec_helpers.
compare) and checks how many iterations were replayed to their end, so a
tape that silently stopped replaying, or replayed the wrong path, fails."""
from __future__ import annotations

from typing import Callable

import numpy as np
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import terra
from terra import replay
from terra.native import NativeModuleMissing, load

try:
    load()
except NativeModuleMissing as exc:  # pragma: no cover - the build makes it
    pytest.skip(str(exc), allow_module_level=True)

from coexec_helpers import assert_same, batches, compare, mlp, sgd_program, state_of  # noqa: E402


def _replayed(stats: dict) -> list[bool]:
    return [s.get("replayed", False) for s in stats["steps"] if s["phase"] == "coexec"]


def _rows_by_score(out: torch.Tensor, x: torch.Tensor, n: int) -> torch.Tensor:
    """The program's NumPy code of the count tests: the `n` rows of `x`
    with the lowest first score in `out` (a fetch), as a host tensor."""
    keep = np.argsort(out.detach().numpy()[:, 0])[:n]
    return torch.from_numpy(np.ascontiguousarray(x.numpy()[keep]))


def test_a_static_step_is_replayed_after_its_first_coexecuted_iteration() -> None:
    stats = compare(sgd_program(momentum=0.9), batches(8), max_fallbacks=0)
    replayed = _replayed(stats)
    assert replayed[0] is False and all(replayed[1:]) and len(replayed) >= 5, replayed
    assert stats["replayed_iterations"] == len(replayed) - 1


def test_state_slots_rebuilt_between_replayed_steps_are_checked_at_the_end() -> None:
    """A replay's end compares the slots' names only when the registry
    rebuilt them (StateRegistry.generation). Between steps 5 and 6 the
    optimizer's state dicts are replaced by equal copies (rebuilt, same
    names: the tape's end still fits); between steps 8 and 9 a parameter
    group the step never uses is added (new slots: the end does not fit
    and is recorded live). Both must leave state as eager does."""
    runs = []
    for terra_mode in (False, True):
        torch.manual_seed(0)
        step, model, opt = sgd_program(momentum=0.9)()
        extra = nn.Parameter(torch.ones(3))
        fn = terra.function(step, cache_dir=None) if terra_mode else step
        states = []
        for i, (x, y) in enumerate(batches(13)):
            if i == 5:
                for p in list(opt.state):
                    opt.state[p] = dict(opt.state[p])
            if i == 8:
                opt.add_param_group({"params": [extra], "lr": 0.1})
            fn(x, y)
            states.append(state_of(model, opt))
        runs.append((states, terra.stats(fn) if terra_mode else None))
    (eager, _), (co, stats) = runs
    for i, (se, st) in enumerate(zip(eager, co)):
        assert se.keys() == st.keys(), f"step {i}"
        for k in se:
            assert_same(st[k], se[k], f"step {i} {k}")
    assert stats["fallbacks"] == 0, stats["fallback_log"]
    replayed = _replayed(stats)
    # (3 traced steps: co-executed steps are 3-12) replayed around the
    # equal copies; the step after the new group is recorded, then replayed
    assert replayed[1:5] == [True] * 4 and replayed[5] is False and replayed[-1] is True, replayed


def test_tapes_can_be_turned_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(replay, "_TAPES_ENABLED", False)
    stats = compare(sgd_program(), batches(6), max_fallbacks=0)
    assert stats["replayed_iterations"] == 0 and not any(_replayed(stats))


def _adam_program() -> tuple:
    """(step, model, optimizer): torch 1.13's Adam reads its step counters
    (`step.item()`), which the host computes itself; the step returns
    `loss.item()` (a graph fetch)."""
    model = mlp()
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)

    def step(x, y):
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.item()
    return step, model, opt


def test_adam_reads_and_item_are_answered_from_the_tape() -> None:
    stats = compare(_adam_program, batches(8), max_fallbacks=0)
    assert sum(_replayed(stats)) >= 4


def test_a_learning_rate_that_changes_every_step_is_fed_from_the_replay() -> None:
    def make() -> tuple:
        model = mlp()
        opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.7)

        def step(x, y):
            loss = F.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
            return loss
        return step, model, opt
    stats = compare(make, batches(9), max_fallbacks=0)
    assert sum(_replayed(stats)) >= 4


def test_random_numbers_are_drawn_on_the_host_in_a_replay() -> None:
    def loss(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(model(x + torch.randn(x.shape) * 0.1), y)
    make = sgd_program(loss=loss, model_fn=lambda: nn.Sequential(
        nn.Linear(6, 16), nn.Dropout(0.3), nn.Tanh(), nn.Linear(16, 3)))
    stats = compare(make, batches(8), max_fallbacks=0)
    assert sum(_replayed(stats)) >= 4


def test_a_branch_the_other_way_switches_tapes_or_catches_up() -> None:
    # The branch alternates. The first iteration down each side leaves the
    # tape at the branch, catches up (re-recording the ops replayed so far)
    # and goes on recording, with no fallback; it leaves a tape of its own,
    # which agrees with the other up to the branch. From then on each
    # iteration switches tapes at the branch and replays to its end.
    def make() -> tuple:
        model = mlp()
        opt = torch.optim.SGD(model.parameters(), lr=0.1)

        def step(x, y, i):
            h = model(x)
            if i % 2:
                h = h * 2.0
            else:
                h = torch.tanh(h)
            loss = F.cross_entropy(h, y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            return loss
        return step, model, opt
    data = [(x, y, i) for i, (x, y) in enumerate(batches(10))]
    stats = compare(make, data, max_fallbacks=0)
    replayed = _replayed(stats)
    assert replayed[:2] == [False, False] and all(replayed[2:]) and len(replayed) >= 6, replayed


def test_a_read_the_tape_has_not_seen_catches_up_at_the_read() -> None:
    # Logging every third step: the first logging iteration leaves its tape
    # at the read it has not seen and catches up there (no fallback once the
    # graph publishes the value); its own tape agrees with the other one up
    # to the read, so later logging iterations switch tapes there.
    def make() -> tuple:
        model = mlp()
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        seen = {"n": 0}

        def step(x, y):
            loss = F.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            seen["n"] += 1
            if seen["n"] % 3 == 0:
                print(f"loss {loss.item():.5f}")
            return loss
        return step, model, opt
    stats = compare(make, batches(13), max_fallbacks=1)
    replayed = _replayed(stats)
    assert any(replayed) and not all(replayed)


def test_a_read_before_the_branch_is_in_the_tape_of_an_iteration_that_caught_up() -> None:
    # The step reads a value (numpy) before a branch that alternates. The
    # first iteration down the second side catches up after the read: the
    # tape it leaves must hold the read too, or every later iteration would
    # leave that tape at the read.
    def make() -> tuple:
        model = mlp()
        opt = torch.optim.SGD(model.parameters(), lr=0.1)

        def step(x, y, i):
            h = model(x)
            scale = float(h.detach().numpy().std())
            if i % 2:
                h = h * 2.0
            loss = F.cross_entropy(h, y) + 0.0 * scale
            opt.zero_grad()
            loss.backward()
            opt.step()
            return loss
        return step, model, opt
    data = [(x, y, i) for i, (x, y) in enumerate(batches(10))]
    stats = compare(make, data, max_fallbacks=0)
    replayed = _replayed(stats)
    assert replayed[:2] == [False, False] and all(replayed[2:]) and len(replayed) >= 6, replayed


def test_a_host_boolean_mask_replays_with_each_steps_count() -> None:
    # YOLO-style targets: positions picked in NumPy, a new count of them
    # every step. The masked values and what they flow into have
    # data-dependent shapes: the replay infers them from its own arguments,
    # and the sizes autograd passes (slice_backward's input sizes, expand)
    # are checked against the dims they stand for, not against the numbers
    # of the step the tape came from.
    def make() -> tuple:
        model = mlp(classes=4)
        opt = torch.optim.Adam(model.parameters(), lr=1e-2)

        def step(x, y, picks):
            out = model(x)
            pos = out[torch.from_numpy(picks)]
            loss = F.cross_entropy(out, y) + F.mse_loss(pos[:, :2].sigmoid(), torch.zeros_like(pos[:, :2]),
                                                        reduction="sum")
            opt.zero_grad()
            loss.backward()
            opt.step()
            return loss
        return step, model, opt
    counts = [3, 5, 2, 6, 4, 1, 3, 5, 0, 2, 4, 7]  # 0 and 1 too (no broadcasting surprise)
    data = []
    for i, (x, y) in enumerate(batches(len(counts))):
        picks = np.zeros(8, dtype=bool)
        picks[np.random.RandomState(i).permutation(8)[:counts[i]]] = True
        data.append((x, y, picks))
    stats = compare(make, data, max_fallbacks=0)
    replayed = _replayed(stats)
    assert replayed[0] is False and all(replayed[1:]) and len(replayed) >= 6, replayed


def test_a_host_tensor_with_a_new_count_each_step_replays() -> None:
    # Faster R-CNN-style proposals: rows picked in NumPy from fetched
    # scores, a new count every step, fed back to the graph. The traces saw
    # the count change, so the graph's feed takes it as dynamic; the tape
    # checks that dim by the feed's type, and what the rows flow into is
    # replayed by shape inference.
    def make() -> tuple:
        model = mlp(classes=4)
        opt = torch.optim.SGD(model.parameters(), lr=0.05)

        def step(x, y, i):
            out = model(x)
            rows = _rows_by_score(out, x, 1 + i % 6)
            loss = F.cross_entropy(out, y) + model(rows).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            return loss
        return step, model, opt
    data = [(x, y, i) for i, (x, y) in enumerate(batches(12))]
    stats = compare(make, data, max_fallbacks=0)
    replayed = _replayed(stats)
    assert replayed[0] is False and all(replayed[1:]) and len(replayed) >= 6, replayed


def test_a_fed_count_learnt_to_change_stays_dynamic_when_tracing_starts_again() -> None:
    # The first new count also changes a size argument no operand has
    # (`new_zeros(n)`), so tracing starts again; the new traces all see one
    # count. The fed rows' count was seen to change: it stays dynamic, and
    # later counts are no deviation (they were one each before).
    def make() -> tuple:
        model = mlp(classes=4)
        opt = torch.optim.SGD(model.parameters(), lr=0.05)

        def step(x, y, n):
            out = model(x)
            rows = _rows_by_score(out, x, n)
            labels = rows.new_zeros(n, dtype=torch.long)
            loss = F.cross_entropy(out, y) + F.cross_entropy(model(rows), labels)
            opt.zero_grad()
            loss.backward()
            opt.step()
            return loss
        return step, model, opt
    counts = [5] * 5 + [4] + [5] * 5 + [3, 5, 2, 6, 5]
    data = [(x, y, n) for (x, y), n in zip(batches(len(counts)), counts)]
    compare(make, data, max_fallbacks=1)


def test_affine_grid_over_a_count_that_changes_each_step() -> None:
    # Faster R-CNN's RoI pooling: F.affine_grid(theta, [N, C, h, w]) over N
    # proposals chosen in NumPy, a new N every step. The size argument's N
    # is theta's count (sizes.SIZE_ARGS), not a new op per count.
    def make() -> tuple:
        conv = nn.Conv2d(2, 3, 3, padding=1)
        head = nn.Linear(3 * 2 * 2, 4)
        model = nn.ModuleList([conv, head])
        opt = torch.optim.SGD(model.parameters(), lr=0.05)

        def step(x, i):
            feat = conv(x)
            n = 1 + (i * 3) % 7
            centers = np.linspace(-0.5, 0.5, n, dtype=np.float32)
            theta = np.zeros((n, 2, 3), dtype=np.float32)
            theta[:, 0, 0] = theta[:, 1, 1] = 0.5
            theta[:, 0, 2], theta[:, 1, 2] = centers, -centers
            grid = F.affine_grid(torch.from_numpy(theta), [n, 3, 2, 2], align_corners=False)
            images = torch.from_numpy(np.zeros(n, dtype=np.int64))  # each RoI's image
            pooled = F.grid_sample(feat[images], grid, align_corners=False)
            loss = head(pooled.flatten(1)).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            return loss
        return step, model, opt
    torch.manual_seed(0)
    data = [(torch.randn(1, 2, 8, 8), i) for i in range(16)]
    stats = compare(make, data, max_fallbacks=1)
    assert sum(_replayed(stats)) >= 6
    assert stats["host_ops"] == []  # the grid sampling is lowered too


def test_the_gil_is_handed_over_faster_while_a_graph_with_host_ops_runs() -> None:
    # The graph calls back into torch for its host ops on its own thread,
    # which needs the GIL: the switch interval is short while such a graph
    # co-executes, and the program's own setting comes back after the step.
    # (Reflection padding is a grid sampling the graph does not lower.)
    import sys
    seen = []
    conv = nn.Conv2d(2, 3, 3, padding=1)
    opt = torch.optim.SGD(conv.parameters(), lr=0.05)

    def step(x):
        seen.append(sys.getswitchinterval())
        theta = torch.eye(2, 3).expand(2, 2, 3)
        grid = F.affine_grid(theta, [2, 3, 4, 4], align_corners=False)
        loss = F.grid_sample(conv(x).expand(2, -1, -1, -1), grid, padding_mode="reflection",
                             align_corners=False).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss
    before = sys.getswitchinterval()
    fn = terra.function(step, cache_dir=None)
    for _ in range(8):
        fn(torch.randn(1, 2, 8, 8))
        assert sys.getswitchinterval() == before
    stats = terra.stats(fn)
    assert stats["host_ops"] and stats["coexec_iterations"] >= 4
    assert seen[0] == before and seen[-1] < before


def test_a_size_argument_that_breaks_its_form_is_not_replayed() -> None:
    # A reshape of rows whose count changes every step is recorded with its
    # size as a form over that count; a step that passes another size must
    # not be replayed from the tape (its results would have the shapes the
    # form gives), in the Python or the native replay.
    def make() -> tuple:
        model = mlp(classes=4)
        opt = torch.optim.SGD(model.parameters(), lr=0.05)

        def step(x, y, i):
            out = model(x)
            rows = _rows_by_score(out, x, 2 + i % 2)
            m = 1 if i % 4 == 3 else rows.shape[0]  # (counts 2 and 3 recur)
            flat = model(rows).view(m, -1)
            loss = F.cross_entropy(out, y) + flat.pow(2).mean() + flat[0].sum()
            opt.zero_grad()
            loss.backward()
            opt.step()
            return loss
        return step, model, opt
    data = [(x, y, i) for i, (x, y) in enumerate(batches(16))]
    compare(make, data, max_fallbacks=4)


def test_sequences_of_several_lengths_replay_one_tape() -> None:
    # GPT-2-style batches of a few lengths, picked inside the step (host
    # tensors): reshapes whose sizes follow the length (a -1 entry, the
    # strides `reshape` passes `_reshape_alias`) are checked by form, so one
    # tape serves every length, each replayed with its own shapes.
    g = torch.Generator().manual_seed(4)
    seqs = [torch.randn(4, t, 6, generator=g) for t in (5, 9, 7)]
    labels = torch.randint(0, 3, (4,), generator=g)
    def make() -> tuple:
        model = mlp()
        opt = torch.optim.SGD(model.parameters(), lr=0.1)

        def step(i):
            x = seqs[i % 3]
            h = model(x.reshape(-1, 6)).reshape(4, -1, 3).mean(1)
            loss = F.cross_entropy(h, labels)
            opt.zero_grad()
            loss.backward()
            opt.step()
            return loss
        return step, model, opt
    stats = compare(make, [(i,) for i in range(12)], max_fallbacks=0)
    replayed = _replayed(stats)
    assert replayed[0] is False and all(replayed[1:]) and len(replayed) >= 6, replayed


def test_a_new_batch_size_leaves_the_tape_at_its_first_op() -> None:
    data = batches(6) + batches(3, b=5, seed=9)
    stats = compare(sgd_program(), data, max_fallbacks=1)
    assert stats["steps"][-1]["replayed"], stats["steps"][-3:]


def test_values_kept_from_a_replayed_step_are_read_after_it() -> None:
    # A placeholder that escapes a replayed step (kept in a list, read
    # later) reads its fetch from that step's finished run (the graph
    # publishes the loss: the step returns it).
    kept: list = []

    def make() -> tuple:
        model = mlp()
        opt = torch.optim.SGD(model.parameters(), lr=0.1)

        def step(x, y):
            loss = F.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            kept.append(loss.detach())
            return loss
        return step, model, opt
    stats = compare(make, batches(8), max_fallbacks=0)
    assert sum(_replayed(stats)) >= 4
    eager, terra_vals = kept[0::2], kept[1::2]  # compare() runs eager, then terra, per step
    assert len(terra_vals) == 8
    for e, t in zip(eager, terra_vals):
        torch.testing.assert_close(torch.as_tensor(t.numpy()), e, rtol=1e-5, atol=1e-6)


def test_an_exception_in_a_replayed_step_leaves_state_as_eager() -> None:
    def make() -> tuple:
        model = mlp()
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        count = {"n": 0}

        def step(x, y):
            loss = F.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            count["n"] += 1
            if count["n"] == 6:
                raise ValueError("bad batch")
            opt.step()
            return loss
        return step, model, opt
    stats = compare(make, batches(9), max_fallbacks=1)
    assert sum(_replayed(stats)) >= 3


def test_catching_up_after_an_in_place_op_keeps_backward_sites() -> None:
    # ReLU(inplace) replaces the batch norm result's grad_fn after the op
    # was replayed; catching up must attribute the batch norm's backward
    # ops to the batch norm, not to the ReLU (else: a fallback).
    def make() -> tuple:
        model = nn.Sequential(nn.Linear(6, 16), nn.BatchNorm1d(16), nn.ReLU(inplace=True), nn.Linear(16, 3))
        opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

        def step(x, y, i):
            h = model[2](model[1](model[0](x)))
            if i % 3 == 2:
                h = h * 0.5
            loss = F.cross_entropy(model[3](h), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            return loss
        return step, model, opt
    data = [(x, y, i) for i, (x, y) in enumerate(batches(12))]
    stats = compare(make, data, max_fallbacks=0)
    replayed = _replayed(stats)
    assert any(replayed) and not all(replayed)


def test_serialized_mode_replays_and_catches_up() -> None:
    # Serialized (LazyTensor-style) runs start the graph only at a fetch:
    # a replay must start it at its recorded fetches, and a catch-up after
    # a read the tape has not seen must still find the graph's values.
    def make() -> tuple:
        model = mlp()
        opt = torch.optim.Adam(model.parameters(), lr=1e-2)

        def step(x, y, i):
            loss = F.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            if i % 4 == 3:
                print(f"{loss.item():.5f}")
            return loss
        return step, model, opt
    data = [(x, y, i) for i, (x, y) in enumerate(batches(12))]
    stats = compare(make, data, max_fallbacks=1, serialized=True)
    replayed = _replayed(stats)
    assert sum(replayed) >= 3 and not all(replayed)


@pytest.mark.parametrize("name", ["dropblock", "gpt2", "yolov3", "faster_rcnn"])
def test_replaying_gives_bit_for_bit_what_recording_gives(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    # Benchmark programs with a ramped drop probability (a relaxed scalar
    # fed from the replay, random masks drawn on the host), with batches of
    # four sequence lengths (one tape for all), and with boolean masks and
    # RoIs whose counts change every step (shapes inferred in the replay):
    # the same graph fed the same values must give exactly the same losses
    # and parameters whether each iteration is recorded or replayed.
    import sys
    from pathlib import Path
    repo = str(Path(__file__).resolve().parents[2])
    if repo not in sys.path:
        sys.path.insert(0, repo)
    from benchmarks.programs import PROGRAMS

    def run(tapes: bool) -> tuple:
        monkeypatch.setattr(replay, "_TAPES_ENABLED", tapes)
        program = PROGRAMS[name].build("small")
        fn = terra.function(program.step, cache_dir=None)
        losses = [float(fn(i)) for i in range(12)]
        return losses, program.param_snapshot(), terra.stats(fn)
    losses_r, params_r, stats_r = run(False)
    losses_t, params_t, stats_t = run(True)
    assert stats_r["replayed_iterations"] == 0 and stats_t["replayed_iterations"] >= 4
    assert stats_t["fallbacks"] == stats_r["fallbacks"] == 0
    assert losses_t == losses_r
    flat_r = params_r.values() if isinstance(params_r, dict) else params_r
    flat_t = params_t.values() if isinstance(params_t, dict) else params_t
    for a, b in zip(flat_t, flat_r):
        assert torch.equal(a, b)


def test_co_execution_runs_torch_single_threaded_and_restores_it() -> None:
    # The host computes almost nothing while a step co-executes; torch's
    # spinning OpenMP workers would take the graph's cores. Eager work after
    # a deviation, and everything after the step, gets the caller's setting.
    seen: list = []

    def make() -> tuple:
        model = mlp()
        opt = torch.optim.SGD(model.parameters(), lr=0.1)

        def step(x, y, i):
            seen.append(torch.get_num_threads())
            loss = F.cross_entropy(model(x), y)
            if i == 6:
                loss = loss + torch.nonzero(y).float().sum() * 0.0  # a new op: a deviation
                seen.append(("after deviation", torch.get_num_threads()))
            opt.zero_grad()
            loss.backward()
            opt.step()
            return loss
        return step, model, opt
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        data = [(x, y, i) for i, (x, y) in enumerate(batches(8))]
        compare(make, data, max_fallbacks=1)
        assert torch.get_num_threads() == 2
        assert 1 in seen and ("after deviation", 2) in seen, seen
    finally:
        torch.set_num_threads(before)


def test_a_replayed_step_keeps_torchs_threads_and_a_recorded_one_runs_single_threaded() -> None:
    # Recording computes on the host (meta results, host-evaluated ops),
    # so a recorded iteration runs torch single-threaded; a replay computes
    # nothing but serial random numbers and commits natively, so it keeps
    # the caller's threads (setting them back costs milliseconds).
    seen: list = []
    torch.manual_seed(0)
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)

    def step(x, y):
        seen.append(torch.get_num_threads())
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        fn = terra.function(step, cache_dir=None, compile_in_background=False)
        for x, y in batches(8):
            fn(x, y)
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)
    steps = terra.stats(fn)["steps"]
    coexec = [(s.get("replayed", False), n) for s, n in zip(steps, seen) if s["phase"] == "coexec"]
    assert (False, 1) in coexec and (True, 2) in coexec, coexec
    assert all(n == (2 if replayed else 1) for replayed, n in coexec), coexec


def test_a_dispatch_mode_the_step_pushes_sees_its_ops() -> None:
    # The co-executor is called directly while it is the only dispatch
    # mode (tracing._DirectMode); a mode the program pushes on top of it
    # must still see the ops it runs, and the step must still match eager.
    from torch.utils._python_dispatch import TorchDispatchMode

    class Count(TorchDispatchMode):
        def __init__(self) -> None:
            super().__init__()
            self.n = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.n += 1
            return func(*args, **(kwargs or {}))
    counts: list = []

    def make() -> tuple:
        model = mlp()
        opt = torch.optim.SGD(model.parameters(), lr=0.1)

        def step(x, y):
            with Count() as c:
                h = model(x)
            counts.append(c.n)
            loss = F.cross_entropy(h, y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            return loss
        return step, model, opt
    compare(make, batches(8), max_fallbacks=0)
    assert counts and all(n == counts[0] and n > 0 for n in counts), counts


def test_size_forms_are_checked_against_the_operands_dims() -> None:
    from terra.sizes import SymDim
    from terra.tape import form_matches
    a, b = torch.empty(5, 4), torch.empty(3, 20)
    # slice_backward(grad, input_sizes=[P, 85]): P is operand 0's dim 0.
    assert form_matches([SymDim(0, 0), 85], [5, 85], [a])
    assert not form_matches([SymDim(0, 0), 85], [6, 85], [a])  # not what the graph would compute
    assert not form_matches([SymDim(0, 0), 85], [5, 84], [a])
    assert form_matches(SymDim(1, 1), 20, [a, b]) and not form_matches(SymDim(1, 1), 3, [a, b])
    # A reshape's inferred entry: what the other entries leave of the numel.
    assert form_matches([-1, SymDim(0, 1)], [5, 4], [a])
    assert form_matches([-1, SymDim(0, 1)], [-1, 4], [a])
    assert not form_matches([-1, SymDim(0, 1)], [6, 4], [a])
    assert not form_matches([SymDim(2, 0)], [5], [a])  # an operand that is not there


def test_a_value_read_then_written_in_place_is_read_again() -> None:
    # A read gives the placeholder its value; an in-place op on it makes
    # that value stale: the next read fetches the new one, and the value
    # returned is the last one (in the Python and in the native replay).
    def make() -> tuple:
        model = mlp()
        opt = torch.optim.SGD(model.parameters(), lr=0.1)

        def step(x, y):
            loss = F.cross_entropy(model(x), y)
            h = model(x).sum(dim=1)
            first = h.tolist()
            h.mul_(2.0)
            second = h.tolist()
            h.add_(1.0)
            print(" ".join(f"{v:.2f}" for v in first + second + h.tolist()))
            h.sub_(3.0)  # returned after this write: its value is the graph's
            opt.zero_grad()
            loss.backward()
            opt.step()
            return loss, h
        return step, model, opt
    stats = compare(make, batches(8), max_fallbacks=0)
    assert sum(_replayed(stats)) >= 4


def test_no_co_executor_outlives_the_next_step() -> None:
    # A co-executor's graph run (every buffer it published) must go with
    # the step, and the co-executor itself with the next one: a native
    # handler that refers back to it made a cycle the collector cannot see
    # (36 MB a step on YOLOv3). Adam's reads of its step counters go
    # through that handler. The last step's records wait for the next step
    # to free them while its graph finishes (function._coexec).
    import gc
    from terra import coexec
    fn = terra.function(_adam_program()[0], cache_dir=None)
    for x, y in batches(8):
        fn(x, y)
    assert terra.stats(fn)["replayed_iterations"] >= 3
    gc.collect()
    alive = [o for o in gc.get_objects() if type(o) is coexec.CoExecutor and (o.compiled is fn or o is fn._retired)]
    assert alive == [fn._retired]
    assert alive[0].run is None and alive[0].retired is None and alive[0].compiled is None


def test_a_co_executed_steps_records_are_freed_without_the_cyclic_collector() -> None:
    # The records of a step (its co-executor, entries, placeholders and
    # their autograd nodes: ~3300 objects on Faster R-CNN) are freed by
    # reference counting when the next step drops them (replay._wait_run).
    # Recursive helpers nested in the backward replay (a pass run through
    # the engine at a new layout, backward._call_spec -> tape.spec_of, and
    # a derived pass, backward._derived) were reference cycles through
    # their closures that captured the co-executor: 23 of 30 steps' records
    # were left to Python's collector, whose collections then walked them
    # (~0.8 ms each). Faster R-CNN takes both paths: new RoI and foreground
    # counts most steps.
    import gc
    import sys
    import weakref
    from pathlib import Path
    repo = str(Path(__file__).resolve().parents[2])
    if repo not in sys.path:
        sys.path.insert(0, repo)
    from benchmarks.programs import PROGRAMS
    program = PROGRAMS["faster_rcnn"].build("small", "cpu", 0)
    fn = terra.function(program.step, cache_dir=None)
    i = 0
    while i < 40 or fn.stats.steps[-1]["phase"] != "coexec":
        fn(i)
        i += 1
        assert i < 120, "Faster R-CNN did not co-execute"
    gc.collect()
    gc.disable()
    try:
        made = []
        for k in range(12):
            fn(i + k)
            made.append(weakref.ref(fn._retired))
        fn(i + 12)
        alive = [k for k, r in enumerate(made) if r() is not None]
    finally:
        gc.enable()
    assert alive == [], f"the records of steps {alive} wait for the cyclic collector"
    assert sum(s["phase"] == "coexec" for s in fn.stats.steps[-13:]) == 13


def test_a_function_the_program_drops_is_freed_without_the_cyclic_collector() -> None:
    # A co-executed function keeps its last step's co-executor for the next
    # step to free (`_retired`); that co-executor referred back to the
    # function, a cycle that kept every dropped function (its compiled
    # graph, its runner thread) until a collection.
    import gc
    import weakref
    fn = terra.function(_adam_program()[0], cache_dir=None)
    for x, y in batches(8):
        fn(x, y)
    assert terra.stats(fn)["replayed_iterations"] >= 3 and fn._retired is not None
    gc.collect()
    gc.disable()
    try:
        dropped, last = weakref.ref(fn), weakref.ref(fn._retired)
        del fn
        assert dropped() is None and last() is None
    finally:
        gc.enable()


def test_no_nested_function_of_the_front_end_calls_itself() -> None:
    # A nested function that calls itself is a reference cycle (the
    # function, its closure, the cell holding it): whatever it captures
    # lives until Python's cyclic collector runs (see the test above).
    # Recursive helpers are module-level functions with explicit arguments.
    import ast
    from pathlib import Path
    found = []
    for path in sorted((Path(terra.__file__).parent).glob("*.py")):
        tree = ast.parse(path.read_text())
        for outer in ast.walk(tree):
            if not isinstance(outer, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for inner in ast.walk(outer):
                if inner is outer or not isinstance(inner, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    continue
                if any(isinstance(n, ast.Name) and n.id == inner.name and isinstance(n.ctx, ast.Load)
                       for n in ast.walk(inner)):
                    found.append(f"{path.name}:{inner.lineno} {outer.name}.{inner.name}")
    assert found == []


def test_replayed_steps_run_without_the_loop_hook() -> None:
    # The loop hook (a C trace function) puts the interpreter in tracing
    # mode, which slowed the host side of a replayed DCGAN step by ~20%. A
    # replay takes its loop contexts from the tape, so it runs without it
    # (loops.LoopCounter.defer); recorded steps have it.
    import sys
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    hooked: list[bool] = []

    def step(x, y):
        hooked.append(sys.gettrace() is not None)
        for layer in model:  # a loop around ops: contexts come from the tape
            x = layer(x)
        loss = F.cross_entropy(x, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    fn = terra.function(step, cache_dir=None)
    for x, y in batches(8):
        fn(x, y)
    stats = terra.stats(fn)
    replayed = [s.get("replayed", False) for s in stats["steps"]]
    assert stats["fallbacks"] == 0 and sum(replayed) >= 4
    assert all(h != r for h, r in zip(hooked, replayed)), (hooked, replayed)


def test_the_last_steps_records_are_freed_while_the_host_waits_for_a_fetch(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # Freeing a replayed step's records (entries, placeholders, autograd
    # nodes: ~0.4 ms for DCGAN) is done while the next step waits for a value
    # the graph has not published (CoExecutor._free_retired_until), a chunk
    # of entries between two polls of Run.ready, and stops once the value is
    # there. The graph is made to look slow for two polls of each fetch.
    from terra import coexec
    seen: list[tuple[int, int]] = []
    original = coexec.CoExecutor._free_retired_until

    def two_polls_late(self: coexec.CoExecutor, ready: Callable[[], bool]) -> None:
        before = len(self.retired.replayed)
        polls = [0]

        def late() -> bool:
            # Two polls say "not yet", then "there" (the fetch after it
            # waits for the value if it is not: on a loaded machine the
            # graph's own answer could stay "not yet" for more polls).
            polls[0] += 1
            return polls[0] > 2
        original(self, late)
        seen.append((before, len(self.retired.replayed) if self.retired is not None else -1))

    monkeypatch.setattr(coexec.CoExecutor, "_free_retired_until", two_polls_late)
    stats = compare(_adam_program, batches(8), max_fallbacks=0)
    assert sum(_replayed(stats)) >= 4
    chunk = coexec._FREE_CHUNK
    # Replayed steps hand ~40 entries on: two chunks go, the rest waits for the end.
    assert any(before > 2 * chunk and after == before - 2 * chunk for before, after in seen), seen


@pytest.mark.parametrize("name", ["dcgan", "bert_qa", "gpt2"])
def test_the_native_replay_gives_bit_for_bit_what_the_python_replay_gives(
        monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    # Plain entries (results from the recipe alone) are replayed by
    # NativeReplay.cpp; the Python replay is its specification. DCGAN has
    # reads answered on the host (Adam's step counters), effects and writes
    # into real tensors among them, BERT-QA mostly views, GPT-2 (four
    # sequence lengths) results with memoized recipes and size forms.
    import sys
    from pathlib import Path
    repo = str(Path(__file__).resolve().parents[2])
    if repo not in sys.path:
        sys.path.insert(0, repo)
    from benchmarks.programs import PROGRAMS
    native_replay = replay.NATIVE_REPLAY
    if native_replay is None:
        pytest.skip("TERRA_NATIVE_REPLAY=0 turned the native replay off")
    counts = load().replay_counts

    def run(native: bool) -> tuple:
        monkeypatch.setattr(replay, "NATIVE_REPLAY", native_replay if native else None)
        program = PROGRAMS[name].build("small")
        fn = terra.function(program.step, cache_dir=None)
        before = counts()
        losses = [float(fn(i)) for i in range(10)]
        after = counts()
        done = tuple(after[k] - before[k] for k in ("replayed", "passes", "reads", "feeds"))
        return losses, program.param_snapshot(), terra.stats(fn), done
    losses_p, params_p, stats_p, native_p = run(False)
    losses_n, params_n, stats_n, native_n = run(True)
    # (passes: the profiler handle of each zero_grad and step, run natively;
    # reads: Adam's step counters, answered from the host's values by their
    # memory key, and `.item()` of values the host has; feeds: the relaxed
    # scalars, Adam's bias corrections, and the inputs. torch 2.x's
    # record_function makes no tensor, and its Adam on CPU parameters reads
    # real step tensors one by one: no passes or reads there, session 22's
    # H200 run counted (1080, 0, 0, 300) for DCGAN.)
    torch1 = torch.__version__.split(".")[0] == "1"
    assert native_p == (0, 0, 0, 0) and native_n[0] >= 4 * 50 and native_n[3] >= 4 * 8, (native_p, native_n)
    if torch1:
        assert native_n[1] >= 4 * 2 and native_n[2] >= 4 * 20, native_n
    assert stats_n["replayed_iterations"] == stats_p["replayed_iterations"] >= 4
    assert stats_n["fallbacks"] == stats_p["fallbacks"] == 0
    assert losses_n == losses_p
    flat_p = params_p.values() if isinstance(params_p, dict) else params_p
    flat_n = params_n.values() if isinstance(params_n, dict) else params_n
    for a, b in zip(flat_n, flat_p):
        assert torch.equal(a, b)


def test_the_native_replay_rejects_bad_calls_with_an_error() -> None:
    if replay.NATIVE_REPLAY is None:
        pytest.skip("TERRA_NATIVE_REPLAY=0 turned the native replay off")
    native = load()
    with pytest.raises(TypeError):
        native.replay_plain(object(), object(), object(), [], {}, 0)  # arguments not a tuple
    with pytest.raises(AttributeError):
        native.replay_plain(object(), object(), object(), (), {}, 0)  # not an entry


def test_the_native_view_stride_check_agrees_with_the_meta_view() -> None:
    # _reshape_alias's strides are checked natively for row-major inputs
    # (their view's strides are row-major too) and left to replay.
    # _view_strides (a meta view) otherwise; where the native check
    # decides, it must agree with it.
    if replay.NATIVE_REPLAY is None:
        pytest.skip("TERRA_NATIVE_REPLAY=0 turned the native replay off")
    check = load().replay_view_strides_match
    rng = np.random.default_rng(0)
    decided = 0
    for _ in range(400):
        shape = [int(d) for d in rng.integers(1, 4, size=int(rng.integers(1, 4)))]
        x = torch.empty(shape)
        if rng.random() < 0.3:
            x = x.transpose(0, -1)  # not row-major (unless it is)
        if rng.random() < 0.1:
            x = torch.empty_strided(shape, [7] * len(shape))
        numel = x.numel()
        size = [int(d) for d in rng.integers(1, 4, size=int(rng.integers(1, 4)))]
        if rng.random() < 0.5:
            size[int(rng.integers(0, len(size)))] = -1
        if rng.random() < 0.5:  # a size that fits
            size = [numel] if rng.random() < 0.5 else [1, -1, 1][: int(rng.integers(1, 4))]
        want = replay._view_strides(x, size)
        for v in ([] if want is None else [list(want)]) + [[1] * len(size), tuple(want or ())]:
            got = check(x, size, v)
            if got >= 0:
                decided += 1
                assert got == (v == want), (tuple(x.shape), x.stride(), size, v, want, got)
    assert decided >= 200



def test_a_large_state_commits_as_eager_leaves_it() -> None:
    # The commit copies a replayed step's state on two threads when it is
    # large (Run.fetch_into, over 2 MB; here ~13 MB of weights and Adam
    # state): every parameter and optimizer value must still match eager.
    wide = lambda: nn.Sequential(nn.Linear(6, 1100), nn.Tanh(), nn.Linear(1100, 1000), nn.Tanh(),  # noqa: E731
                                 nn.Linear(1000, 3))
    stats = compare(sgd_program(model_fn=wide, optimizer=torch.optim.Adam, lr=1e-3), batches(6),
                    max_fallbacks=0)
    assert sum(_replayed(stats)) >= 2
