"""Program loops, found from the bytecode of the frames (spec 2.6, option 1).

A loop of a code object is the bytecode range closed by a backward jump:
`for` loops (their `FOR_ITER` and body), `while` loops, and loops inside
comprehensions and generators (their own code objects). An op's *loop
context* is, from the step function's frame inwards, every loop whose
range holds the frame's current instruction (`f_lasti`). Each level is a
`LoopLevel`:

* `site`: the loop's identity, a Site whose innermost frame is the loop's
  first instruction and whose outer frames are the calls that led to it
  (the same loop reached through two call paths is two loops);
* `activation`: which run of the loop (a frame can run a loop again only
  when an enclosing loop iterates, or in a new call);
* `iteration`: which iteration of that run.

Iterations are counted exactly, not guessed from positions: while a step
runs, `LoopCounter` (a C trace hook that acts only in frames whose code
has loops, and only on call and line events) counts arrivals at each
loop's first instruction; Python reports a line event on every backward jump, so each
iteration has its own count. Iterations that issue no traced event get
no marker at all.

The tracer attaches the context to each positional event (ops, feeds,
fetches); `transitions` turns consecutive contexts into the trace's loop
markers (`terra.loop_begin`, `loop_iter`, `loop_end`). Which loops are
marked is decided per function (see `TerraFunction`): only loops whose
trip count varied between traces, so fixed-count loops (layers, the
optimizer's loop over parameters) stay unrolled, as a graph compiler
would specialize them anyway.
"""
from __future__ import annotations

import dis
import sys
import types
from dataclasses import dataclass
from typing import Any, Iterable, Optional

from . import native
from .sites import Frame, Site, own_code

_JUMPS = frozenset(dis.hasjrel) | frozenset(dis.hasjabs)
_RANGES: dict[types.CodeType, tuple[tuple[int, int], ...]] = {}
_STARTS: dict[types.CodeType, frozenset[int]] = {}
# The offset a new call of a code object starts at (its first RESUME from
# Python 3.11 on); a generator resumed later stands further on.
_ENTRY: dict[types.CodeType, int] = {}


def loop_ranges(code: types.CodeType) -> tuple[tuple[int, int], ...]:
    """The (first, last) instruction offsets of the loops of `code`, outer
    loops before the loops they hold."""
    found = _RANGES.get(code)
    if found is None:
        ends: dict[int, int] = {}
        for ins in dis.get_instructions(code):
            target = ins.argval
            if ins.opcode in _JUMPS and isinstance(target, int) and target <= ins.offset:
                ends[target] = max(ends.get(target, target), ins.offset)
        found = _RANGES[code] = tuple(sorted(ends.items(), key=lambda r: (r[0], -r[1])))
        _STARTS[code] = frozenset(ends)
        _ENTRY[code] = next((ins.offset for ins in dis.get_instructions(code) if ins.opname == "RESUME"), 0)
    return found


def _line_of(code: types.CodeType, offset: int) -> int:
    line = code.co_firstlineno
    for start, number in dis.findlinestarts(code):
        if start > offset:
            break
        if number is not None:
            line = number
    return line


@dataclass(frozen=True)
class LoopLevel:
    """One enclosing loop of an event (see the module docstring)."""

    site: Site
    activation: int
    iteration: int


Context = tuple  # tuple[LoopLevel, ...], outermost first


