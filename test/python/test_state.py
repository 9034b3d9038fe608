"""StateRegistry: its slots follow every change of the modules and optimizers
(the slots are cached between calls; see StateRegistry.slots; the walk that
checks them is native where the module is built, StateWalk.cpp)."""
import gc
import importlib
import weakref

import pytest
import torch
from torch import nn

from terra import native
from terra.mlir_text import ELEMENT_TYPES
from terra.replay import bump_versions, commit_plan, python_commit_plan
from terra.runio import tensor_spec, tensor_specs
from terra.state import StateRegistry


def _view(reg: StateRegistry) -> list:
    return [(s.name, s.get()) for s in reg.slots()]


def _python(reg: StateRegistry) -> StateRegistry:
    """`reg` without the native walk and reads (the Python path only)."""
    reg._native_walk = None
    reg._native = None
    return reg


def _same(cached: StateRegistry) -> None:
    """The cached registry's slots are what a fresh registry builds with
    the Python walk, and its tensors are what the slots' getters read."""
    fresh = _python(StateRegistry(cached.modules, cached.optimizers))
    fresh.held = cached.held
    a, b = _view(cached), _view(fresh)
    assert [n for n, _ in a] == [n for n, _ in b]
    assert all(x is y for (_, x), (_, y) in zip(a, b))
    got, want = cached.tensors(), fresh.tensors()
    assert list(got) == list(want)
    assert all(got[n] is want[n] for n in want)
    # A replay's end reads every slot at once (natively: StateWalk.cpp's
    # slot_list): what each getter gives, None included.
    for reg in (cached, fresh):
        slots, values = reg.slot_values()
        assert [s.name for s in slots] == [n for n, _ in a]
        assert len(values) == len(slots) and all(v is s.get() for s, v in zip(slots, values))


def test_the_native_walk_is_used_where_built() -> None:
    native.load()  # the tests run against a build
    reg = StateRegistry([nn.Linear(2, 2)], [])
    assert reg._native_walk is not None


def _step(model: nn.Module, opt: torch.optim.Optimizer) -> None:
    opt.zero_grad()
    model(torch.randn(2, 4)).sum().backward()
    opt.step()


def test_slots_follow_changes_of_modules_and_optimizers() -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4), nn.Linear(4, 2))
    opt = torch.optim.Adam(model.parameters())
    reg = StateRegistry([model], [opt])
    _same(reg)
    assert reg.slots() is not reg.slots()  # callers get their own list
    _step(model, opt)  # Adam's state appears
    _same(reg)
    assert any(s.name.startswith("optim:0.weight:exp_avg") for s in reg.slots())
    _step(model, opt)  # same layout, new values: the getters read them
    _same(reg)
    model[2] = nn.Linear(4, 2)  # a new submodule: new parameter objects
    _same(reg)
    model[1].running_mean = torch.zeros(4)  # a buffer replaced
    _same(reg)
    opt.add_param_group({"params": [nn.Parameter(torch.ones(3))]})  # a parameter no module names
    _same(reg)
    assert "param:opt0.group1.0" in [s.name for s in reg.slots()]
    p = model[0].weight
    opt.state[p] = {k: v.clone() for k, v in opt.state[p].items()}  # a new state dict
    _same(reg)
    opt.state[p]["exp_avg"] = 0.0  # a state value that is no longer a tensor
    _same(reg)
    assert "optim:0.weight:exp_avg" not in [s.name for s in reg.slots()]
    model.extra = nn.Linear(1, 1)  # a module added under a new name
    _same(reg)
    del model.extra
    _same(reg)
    # Only names change (the same objects): the check that skips the
    # named walk (`_fingerprint`) must see it.
    lin = model[0]
    b = lin.bias
    del lin.bias
    lin.register_parameter("b2", b)  # (the last one: the order stays)
    _same(reg)
    assert "param:0.b2" in [s.name for s in reg.slots()]
    model.add_module("again", model[2])  # a module shared under two names
    _same(reg)
    model._modules["again2"] = model._modules.pop("again")  # renamed in place
    _same(reg)
    assert reg.slots() == reg.slots()


