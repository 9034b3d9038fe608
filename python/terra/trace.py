"""One recorded iteration (a `terra.trace`) and its MLIR text.

The events mirror the trace format (docs/trace-format.md): DL ops, feeds
(values from the host), state reads, fetches (values the host reads), in
execution order with plain SSA data flow. Besides the MLIR, a Trace keeps
what a runner needs to drive the compiled graph for the same program:
where each feed comes from, which fetches are materializations the program
read and which are end-of-iteration commits of persistent state.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional, Sequence, Union

import torch

from . import mlir_text
from .loops import restrict, transitions
from .sites import Site


@dataclass(frozen=True)
class TensorType:
    """dtype and shape of one traced value (a size of -1 is a dynamic dim:
    a data-dependent size, see tracing._Recorder._record)."""

    dtype: torch.dtype
    shape: tuple[int, ...]

    @staticmethod
    def of(t: torch.Tensor) -> "TensorType":
        return TensorType(t.dtype, tuple(int(d) for d in t.shape))

    def mlir(self) -> str:
        return mlir_text.tensor_type(self.dtype, self.shape)


@dataclass(frozen=True)
class ValueRef:
    """Result `result` of event `event` (an SSA value of the trace)."""

    event: int
    result: int = 0


@dataclass
class OpEvent:
    """`terra.op NAME(inputs) args {...}`."""

    name: str
    inputs: list[ValueRef]
    args: dict[str, Any]
    results: list[TensorType]
    site: Site
    # (aten overload, call recipe): how to run the op again on the host when
    # the graph has no lowering for it; not part of the MLIR.
    call: Any = None
    # The enclosing program loops (loops.LoopLevel, outermost first).
    loops: tuple = ()


@dataclass
class ArgSource:
    """A feed that is a tensor argument of the step call: `path` indexes the
    call's (args, kwargs), e.g. ("args", 0) or ("kwargs", "batch", "x")."""

    path: tuple[Union[int, str], ...]


@dataclass
class ConstSource:
    """A feed the step made or found outside any recorded op (a tensor from
    a Python scalar, a tensor built before the step): its value as traced."""

    value: torch.Tensor


@dataclass
class StateSource:
    """A value the host reads from persistent state as it was when the
    iteration started (a parameter printed before it was updated)."""

    name: str


@dataclass
class FeedEvent:
    """`terra.feed : TYPE` (an input from the host)."""

    type: TensorType
    site: Site
    source: Union[ArgSource, ConstSource]
    loops: tuple = ()


@dataclass
class StateEvent:
    """`terra.state "NAME" : TYPE` (a read of persistent state)."""

    name: str
    type: TensorType
    site: Site


@dataclass
class FetchEvent:
    """`terra.fetch VALUE`: a materialization (`kind` says how Python read
    it: item, float, int, bool, tolist, numpy, repr, ...) or, with
    `commit` set, the final value of the persistent state `commit`, or
    (kind "arg", `arg` set) the final value of the step's tensor argument
    at `arg` (a path into the call's (args, kwargs), ArgSource's), which
    the step wrote in place."""

    value: ValueRef
    type: TensorType
    site: Site
    kind: str = "materialize"
    commit: Optional[str] = None
    loops: tuple = ()
    arg: Optional[tuple] = None


Event = Union[OpEvent, FeedEvent, StateEvent, FetchEvent]


@dataclass
class Materialization:
    """One value Python read, in program order: the `fetch`-th fetch of the
    trace when the graph computes it, else where the host already has it
    (a fed tensor, state as the iteration started)."""

    kind: str
    fetch: Optional[int] = None
    host: Optional[Union[ArgSource, ConstSource, StateSource]] = None