class LoopCounter:
    """Counts loop iterations while a step runs (one thread).

        counter = LoopCounter()
        with counter:                 # installs the trace hook
            step(...)
        counter.context(frames)       # while the step runs

    The hook is a C trace function (`_terra_native.LoopHook`): a Python
    `sys.settrace` hook made every Python call and traced line a Python
    call, which slowed the host side 3-4x. `suspended()` leaves tracing
    mode while the tracer's own code runs.
    """

    def __init__(self) -> None:
        # Frames are identified by address and never referenced: holding a
        # frame keeps its locals alive, which changes what autograd does
        # (AccumulateGrad steals a gradient only nobody else holds). An
        # address reused by a later frame is told apart by its new
        # activation, given when a call starts.
        self._hook = _shared_hook()
        self._loop_sites: dict[tuple, Site] = {}
        self.active = False
        # Set before the step by a co-executor replaying a tape: the hook
        # starts only if the replay leaves the tape (`start_late`).
        self.defer = False
        self.deferred = False  # the step runs, the hook not started yet
        self.late = False  # the hook started mid-step

    # -- the hook ------------------------------------------------------------
    def __enter__(self) -> "LoopCounter":
        # A debugger or coverage tool owns the hook: loops are then not
        # counted (every loop is unrolled, as without loop markers).
        self.active = sys.gettrace() is None
        self.late = False
        self.deferred = self.active and self.defer
        if self.deferred:
            self.active = False
        elif self.active:
            self._hook.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.active:
            self._hook.stop()
            self._hook.clear()
        self.active = self.deferred = False

    def start_late(self, frame: Optional[types.FrameType], frames: list, last: Optional[tuple],
                   following: Optional[tuple], issued: int) -> bool:
        """Starts counting in the middle of the step, with `frame` and its
        callers on the stack. A replay that follows its tape takes every
        op's loop context from the tape and needs no counts (nor tracing
        mode, which made the interpreter run the host side of a replayed
        DCGAN step ~20% slower); one that leaves its tape records from here
        on, so the counts must go on from the tape's: `frames` are the
        step's frames here (`sites.capture`'s pairs, innermost first), and
        `last` the (site, loop context) of the tape's last event replayed,
        whose activations are numbered up to `issued`, and the (site, loop
        context) of the tape's event after it (None at the tape's end).
        Returns False when the counts of a loop holding the current
        instruction cannot be known (see `_continued`): the caller must not
        trust the contexts."""
        if not self.deferred:
            return True
        self.deferred = False
        if sys.gettrace() is not None:
            return True  # a debugger owns the hook: nothing is counted, as at a start
        seeds, known = self._continued(frames, last, following)
        hook = self._hook
        hook.start(late=True)
        self.active = self.late = True
        hook.reserve(issued)
        for f, act, counts in seeds:
            hook.seed(f, act, counts)
        while frame is not None:  # the other frames: new activations
            hook.activation(frame)
            frame = frame.f_back
        return known

    def _continued(self, frames: list, last: Optional[tuple], following: Optional[tuple]) -> tuple[list, bool]:
        """The activations and loop counts of the frames on the stack as the
        tape numbers them, from the last event replayed (its site and loop
        context): (frame, activation, [(loop start, count)]) seeds, and
        whether they are known. From the step's frame inwards, comparing
        with that event's frames:

        * a frame at another instruction is in the same call; a loop
          holding both instructions is in the same iteration if it moved
          forward, the next if it moved back; the frames inside it are
          calls made since, whose loops had no event (any count does);
        * a frame at the same instruction, inside a loop of its, is either
          still running it (another op of the same call) or running it
          again in the next iteration: the tape's next event (`following`)
          tells which it expected: it ran it again if that event is no
          longer at this instruction in this iteration;
        * a frame at the same instruction outside its loops is still
          running it, and so are the frames inside it, compared in turn.

        (A replay leaves its tape because the program did something else
        than the tape: it expected the loop to end, or another op. Counts
        decided wrongly here give another loop structure to this
        iteration's trace, never other values: every op is still checked
        against the graph with its inputs.) Unknown (False) where the last
        event's site is not a stack (a backward op's)."""
        if not frames or not inside_loop(frames):
            return [], True  # no loop holds the step here: fresh counts are right
        if last is None:
            return [], True  # no event yet this step
        site, context = last
        if site is None:
            return [], False
        levels = {lv.site: lv for lv in context}
        theirs = list(reversed(site.frames))
        after_frames = list(reversed(following[0].frames)) if following and following[0] is not None else []
        after_levels = {lv.site: lv for lv in following[1]} if following else {}
        outer: tuple[Frame, ...] = ()
        for depth, (frame, info) in enumerate(reversed(frames)):
            code = frame.f_code
            then = theirs[depth] if depth < len(theirs) else None
            if then is None or then.file != info.file or then.function != info.function:
                return [], True  # a call made since: see above
            holding = [(start, self._loop_site(code, start, info, outer)) for start, end in loop_ranges(code)
                       if start <= info.offset <= end]
            if then.offset == info.offset and holding:
                nxt = after_frames[depth] if depth < len(after_frames) else None
                if nxt is not None and nxt.offset == info.offset and all(
                        after_levels.get(ls) == levels.get(ls) for _, ls in holding):
                    outer = (info,) + outer
                    continue  # the tape went on in this execution: so does the program
                moved_back = True  # the same instruction again: the next iteration
            elif then.offset == info.offset:
                outer = (info,) + outer
                continue
            else:
                moved_back = info.offset < then.offset
            act = None
            for start, end in loop_ranges(code):
                lv = levels.get(self._loop_site(code, start, info, outer))
                if lv is not None:
                    act = lv.activation
                    break
            if act is None:
                return [], True  # no earlier event in this frame's loops
            counts = []
            for start, ls in holding:
                lv = levels.get(ls)
                if lv is not None:
                    counts.append((start, lv.iteration + moved_back))
            return [(frame, act, counts)], True
        return [], True

    def _loop_site(self, code: types.CodeType, start: int, info: Frame, outer: tuple) -> Site:
        """The site of the loop starting at `start` of a frame running
        `code` (its Frame `info`), reached through the frames `outer`
        (innermost first)."""
        key = (code, start, outer)
        site = self._loop_sites.get(key)
        if site is None:
            head = Frame(info.file, info.function, _line_of(code, start), start)
            site = self._loop_sites[key] = Site((head,) + outer)
        return site

    def unsure(self) -> bool:
        """Whether the counts may be wrong since a late start: a generator
        that started before it (its loops' counts unknown) was resumed."""
        return self.late and self._hook.unknown_resume()

    def suspend(self) -> bool:
        """Leaves tracing mode (the tracer's own code runs untraced); True
        if the caller must `resume()`."""
        return self.active and self._hook.suspend()

    def resume(self) -> None:
        self._hook.resume()

    # -- contexts --------------------------------------------------------------
    def context(self, frames: Iterable[tuple[types.FrameType, Frame]]) -> Context:
        """The loop context of an event issued with `frames` (innermost
        first, as `sites.capture` collects them) on the stack."""
        if not self.active:
            return ()
        levels: list[LoopLevel] = []
        outer: tuple[Frame, ...] = ()
        hook = self._hook
        for frame, info in reversed(list(frames)):
            code = frame.f_code
            ranges = _RANGES.get(code)
            if ranges is None:
                ranges = loop_ranges(code)
            for start, end in ranges:
                if start <= info.offset <= end:
                    site = self._loop_site(code, start, info, outer)
                    act = hook.activation(frame)
                    levels.append(LoopLevel(site, act, hook.count(act, start)))
            outer = (info,) + outer
        return tuple(levels)


