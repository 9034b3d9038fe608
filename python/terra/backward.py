"""Whole backward passes replayed without the autograd engine.

A replayed iteration (tape.py) used to run every `loss.backward()` through
torch's autograd engine on placeholders: the engine walks the graph of
autograd nodes and dispatches each node's ops, and each op comes back to the
co-executor to be matched against the tape and given placeholder results.
That cost the host about as much per op as eager PyTorch spends computing it
(on DCGAN's co-executed step ~1.6 ms of ~6 ms). When nothing but the engine
runs during a backward pass, what it does is fixed by the forward ops the
replay already matched: the same ops on the same values, and `.grad` of the
same leaves set to the same results. So a backward pass whose entries the
tape has, that was once replayed through the engine with nothing else
running (its *validation*), is afterwards replayed as one unit: the
co-executor makes the entries' results from their recipes, logs them (a
later deviation or catch-up sees exactly what the engine-driven replay would
have left), sends their run effects, and sets the leaves' gradients. The
engine is not called.

What could make the engine do something else, and how it is ruled out:

* **Python code during the pass** (tensor and node hooks, module backward
  hooks, custom `autograd.Function` backwards, saved-tensor unpack hooks):
  the validation watches the calling thread with a profile function; any
  Python frame but terra's own, the standard library's and torch's dispatch
  helpers marks the pass as never replayed whole. Hook registration APIs
  (`Tensor.register_hook`, `retain_grad`, `register_post_accumulate_grad_hook`,
  node `register_hook`/`register_prehook`, `saved_tensors_hooks`) bump an
  epoch, and the hooks they register are wrapped so the validation sees them
  run even when they are C callables (`grads.append`). A registration in the
  current step rules the macro out for that step; one since the validation
  makes the next replay validate again. The leaves' own hook dicts are
  checked at the validation, and no pass with a Python autograd node is
  taken.
* **Another graph from the same forward ops**: a parameter whose
  `requires_grad` changed, a part of the forward run under `no_grad` this
  time, a gradient that was `None` where it was a tensor (gradient
  accumulation every other step): the macro compares the forward results'
  autograd node types, every parameter's `requires_grad` and each leaf's
  gradient identity with the validated pass's, and runs the engine if any
  differs (a sibling tape whose validated pass fits is taken instead).
* **Another call**: the roots, their gradients and the flags must be the
  recorded ones; only `backward()` (accumulating, no `create_graph`, no
  `inputs`) is replayed whole, and not under anomaly detection.

What the engine would have done and the macro does not: free the graph's
saved placeholders (they have no data; they go with the forward's
tensors). Known gap: a C-callable hook registered directly on a long-lived
autograd node (a gradient accumulator, DDP-style) before the first
co-executed step is invisible to the validation. `TERRA_BACKWARD_MACRO=0`
runs every pass through the engine. CUDA graphs keep the engine (its device
threads run hooks the profile function does not see).
"""
from __future__ import annotations

import os
import sys
import sysconfig
import threading
import weakref
from typing import Any, Callable, Iterator, Optional

import torch

from . import sizes, tracing
from .sites import OWN_HOOKS, grad_fn_of
from .tape import (MEMO_MAX, Untapeable, flat_inputs, flat_results, hashable, layout_key, matches, relaxed_arg, spec_of,
                   tensor_idents)

ENABLED = os.environ.get("TERRA_BACKWARD_MACRO", "1") != "0"
# Bumped by every hook registration (see module doc); [0] to share a cell.
HOOK_EPOCH = [0]
_HOOK_CALLS = [0]  # calls of hooks registered through the wrapped APIs

_LOG = "tape" in os.environ.get("TERRA_LOG", "").split(",")
_PARAMS = ("tensors", "grad_tensors", "retain_graph", "create_graph", "inputs", "allow_unreachable",
           "accumulate_grad")


class Block:
    """One backward pass of a tape: entries `start..end-1` are the ops the
    engine ran for one `run_backward` call with arguments `call` (a spec,
    tape.spec_of). Validation state: `state` is None (not validated), "ok",
    or why it is never replayed whole; the rest is filled by the validation."""

    __slots__ = ("start", "end", "call", "state", "epoch", "leaves", "params", "pattern", "refs", "needed",
                 "effects", "infer", "varying", "values", "derive")

    def __init__(self, start: int, end: int, call: Any):
        self.start, self.end, self.call = start, end, call
        self.state: Optional[str] = None
        self.epoch = -1
        self.leaves: tuple = ()  # (leaf identity, its gradient's identity before, after)
        self.params: tuple = ()  # (state name, requires_grad) of every parameter
        self.pattern: tuple = ()  # autograd node types of the forward results before the pass
        self.refs: tuple = ()  # identities the entries read that are not results of entries
        # The entries `_apply` makes (the rest wait for `expand`): (entry,
        # flat inputs its results or in-place updates use, their identities).
        self.needed: tuple = ()
        self.effects: list = []  # the entries' run effects, in order
        # Entries whose recipes are memoized per layout of sizes -> which of
        # their results alias inputs (the same for every layout, checked).
        self.infer: dict = {}
        # Entries whose arguments are not all fixed by the tape (a relaxed
        # scalar, a size following data-dependent sizes), and what they were
        # per forward key (`_forward_key`): entry -> those arguments in spec
        # order (`_variable`) and its relaxed scalar's feed (or None).
        self.varying: tuple = ()
        self.values: dict = {}
        # The entries `_derive` makes (those its inferences and size forms
        # read), once worked out; () once it failed (the engine runs).
        self.derive: Optional[tuple] = None


