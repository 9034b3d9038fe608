"""A committed step's new state written by the graph into the state's own
memory (-terra-commit-in-place, terra_rt_commit_ready): the same values as
eager and as the host's copy, the user's tensors keep their memory (views
of it see each update, as eager's in-place updates show them), and a
value read inside the step after the update is the updated one."""
from __future__ import annotations

import os
from contextlib import contextmanager
from pathlib import Path

import torch
import torch.nn.functional as F

import terra
from coexec_helpers import assert_same, batches, compare, mlp, sgd_program


@contextmanager
def commit_in_place(on: bool):
    old = os.environ.get("TERRA_COMMIT_IN_PLACE")
    os.environ["TERRA_COMMIT_IN_PLACE"] = "1" if on else "0"
    try:
        yield
    finally:
        if old is None:
            del os.environ["TERRA_COMMIT_IN_PLACE"]
        else:
            os.environ["TERRA_COMMIT_IN_PLACE"] = old


def test_sgd_momentum_writes_every_state_in_place_like_eager(tmp_path: Path) -> None:
    make = sgd_program(momentum=0.9)
    # Serialized, the graph runs once the host has finished each step: it
    # always writes in place. Concurrent, only when the graph gets to the
    # update after the host has finished; else the host copies.
    stats = compare(make, batches(12), max_fallbacks=0, serialized=True)
    assert stats["commits_in_place"] >= 6 * stats["coexec_iterations"] > 0, stats
    compare(make, batches(12), max_fallbacks=0)
    # The compiled graph waits for the host before writing the new state,
    # and writes all of it (parameters, gradients, momenta) in place.
    torch.manual_seed(0)
    step, model, opt = make()
    fn = terra.function(step, cache_dir=None)
    for x, y in batches(6):
        fn(x, y)
        fn.wait_compiled()
    paths = terra.explain(fn, str(tmp_path))
    lowered = Path(paths["4-llvm.mlir"]).read_text()
    assert "terra_rt_commit_ready" in lowered
    names = len(list(model.parameters()))
    assert lowered.count("terra_rt_fetch_state_f32") >= 3 * names, lowered.count("terra_rt_fetch_state_f32")


def test_in_place_and_copied_commits_agree_and_keep_the_users_memory() -> None:
    results = []
    for on in (True, False):
        torch.manual_seed(0)
        step, model, opt = sgd_program(momentum=0.9)()
        ptrs = [p.data_ptr() for p in model.parameters()]
        # A NumPy view of a weight: eager's in-place updates show in it.
        view = model[0].weight.detach().numpy()
        fn = terra.function(step, cache_dir=None, serialized=True)
        with commit_in_place(on):
            for x, y in batches(10):
                fn(x, y)
                fn.wait_compiled()
        stats = terra.stats(fn)
        assert stats["fallbacks"] == 0 and stats["coexec_iterations"] >= 4, stats
        assert (stats["commits_in_place"] > 0) == on, stats
        assert [p.data_ptr() for p in model.parameters()] == ptrs
        assert torch.equal(torch.from_numpy(view), model[0].weight.detach())
        results.append([t.detach().clone() for t in model.parameters()]
                       + [opt.state[p]["momentum_buffer"].clone() for p in model.parameters()]
                       + [p.grad.clone() for p in model.parameters()])
    for a, b in zip(*results):
        assert torch.equal(a, b)


def test_a_value_read_after_the_update_inside_the_step_is_the_updated_one() -> None:
    # The host needs the updated weight's sum inside the step, so the graph
    # gets to the update before the host has finished: it computes into its
    # own buffers and the host copies them; the result is eager's.
    def make() -> tuple:
        model = mlp()
        opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

        def step(x, y):
            loss = F.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            print(f"{model[0].weight.sum().item():.5f}")
            return loss
        return step, model, opt
    for serialized in (False, True):
        stats = compare(make, batches(10), max_fallbacks=0, serialized=serialized)
        assert stats["coexec_iterations"] >= 4, stats


def test_a_gradient_read_before_the_step_ends_every_few_steps() -> None:
    # Logging a gradient's norm every third step, after the update: steps
    # that read it and steps that do not share the graph.
    def make() -> tuple:
        model = mlp()
        opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        counter = {"n": 0}

        def step(x, y):
            loss = F.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            counter["n"] += 1
            if counter["n"] % 3 == 0:
                print(f"{model[2].bias.grad.norm().item():.5f}")
            return loss
        return step, model, opt
    for serialized in (False, True):
        compare(make, batches(14), max_fallbacks=2, serialized=serialized)


def test_adam_with_foreach_lists_writes_its_gradients_in_place_too() -> None:
    # Adam's foreach path feeds its per-parameter bias corrections as lists
    # (a [4] tensor each) after backward has accumulated the gradients, so
    # the lists' shape guards come after the gradients' writes. The runtime
    # checks each feed as the host sends it, which lets the gradients (not
    # only the parameters) go in place. (The moments: the next test.)
    make = sgd_program(optimizer=torch.optim.Adam, lr=0.01, foreach=True)
    stats = compare(make, batches(10), max_fallbacks=0, serialized=True)
    assert stats["commits_in_place"] > 0, stats
    names = 4  # two linear layers: weights and biases
    per_step = [s.get("commits_in_place", 0) for s in stats["steps"]]
    assert max(per_step) >= 2 * names, per_step