def inside_loop(frames: Iterable[tuple[types.FrameType, Frame]]) -> bool:
    """Whether one of `frames` ((frame, Frame) pairs, as `sites.capture`
    collects them) stands inside a loop of its code."""
    for frame, info in frames:
        for start, end in loop_ranges(frame.f_code):
            if start <= info.offset <= end:
                return True
    return False


_HOOK: Any = None


def _shared_hook() -> Any:
    """The process's one C hook: its table of code objects' loops is filled
    once, not again for every step (one step runs at a time)."""
    global _HOOK
    if _HOOK is None:
        _HOOK = native.load().LoopHook(_code_info)
    return _HOOK


def _code_info(code: types.CodeType) -> Optional[tuple[int, frozenset[int]]]:
    """For the C hook: (entry offset, loop first offsets) of a code object
    with loops, else None. This package's own code (and torch's dispatch
    plumbing) is never part of a site, so its loops never count: a replay
    that leaves its tape starts the hook in the middle of the recorder,
    which met ~170 of this package's code objects there, and disassembling
    them cost ~30 ms of the first such step."""
    if own_code(code) or not loop_ranges(code):
        return None
    return _ENTRY[code], _STARTS[code]


def transitions(before: Context, after: Context) -> list[tuple[str, Optional[Site]]]:
    """The loop markers between an event in context `before` and the next
    in `after`: ("end", None), ("iter", None) and ("begin", site)."""
    out: list[tuple[str, Optional[Site]]] = []
    i = 0
    while i < len(before) and i < len(after):
        b, a = before[i], after[i]
        if b.site != a.site or b.activation != a.activation:
            break
        if b.iteration != a.iteration:
            out += [("end", None)] * (len(before) - i - 1)
            out.append(("iter", None))
            for level in after[i + 1:]:
                out += [("begin", level.site), ("iter", None)]
            return out
        i += 1
    out += [("end", None)] * (len(before) - i)
    for level in after[i:]:
        out += [("begin", level.site), ("iter", None)]
    return out


def restrict(ctx: Context, loops: Any) -> Context:
    """`ctx` with only the levels of the loops in `loops` (by site)."""
    if not ctx or not loops:
        return ()
    return tuple(level for level in ctx if level.site in loops)


def trip_counts(contexts: Iterable[Context]) -> dict[Site, tuple[int, ...]]:
    """For each loop, the trip counts of its runs (iterations that issued
    an event) over a trace's event contexts, in the order the runs began.
    A loop whose runs take different counts within one iteration but the
    same sequence of counts every iteration (a `Sequential` loop run for
    blocks of two and three layers) is fixed; only a sequence that changes
    between iterations makes it a graph loop (TerraFunction._merge)."""
    runs: dict[tuple[Site, tuple], set[int]] = {}
    for ctx in contexts:
        for depth, level in enumerate(ctx):
            # A run is one activation inside one iteration of every
            # enclosing loop.
            run = (level.site, tuple((lv.activation, lv.iteration) for lv in ctx[:depth]) + (level.activation,))
            runs.setdefault(run, set()).add(level.iteration)
    out: dict[Site, list[int]] = {}
    for (site, _), iterations in runs.items():  # dicts keep the order runs began
        out.setdefault(site, []).append(len(iterations))
    return {site: tuple(counts) for site, counts in out.items()}
