"""Sites: where in the program an op ran, as a call stack.

A site is part of an op's identity when traces are merged (spec 1.4.4): two
ops are the same TraceGraph node only if they ran at the same site. It is
the Python call stack from the frame that issued the op up to the step
function's own frame, with the bytecode offset (`f_lasti`) of every frame,
so two ops on one line and one helper called from two places stay apart.
Frames of the caller of the step function are left out: the same step
called from two places in a training loop is the same program.

Ops the autograd engine runs have no user frames of their own (they all
show the `loss.backward()` line); `BackwardSites` gives them a stable site
derived from the forward op that created their autograd node.
"""
from __future__ import annotations

import bisect
import dis
import os
import sys
import types
import weakref
from dataclasses import dataclass
from typing import Any, Callable, Optional

import torch

from . import mlir_text

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))


@dataclass(frozen=True)
class Frame:
    """One frame: file, function (qualified name), line, bytecode offset."""

    file: str
    function: str
    line: int
    offset: int

    def __post_init__(self) -> None:
        # Sites are hashed for every op validated; frames are interned by
        # `capture`, so their hash is computed once.
        object.__setattr__(self, "_hash", hash((self.file, self.function, self.line, self.offset)))

    def __hash__(self) -> int:
        return self._hash  # type: ignore[attr-defined]

    def __reduce__(self) -> tuple:  # the cached hash is per process
        return (Frame, (self.file, self.function, self.line, self.offset))

    def mlir(self) -> str:
        """`"fn"("file":line:offset)` (a NameLoc around a FileLineColLoc)."""
        loc = f"{mlir_text.string_literal(self.file)}:{self.line}:{self.offset}"
        if not self.function:
            return loc
        return f"{mlir_text.string_literal(self.function)}({loc})"


@dataclass(frozen=True)
class Site:
    """A call stack, innermost frame first."""

    frames: tuple[Frame, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "_hash", hash(self.frames))

    def __hash__(self) -> int:
        return self._hash  # type: ignore[attr-defined]

    def __reduce__(self) -> tuple:  # the cached hash is per process
        return (Site, (self.frames,))

    def mlir(self) -> str:
        """`callsite(inner at callsite(... at outer))`, the importer's shape."""
        if not self.frames:
            return "unknown"
        text = self.frames[-1].mlir()
        for f in reversed(self.frames[:-1]):
            text = f"callsite({f.mlir()} at {text})"
        return text

    def under(self, frame: Frame) -> "Site":
        """This site with `frame` as a new innermost frame."""
        return Site((frame,) + self.frames)


# torch's own frames between an op and the mode that sees it, skipped like
# this package's: the dispatch-mode machinery (torch 1.13 wraps every
# mode's handler in one) and the `torch._disable_dynamo` wrapper torch 2.x
# puts around every mode's `__torch_dispatch__`. A subclass calling its
# base's handler passes through that wrapper twice, so keeping these frames
# gave the co-executor's ops other sites than the tracer's, and made the
# innermost frame of an engine op the wrapper, not `torch.autograd`'s entry.
_TORCH_PLUMBING = tuple(os.path.join("torch", *parts) for parts in (
    ("utils", "_python_dispatch.py"), ("_compile.py",), ("_dynamo", "eval_frame.py")))
# torch's decompositions the recorder runs in place of an op (tracing.
# TORCH_DECOMPOSED): their ops take the op's site, as the ops of an op
# composed in C++ do (an engine op's decomposition stays an engine op).
_TORCH_PLUMBING += tuple(os.path.join("torch", "_decomp", name) for name in (
    "decompositions.py", "__init__.py")) + (os.path.join("torch", "_prims_common", "wrappers.py"),)


# By file name: equal code objects (== ignores the file) may live in
# different files.
_OWN: dict[str, bool] = {}


def own_code(code: types.CodeType) -> bool:
    """Whether `code` is this package's or torch's dispatch plumbing: its
    frames are never part of a site."""
    file = code.co_filename
    own = _OWN.get(file)
    if own is None:
        path = os.path.abspath(file)
        own = _OWN[file] = os.path.dirname(path) == _PACKAGE_DIR or path.endswith(_TORCH_PLUMBING)
    return own