def test_cached_slots_set_the_current_objects() -> None:
    model = nn.Linear(3, 3)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    reg = StateRegistry([model], [opt])
    reg.slots()
    model.weight = nn.Parameter(torch.zeros(3, 3))  # replaced after the slots were built
    slot = next(s for s in reg.slots() if s.name == "param:weight")
    slot.set(torch.ones(3, 3))
    assert torch.equal(model.weight, torch.ones(3, 3))


def _walk_changes(reg: StateRegistry) -> bool:
    """Whether the native walk finds the state changed since the slots
    were last built (then `slots` builds them again)."""
    changed = not reg._native_walk.same(reg.modules, reg.optimizers, reg.held)
    reg.slots()
    return changed


def test_the_native_walk_sees_every_change_the_slots_depend_on() -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4), nn.Linear(4, 2))
    opt = torch.optim.Adam(model.parameters())
    reg = StateRegistry([model], [opt])
    assert _walk_changes(reg)  # nothing accepted yet
    assert not _walk_changes(reg)
    _step(model, opt)  # Adam's state appears
    assert _walk_changes(reg)
    _step(model, opt)  # new values in the same tensors and dicts
    assert not _walk_changes(reg)
    first, norm, last = model
    changes = [
        lambda: setattr(first, "weight", nn.Parameter(torch.zeros(4, 4))),
        # The order named_parameters gives (pop and insert again: torch 2.x
        # keeps a module's parameters in a dict, 1.13 in an OrderedDict).
        lambda: first._parameters.update(weight=first._parameters.pop("weight")),
        lambda: setattr(norm, "running_var", torch.ones(4)),
        lambda: setattr(model, "extra", nn.ReLU()),
        lambda: model._modules.update({"0": model._modules.pop("0")}),
        lambda: opt.add_param_group({"params": [nn.Parameter(torch.ones(2))]}),
        lambda: opt.param_groups[0]["params"].append(nn.Parameter(torch.ones(2))),
        lambda: opt.state[last.bias].update(extra=torch.zeros(1)),  # a new tensor-valued key
        lambda: opt.state[last.bias].update(extra=1.0),  # no longer a tensor
        lambda: opt.state.__setitem__(last.bias, dict(opt.state[last.bias])),
        lambda: reg.adopt([torch.zeros(2)]),
    ]
    for k, change in enumerate(changes):
        change()
        assert _walk_changes(reg), f"change {k} went unseen"
        assert not _walk_changes(reg), f"change {k} is seen twice"
        _same(reg)


def test_the_native_walk_compares_adopted_tensors_by_address_and_keeps_nothing_alive() -> None:
    model = nn.Linear(2, 2)
    reg = StateRegistry([model], [])
    held = torch.zeros(3)
    reg.adopt([held])
    _walk_changes(reg)
    ref = weakref.ref(held)
    del held
    gc.collect()
    assert ref() is None  # the record does not keep an adopted tensor alive
    assert _walk_changes(reg)  # and sees it go
    assert "held:0" not in reg.tensors()
    _same(reg)


def test_unusual_containers_leave_the_check_to_the_python_walk() -> None:
    class Params(dict):
        pass

    model = nn.Linear(2, 2)
    reg = StateRegistry([model], [])
    reg.slots()
    model._parameters = Params(model._parameters)  # a mapping type the walk does not model
    assert not reg._native_walk.same(reg.modules, reg.optimizers, reg.held)
    _same(reg)


def test_native_tensor_specs_equal_tensor_spec() -> None:
    tensors = [torch.zeros(2, 3), torch.ones(4, 2).t(), torch.zeros((), dtype=torch.int64),
               torch.zeros(5, dtype=torch.bool)[1:], nn.Parameter(torch.ones(2))]
    load = native.load()
    assert load.tensor_specs(tensors, ELEMENT_TYPES) == [tensor_spec(t) for t in tensors]
    assert tensor_specs(tensors) == [tensor_spec(t) for t in tensors]
    odd = [torch.zeros(2), torch.zeros(2, dtype=torch.complex64)]
    assert load.tensor_specs(odd, ELEMENT_TYPES)[1] is None
    with pytest.raises(Exception, match="complex64"):
        tensor_specs(odd)  # named, as tensor_spec names it