def _bind(args: tuple, kwargs: dict) -> Optional[dict]:
    if len(args) > len(_PARAMS) or any(k not in _PARAMS for k in kwargs):
        return None
    bound = dict(zip(_PARAMS, args))
    bound.update(kwargs)
    return bound


def _whole_pass(bound: Optional[dict]) -> bool:
    """A `backward()` call the macro can stand for: it accumulates into
    `.grad`, makes no graph of its own and has no `inputs`."""
    return (bound is not None and bool(bound.get("accumulate_grad", True))
            and not bound.get("create_graph", False) and not bound.get("inputs"))


def eligible(entries: list, start: int, end: int) -> bool:
    """Whether entries `start..end-1` can be made without the engine: ops
    whose results come from their recipes (memoized per layout and relaxed
    scalar, tape.Entry.makeable), nothing fed from values or computed on the
    host (tape.py, replay._chain). Relaxed scalars and sizes that follow
    data-dependent sizes (the backward of a pooling whose input size varies
    between paths) are what the validated passes had for the same forward
    key (`_forward_key`)."""
    return end > start and all(e.makeable and not (e.feeds or e.host_eval) for e in entries[start:end])


# -- the engine wrapper ------------------------------------------------------
class _Engine:
    """Stands for torch's `Variable._execution_engine`: `run_backward` of the
    co-executed step's thread goes to `run`; anything else to the engine."""

    def __init__(self, engine: Any):
        self._engine = engine

    def run_backward(self, *args: Any, **kwargs: Any) -> Any:
        ex = tracing._ACTIVE
        if _TRACED_RETURNS or (ex is None and _COEXEC_RETURNS):
            _check_returned(args[0] if args else kwargs.get("tensors", ()), outside=ex is None)
        if (ex is None or getattr(ex, "b_blocks", None) is None or ex.thread != threading.get_ident()
                or ex.paused or ex.b_depth):
            return self._engine.run_backward(*args, **kwargs)
        return run(ex, self._engine, args, kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._engine, name)


# -- tensors a step returned, differentiated after it -----------------------
# Eagerly a step's caller gets tensors with autograd history it may
# differentiate after the step (`loss = forward(x); loss.backward()`, a
# hidden state carried into the next step undetached, another function's
# step taking it as an argument); a co-executed step returns the graph's
# values, which have none. A traced step's tensors with history are watched
# (id -> (weak reference to the tensor, weak reference to its function))
# until the function co-executes: a backward pass that reaches one makes the
# function eager before it does. A co-executed step's values that had
# history as placeholders are watched too, by identity: a backward pass
# outside any step from one fails with an error saying why.
_TRACED_RETURNS: dict[int, tuple] = {}
_COEXEC_RETURNS: dict[int, tuple] = {}


def watch_returned(fn: Any, tensors: list, coexec: bool) -> None:
    """Watches `tensors`, returned by a step of `fn` (see above)."""
    install()  # (a traced step's caller runs its backward through the wrapper)
    table = _COEXEC_RETURNS if coexec else _TRACED_RETURNS
    for t in tensors:
        key = id(t)

        def forget(ref: Any, key: int = key) -> None:
            if table.get(key, (None,))[0] is ref:
                del table[key]
        table[key] = (weakref.ref(t, forget), weakref.ref(fn))


def _check_returned(roots: Any, outside: bool) -> None:
    """A backward pass from `roots` (`outside` any step, or in a step)
    against the watched tensors (TerraFunction.differentiated_after)."""
    roots = [r for r in (roots if isinstance(roots, (list, tuple)) else (roots,)) if isinstance(r, torch.Tensor)]
    if outside and _COEXEC_RETURNS:
        for r in roots:
            ref, fn_ref = _COEXEC_RETURNS.get(id(r), (None, None))
            fn = fn_ref() if ref is not None and ref() is r else None
            if fn is not None:
                _forget_function(fn)
                fn.differentiated_after(coexec=True)
    if not _TRACED_RETURNS:
        return
    nodes: dict = {}
    for key, (ref, fn_ref) in list(_TRACED_RETURNS.items()):
        t, fn = ref(), fn_ref()
        if t is None or fn is None or fn.phase in ("coexec", "eager"):
            _TRACED_RETURNS.pop(key, None)
        elif t.grad_fn is not None:
            nodes[t.grad_fn] = fn
    if not nodes:
        return
    seen: set = set()
    stack = [r.grad_fn for r in roots if r.grad_fn is not None]
    while stack:
        node = stack.pop()
        if node is None or node in seen:
            continue
        fn = nodes.get(node)
        if fn is not None:
            _forget_function(fn)
            fn.differentiated_after(coexec=False)
            return
        seen.add(node)
        stack.extend(n for n, _ in node.next_functions)


def _forget_function(fn: Any) -> None:
    for table in (_TRACED_RETURNS, _COEXEC_RETURNS):
        for key, (_, fn_ref) in list(table.items()):
            if fn_ref() is fn:
                table.pop(key, None)


_INSTALLED = [False]


