"""Tapes: co-executing a step again without recording it again.

Recording an op costs the co-executor tens of microseconds of Python (its
site, loop context, provenance, meta result, trace event and validation by
the Cursor): more than eager PyTorch spends on most ops. But a training
step usually issues the same ops as the step before it. So a co-executed
iteration that ends validated leaves a **tape**: for every interaction of
the step with the co-executor, in order (each aten op it dispatches, each
read of a value), what the co-executor did about it:

* how to check the interaction is the same one: the op, every non-tensor
  argument (type and value), and the identity of every tensor argument:
  the result `j` of interaction `q` of this iteration, a state tensor, a
  step argument (with its shape, strides and dtype), or the `n`-th other
  host tensor the iteration uses (numbered by memory in order of first
  use, with its metadata: the recorder feeds such a tensor's value, and
  two uses of one memory are one value);
* how its results were made: new placeholders (shape, strides, dtype),
  views of an argument, the argument itself (in place), or real tensors
  (aliases of real tensors, random numbers drawn on the host);
* what went to the graph run while it was handled (case selections, loop
  conditions, feeds and where their values come from) and how a read was
  answered (a fetch, a value the host computed, the tensor itself);
* for the end: which tensor each state slot holds, and the fetches that
  commit them and give the returned values.

The next iteration **replays** the tape: each interaction is checked
against its entry and, while they match, handled from the tape (results
made from it, its run effects repeated) without recording anything. Two
iterations whose interactions match one for one compute the same ops on
the same inputs, so the graph, driven by the same signals and fed the
new values, computes exactly what eager would.

At the first interaction that does not match (a branch the other way, a
new shape, a new scalar), the co-executor **catches up**: it records the
interactions replayed so far as it would have live (sites, loop contexts
and backward sites from the tape, results and read values from the
replay, nothing sent to the run again), checks that the Cursor decides the
same signals the replay sent, sends what it decided beyond them, and goes
on recording from there. Ops the tape cannot replay (an op with a tensor
from an earlier iteration; anything the recorder could not record) end the
tape there.

Sizes that change while the ops stay the same (a boolean mask's count, a
batch of another length) do not end a tape: where the compiled graph types
a value with a dynamic dim, its entry makes its results by shape inference
(`Entry.infer`), size arguments standing for such dims are checked by their
recorded form (`form_matches`), and host tensors fed with dynamic dims are
checked by the feed's type (`relax_host_shapes`); see replay.py.
"""
from __future__ import annotations

from typing import Any, Callable, Optional

import torch
from torch.utils._pytree import tree_flatten

from .placeholder import Placeholder
from .sizes import SymDim


class Entry:
    """One interaction of the step with the co-executor (see module doc)."""

    __slots__ = ("kind", "func", "name", "spec", "outs", "struct", "effects", "site", "reached",
                 "loops", "engine", "engine_sites", "host_eval", "written", "relaxed", "answer",
                 "mat_kind", "feeds", "chain", "needs_flat", "real", "ids", "infer", "forms", "mask_reads", "memo", "plain",
                 "makeable", "native_forms", "native", "value_shapes")

    def __init__(self, kind: str, func: Any, spec: Any):
        self.kind = kind  # "op", "rng", "pass", "mat", "stop"
        self.func = func  # the op, or None for a read by a tensor method
        self.name = ""
        self.spec = spec  # argument checks (spec_of)
        self.outs: tuple = ()  # result recipes
        self.struct: Any = None  # pytree spec of the results; None: one value
        self.effects: list = []  # run effects while it was handled
        self.site: Any = None
        self.reached = True
        self.loops: tuple = ()
        self.engine = False
        self.engine_sites: tuple = ()
        self.host_eval = False
        self.written: tuple = ()  # flat input indices written in place
        self.relaxed: Any = None  # (position, kwarg name, dtype, list length or None)
        self.answer: Any = None  # how a read was answered
        self.mat_kind = ""
        self.feeds: tuple = ()  # flat input indices fed to the graph (values taken on entry)
        self.chain = 0  # digest of the tape up to this entry (replay._chain)
        # For the replay, set when the tape is made (replay._chain): whether
        # it needs the call's flat tensor list, and whether it runs for real.
        self.needs_flat = True
        self.real = False
        self.ids: tuple = ()  # per result: its identity (q, j), None for "same"
        # Results whose shapes follow data-dependent sizes (a boolean mask's
        # count, and what it flows into): made by shape inference on the
        # replay's own arguments, not from the recipe's shapes.
        self.infer = False
        # Size arguments that refer to data-dependent dims: arg index or
        # name -> recorded form (sizes.py), checked against the operands.
        self.forms: Optional[dict] = None
        # Boolean masks the graph computes, read for the result's size:
        # (flat input index, how the recording read it).
        self.mask_reads: tuple = ()
        # An op the host runs on values it reads (tracing.HOST_VALUE_OPS):
        # its results' shapes, which depend on those values.
        self.value_shapes: Optional[tuple] = None
        # For `infer` entries whose shapes follow the inputs' shapes: input
        # layout -> result recipes (replay.TapeRecorder._replay_op); None: infer always.
        self.memo: Optional[dict] = None
        # An op whose replay makes its results from the recipe alone (set
        # with `needs_flat`): the native replay takes it (replay.py).
        self.plain = False
        # Its results come from the recipe, or from the recipes memoized per
        # layout and relaxed scalar (a `plain` entry, or one whose memo key
        # has its relaxed scalar, which the native replay does not make):
        # a backward pass of such entries can be replayed whole (backward.py).
        self.makeable = False
        # The forms as the native replay checks them, or None (replay._chain).
        self.native_forms: Any = None
        # What the native replay reads of an entry it takes (a plain one, or
        # a "pass" one it runs as it is), in one tuple (replay._NATIVE_FIELDS,
        # the last field: whether it is a pass), or None for the others.
        self.native: Optional[tuple] = None