def capture(start: Optional[types.FrameType], stop: Optional[types.FrameType],
            raw: Optional[list] = None) -> tuple[Site, bool]:
    """The site of the frames from `start` outwards, up to and including the
    frame whose caller is `stop` (the step function's frame). Frames of this
    package are skipped. Returns (site, reached): `reached` is False when
    `stop` is not on the stack (the op ran on another thread, e.g. an
    autograd device thread, or outside the step). `raw`, if given, gets
    (frame object, Frame) pairs, innermost first (for loops.py)."""
    pairs = []
    f = start
    cache = _FRAMES
    while f is not None and f is not stop:
        key = (id(f.f_code), f.f_lasti)
        hit = cache.get(key)
        if hit is None:
            hit = cache[key] = (f.f_code, _frame_info(f))
        if hit[1] is not None:
            pairs.append((f, hit[1]))
        f = f.f_back
    frames = tuple(p[1] for p in pairs)
    site = _SITES.get(frames)
    if site is None:
        if len(_SITES) > _INTERN_LIMIT:  # e.g. code made by exec() in a loop
            _SITES.clear()
            _FRAMES.clear()
        site = _SITES[frames] = Site(frames)
    if raw is not None:
        raw.extend(pairs)
    return site, f is stop


# (id(code), f_lasti) -> (code, Frame or None for this package's frames).
# The code object is held so its id is never reused by another one; a
# frame's line is a function of its code and offset.
_FRAMES: dict[tuple[int, int], tuple[types.CodeType, Optional[Frame]]] = {}
# Sites are interned: equal sites are one object, hashed once.
_SITES: dict[tuple, Site] = {}
_INTERN_LIMIT = 1 << 18


def _frame_info(f: types.FrameType) -> Optional[Frame]:
    code = f.f_code
    if own_code(code):
        return None
    name = getattr(code, "co_qualname", code.co_name)
    return Frame(code.co_filename, name, f.f_lineno or 0, call_offset(code, max(f.f_lasti, 0)))


# code -> sorted offsets of its instructions, and the offset each stands for.
_CALLS: "weakref.WeakKeyDictionary[types.CodeType, tuple[list[int], list[int]]]" = weakref.WeakKeyDictionary()


def call_offset(code: types.CodeType, lasti: int) -> int:
    """The offset of the instruction a frame is at, whatever the
    interpreter left in `f_lasti` for the same call: CPython 3.11 points a
    frame that called a Python function into its CALL's inline caches, and
    one whose C call was specialized at the PRECALL before it (after some
    runs of the same code), so one call had up to three offsets. A site
    must not change between iterations (or with terra's engine wrapper), so
    an offset is its instruction's, and a PRECALL stands for its CALL."""
    table = _CALLS.get(code)
    if table is None:
        ins = list(dis.get_instructions(code))
        starts = [i.offset for i in ins]
        means = [nxt.offset if i.opname == "PRECALL" else i.offset for i, nxt in zip(ins, ins[1:] + ins[-1:])]
        table = _CALLS[code] = (starts, means)
    starts, means = table
    k = bisect.bisect_right(starts, lasti) - 1
    return means[k] if k >= 0 else lasti


_ENGINE_ENTRIES = {"backward", "grad", "_engine_run_backward"}


def engine_frame(thread_id: int) -> Optional[types.FrameType]:
    """The innermost frame of thread `thread_id` if it is waiting in the
    autograd engine (`torch.autograd.backward`/`grad`), else None.

    The engine runs the backward of CUDA tensors on its device threads
    (the CPU's on the calling thread), and those threads inherit the
    caller's dispatch modes: an op that reaches a mode from another thread
    while the step's thread waits in the engine is the step's backward. Its
    site is captured from this frame, exactly as the same op run by the
    engine on the calling thread would be."""
    f = sys._current_frames().get(thread_id)
    while f is not None and own_code(f.f_code):  # terra's engine wrapper (backward.py)
        f = f.f_back
    if f is None or f.f_code.co_name not in _ENGINE_ENTRIES:
        return None
    if "torch" + os.sep + "autograd" + os.sep not in f.f_code.co_filename.replace("/", os.sep):
        return None
    return f