def install() -> None:
    """Wraps torch's engine and its hook registration APIs (once)."""
    if _INSTALLED[0]:
        return
    _INSTALLED[0] = True
    from torch.autograd.variable import Variable
    Variable._execution_engine = _Engine(Variable._execution_engine)
    _wrap_registration(torch.Tensor, "register_hook", hook_arg=0)
    _wrap_registration(torch.Tensor, "register_post_accumulate_grad_hook", hook_arg=0)
    _wrap_registration(torch.Tensor, "retain_grad", hook_arg=None)
    mixin = getattr(torch.autograd.function, "_HookMixin", None)
    if mixin is not None and "_register_hook" in mixin.__dict__:
        orig = mixin.__dict__["_register_hook"].__func__

        def _register_hook(backward_hooks: Any, hook: Any) -> Any:
            if OWN_HOOKS[0]:
                return orig(backward_hooks, hook)
            HOOK_EPOCH[0] += 1
            return orig(backward_hooks, _counted(hook))
        mixin._register_hook = staticmethod(_register_hook)
    graph = getattr(torch.autograd, "graph", None)
    hooks_cls = getattr(graph, "saved_tensors_hooks", None) if graph is not None else None
    if hooks_cls is not None:
        orig_init = hooks_cls.__init__

        def __init__(self: Any, *a: Any, **k: Any) -> None:
            HOOK_EPOCH[0] += 1
            orig_init(self, *a, **k)
        hooks_cls.__init__ = __init__


def _counted(hook: Any) -> Any:
    def counted(*a: Any, **k: Any) -> Any:
        _HOOK_CALLS[0] += 1
        return hook(*a, **k)
    try:
        counted.__wrapped__ = hook  # type: ignore[attr-defined]
    except AttributeError:
        pass
    return counted


def _wrap_registration(cls: type, name: str, hook_arg: Optional[int]) -> None:
    orig = getattr(cls, name, None)
    if orig is None:
        return

    def wrapper(self: Any, *a: Any, **k: Any) -> Any:
        HOOK_EPOCH[0] += 1
        if hook_arg is not None and len(a) > hook_arg:
            a = a[:hook_arg] + (_counted(a[hook_arg]),) + a[hook_arg + 1:]
        return orig(self, *a, **k)
    wrapper.__name__, wrapper.__doc__, wrapper.__wrapped__ = name, orig.__doc__, orig  # type: ignore[attr-defined]
    setattr(cls, name, wrapper)


# -- one backward call ---------------------------------------------------------
def run(ex: Any, engine: Any, args: tuple, kwargs: dict) -> Any:
    """A `run_backward` call of the co-executed step (see module doc)."""
    if not ex.fast:
        return _recorded(ex, engine, args, kwargs)
    q = ex.pos
    bound = _bind(args, kwargs)
    if ENABLED and _whole_pass(bound) and not torch.is_anomaly_enabled() and ex.deviation is None:
        fit = _fitting_block(ex, q, args, kwargs)
        if fit is not None:
            _apply(ex, *fit)
            return ()
        if HOOK_EPOCH[0] == ex.hook_epoch0 and sys.getprofile() is None and _unvalidated(ex, q):
            return _validate(ex, engine, bound, args, kwargs)
    call = _call_spec(ex, bound, args, kwargs)
    watched = HOOK_EPOCH[0] == ex.hook_epoch0 and sys.getprofile() is None
    out = engine.run_backward(*args, **kwargs)
    _note_left(ex, q, call)
    if watched and ex.fast:
        _learn(ex, q)
    return out


def _call_spec(ex: Any, bound: Optional[dict], args: tuple, kwargs: dict) -> Any:
    """The checks of a `run_backward` call (`bound`: its arguments by name;
    tape.spec_of with the identities known so far: nothing is numbered
    here), or None if the macro cannot stand for it."""
    if not _whole_pass(bound):
        return None
    try:
        return spec_of(args, kwargs, lambda t: ex.idents.get(id(t)))
    except Untapeable:
        return None


def _recorded(ex: Any, engine: Any, args: tuple, kwargs: dict) -> Any:
    """While the iteration is recorded: which entries the pass made."""
    start = len(ex.building)
    call = _call_spec(ex, _bind(args, kwargs), args, kwargs)
    out = engine.run_backward(*args, **kwargs)
    if call is not None and not ex.fast:
        ex.b_blocks.append((start, len(ex.building), call))
    return out


def _note_left(ex: Any, q: int, call: Any) -> None:
    """A replay that left its tape during the pass records the rest: the
    pass is a block of the tape it leaves."""
    if not ex.fast and call is not None:
        ex.b_blocks.append((q, len(ex.building), call))


def _unvalidated(ex: Any, q: int) -> bool:
    """Whether the current tape or another that agrees with it up to `q` has
    a pass at `q` not validated since the last hook registration."""
    epoch = HOOK_EPOCH[0]
    return any(block.epoch != epoch for _, block in _blocks_at(ex, q))


def _blocks_at(ex: Any, q: int) -> Iterator[tuple]:
    """(tape, pass) for the passes at entry `q` of the current tape and of
    the tapes that agree with it so far (tapes differ inside passes: a
    gradient taken over or accumulated)."""
    for t in ex._agreeing_tapes(q):
        block = t.blocks.get(q) if t.blocks else None
        if block is not None and block.end <= t.limit:
            yield t, block


def _fitting_block(ex: Any, q: int, args: tuple, kwargs: dict) -> Optional[tuple]:
    """A validated pass at entry `q` (`_blocks_at`) whose checks this call
    passes, with its memoized recipes."""
    epoch = HOOK_EPOCH[0]
    if epoch != ex.hook_epoch0 or len(ex.replayed) != q:
        return None
    pattern = key = None
    for t, block in _blocks_at(ex, q):
        if block.state != "ok" or block.epoch != epoch:
            continue
        if pattern is None:
            pattern = _pattern(ex, q)
        if block.pattern == pattern and _checks_pass(ex, block, args, kwargs):
            if block.varying and key is None:
                key = _forward_key(ex, q)
            values = block.values.get(key) if block.varying else _NO_VALUES
            derived = None
            if values is None:
                # Not met since the validation: the sizes the engine would
                # pass follow from the graph's size forms, or the
                # engine-driven replay learns them (`_learn`).
                derived = _derive(ex, t, block, key)
                if derived is None:
                    continue
                values = derived[0]
            recipes = _memo_recipes(ex, t, block, values) if derived is None else derived[1]
            if recipes is not None:
                ex.tape = t
                return block, recipes, values
    return None