class End:
    """The end of a taped iteration."""

    __slots__ = ("effects", "slots", "dropped", "commits", "returns", "result", "escapes", "checks")

    def __init__(self) -> None:
        self.effects: list = []
        self.slots: list = []  # (slot name, identity of its final tensor)
        self.dropped: list = []  # slots set to None
        self.commits: list = []  # (slot name, fetch point, instance)
        self.returns: list = []  # (index in the flat result, fetch point, instance)
        self.result: list = []  # identities of the flat result's tensors
        self.escapes: dict = {}  # (q, j) -> (fetch point, instance)
        self.checks: Any = None  # EndChecks, made by a replay's first end

    def end_checks(self) -> "EndChecks":
        if self.checks is None:
            self.checks = EndChecks(self)
        return self.checks


class EndChecks:
    """How a replay's end checks the state slots against an End quickly:
    the slot names and identities apart, each commit's slot by position,
    and the registry generation whose slots were last found to have the
    End's names (equal generations: the same slots, names not compared)."""

    __slots__ = ("names", "idents", "commit_at", "complete", "generation")

    def __init__(self, end: End):
        self.names = [n for n, _ in end.slots]
        self.idents = [i for _, i in end.slots]
        at = {n: k for k, n in enumerate(self.names)}
        self.commit_at = [at.get(c[0]) for c in end.commits]
        # Every commit's slot is among the End's (they come from the same
        # final slots); an End where one is not never fits.
        self.complete = None not in self.commit_at
        self.generation = -1


class Tape:
    __slots__ = ("entries", "end", "limit", "signature", "blocks")

    def __init__(self, entries: list[Entry], end: Optional[End], limit: int):
        self.entries = entries
        self.blocks: dict = {}  # first entry -> backward.Block: a backward pass the tape can replay whole
        self.end = end  # None: the tape stops before the end
        self.limit = limit  # entries before this index can be replayed
        self.signature: Any = None  # the whole tape's digest (replay._chain)


class Untapeable(Exception):
    """An interaction the tape cannot replay."""


def flat_inputs(args: tuple, kwargs: dict) -> list:
    """The tensors of an op's arguments, in order (lists one level deep)."""
    out = []
    for v in args:
        if isinstance(v, torch.Tensor):
            out.append(v)
        elif type(v) in (list, tuple):
            out.extend(x for x in v if isinstance(x, torch.Tensor))
    for v in kwargs.values():
        if isinstance(v, torch.Tensor):
            out.append(v)
        elif type(v) in (list, tuple):
            out.extend(x for x in v if isinstance(x, torch.Tensor))
    return out