def adam_program(reset_at: int = -1, kept: list | None = None):
    """`make` for an Adam (foreach) step on the small MLP; with `reset_at`,
    the step of that call clears the optimizer's state first (the next
    update makes new moments, as Adam's first step does), after keeping
    the old moments in `kept`."""
    def make() -> tuple:
        model = mlp()
        opt = torch.optim.Adam(model.parameters(), lr=0.01, foreach=True)
        calls = [0]

        def step(x, y):
            if calls[0] == reset_at:
                if kept is not None:
                    kept.extend(s["exp_avg"] for s in opt.state.values())
                opt.state.clear()
            calls[0] += 1
            loss = F.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            return loss
        return step, model, opt
    return make


def test_adam_writes_its_moments_and_step_counters_in_place() -> None:
    # The moments and step counters are made by Adam's first step: the
    # graph's branch yields new tensors in that case and the states in the
    # others, so they are written in place only when the branch takes a
    # case yielding the state (-terra-mark-state-updates' case condition).
    stats = compare(adam_program(), batches(10), max_fallbacks=0, serialized=True)
    names = 4  # two linear layers: weights and biases
    per_step = [s.get("commits_in_place", 0) for s in stats["steps"]]
    # parameters, gradients, both moments and the step counters
    assert max(per_step) == 5 * names, per_step


def test_new_moments_after_a_reset_leave_the_old_ones_alone() -> None:
    # Clearing the optimizer's state mid-training takes the first step's
    # case again: the new moments are new tensors (eager leaves the old
    # ones as they were), so the graph must not write them into the old
    # moments' memory.
    for serialized in (True, False):
        kept_e: list = []
        kept_t: list = []
        make_e, make_t = adam_program(9, kept_e), adam_program(9, kept_t)
        made = iter([make_e, make_t])
        compare(lambda: next(made)(), batches(14), max_fallbacks=2, serialized=serialized)
        assert len(kept_e) == len(kept_t) == 4
        for a, b in zip(kept_e, kept_t):
            assert_same(b, a, f"an old moment, serialized={serialized}")


def test_a_branch_making_a_new_tensor_leaves_the_old_state_alone() -> None:
    # Every third step starts the running average afresh in a new tensor
    # (eager leaves the old buffer, which the program keeps, as it was);
    # the other steps update the buffer in place. The merged graph's branch
    # yields the state in one case and a new value in the other: only the
    # first may be written into the state's memory.
    replaced: list = []  # per program made: its replaced buffers

    def make() -> tuple:
        model = mlp()
        model.register_buffer("avg", torch.zeros(3))
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        calls, old = [0], []
        replaced.append(old)

        def step(x, y):
            logits = model(x)
            loss = F.cross_entropy(logits, y)
            if calls[0] % 3 == 2:
                old.append(model.avg)
                avg = torch.zeros_like(model.avg)
                model.avg = avg
            else:
                avg = model.avg
            avg.mul_(0.5).add_(logits.detach().mean(0))
            calls[0] += 1
            opt.zero_grad()
            loss.backward()
            opt.step()
            return loss
        return step, model, opt

    for serialized in (True, False):
        replaced.clear()
        stats = compare(make, batches(14), max_fallbacks=2, serialized=serialized)
        if serialized:
            assert stats["commits_in_place"] > 0, stats
        old_e, old_t = replaced
        assert len(old_e) == len(old_t) == 4
        for a, b in zip(old_e, old_t):
            assert_same(b, a, f"a replaced buffer, serialized={serialized}")


def test_a_fed_view_of_a_parameter_written_in_place() -> None:
    # The step's input is a view of the weight the step updates in place
    # (eager: the view is read before the update and shows the updated
    # weight afterwards). The runtime gives the graph a copy of a feed
    # overlapping a state it writes in place (terra.donated_states).
    def make() -> tuple:
        torch.manual_seed(0)
        model = torch.nn.Linear(6, 6)
        opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

        def step(x, y):
            loss = F.mse_loss(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            # Read after the update: eager's view shows the new weight.
            return loss, x.sum()
        return step, model, opt

    for serialized in (True, False):
        step_e, model_e, opt_e = make()
        step_t, model_t, opt_t = make()
        fn = terra.function(step_t, cache_dir=None, serialized=serialized)
        g = torch.Generator().manual_seed(2)
        for i in range(12):
            y = torch.randn(6, 6, generator=g)
            # Rows 1..6 of the weight (transposed: a strided view), each
            # copy's own.
            x_e = model_e.weight.detach().t()
            x_t = model_t.weight.detach().t()
            before = x_t.clone()
            (loss_e, sum_e), (loss_t, sum_t) = step_e(x_e, y), fn(x_t, y)
            assert_same(loss_t, loss_e, f"step {i} loss, serialized={serialized}")
            assert_same(sum_t, sum_e, f"step {i} the view's sum after the update, serialized={serialized}")
            # The view shows the update, as in eager.
            assert_same(x_t, x_e, f"step {i} the fed view, serialized={serialized}")
            assert not torch.equal(x_t, before)
            for a, b in zip(model_e.parameters(), model_t.parameters()):
                assert_same(b, a, f"step {i} parameters, serialized={serialized}")
        stats = terra.stats(fn)
        assert stats["coexec_iterations"] > 0, stats
        if serialized:
            assert stats["commits_in_place"] > 0, stats