_NO_VALUES: dict = {}
# Forward keys whose values a pass keeps (a pass whose key is not kept goes
# through the engine, ~2 ms on Faster R-CNN); as tape.MEMO_MAX.
_VALUES_MAX = 256


def _forward_key(ex: Any, q: int) -> tuple:
    """What the engine's arguments in a pass at entry `q` follow from,
    besides the tape: the data-dependent sizes met so far (the replay's
    layout) and the relaxed scalars fed before the pass (a forward
    multiply's relaxed factor is its backward's)."""
    feeds = ex.relaxed_feeds
    if not feeds:
        return (tuple(ex.layout), ())
    with ex.pause():  # (reading a value dispatches ops, not the step's)
        relaxed = tuple((k, hashable(v.tolist())) for k, v in feeds.items() if k < q)
    return (tuple(ex.layout), relaxed)


def _variable(spec: tuple, args: tuple, kwargs: dict) -> list:
    """A call's arguments its spec does not check by value (a relaxed
    scalar "R", a size following data-dependent sizes "F"), in spec order."""
    out: list = []
    sa, sk = spec
    for s, v in zip(sa, args):
        _walk_variable(s, v, out)
    for k, s in sk:
        _walk_variable(s, kwargs[k], out)
    return out


# (The recursive helpers are module-level functions: a nested function that
# calls itself is a reference cycle through its closure, which keeps what
# it captures, e.g. a co-executor and its step's records, alive until
# Python's cyclic collector runs.)
def _walk_variable(s: tuple, v: Any, out: list) -> None:
    kind = s[0]
    if kind == "R" or kind == "F":
        out.append(list(v) if isinstance(v, list) else v)
    elif kind == "L":
        for x, y in zip(s[2], v):
            _walk_variable(x, y, out)


def _values(ex: Any, tape: Any, block: Block) -> Optional[dict]:
    """The varying arguments of the pass's entries as this step's replay
    of it through the engine passed them (`Block.values`), or None if a
    record lacks them."""
    out = {}
    entries = tape.entries
    for q in block.varying:
        r = ex.replayed[q] if q < len(ex.replayed) else None
        if r is None or r.args is None or r.entry is not entries[q]:
            return None
        e = entries[q]
        feed = None
        if e.relaxed is not None:
            feed = ex.relaxed_feeds.get(q)
            if feed is None:
                return None
        out[q] = (_variable(e.spec, r.args, r.kwargs),
                  None if e.relaxed is None else relaxed_arg(e, r.args, r.kwargs), feed)
    return out


def _learn(ex: Any, q: int) -> None:
    """After a validated pass with varying arguments ran through the
    engine (its values for this forward key were not known), keeps them."""
    tape = ex.tape
    block = tape.blocks.get(q) if tape.blocks else None
    if (block is None or block.state != "ok" or not block.varying or block.epoch != HOOK_EPOCH[0]
            or ex.pos != block.end or ex.deviation is not None or len(block.values) >= _VALUES_MAX):
        return
    key = _forward_key(ex, q)
    if key not in block.values:
        values = _values(ex, tape, block)
        if values is not None:
            block.values[key] = values


# Forward keys a pass's values were learnt at (through the engine) before
# its sizes are derived from the graph's size forms at a new key (`_derive`);
# TERRA_DERIVE_SIZES=0: never (every new key's pass runs through the engine).
_DERIVE_AFTER = 2 if os.environ.get("TERRA_DERIVE_SIZES", "1") != "0" else sys.maxsize


def _derive(ex: Any, tape: Any, block: Block, key: tuple) -> Optional[tuple]:
    """The pass's varying arguments and recipes at a forward key not met
    yet (Faster R-CNN: a new combination of RoI, foreground and mask
    counts most steps), without the engine: (values, recipes) as
    `_fitting_block` takes them, kept for the key like learnt ones; None
    if they cannot be derived (then the engine runs, `_learn`).

    The sizes the engine passes (a `new_zeros` of the RoI count, reshapes
    back to a pooled map's sizes) are dims of forward values, saved by
    autograd. Each such argument has a size form (sizes.py): which dim of
    which operand, or of which earlier value, it is. The graph computes
    the argument from that form, and every replay through the engine
    checked that the form gives what the engine passed (`replay.
    _forms_match`); after `_DERIVE_AFTER` forward keys whose values the
    engine gave (and the forms matched), the forms are evaluated on this
    step's shapes instead: the graph gets the same sizes either way.
    Shapes come from inference (`infer_meta`) on scratch placeholders made
    entry by entry, as the engine-driven replay makes them; nothing of
    the step is touched here."""
    if len(block.values) < _DERIVE_AFTER or key[1] or not block.infer or block.derive == ():
        return None
    entries = tape.entries
    if any(entries[q].relaxed is not None for q in block.varying):
        return None
    if block.derive is None:
        block.derive = _derive_plan(entries, block)
    derived = _derived(ex, tape, block)
    if derived is None:
        # Not derivable (a real result, an argument it cannot make, a failed
        # inference): the engine runs this pass from now on, without paying
        # for a failed attempt at every new key.
        block.derive = ()
        return None
    values, recipes = derived
    if len(block.values) < _VALUES_MAX:
        block.values[key] = values
    layout = ex.layout
    for q, r in recipes.items():
        e = entries[q]
        if e.memo is not None and len(e.memo) < MEMO_MAX:
            e.memo.setdefault(layout_key(layout, e, None), r)
    return values, recipes


