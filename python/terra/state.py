"""Persistent state: the tensors that outlive one iteration.

Parameters, their gradients, optimizer state and module buffers are read
by the graph as `terra.state "<name>"` rather than fed, and their final
values are committed back after the iteration. Each gets a stable name,
independent of object identity (a gradient or a momentum buffer is a new
tensor object in some iterations):

    param:<module path>          e.g. param:fc1.weight
    grad:<module path>           its .grad
    optim:<module path>:<key>    e.g. optim:fc1.weight:momentum_buffer
    buffer:<module path>         e.g. buffer:bn.running_mean

Parameters an optimizer holds that no given module names are called
`opt<i>.group<j>.<k>`. Tensors the program holds elsewhere (a closure, a
global, an object's attribute) and the step writes in place, such as an
exponential moving average of the weights or a running metric, are adopted
as they are found (`adopt`) and called `held:<i>`:

    held:0                       the first such tensor
"""
from __future__ import annotations

import collections
import weakref
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Optional

import torch

# Slot kinds, as the native reader (python/src/StateWalk.cpp) numbers them:
# what `StateSlot.get` reads from its `obj` (and `key`).
PARAM, GRAD, DICT_ENTRY, BUFFER, HELD = range(5)


@dataclass
class StateSlot:
    """Where one named piece of state lives: read it, or replace it.
    `kind`, `obj` and `key` say what `get` reads: the parameter `obj`, its
    `.grad`, `obj.get(key)` (an optimizer state dict), `getattr(obj, key)`
    (a module's buffer) or `obj()` (a weak reference)."""

    name: str
    get: Callable[[], Optional[torch.Tensor]]
    set: Callable[[Optional[torch.Tensor]], None]
    kind: int = PARAM
    obj: Any = None
    key: Any = None