def test_tensor_specs_return_a_spec_that_still_stands_again() -> None:
    # With the last call's specs, runio.tensor_specs returns each spec that
    # still describes its tensor again (the runtime reuses what it read
    # from a spec object it has seen: Graph.new_run, Run.fetch_into); any
    # change the runtime would read differently gives a new spec.
    if native.load_dispatch() is None:
        pytest.skip("the dispatch hook is not built")

    class Sub(torch.Tensor):
        pass

    p = nn.Parameter(torch.ones(3, 4))
    b = torch.zeros(6)
    tensors = [p, b, torch.ones(4, 2).t(), torch.ones(2).as_subclass(Sub)]
    first = tensor_specs(tensors)
    assert first == [tensor_spec(t) for t in tensors]
    again = tensor_specs(tensors, first)
    assert again == first
    assert [a is f for a, f in zip(again, first)] == [True, True, True, False]  # a subclass: tensor_spec
    assert tensor_specs(tensors, [None, 3]) == first  # anything else in `previous`: read afresh

    def transpose() -> None:
        with torch.no_grad():
            p.t_()
    changes = [
        lambda: setattr(p, "data", torch.zeros(3, 4)),  # new memory
        transpose,  # the same memory, other sizes and strides
        lambda: tensors[2].as_strided_((2, 4), (4, 1)),  # the same sizes, other strides
        lambda: b.resize_(9),  # other sizes
        lambda: b.set_(b.untyped_storage() if hasattr(b, "untyped_storage") else b.storage(), 1, (5,)),  # offset
        lambda: setattr(p, "data", p.data.double()),  # another dtype
        lambda: tensors.__setitem__(1, b.clone()),  # another tensor in that place
    ]
    for k, change in enumerate(changes):
        last = tensor_specs(tensors)
        change()
        now = tensor_specs(tensors, last)
        assert now == [tensor_spec(t) for t in tensors], f"change {k}"
        assert any(a is not b for a, b in zip(now[:3], last[:3])), f"change {k} went unseen"


def test_native_commit_plan_equals_its_python_specification() -> None:
    # A replay's commit plan (replay.commit_plan): plain CPU tensors are
    # direct commits, with the spec they crossed with at the step's start
    # while it still describes them, else a new one; anything else (no
    # tensor, a subclass, a sparse or a meta tensor) goes to the setters.
    if native.load_dispatch() is None:
        pytest.skip("the dispatch hook is not built")

    class Sub(torch.Tensor):
        pass

    p, q, g = nn.Parameter(torch.ones(3, 4)), nn.Parameter(torch.ones(2)), torch.zeros(3, 4)
    held = [p, q, g, None, torch.ones(2).as_subclass(Sub), torch.zeros(3).to_sparse(),
            torch.empty(2, device="meta"), torch.ones(4, 2).t()]
    specs = {f"s{k}": tensor_spec(t) for k, t in enumerate(held[:3])}
    specs["s7"] = tensor_spec(held[7])
    q.data = torch.zeros(2)  # new memory since its spec was made: a new spec
    specs["s2"] = tensor_spec(torch.zeros(3, 4))  # another tensor's spec under g's name
    commits = [(f"s{k}", 10 + k, k % 2) for k in range(len(held))]
    native_plan = commit_plan(commits, held, specs)
    python_plan = python_commit_plan(commits, held, specs)
    assert native_plan == python_plan
    direct, items, late = native_plan
    assert [c for c, _ in direct] == [commits[k] for k in (0, 1, 2, 7)]
    assert all(t is held[k] for (_, t), k in zip(direct, (0, 1, 2, 7)))
    assert [c[0] for c in late] == ["s3", "s4", "s5", "s6"]
    assert items[0][2] is specs["s0"] and items[3][2] is specs["s7"]  # still standing: the same object
    assert items[1][2] == tensor_spec(q) and items[2][2] == tensor_spec(g)
    assert [i[:2] for i in items] == [(10, 0), (11, 1), (12, 0), (17, 1)]