def _derived(ex: Any, tape: Any, block: Block) -> Optional[tuple]:
    """(values, recipes) of `_derive`, made along `block.derive`, or None."""
    entries = tape.entries
    learnt = next(iter(block.values.values()))
    from .coexec import MetaUnavailable
    start = block.start
    made: dict = {}  # entry -> its scratch results (flat)
    values: dict = {}
    recipes: dict = {}

    def tensor(ident: Any) -> Optional[torch.Tensor]:
        if isinstance(ident, tuple) and ident and type(ident[0]) is int and ident[0] >= start:
            flat = made.get(ident[0])
            return flat[ident[1]] if flat is not None and ident[1] < len(flat) else None
        return resolve(ex, ident)

    # Made as inside __torch_dispatch__: with the co-executor's mode off
    # (its own torch calls must not come back to it).
    outside = ex.mode_on()
    if outside:
        ex.mode_off()
    try:
        with ex.pause(), torch.no_grad():
            for q in block.derive:
                e = entries[q]
                sa, sk = e.spec
                args = [_derived_arg(x, tensor) for x in sa]
                kwargs = {k: _derived_arg(x, tensor) for k, x in sk}
                if e.forms:
                    _evaluate_forms(e, args, kwargs, tensor, learnt.get(q))
                    values[q] = (_variable(e.spec, tuple(args), kwargs), None, None)
                flat = flat_inputs(args, kwargs)
                if e.infer:
                    out = flat_results(ex._placeholders(e.func, e.name, tuple(args), kwargs), e.struct)
                    got, real_made = ex._recipe_list(out, flat)
                    if real_made:
                        return None
                    recipes[q] = tuple(got)
                    if _aliases(recipes[q]) != block.infer[q]:
                        return None
                else:
                    out = flat_results(ex._make_results(e, flat), e.struct)
                made[q] = out
    except (_Underivable, MetaUnavailable, RuntimeError, ValueError, TypeError, IndexError, KeyError):
        return None
    finally:
        if outside:
            ex.mode_back()
    if any(q not in values for q in block.varying):
        return None
    return values, recipes


def _derived_arg(s: tuple, tensor: Callable[[Any], Optional[torch.Tensor]], top: bool = True) -> Any:
    """An argument of a derived entry from its check `s` (`_derived`)."""
    kind = s[0]
    if kind == "V":
        return s[2]
    if kind == "T":
        t = tensor(s[1])
        if t is None:
            raise _Underivable
        return t
    if kind == "F" and top:
        return _FORM
    if kind == "L":
        return s[1](_derived_arg(x, tensor, False) for x in s[2])
    raise _Underivable  # a relaxed scalar, a size inside a list


def _derive_plan(entries: list, block: Block) -> tuple:
    """The entries `_derive` makes, in order: the inferred ones and what
    their arguments and size forms read inside the pass, transitively
    (the pass's other results are not needed for shapes)."""
    start, end = block.start, block.end
    wanted = set(block.infer)
    for q in range(end - 1, start - 1, -1):
        if q not in wanted:
            continue
        e = entries[q]
        idents = _idents_in(e)
        for _, extra in (e.forms or {}).values():
            idents.extend(extra)
        wanted.update(i[0] for i in idents
                      if isinstance(i, tuple) and i and type(i[0]) is int and start <= i[0] < q)
    return tuple(sorted(wanted))


class _Underivable(Exception):
    """An argument `_derive` cannot make."""


_FORM = object()  # an argument a size form gives (`_evaluate_forms`)


def _evaluate_forms(e: Any, args: list, kwargs: dict, tensor: Any, learnt: Any) -> None:
    """Fills entry `e`'s size arguments (`_FORM` in `args`/`kwargs`) from
    their forms (sizes.py) on the operands' shapes. A reshape's inferred
    entry (-1 in the form) is what the others leave of the operand's
    elements, or -1 where the engine passed -1 (`learnt`: the entry's
    values at a learnt key)."""
    from .replay import _view_strides, form_operands
    tensors = form_operands(e.func, tuple(args), kwargs)
    # The learnt values are the spec's size arguments in order (`_variable`).
    sa, sk = e.spec
    where_in_spec = [i for i, x in enumerate(sa) if x[0] == "F"] + [k for k, x in sk if x[0] == "F"]
    if learnt is None or len(learnt[0]) != len(where_in_spec):
        raise _Underivable
    shown = dict(zip(where_in_spec, learnt[0]))
    strides_at = None
    for where, (form, extra) in e.forms.items():
        if form == "view-strides":
            strides_at = where
            continue
        operands = tensors + [tensor(i) for i in extra] if extra else tensors
        if any(t is None for t in operands):
            raise _Underivable
        value = _form_value(form, operands, shown.get(where))
        if type(where) is int:
            args[where] = value
        else:
            kwargs[where] = value
    if strides_at is not None:
        size = args[1] if len(args) > 1 else kwargs.get("size")
        strides = _view_strides(args[0], size)
        if strides is None:
            raise _Underivable
        if type(strides_at) is int:
            args[strides_at] = strides
        else:
            kwargs[strides_at] = strides
    if any(a is _FORM for a in args) or any(a is _FORM for a in kwargs.values()):
        raise _Underivable