def is_engine_site(site: Site, reached: bool) -> bool:
    """True if the op was issued by the autograd engine rather than by Python
    code: the innermost Python frame is the engine's entry point
    (`torch.autograd.backward`/`grad`), or no frame of the step is on the
    stack at all (a device thread)."""
    if not reached or not site.frames:
        return True
    f = site.frames[0]
    return f.function in _ENGINE_ENTRIES and "torch" + os.sep + "autograd" + os.sep in f.file.replace("/", os.sep)


AUTOGRAD_FILE = "<autograd>"
STATE_FILE = "<state>"


class _Node:
    """Stands for a tensor whose autograd node is known (`grad_fn`)."""

    __slots__ = ("grad_fn",)

    def __init__(self, node: Any):
        self.grad_fn = node


# True while BackwardSites registers its own node hooks (backward.py's hook
# epoch counts only the program's).
OWN_HOOKS = [False]


class BackwardSites:
    """Gives each op the autograd engine runs a site derived from the forward
    op that created its autograd node.

    While the forward runs, every recorded op's outputs are remembered; once
    autograd has attached their `grad_fn` (visible at the next recorded op),
    the node gets a post hook and the forward op's site. During backward,
    ops are buffered until a node's post hook fires (the engine runs one node
    at a time on the CPU, and post hooks run right after the node): the
    buffered ops then get the site

        callsite("<NodeName>"("<autograd>":0:k) at <forward op's site>)

    with k the op's index within that node. Gradient accumulation into a
    leaf (AccumulateGrad) is attributed to the leaf's state name, e.g.
    `callsite("AccumulateGrad"("<autograd>":0:k) at "param:fc1.weight"("<state>":0:0))`.
    Ops no post hook claims (the engine's own gradient sums after the last
    node, or nodes created outside any recorded op) get their position in
    the backward pass: `"backward"("<autograd>":0:k)` at the backward() call.
    """

    def __init__(self, leaf_name: Callable[[torch.Tensor], Optional[str]]):
        self._leaf_name = leaf_name
        self._recent: list[tuple[Any, Site]] = []  # (weakref to output, forward site)
        self._nodes: dict[Any, tuple[Site, str]] = {}  # grad_fn -> (site, label)
        self._counts: dict[Any, int] = {}
        self._handles: list[Any] = []
        self._pending: list[tuple[Any, Site]] = []  # (op record, engine call-site)
        self._leaves = 0
        self._position = 0
        self._assign: Callable[[Any, Site], None] = lambda rec, site: None
        # (node site, label, first index): the node a replay that left its
        # tape inside the engine expected to be running (expect_running).
        self._running: Optional[tuple[Site, str, int]] = None
        self._prehooked: set = set()

    def bind(self, assign: Callable[[Any, Site], None]) -> None:
        """`assign(record, site)` sets a recorded op's site."""
        self._assign = assign

    # -- forward side ------------------------------------------------------
    def forward_outputs(self, outputs: list[torch.Tensor], site: Site, nodes: Optional[list] = None) -> None:
        """Remembers a forward op's outputs to find their autograd node
        later, or, given `nodes`, the nodes themselves (an op recorded after
        it ran, when later in-place ops may have replaced `grad_fn`)."""
        if nodes is not None:
            self._recent.extend((lambda n=n: _Node(n), site) for n in nodes)
            return
        for t in outputs:
            try:
                self._recent.append((weakref.ref(t), site))
            except TypeError:
                pass

    def resolve(self) -> None:
        """Hooks the autograd nodes of the outputs remembered so far."""
        recent, self._recent = self._recent, []
        for ref, site in recent:
            t = ref()
            node = grad_fn_of(t) if t is not None else None
            if node is None or node in self._nodes:
                continue
            self._hook(node, site, type(node).__name__)
            for nxt, _ in getattr(node, "next_functions", ()):
                if nxt is not None and type(nxt).__name__ == "AccumulateGrad" and nxt not in self._nodes:
                    var = getattr(nxt, "variable", None)
                    name = self._leaf_name(var) if var is not None else None
                    if name is None:
                        name = f"leaf{self._leaves}"
                        self._leaves += 1
                    self._hook(nxt, Site((Frame(STATE_FILE, name, 0, 0),)), "AccumulateGrad")

    def _hook(self, node: Any, site: Site, label: str) -> None:
        self._nodes[node] = (site, label)
        self._counts[node] = 0
        OWN_HOOKS[0] = True  # not the program's hook (backward.py counts those)
        try:
            self._handles.append(node.register_hook(lambda gi, go, node=node: self._fired(node)))
        except (AttributeError, RuntimeError):
            pass  # cannot hook: its ops fall back to positional sites
        finally:
            OWN_HOOKS[0] = False

    # -- backward side -----------------------------------------------------
    def engine_op(self, record: Any, call_site: Site) -> None:
        """Buffers an op the engine ran until its node's post hook fires."""
        self._pending.append((record, call_site))

    def expect_running(self, expected: Site) -> None:
        """A replay leaves its tape inside the engine, before the op it
        expected at `expected` (an engine op's site: its node's site under
        `"<Node>"("<autograd>":0:k)`). The node running now got its post
        hook only now, and torch's engine decides whether to call a node's
        post hooks before running it (torch 1.13's `call_function`), so
        its ops would go to the next node that fires. They are the
        expected node's, from index k on, until the next node starts (a
        pre-hook on every hooked node says when) or Python runs again."""
        frames = expected.frames
        if not frames or frames[0].file != AUTOGRAD_FILE:
            return
        self._running = (Site(frames[1:]), frames[0].function, frames[0].offset)
        OWN_HOOKS[0] = True
        try:
            for node in self._nodes:
                if node not in self._prehooked:
                    self._prehooked.add(node)
                    try:
                        # (a node starts: the ops before it are the running node's)
                        self._handles.append(node.register_prehook(lambda grads: self._claim_running()))
                    except (AttributeError, RuntimeError):
                        pass
        finally:
            OWN_HOOKS[0] = False

    def _claim_running(self) -> None:
        running, self._running = self._running, None
        if running is None or not self._pending:
            return
        site, label, k = running
        for record, _ in self._pending:
            self._assign(record, site.under(Frame(AUTOGRAD_FILE, label, 0, k)))
            k += 1
            self._position += 1
        self._pending.clear()

    def _fired(self, node: Any) -> None:
        self._running = None  # (a node whose post hook fires claims its own ops)
        site, label = self._nodes[node]
        for record, _ in self._pending:
            k = self._counts[node]
            self._counts[node] = k + 1
            self._assign(record, site.under(Frame(AUTOGRAD_FILE, label, 0, k)))
            self._position += 1
        self._pending.clear()

    def flush(self) -> None:
        """Gives the ops no node claimed their position in the backward pass
        (called when Python code runs again after the engine)."""
        self._claim_running()
        for record, call_site in self._pending:
            self._assign(record, call_site.under(Frame(AUTOGRAD_FILE, "backward", 0, self._position)))
            self._position += 1
        self._pending.clear()

    def backward_started(self) -> None:
        """A new backward pass starts counting positions from zero."""
        self._position = 0

    def release(self) -> None:
        """Drops the callback into the recorder (see `_Recorder.release`)."""
        self._leaf_name = lambda t: None

    def close(self) -> None:
        """Removes every hook (end of the iteration) and drops the nodes."""
        self.flush()
        for h in self._handles:
            h.remove()
        self._handles.clear()
        self._nodes.clear()
        self._counts.clear()
        self._recent.clear()
        self._prehooked.clear()
        self._running = None


def grad_fn_of(t: Any) -> Any:
    """`t.grad_fn`, or None where torch refuses to say: a view made under
    no_grad whose memory was written in place since raises on reading it
    (`with torch.no_grad(): w[0].mul_(0.99)`, a parameter's row scaled in
    place), though the program never asks."""
    try:
        return t.grad_fn
    except RuntimeError:
        return None


def user_line(site: Any) -> str:
    """`file:line` of the user's innermost frame in `site` (frames inside
    torch itself, e.g. nn.functional, are skipped when a user frame exists)."""
    if site is None or not getattr(site, "frames", None):
        return "<unknown>"
    files = [f for f in site.frames if not f.file.startswith("<")]
    for f in files:
        if _TORCH_DIR not in os.path.abspath(f.file):
            return f"{f.file}:{f.line}"
    if files:
        return f"{files[0].file}:{files[0].line}"
    f = site.frames[0]
    return f"{f.file}:{f.function}"


_TORCH_DIR = os.path.dirname(os.path.abspath(torch.__file__)) + os.sep