def test_native_dense_check_equals_its_python_specification() -> None:
    # function.dense_cpu_real decides whether torch 1.13's multi-tensor
    # update may replace the per-parameter one; natively from the tensors'
    # C++ side, with the Python predicate for types it does not know.
    tf = importlib.import_module("terra.function")
    if native.load_dispatch() is None:
        pytest.skip("the dispatch hook is not built")

    class Sub(nn.Parameter):
        pass

    def with_grad(p: torch.Tensor, grad: torch.Tensor) -> torch.Tensor:
        p.grad = grad
        return p
    cases = {
        "plain": [nn.Parameter(torch.ones(2)), torch.zeros(3)],
        "grads": [with_grad(nn.Parameter(torch.ones(2)), torch.ones(2))],
        "complex": [nn.Parameter(torch.ones(2)), nn.Parameter(torch.ones(2, dtype=torch.complex64))],
        "sparse": [nn.Parameter(torch.ones(2).to_sparse())],
        "sparse grad": [with_grad(nn.Parameter(torch.ones(2)), torch.ones(2).to_sparse())],
        "meta": [nn.Parameter(torch.empty(2, device="meta"))],
        "subclass": [Sub(torch.ones(2))],
        "empty": [],
    }
    load = native.load_dispatch()
    for name, params in cases.items():
        python = all(p.layout is torch.strided and not p.is_complex() and p.device.type == "cpu" and
                     (p.grad is None or p.grad.layout is torch.strided) for p in params)
        assert tf.dense_cpu_real(params) == python, name
        assert load.dense_cpu_real(params) == (None if name == "subclass" else python), name


def test_bump_versions_counts_as_an_in_place_write() -> None:
    p = nn.Parameter(torch.ones(3))
    t = torch.zeros(2)
    before = (p._version, t._version)
    bump_versions([p, t])
    assert (p._version, t._version) == (before[0] + 1, before[1] + 1)
    # Autograd refuses a saved tensor written since it was saved.
    x = torch.ones(3, requires_grad=True)
    y = x * p
    bump_versions([p])
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()


def test_a_state_that_cannot_be_read_at_a_co_executed_step_runs_it_eagerly() -> None:
    """Reading the program's state is the first thing a co-executed step
    does; when it fails (here: the registry raises), that step runs
    eagerly, counted as a fallback, and the next one co-executes again.
    (It used to fail with an AttributeError from the half-built
    co-executor.)"""
    from coexec_helpers import assert_same, batches, sgd_program
    import terra
    data = batches(8)
    torch.manual_seed(0)
    step_e, model_e, opt_e = sgd_program()()
    torch.manual_seed(0)
    step_t, model_t, opt_t = sgd_program()()
    fn = terra.function(step_t, cache_dir=None)
    for i, (x, y) in enumerate(data):
        expected = step_e(x, y)
        if i == 5:
            assert terra.stats(fn)["coexec_iterations"] > 0
            real = fn.registry.tensors

            def unreadable() -> dict:
                raise RuntimeError("cannot read the state")
            fn.registry.tensors = unreadable
            try:
                got = fn(x, y)
            finally:
                fn.registry.tensors = real
        else:
            got = fn(x, y)
        assert_same(got, expected, f"step {i} result")
        for (name, a), b in zip(model_t.state_dict().items(), model_e.state_dict().values()):
            assert_same(a, b, f"step {i} {name}")
    stats = terra.stats(fn)
    assert [(f["iteration"], f["site"]) for f in stats["fallback_log"]] == [(5, "<state>")], stats["fallback_log"]
    assert "cannot identify the state" in stats["fallback_log"][0]["reason"]
    assert stats["steps"][-1]["phase"] == "coexec"