def spec_of(args: tuple, kwargs: dict, ident: Any) -> tuple:
    """The checks of an interaction's arguments; `ident(t)` gives a
    tensor's identity (None: not replayable)."""
    return (tuple(_spec_leaf(v, ident) for v in args), tuple((k, _spec_leaf(v, ident)) for k, v in kwargs.items()))


# (A module-level function, as the other recursive helpers here: a nested
# one that calls itself is a reference cycle through its closure, which
# would keep what it captures, e.g. a co-executor through `ident`, alive
# until Python's cyclic collector runs.)
def _spec_leaf(v: Any, ident: Any) -> tuple:
    if isinstance(v, torch.Tensor):
        i = ident(v)
        if i is None:
            raise Untapeable("a tensor from outside this iteration")
        meta = (tuple(v.shape), tuple(v.stride()), v.dtype) if i[0] == "arg" else None
        return ("T", i, meta)
    if type(v) in (list, tuple) and any(isinstance(x, torch.Tensor) for x in v):
        return ("L", type(v), tuple(_spec_leaf(x, ident) for x in v))
    return ("V", type(v), v)


def tensor_idents(spec: tuple) -> list:
    """The identities a spec checks, in flat input order (flat_inputs)."""
    out: list = []
    for leaf in list(spec[0]) + [s for _, s in spec[1]]:
        if leaf[0] == "T":
            out.append(leaf[1])
        elif leaf[0] == "L":
            out.extend(x[1] for x in leaf[2] if x[0] == "T")
    return out


def flat_results(out: Any, struct: Any) -> Any:
    """An entry's results as a flat sequence (`Entry.struct`: None for one
    value, list/tuple for a flat sequence, else a pytree spec)."""
    return (out,) if struct is None else out if struct is list or struct is tuple else tree_flatten(out)[0]


def relax_spec(spec: tuple, position: int, name: str, kwarg_only: bool, length: Optional[int],
               nargs: int) -> tuple:
    """`spec` with the argument carried by a relaxed feed unchecked."""
    sa, sk = spec
    if position < nargs and not kwarg_only:
        sa = sa[:position] + (("R", length),) + sa[position + 1:]
    else:
        sk = tuple((k, ("R", length) if k == name else s) for k, s in sk)
    return (sa, sk)


def matches(spec: tuple, args: tuple, kwargs: dict, idents: dict, host: Callable[[torch.Tensor], Any]) -> bool:
    """Whether a call's arguments pass an entry's checks; `idents` are
    this iteration's tensor identities so far, `host(t)` identifies a
    real tensor not among them."""
    sa, sk = spec
    if len(args) != len(sa) or len(kwargs) != len(sk):
        return False
    for v, s in zip(args, sa):
        # The common checks inline: a tensor made in this iteration (or
        # already identified) and a plain value.
        kind = s[0]
        if kind == "T" and s[2] is None:
            i = idents.get(id(v))
            if i is not None:
                if i != s[1]:
                    return False
                continue
        elif kind == "V":
            if type(v) is not s[1] or v != s[2]:
                return False
            continue
        if not _match(v, s, idents, host):
            return False
    for k, s in sk:
        if k not in kwargs or not _match(kwargs[k], s, idents, host):
            return False
    return True


def _match(v: Any, s: tuple, idents: dict, host: Callable[[torch.Tensor], Any]) -> bool:
    kind = s[0]
    if kind == "V":
        return type(v) is s[1] and v == s[2]
    if kind == "T":
        i = idents.get(id(v))
        if i is None:
            if not isinstance(v, torch.Tensor) or isinstance(v, Placeholder):
                return False
            i = host(v)
        m = s[2]
        if m == "dyn":  # a host tensor with dynamic dims (relax_host_shapes)
            want = s[1]
            return (i[0] == "host" and i[1] == want[1] and i[4] == want[4] and len(i[2]) == len(want[2])
                    and all(w < 0 or w == d for w, d in zip(want[2], i[2])) and _dense(i[2], i[3]))
        if i != s[1]:
            return False
        return m is None or (v.dtype == m[2] and tuple(v.shape) == m[0] and tuple(v.stride()) == m[1])
    if kind == "F":  # a symbolic size: its type here, its entries in form_matches
        return type(v) is s[1]
    if kind == "L":
        if type(v) is not s[1] or len(v) != len(s[2]):
            return False
        return all(_match(x, y, idents, host) for x, y in zip(v, s[2]))
    # "R": a relaxed scalar (or scalar list), fed to the graph
    n = s[1]
    if n is None:
        return type(v) in (int, float)
    return type(v) in (list, tuple) and len(v) == n and all(type(x) in (int, float) for x in v)


