"""StateRegistry: its slots follow every change of the modules and optimizers
(the slots are cached between calls; see StateRegistry.slots)."""
import torch
from torch import nn

from terra.state import StateRegistry


def _view(reg: StateRegistry) -> list:
    return [(s.name, s.get()) for s in reg.slots()]


def _same(cached: StateRegistry) -> None:
    """The cached registry's slots are what a fresh registry builds."""
    fresh = StateRegistry(cached.modules, cached.optimizers)
    a, b = _view(cached), _view(fresh)
    assert [n for n, _ in a] == [n for n, _ in b]
    assert all(x is y for (_, x), (_, y) in zip(a, b))


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