class StateRegistry:
    """Enumerates the persistent state of some modules and optimizers."""

    def __init__(self, modules: Iterable[torch.nn.Module] = (),
                 optimizers: Iterable[torch.optim.Optimizer] = ()):
        self.modules = list(modules)
        self.optimizers = list(optimizers)
        # Weak references to adopted tensors (`adopt`), in adoption order.
        self.held: list[weakref.ref] = []
        self._sig: Any = None  # what `_slots` were built from (see slots)
        self._slots: list[StateSlot] = []
        # Counts rebuilds of `_slots`: equal generations, the same slots in
        # the same order (a replay's end checks the names only when it changed).
        self.generation = 0
        # The walk made natively (StateWalk.cpp): it says whether the
        # objects `_slots` were built from are still those; `_walk_keep`
        # holds them alive while its record stands. `_reads`: the slots'
        # names, kinds, objects and keys, for the native `slot_tensors`.
        from . import native  # noqa: PLC0415 - the module is built with the front end
        module = native.load_optional()  # without it the walk and the reads stay in Python
        self._native = module if hasattr(module, "StateWalk") else None
        self._native_walk = None if self._native is None else self._native.StateWalk(
            torch.Tensor, collections.OrderedDict, collections.defaultdict)
        self._walk_keep: list = []
        self._reads: Optional[tuple] = None

    def _walk(self) -> tuple[list[tuple[str, torch.Tensor]], list[tuple[str, torch.nn.Module, str]]]:
        """Named parameters and buffers of every module, in the order and with
        the names (first occurrence of a shared tensor or module) that
        `named_parameters()` / `named_buffers()` give, from one walk of the
        module tree (`slots()` runs several times per iteration; torch's
        generators made it cost milliseconds on a 60-module model)."""
        params: list[tuple[str, torch.Tensor]] = []
        buffers: list[tuple[str, torch.nn.Module, str]] = []
        seen_params: set[int] = set()
        seen_buffers: set[int] = set()
        multi = len(self.modules) > 1
        for mi, root in enumerate(self.modules):
            seen_modules: set[int] = set()
            stack: list[tuple[str, torch.nn.Module]] = [("", root)]
            while stack:
                prefix, mod = stack.pop()
                if id(mod) in seen_modules:
                    continue
                seen_modules.add(id(mod))
                dot = prefix + "." if prefix else ""
                for n, p in mod._parameters.items():
                    if p is not None and id(p) not in seen_params:
                        seen_params.add(id(p))
                        params.append((f"m{mi}.{dot}{n}" if multi else dot + n, p))
                for n, b in mod._buffers.items():
                    if b is not None and id(b) not in seen_buffers:
                        seen_buffers.add(id(b))
                        buffers.append((f"m{mi}.{dot}{n}" if multi else dot + n, mod, n))
                children = [(dot + n, c) for n, c in mod._modules.items() if c is not None]
                stack.extend(reversed(children))  # pre-order, as named_modules
        return params, buffers

    def slots(self) -> list[StateSlot]:
        """Every slot, in a deterministic order (params with their grads,
        then optimizer state, then buffers). Slots whose tensor is None
        (a parameter without a gradient) are included.

        Runs twice per co-executed iteration (its start and its commit):
        the slots are rebuilt only when what they are made from changed
        (the module tree's parameters and buffers, the optimizers' params
        and their state dicts and keys); the check is one walk and one
        comparison (building 570 slots cost YOLOv3 0.9 ms each time), made
        natively when the native module is built (StateWalk.cpp)."""
        walk = self._native_walk
        if walk is not None and walk.same(self.modules, self.optimizers, self.held):
            return list(self._slots)
        slots = self._python_slots()
        if walk is not None:
            self._walk_keep = walk.accept()
        return slots

    def _python_slots(self) -> list[StateSlot]:
        named, buffers = self._walk()
        names = {id(p): n for n, p in named}
        params = [p for _, p in named]
        for oi, opt in enumerate(self.optimizers):
            for gi, group in enumerate(opt.param_groups):
                for k, p in enumerate(group["params"]):
                    if id(p) not in names:
                        names[id(p)] = f"opt{oi}.group{gi}.{k}"
                        params.append(p)
        # The getters hold the parameter, the optimizer's state dict of
        # each parameter and the module of each buffer: a new one of any of
        # them, a new name or a new tensor-valued state key is a new layout.
        states = [[opt.state.get(p) for p in params] for opt in self.optimizers]
        held = [r() for r in self.held]
        sig = ([(names[id(p)], id(p)) for p in params],
               [(name, id(mod), attr) for name, mod, attr in buffers],
               [[None if not st else (id(st), [k for k, v in st.items() if isinstance(v, torch.Tensor)])
                 for st in opt_states] for opt_states in states],
               [id(t) for t in held])
        if sig == self._sig:
            return list(self._slots)
        out: list[StateSlot] = []
        for p in params:
            n = names[id(p)]
            out.append(StateSlot(f"param:{n}", lambda p=p: p, _param_setter(p), PARAM, p))
            out.append(StateSlot(f"grad:{n}", lambda p=p: p.grad, _grad_setter(p), GRAD, p))
        for opt_states in states:
            for p, st in zip(params, opt_states):
                if not st:
                    continue
                for key in sorted(st, key=str):
                    if isinstance(st[key], torch.Tensor):
                        out.append(StateSlot(f"optim:{names[id(p)]}:{key}",
                                             lambda st=st, key=key: st.get(key),
                                             _dict_setter(st, key), DICT_ENTRY, st, key))
        for name, mod, attr in buffers:
            out.append(StateSlot(f"buffer:{name}", lambda mod=mod, attr=attr: getattr(mod, attr),
                                 _attr_setter(mod, attr), BUFFER, mod, attr))
        for i, r in enumerate(self.held):
            out.append(StateSlot(f"held:{i}", r, _held_setter(r), HELD, r))
        self._sig, self._slots = sig, out
        self._reads = None
        self.generation += 1
        return list(out)

    def adopt(self, tensors: Iterable[torch.Tensor]) -> list[str]:
        """Makes tensors the program holds outside the modules and
        optimizers persistent state (the step writes them in place: the
        graph reads them as state and the commit writes them back in
        place). Returns the new slots' names; a tensor adopted already, or
        one the slots hold, is not adopted again."""
        known = {id(t) for s in self.slots() if (t := s.get()) is not None}
        names = []
        for t in tensors:
            if id(t) not in known:
                known.add(id(t))
                names.append(f"held:{len(self.held)}")
                self.held.append(weakref.ref(t))
        return names

    def tensors(self) -> dict[str, torch.Tensor]:
        """name -> tensor for every slot that holds one now."""
        slots = self.slots()
        if self._native is None:
            return {s.name: t for s in slots if (t := s.get()) is not None}
        return self._native.slot_tensors(*self._slot_reads(slots))

    def slot_values(self) -> tuple[list[StateSlot], list[Optional[torch.Tensor]]]:
        """`slots()` and each slot's tensor (None where it holds none), the
        reads in one native call where the module is built (a replay's end
        reads every slot: ~0.25 ms for YOLOv3's 570 in Python)."""
        slots = self.slots()
        if self._native is None:
            return slots, [s.get() for s in slots]
        return slots, self._native.slot_list(*self._slot_reads(slots)[1:])

    def _slot_reads(self, slots: list[StateSlot]) -> tuple:
        """The slots' names, kinds, objects and keys for the native reads
        (`slots`: the current slots, what `slots()` returned)."""
        if self._reads is None:
            self._reads = ([s.name for s in slots], [s.kind for s in slots],
                           [s.obj for s in slots], [s.key for s in slots])
        return self._reads

    def slot(self, name: str) -> StateSlot:
        for s in self.slots():
            if s.name == name:
                return s
        raise KeyError(f"no persistent state named {name!r}")