def _form_value(form: Any, operands: list, learnt: Any) -> Any:
    """A size argument from its form (`sizes.resolve`); a reshape's -1
    entry is the engine's number (what the other entries leave of the
    operand's elements) unless the engine passed -1 there (`learnt`)."""
    if isinstance(form, sizes.SymDim):
        return sizes.resolve(form, operands)
    if not isinstance(form, list) or not isinstance(learnt, list) or len(learnt) != len(form):
        raise _Underivable
    out = list(sizes.resolve(form, operands))
    inferred = next((i for i, (f, v) in enumerate(zip(form, learnt)) if f == -1 and v != -1), None)
    if inferred is not None:
        known = 1
        for i, v in enumerate(out):
            if i != inferred and v != -1:
                known *= v
        n = operands[0].numel() if operands else 0
        if known <= 0 or n % known:
            raise _Underivable
        out[inferred] = n // known
    return out


def _memo_recipes(ex: Any, tape: Any, block: Block, values: dict) -> Optional[dict]:
    """The recipes of the pass's entries whose shapes follow data-dependent
    sizes (GPT-2's sequence lengths) or relaxed scalars, as the replay
    memoized them for the sizes met so far and the scalar `values` has
    (replay.TapeRecorder._memo_key); None if one has none yet (the
    engine-driven replay infers and memoizes them)."""
    out: dict = {}
    if not block.infer:
        return out
    layout = ex.layout
    entries = tape.entries
    for q in block.infer:  # (entry -> its results' aliases, checked)
        e = entries[q]
        recipes = e.memo.get(layout_key(layout, e, values[q][1] if e.relaxed is not None else None))
        if recipes is None or _aliases(recipes) != block.infer[q]:
            return None
        out[q] = recipes
    return out


def _pattern(ex: Any, q: int) -> list:
    """The autograd node types of the results replayed before entry `q`, as
    the next interaction found them (extended as the step goes: a record's
    nodes are final once noted). Passes are left out: what their results'
    nodes are depends on the engine (a saved result unpacked), not on the
    forward ops."""
    if ex._forward is not None:
        ex._note_nodes()
    known = ex.b_pattern
    n = len(known)
    if n < q:
        inside: set = set()
        for b in ex.tape.blocks.values():
            if b.start < q and b.end > n:
                inside.update(range(max(b.start, n), min(b.end, q)))
        for k, r in enumerate(ex.replayed[n:q], n):
            known.append("pass" if k in inside or r is None else None if r.nodes is None
                         else tuple(map(type, r.nodes)))
    return known[:q]


def _checks_pass(ex: Any, block: Block, args: tuple, kwargs: dict) -> bool:
    if not matches(block.call, args, kwargs, ex.idents, ex._host_ident):
        return False
    state = ex.initial_tensors
    for name, rg in block.params:
        t = state.get(name)
        if t is None or t.requires_grad is not rg:
            return False
    idents = ex.idents
    for leaf_id, before, _ in block.leaves:
        leaf = state.get(leaf_id[1]) if leaf_id[0] == "state" else resolve(ex, leaf_id)
        if leaf is None:
            return False
        g = leaf.grad
        if (None if g is None else idents.get(id(g))) != before:
            return False
    return all(resolve(ex, i) is not None for i in block.refs)  # (host tensors, step arguments)


def resolve(ex: Any, ident: Any) -> Optional[torch.Tensor]:
    """This iteration's tensor with tape identity `ident`: a result of a
    replayed entry, a state tensor as the step began, a numbered host
    tensor, a step argument; None if there is none (or another tensor has that identity)."""
    if isinstance(ident[0], int):
        return ex._tensor_of(ident)
    if ident[0] == "state":
        t = ex.initial_tensors.get(ident[1])
    elif ident[0] == "host":  # the n-th host memory (its sizes may be relaxed: tape.relax_host_shapes)
        t = ex.host_tensors.get(ident[1])
        i = ex.idents.get(id(t)) if t is not None else None
        return t if i is not None and i[:2] == ident[:2] else None
    elif ident[0] == "arg":  # a step argument, by its path in (args, kwargs)
        t = ex._call
        for k in ident[1]:
            try:
                t = t[k]
            except (KeyError, IndexError, TypeError):
                return None
        if not isinstance(t, torch.Tensor):
            return None
    else:
        return None
    return t if t is not None and ex.idents.get(id(t)) == ident else None


class _PassLog:
    """Stands in the co-executor's log for the ops of a pass replayed
    whole, until `expand` puts them there."""

    __slots__ = ()


def _apply(ex: Any, block: Block, recipes: dict, values: dict) -> None:
    """The pass as the engine-driven replay would leave it, lazily: only the
    results the rest of the tape refers to (and the in-place updates of
    real tensors) are made now; every other result, the records a catch-up
    reads and the log a deviation replays are made by `expand` if the step
    ever needs them. The run gets the pass's effects, the leaves their
    gradients."""
    from .replay import _Replayed
    tape = ex.tape
    entries = tape.entries
    replayed = ex.replayed
    start = block.start
    replayed.extend([None] * (block.end - start))
    make, name = ex._make_results, ex._name_replayed
    for q, uses, inputs in block.needed:
        e = entries[q]
        flat = None
        if e.needs_flat:
            flat = [None] * len(inputs)
            for k in uses:
                flat[k] = resolve(ex, inputs[k])
        out = make(e, flat, recipes.get(q))
        if e.written:
            ex._replay_writes(e, flat)
        name(e, out)
        replayed[q] = _Replayed(e, e.func, None, None, out, None, None)
    marker = _PassLog()
    ex.log.append(marker)
    ex.deferred.append((tape, block, marker, recipes, values))
    ex.pos = block.end
    ex.current_site = entries[block.end - 1].site
    if values:
        feeds = ex.relaxed_feeds
        for q, (_, _, feed) in values.items():
            if feed is not None:
                feeds[q] = feed
    if block.effects:
        ex._emit(block.effects)
    for leaf_id, before, after in block.leaves:
        if after != before:
            resolve(ex, leaf_id).grad = None if after is None else resolve(ex, after)
    ex.backward_macros += 1