@dataclass
class Trace:
    """Everything recorded for one call of the step function."""

    events: list[Event] = field(default_factory=list)
    # Persistent state set to None during the iteration (e.g. grads by
    # zero_grad(set_to_none=True) with no backward after it).
    dropped_state: list[str] = field(default_factory=list)
    # Why the trace cannot be compiled (empty: it can).
    problems: list[str] = field(default_factory=list)
    # Tensors from outside the step that it wrote in place and that are not
    # persistent state yet: the function adopts them (StateRegistry.adopt)
    # and traces again.
    adopt: list[Any] = field(default_factory=list)
    # What Python read, in order, and the values it got in the eager run.
    materializations: list[Materialization] = field(default_factory=list)
    materialized: list[Any] = field(default_factory=list)

    # -- views -------------------------------------------------------------
    def of_kind(self, kind: type) -> list[Any]:
        return [e for e in self.events if isinstance(e, kind)]

    @property
    def ops(self) -> list[OpEvent]:
        return self.of_kind(OpEvent)

    @property
    def feeds(self) -> list[FeedEvent]:
        """Feeds in order: the order the runner must feed them."""
        return self.of_kind(FeedEvent)

    @property
    def states(self) -> list[StateEvent]:
        return self.of_kind(StateEvent)

    @property
    def fetches(self) -> list[FetchEvent]:
        return self.of_kind(FetchEvent)

    @property
    def commits(self) -> dict[int, str]:
        """Fetch position (index into `fetches`) -> the state it commits."""
        return {i: f.commit for i, f in enumerate(self.fetches) if f.commit is not None}

    def op_names(self) -> list[str]:
        return [e.name for e in self.ops]

    def producer(self, ref: ValueRef) -> Event:
        return self.events[ref.event]

    # -- text --------------------------------------------------------------
    def layout(self, loops: Any = frozenset()) -> list[Any]:
        """The trace's events in text order, with the markers of the program
        loops in `loops` (sites) between them: event indices, and
        ("begin", site) / ("iter", site) / ("end", site) for markers."""
        out: list[Any] = []
        ctx: tuple = ()
        open_sites: list[Site] = []

        def move(to: tuple) -> None:
            nonlocal ctx
            for kind, site in transitions(ctx, to):
                if kind == "begin":
                    open_sites.append(site)
                    out.append(("begin", site))
                elif kind == "iter":
                    out.append(("iter", open_sites[-1]))
                else:
                    out.append(("end", open_sites.pop()))
            ctx = to

        for i, ev in enumerate(self.events):
            if loops and moves_loops(ev):
                move(restrict(ev.loops, loops))
            out.append(i)
        move(())
        return out

    def mlir(self, name: str, locations: Optional["LocationTable"] = None,
             loops: Any = frozenset()) -> str:
        """The `terra.trace @name { ... }` op (locations inline unless a
        table of aliases is given), with markers for the program loops in
        `loops`."""
        locs = locations or LocationTable(inline=True)
        names: dict[int, str] = {}
        lines = [f"  terra.trace @{name} {{"]

        def ref(r: ValueRef) -> str:
            base = names[r.event]
            ev = self.events[r.event]
            if isinstance(ev, OpEvent) and len(ev.results) != 1:
                return f"{base}#{r.result}"
            return base

        for i in self.layout(loops):
            if isinstance(i, tuple):
                kind, site = i
                lines.append(f"    terra.loop_{kind} loc({locs.ref(site)})")
                continue
            ev = self.events[i]
            if isinstance(ev, OpEvent):
                names[i] = f"%v{i}"
                lhs = ""
                if len(ev.results) == 1:
                    lhs = f"{names[i]} = "
                elif len(ev.results) > 1:
                    lhs = f"{names[i]}:{len(ev.results)} = "
                ins = ", ".join(ref(r) for r in ev.inputs)
                in_types = ", ".join(self._type_of(r).mlir() for r in ev.inputs)
                outs = ", ".join(t.mlir() for t in ev.results)
                if len(ev.results) != 1:
                    outs = f"({outs})"
                args = f" args {mlir_text.dictionary(ev.args)}" if ev.args else ""
                lines.append(f"    {lhs}terra.op {mlir_text.string_literal(ev.name)}({ins}){args} "
                             f": ({in_types}) -> {outs} loc({locs.ref(ev.site)})")
            elif isinstance(ev, FeedEvent):
                names[i] = f"%v{i}"
                lines.append(f"    {names[i]} = terra.feed : {ev.type.mlir()} loc({locs.ref(ev.site)})")
            elif isinstance(ev, StateEvent):
                names[i] = f"%v{i}"
                lines.append(f"    {names[i]} = terra.state {mlir_text.string_literal(ev.name)} "
                             f": {ev.type.mlir()} loc({locs.ref(ev.site)})")
            elif isinstance(ev, FetchEvent):
                lines.append(f"    terra.fetch {ref(ev.value)} : {self._type_of(ev.value).mlir()} "
                             f"loc({locs.ref(ev.site)})")
        lines.append("  }")
        return "\n".join(lines)

    def _type_of(self, r: ValueRef) -> TensorType:
        ev = self.events[r.event]
        if isinstance(ev, OpEvent):
            return ev.results[r.result]
        return ev.type


def moves_loops(ev: Any) -> bool:
    """Whether an event sits in its own loop context in the text. State
    reads are not positional, and a step argument is fed where the text
    stands when it is first used: it is one value for the whole call, not
    one per iteration of the loop that first reads it."""
    if isinstance(ev, StateEvent):
        return False
    return not (isinstance(ev, FeedEvent) and isinstance(ev.source, ArgSource))


class LocationTable:
    """Prints sites once as `#loc` aliases at the top of a module (sites are
    long call stacks and repeat a lot), or inline."""

    def __init__(self, inline: bool = False):
        self.inline = inline
        self._frames: dict[Any, str] = {}
        self._sites: dict[Site, str] = {}
        self.definitions: list[str] = []

    def ref(self, site: Site) -> str:
        if self.inline:
            return site.mlir()
        if site in self._sites:
            return self._sites[site]
        if not site.frames:
            return "unknown"
        frames = [self._frame(f) for f in site.frames]
        text = frames[-1]
        for f in reversed(frames[:-1]):
            text = f"callsite({f} at {text})"
        if len(frames) == 1:
            alias = frames[0]
        else:
            alias = f"#site{len(self._sites)}"
            self.definitions.append(f"{alias} = loc({text})")
        self._sites[site] = alias
        return alias

    def _frame(self, frame: Any) -> str:
        if frame not in self._frames:
            alias = f"#frame{len(self._frames)}"
            self.definitions.append(f"{alias} = loc({frame.mlir()})")
            self._frames[frame] = alias
        return self._frames[frame]


def module_text(traces: Sequence[Trace], names: Optional[Sequence[str]] = None,
                loops: Any = frozenset()) -> str:
    """A module holding one `terra.trace` per trace (`@iter0`, `@iter1`, ...),
    ready for `terra-opt -terra-merge-traces`; the program loops in `loops`
    (sites) are marked."""
    names = list(names) if names is not None else [f"iter{i}" for i in range(len(traces))]
    locs = LocationTable()
    bodies = [t.mlir(n, locs, loops) for t, n in zip(traces, names)]
    return "\n".join(locs.definitions + ["module {"] + bodies + ["}"]) + "\n"