def _assign(target: torch.Tensor, value: torch.Tensor) -> None:
    with torch.no_grad():
        target.copy_(value)


def _replaceable(cur: object, value: torch.Tensor) -> bool:
    """`cur` can take `value` in place (same object stays in the program)."""
    from .placeholder import Placeholder
    return (isinstance(cur, torch.Tensor) and not isinstance(cur, Placeholder)
            and cur.shape == value.shape and cur.dtype == value.dtype)


def _fresh(value: torch.Tensor) -> torch.Tensor:
    from .placeholder import Placeholder
    if isinstance(value, Placeholder):
        value = value.terra_real
    return value.detach().clone()


def _param_setter(p: torch.Tensor) -> Callable[[Optional[torch.Tensor]], None]:
    def set_(value: Optional[torch.Tensor]) -> None:
        if value is None:
            raise ValueError("a parameter cannot be set to None")
        _assign(p, value)
    return set_


def _grad_setter(p: torch.Tensor) -> Callable[[Optional[torch.Tensor]], None]:
    def set_(value: Optional[torch.Tensor]) -> None:
        if value is None:
            p.grad = None
        elif _replaceable(p.grad, value):
            _assign(p.grad, value)
        else:
            p.grad = _fresh(value)
    return set_


def _dict_setter(d: dict, key: object) -> Callable[[Optional[torch.Tensor]], None]:
    def set_(value: Optional[torch.Tensor]) -> None:
        cur = d.get(key)
        if value is None:
            d.pop(key, None)
        elif _replaceable(cur, value):
            _assign(cur, value)
        else:
            d[key] = _fresh(value)
    return set_


def _held_setter(ref: weakref.ref) -> Callable[[Optional[torch.Tensor]], None]:
    def set_(value: Optional[torch.Tensor]) -> None:
        cur = ref()
        if cur is None or value is None:
            return  # the program dropped it (nothing reads it), or nothing to write
        if not _replaceable(cur, value):
            raise ValueError(f"an adopted tensor of shape {list(cur.shape)} cannot take a value of "
                             f"shape {list(value.shape)} ({value.dtype}) in place")
        _assign(cur, value)
    return set_


def _attr_setter(mod: torch.nn.Module, attr: str) -> Callable[[Optional[torch.Tensor]], None]:
    def set_(value: Optional[torch.Tensor]) -> None:
        cur = getattr(mod, attr)
        if value is None:
            setattr(mod, attr, None)
        elif _replaceable(cur, value):
            _assign(cur, value)
        else:
            setattr(mod, attr, _fresh(value))
    return set_