def expand(ex: Any) -> None:
    """Makes what `_apply` left out: every result of the passes replayed
    whole, their records and their log entries, in order."""
    from .replay import _Replayed
    deferred, ex.deferred = ex.deferred, []
    replayed, make, name = ex.replayed, ex._make_results, ex._name_replayed
    for tape, block, marker, recipes, values in deferred:
        entries = tape.entries
        ops = []
        for q in range(block.start, block.end):
            e = entries[q]
            sa, sk = e.spec
            given = iter(values[q][0]) if q in values else None
            args = tuple([_arg(ex, x, given) for x in sa])
            kwargs = {k: _arg(ex, x, given) for k, x in sk} if sk else {}
            r = replayed[q]
            if r is None:
                out = make(e, flat_inputs(args, kwargs) if e.needs_flat else None, recipes.get(q))
                name(e, out)
                r = replayed[q] = _Replayed(e, e.func, args, kwargs, out, None, None)
            else:
                r.args, r.kwargs = args, kwargs
            if not e.engine:  # noted as the replay notes an op it takes for a forward one
                r.nodes = [grad_fn_of(o) for o in flat_results(r.out, e.struct) if isinstance(o, torch.Tensor)]
            ops.append((e.func, args, kwargs, r.out, e.site))
        log = ex.log
        i = next(k for k, x in enumerate(log) if x is marker)
        log[i:i + 1] = ops


def _arg(ex: Any, s: tuple, given: Optional[Iterator]) -> Any:
    """The argument an entry's check `s` stands for (tape.spec_of); those
    not checked by value are the next of `given` (`_variable`)."""
    kind = s[0]
    if kind == "V":
        return s[2]
    if kind == "T":
        return resolve(ex, s[1])
    if kind == "R" or kind == "F":
        v = next(given)
        return list(v) if isinstance(v, list) else v
    return s[1](_arg(ex, x, given) for x in s[2])  # "L"


# -- the validation ------------------------------------------------------------
_TERRA_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep
_STDLIB = os.path.abspath(sysconfig.get_paths()["stdlib"]) + os.sep
_TORCH_DIR = os.path.dirname(os.path.abspath(torch.__file__)) + os.sep


def _foreign(filename: str) -> bool:
    """Whether Python code in `filename` running inside a backward pass is
    the program's (a hook, a custom Function): anything but terra, torch
    (its dispatch helpers and the decompositions shape inference uses; a
    torch-defined hook is registered through the wrapped APIs, so counted)
    and the standard library."""
    path = os.path.abspath(filename)
    if path.startswith(_TERRA_DIR) or path.startswith(_TORCH_DIR) or filename.startswith("<frozen"):
        return False
    return not (path.startswith(_STDLIB) and "-packages" not in path)


def _walk(roots: list) -> tuple[list, bool]:
    """The leaves (AccumulateGrad variables) of the graph under `roots`, and
    whether it has a node that runs Python (a custom Function, a module's
    backward hooks) or a leaf with hooks of its own."""
    python_fn = getattr(torch.autograd.function, "BackwardCFunction", None)
    seen: set = set()
    stack = [n for r in roots if isinstance(r, torch.Tensor) and (n := grad_fn_of(r)) is not None]
    leaves: list = []
    kept: list = []  # node wrappers die when dropped, and their ids are reused
    hooked = False
    while stack:
        node = stack.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        kept.append(node)
        if python_fn is not None and isinstance(node, python_fn):
            hooked = True
        var = getattr(node, "variable", None)
        if type(node).__name__ == "AccumulateGrad" and isinstance(var, torch.Tensor):
            if not any(v is var for v in leaves):
                leaves.append(var)
            if getattr(var, "_backward_hooks", None) or getattr(var, "_post_accumulate_grad_hooks", None):
                hooked = True
            continue
        stack.extend(n for n, _ in node.next_functions)
    return leaves, hooked


