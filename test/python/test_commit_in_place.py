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
from coexec_helpers import batches, compare, mlp, sgd_program


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
    # only the parameters) go in place. (The moments are created by the
    # first step: a branch of the graph yields fresh tensors for them, so
    # they are not tied to their states' memory.)
    make = sgd_program(optimizer=torch.optim.Adam, lr=0.01, foreach=True)
    stats = compare(make, batches(10), max_fallbacks=0, serialized=True)
    assert stats["commits_in_place"] > 0, stats
    names = 4  # two linear layers: weights and biases
    per_step = [s.get("commits_in_place", 0) for s in stats["steps"]]
    assert max(per_step) >= 2 * names, per_step