def form_matches(form: Any, value: Any, tensors: list) -> bool:
    """Whether size argument `value` is what its recorded form (sizes.py)
    gives for these operands: the graph computes the size from the form,
    so the replay may pass the call on only if they agree. A reshape's
    inferred entry (-1) must be what the other entries leave."""
    if isinstance(form, SymDim):
        return type(value) is int and form.operand < len(tensors) and \
            tensors[form.operand].dim() > form.dim and tensors[form.operand].shape[form.dim] == value
    if type(value) not in (list, tuple) or len(value) != len(form):
        return False
    inferred = None
    known = 1
    for i, (f, v) in enumerate(zip(form, value)):
        if isinstance(f, SymDim):
            if f.operand >= len(tensors) or tensors[f.operand].dim() <= f.dim or tensors[f.operand].shape[f.dim] != v:
                return False
        elif f == -1 and v != -1:
            inferred = i
            continue
        elif f != v:
            return False
        if v != -1:
            known *= v
    if inferred is not None:
        return bool(tensors) and known * value[inferred] == tensors[0].numel()
    return True


def _dense(shape: tuple, stride: tuple) -> bool:
    expected = 1
    for n, st in zip(reversed(shape), reversed(stride)):
        if n != 1 and st != expected:
            return False
        expected *= n
    return True


def relax_host_shapes(spec: tuple, dynamic: dict) -> tuple:
    """`spec` with the checks of host tensors fed with dynamic dims
    (`dynamic`: host tensor number -> dims) relaxed to the feed's type:
    those dims may take any size, the tensor must be dense."""
    sa, sk = spec
    return (tuple(_relaxed_leaf(x, dynamic) for x in sa), tuple((k, _relaxed_leaf(x, dynamic)) for k, x in sk))


def _relaxed_leaf(s: tuple, dynamic: dict) -> tuple:
    if s[0] == "T":
        i = s[1]
        if i[0] == "host" and i[1] in dynamic and (s[2] == "dyn" or _dense(i[2], i[3])):
            dims = dynamic[i[1]]
            return ("T", ("host", i[1], tuple(-1 if d in dims else n for d, n in enumerate(i[2])), None, i[4]),
                    "dyn")
        return s
    if s[0] == "L":
        return ("L", s[1], tuple(_relaxed_leaf(x, dynamic) for x in s[2]))
    return s


def relaxed_arg(e: Entry, args: tuple, kwargs: dict) -> Any:
    """An entry's relaxed argument (a scalar or scalar list) in this call."""
    position, name, kwarg_only = e.relaxed[:3]
    return args[position] if position < len(args) and not kwarg_only else kwargs[name]


def hashable(v: Any) -> Any:
    """A relaxed scalar or scalar list as part of a key."""
    return tuple(v) if isinstance(v, list) else v


# Input layouts whose inferred recipes an entry keeps (`Entry.memo`: the
# replay's and the whole backward pass's, replay.py and backward.py). A
# program whose data-dependent sizes combine anew most steps (Faster R-CNN:
# the batch's mask counts x the RoI count x the foreground count, ~200
# combinations) infers its entries again at every layout past the cap: with
# 16 kept that was ~2 ms on most steps forever; 256 keeps a few kB per
# entry at most.
MEMO_MAX = 256


def layout_key(layout: list, e: Entry, v: Any) -> tuple:
    """An inferred entry's memo key: the data-dependent sizes met so far
    (`layout`) and its relaxed scalar `v` (fed, so unchecked), if any."""
    if e.relaxed is None:
        return tuple(layout)
    return tuple(layout) + (("relaxed", hashable(v)),)


def relaxed_value(e: Entry, args: tuple, kwargs: dict) -> torch.Tensor:
    """The feed value of an entry's relaxed argument in this call."""
    dtype, length = e.relaxed[3:]
    v = relaxed_arg(e, args, kwargs)
    if length is None:
        return torch.tensor(float(v), dtype=dtype)
    return torch.tensor([float(x) for x in v], dtype=dtype)