def _validate(ex: Any, engine: Any, bound: dict, args: tuple, kwargs: dict) -> Any:
    """Runs the pass through the engine once more, watching that nothing
    but the engine runs; if the replay followed a pass of its tape (the
    tape it holds at the end: the engine's ops may choose another that
    agrees so far), records there what the macro checks and does."""
    q = ex.pos
    call = _call_spec(ex, bound, args, kwargs)
    roots = list(bound.get("tensors") or ())
    leaves, hooked = _walk(roots)
    epoch, calls = HOOK_EPOCH[0], _HOOK_CALLS[0]
    cpu = all(t.device.type == "cpu" for t in leaves) and all(
        isinstance(r, torch.Tensor) and r.device.type == "cpu" for r in roots)
    idents = ex.idents
    before = []
    for leaf in leaves:
        g = leaf.grad
        before.append((idents.get(id(leaf)), None if g is None else idents.get(id(g), ())))
    pattern = _pattern(ex, q)
    foreign: list = []

    def watch(frame: Any, event: str, _arg: Any) -> None:
        if event == "call" and not foreign and _foreign(frame.f_code.co_filename):
            foreign.append(frame.f_code.co_filename)

    ex.backward_validations += 1
    sys.setprofile(watch)
    try:
        out = engine.run_backward(*args, **kwargs)
    finally:
        sys.setprofile(None)
    tape = ex.tape
    block = tape.blocks.get(q) if ex.fast and tape.blocks else None
    if (block is None or ex.pos != block.end or ex.deviation is not None or HOOK_EPOCH[0] != epoch
            or block.end > tape.limit):
        _note_left(ex, q, call)
        return out  # the replay did not follow a pass of its tape: nothing learnt
    why = None
    if hooked or foreign or _HOOK_CALLS[0] != calls:
        why = "Python code runs in the backward pass" + (f" ({foreign[0]})" if foreign else "")
    elif not cpu:
        why = "not a CPU graph"
    rows = []
    refs: set = set()
    if why is None:
        for leaf, (leaf_id, was) in zip(leaves, before):
            g = leaf.grad
            now = None if g is None else idents.get(id(g), ())
            if leaf_id is None or was == () or now == () or resolve(ex, leaf_id) is not leaf:
                why = "a leaf or gradient the tape does not know"
                break
            rows.append((leaf_id, was, now))
        refs = {i for e in tape.entries[block.start:block.end] for i in _idents_in(e) if not isinstance(i[0], int)}
        if why is None and any(resolve(ex, i) is None for i in refs):
            why = "an argument the tape cannot find again"
    block.epoch = epoch
    if why is not None:
        block.state = why
        if _LOG:
            print(f"[terra] backward pass at entry {q} runs through the engine: {why}", file=sys.stderr,
                  flush=True)
        return out
    # State tensors are the step's initial ones by name: found every step.
    block.leaves, block.refs, block.pattern = tuple(rows), tuple(i for i in refs if i[0] != "state"), pattern
    entries = tape.entries
    block.varying = tuple(k for k in range(block.start, block.end)
                          if entries[k].relaxed is not None or entries[k].forms)
    values = _NO_VALUES
    if block.varying:
        values = _values(ex, tape, block)
        if values is None:
            block.state = "arguments the replay did not keep"
            return out
        block.values = {_forward_key(ex, q): values}
    memo = {k: entries[k].memo.get(layout_key(ex.layout, entries[k], values[k][1] if entries[k].relaxed is not None
                                                else None))
            for k in range(block.start, block.end) if entries[k].infer}
    if any(r is None for r in memo.values()):
        block.state = "shapes the replay did not memoize"
        return out
    block.needed = _needed(tape, block, [now for _, _, now in rows], memo)
    block.effects = [eff for e in tape.entries[block.start:block.end] for eff in e.effects]
    block.infer = {k: _aliases(r) for k, r in memo.items()}
    block.params = tuple((name, t.requires_grad) for name, t in ex.initial_tensors.items()
                         if name.startswith("param:"))
    block.state = "ok"
    return out


def _idents_in(e: Any) -> list:
    """Every tensor identity an entry checks (a read's check is one)."""
    if e.func is None and e.kind == "mat":
        return [e.spec] if isinstance(e.spec, tuple) else []
    found: list = []
    if isinstance(e.spec, tuple) and len(e.spec) == 2:
        sa, sk = e.spec
        for s in sa:
            _tensor_leaves(s, found)
        for _, s in sk:
            _tensor_leaves(s, found)
    return found


def _tensor_leaves(s: tuple, found: list) -> None:
    if s[0] == "T":
        found.append(s[1])
    elif s[0] == "L":
        for x in s[2]:
            _tensor_leaves(x, found)


def _aliases(recipes: Any) -> list:
    """Which results are an input or a view of one (recipe kind, input)."""
    return [r[:2] for r in recipes if r[0] in ("same", "view")]


def _needed(tape: Any, block: Block, grads: list, memo: dict) -> tuple:
    """Which of the pass's entries `_apply` must make (entry, flat inputs it
    uses, the identities of its flat inputs): those whose results
    the program can reach (the leaves' new gradients, anything a later
    entry or the tape's end refers to, and what those are views or aliases
    of) and those that update a tensor made outside the pass in place."""
    start, end, entries = block.start, block.end, tape.entries

    def inside(i: Any) -> bool:
        return isinstance(i, tuple) and bool(i) and type(i[0]) is int and start <= i[0] < end
    work = [i for i in grads if inside(i)]
    for e in entries[end:]:
        work.extend(i for i in _idents_in(e) if inside(i))
    if tape.end is not None:
        work.extend(i for _, i in tape.end.slots if inside(i))
        work.extend(i for i in tape.end.result if inside(i))
        # Not the end's escapes: a recorded step publishes every result the
        # co-executor itself still held at its end, but the program reaches
        # a result of a pass without hooks only through a leaf's `.grad`
        # (above) and what aliases it; the end skips results not made.
    specs = {q: tensor_idents(entries[q].spec) for q in range(start, end)}
    uses: dict = {}

    def need(q: int) -> None:
        if q in uses:
            return
        e = entries[q]
        used = uses[q] = set(e.written)
        used.update(r[1] for r in memo.get(q, e.outs) if r[0] in ("same", "view"))
        work.extend(specs[q][k] for k in used if inside(specs[q][k]))
    for q in range(start, end):
        if any(not inside(specs[q][k]) for k in entries[q].written):
            need(q)
    while work:
        need(work.pop()[0])
    return tuple((q, tuple(sorted(uses[q])), specs[q]) for q in sorted(uses))
