"""Tapes of the co-executor: building them while an iteration is recorded,
replaying them in the next iterations, and catching up when an iteration
leaves its tape (the design is in tape.py and docs/frontend.md, "Tapes").

`TapeRecorder` is the part of `coexec.CoExecutor` that deals with tapes; it
works on the co-executor's state (the run, the recorder's provenance, the
Cursor's handles), so it is a mixin of that class, kept in its own module
because the tape is its own layer of the front end: the recorder
(tracing.py) turns ops into trace events, the co-executor (coexec.py)
validates them and drives the graph run, and this module lets an iteration
that repeats an earlier one skip both.
"""
from __future__ import annotations

import os
import sys
import time
import weakref
from typing import Any, Callable, Iterator, Optional

import torch
from torch.utils._pytree import LeafSpec, tree_flatten, tree_unflatten

from . import backward, placeholder, sizes
from . import native as native_module
from .placeholder import Placeholder, Token, view_placeholder
from .mlir_text import ELEMENT_TYPES
from .runio import resolve_later, tensor_spec, to_torch
from .sites import Site, capture, grad_fn_of, is_engine_site, user_line
from .tape import (MEMO_MAX, Entry, Tape, Untapeable, _match, flat_inputs, flat_results, form_matches, matches,
                   relax_host_shapes, layout_key, relaxed_arg, relaxed_value, spec_of, tensor_idents)
from .trace import FeedEvent, OpEvent, ValueRef
from .tracing import HOST_VALUE_OPS, _flat_tensors_deep, op_info, passed_args


class WeakResults:
    """The results of an autograd-engine op in the co-executor's log (the
    ops a deviation replays eagerly), held weakly. AccumulateGrad takes a
    gradient over without a copy only when nothing else references it
    (torch 2.x counts its Python object's references too); the log's strong
    reference made it copy in co-executed steps (`new_empty_strided` +
    `copy_`, ops the traces never had), a deviation (docs/frontend.md,
    "Gradients taken over or copied"). A result nobody holds any more needs
    no value at a deviation; one still held (the program's, or a later
    logged op's argument) is found through its weak reference."""

    __slots__ = ("refs",)

    def __init__(self, out: Any, owner: Any):
        flat = (out,) if isinstance(out, torch.Tensor) else tree_flatten(out)[0]
        # The tape's identities are keyed by id(): a result that dies takes
        # its identity with it, so a later tensor given its id is not taken
        # for it (nothing else may keep a placeholder alive).
        owner_ref = weakref.ref(owner)
        self.refs = [weakref.ref(o, _Forget(owner_ref, id(o))) if isinstance(o, torch.Tensor) else o
                     for o in flat]

    def flat(self) -> list:
        return [r() if type(r) is weakref.ref else r for r in self.refs]


class _Forget:
    """Removes a dead tensor's identity from its co-executor's current
    identities (WeakResults' weakref callback; whatever has that id when the
    tensor dies is the tensor)."""

    __slots__ = ("owner", "key")

    def __init__(self, owner: Any, key: int):
        self.owner, self.key = owner, key

    def __call__(self, _ref: Any) -> None:
        ex = self.owner()
        if ex is not None:
            ex.idents.pop(self.key, None)


def logged_outputs(out: Any) -> list:
    """The flat results of a log entry (None for a weakly held result that
    is gone)."""
    return out.flat() if type(out) is WeakResults else tree_flatten(out)[0]


class TapeRecorder:
    """Tape building, replay and catch-up for `coexec.CoExecutor` (a mixin:
    the attributes it uses are set up by `CoExecutor.__init__`)."""

    # -- building a tape while the iteration is recorded ---------------------------
    def _ident(self, t: torch.Tensor) -> Optional[tuple]:
        i = self.idents.get(id(t))
        if i is not None:
            return i
        return None if isinstance(t, Placeholder) else self._host_ident(t)

    def _host_ident(self, t: torch.Tensor) -> tuple:
        """The identity of a real tensor that is neither state, nor a step
        argument, nor made in the step, as the recorder sees it: state if
        it is a state tensor's memory, else the n-th host memory used."""
        k = self.key(t)
        name = self.state_name_of(t)
        if name is not None:
            i: tuple = ("state", name)
        else:
            n = self.host_ids.get(k)
            if n is None:
                n = self.host_ids[k] = len(self.host_ids)
                self.host_tensors[n] = t
                if n in self._relaxed_hosts:  # its sizes may differ from the tape's
                    self.layout.append((n, tuple(t.shape)))
            i = ("host", n, tuple(t.shape), tuple(t.stride()), t.dtype)
        self.idents[id(t)] = i
        self.tape_keep.append(t)  # its id stays its own
        return i

    def _name_results(self, q: int, e: Entry, out: Any) -> None:
        """Gives entry `q`'s results their identities."""
        struct = e.struct
        if struct is None:
            flat = (out,)
        elif struct is list or struct is tuple:
            flat = out
        else:
            flat = tree_flatten(out)[0]
        idents = self.idents
        for j, (o, recipe) in enumerate(zip(flat, e.outs)):
            if recipe[0] != "same" and isinstance(o, torch.Tensor):
                idents[id(o)] = (q, j)
                if not isinstance(o, Placeholder):
                    self.tape_keep.append(o)
                ref = self.producers.get(self.key(o))
                if ref is not None:
                    self.ref_idents.setdefault(ref, (q, j))

    def _name_replayed(self, e: Entry, out: Any) -> None:
        """`_name_results` for a replayed entry (identities made with the tape)."""
        struct = e.struct
        idents = self.idents
        if struct is None:
            i = e.ids[0]
            if i is not None and isinstance(out, torch.Tensor):
                idents[id(out)] = i
                if type(out) is not Placeholder:
                    self.tape_keep.append(out)
            return
        flat = out if struct is list or struct is tuple else tree_flatten(out)[0]
        for o, i in zip(flat, e.ids):
            if i is not None and isinstance(o, torch.Tensor):
                idents[id(o)] = i
                if type(o) is not Placeholder:
                    self.tape_keep.append(o)

    def _b_begin(self, func: Any, args: tuple, kwargs: dict) -> Entry:
        try:
            spec = spec_of(args, kwargs, self._ident) if func is not None else self._ident(args[0])
        except Untapeable:
            spec = None
        e = Entry("stop", func, spec)
        e.effects, self.b_pending = self.b_pending, []
        self.building.append(e)
        self.b_current = e
        self.b_flat = flat_inputs(args, kwargs)
        self._b_call = (args, kwargs)
        self._kind = None
        self._b_host = False
        self._b_answer = None
        self._b_masks: list = []
        self._written_now = []
        self._record_from = None
        self._site_info = None
        return e

    def _b_end(self, e: Entry, out: Any) -> None:
        """Completes the tape entry of an interaction recorded live."""
        q = len(self.building) - 1
        if e.func is not None:
            e.kind = self._kind or "stop"
            e.name = op_info(e.func).name
        if self._site_info is not None:
            e.site, e.reached, e.loops = self._site_info
        e.engine = e.site is not None and is_engine_site(e.site, e.reached)
        if e.engine and self._record_from is not None:
            e.engine_sites = (self._record_from, len(self.trace.events))  # sites filled in at the end
        e.host_eval = self._b_host
        try:
            if e.spec is None or self.deviation is not None or e.site is None:
                raise Untapeable("not recorded")
            if e.kind == "mat":
                if self._b_answer is None:
                    raise Untapeable("read not answered")
                e.answer = self._b_answer
                if e.func is not None:
                    e.mat_kind = "item"
            elif e.kind in ("op", "rng", "pass", "masked"):
                masked = e.kind == "masked"
                if masked:
                    reads = []
                    for m in self._b_call[0][1]:
                        if isinstance(m, Placeholder):
                            answer = next((a for t, a in self._b_masks if t is m), None)
                            if answer is None:
                                raise Untapeable("a boolean mask read in no way the tape knows")
                            reads.append((next(k for k, x in enumerate(self.b_flat) if x is m), answer))
                    e.mask_reads = tuple(reads)
                    e.kind = "op"
                elif e.kind == "rng":
                    # The values an op the host runs on values read
                    # (tracing.HOST_VALUE_OPS, HOST_RNG_VALUE_OPS), and the
                    # shapes of results that depend on values.
                    e.mask_reads = tuple((k, a) for k, x in enumerate(self.b_flat)
                                         for t, a in self._b_masks if t is x)
                    if e.name in HOST_VALUE_OPS:
                        e.value_shapes = tuple(tuple(t.shape) for t in _flat_tensors_deep(out))
                flat_in = self.b_flat
                e.written = tuple(next(k for k, x in enumerate(flat_in) if x is w) for w in self._written_now)
                self._recipes(e, out, flat_in)
                if e.kind == "op":  # (an alias op records no event: lo is None)
                    self.b_events[q] = (self._record_from, len(self.trace.events), masked, self._b_call)
                self._name_results(q, e, out)
            else:
                raise Untapeable(e.kind)
        except (Untapeable, StopIteration) as exc:
            e.kind = "stop"
            if self.b_limit is None:
                self._b_stop(q, f"{e.name or e.kind}: {exc or 'a result not among the arguments'}")

    @staticmethod
    def _limit_before(entries: list, q: int, why: Optional[str], engine: Optional[bool] = None) -> int:
        """Where a tape that cannot replay entry `q` ends: before `q`, or,
        for an op of the autograd engine, before its backward pass (see
        _b_stop). Says why with TERRA_LOG=tape when `why` is given."""
        if engine if engine is not None else q < len(entries) and entries[q].engine:
            p = q
            while p > 0 and entries[p - 1].engine:
                p -= 1
            q = max(p - 1, 0)
        if why is not None and _TAPE_LOG:
            print(f"[terra] tape ends at entry {q}: {why}", file=sys.stderr, flush=True)
        return q

    def _b_stop(self, q: int, why: str) -> None:
        """The tape being built ends before entry `q`; inside the autograd
        engine, before the backward pass instead: a catch-up there could not
        hook the autograd node already running (a post hook added while a
        node runs does not fire), so the rest of its ops would get another
        node's backward site, a path the graph does not have."""
        if self.in_engine:
            q = self._limit_before(self.building, q, None, engine=True)
        self.b_limit = q
        if _TAPE_LOG:
            e = self.building[q] if q < len(self.building) else None
            where = f" at {user_line(e.site)}" if e is not None and e.site is not None else ""
            print(f"[terra] tape ends at entry {q}{where}: {why}", file=sys.stderr, flush=True)

    def _recipes(self, e: Entry, out: Any, flat_in: list) -> None:
        """How the replay makes an entry's results (see tape.py)."""
        if isinstance(out, torch.Tensor):
            flat, e.struct = [out], None
        elif type(out) in (list, tuple) and not any(type(o) in (list, tuple, dict) for o in out):
            flat, e.struct = list(out), type(out)  # the common multi-result form, without pytree
        else:
            flat, e.struct = tree_flatten(out)
        recipes, real_made = self._recipe_list(flat, flat_in)
        if real_made and e.kind == "op" and any(r[0] not in ("real", "value") for r in recipes):
            raise Untapeable("real and placeholder results")
        e.outs = tuple(recipes)

    def _recipe_list(self, flat: list, flat_in: list) -> tuple[list, bool]:
        """The recipes of an interaction's flat results; whether one is real."""
        recipes = []
        real_made = False
        for o in flat:
            if not isinstance(o, torch.Tensor):
                recipes.append(("value", o))
                continue
            k = next((k for k, x in enumerate(flat_in) if x is o), None)
            if k is not None:
                recipes.append(("same", k))
            elif isinstance(o, Placeholder):
                tok = o._terra_token
                k = next((k for k, x in enumerate(flat_in)
                          if (x._terra_token if isinstance(x, Placeholder) else self.real_tokens.get(self.base(x)))
                          is tok), None)
                meta = (tuple(o.shape), tuple(o.stride()))
                if k is not None:
                    recipes.append(("view", k) + meta + (o.storage_offset() - flat_in[k].storage_offset(),
                                                          o.dtype, o._terra_where))
                else:
                    recipes.append(("new",) + meta + (o.storage_offset(), o.dtype, o._terra_where))
            else:
                real_made = True
                recipes.append(("real",))
        return recipes, real_made

    def _shape_polymorphic(self, e: Entry, info: tuple) -> None:
        """Marks an entry whose results the graph types with dynamic dims
        (a boolean mask's count and what it flows into, a host tensor fed
        with sizes the traces saw change): the replay infers their shapes
        from its own arguments (the graph's types are the ground truth of
        what may vary: a static dim that changes fails the graph's guard),
        and the size arguments that stand for dynamic dims are checked
        against them (tape.form_matches) instead of by value."""
        lo, hi, masked, (args, kwargs) = info
        if lo is None:  # an alias (`detach`): its view has its argument's shape
            src = args[0] if args and isinstance(args[0], torch.Tensor) else None
            shape = self._graph_shape(self.producers.get(self.key(src))) if src is not None else None
            if any(r[0] == "view" for r in e.outs) and (shape is None or any(d < 0 for d in shape)):
                e.infer = True
                e.outs = tuple(r if r[0] in ("same", "value") else ("infer",) for r in e.outs)
                e.memo = {}
            return
        events = self.trace.events
        idx = next((i for i in range(hi - 1, lo - 1, -1) if isinstance(events[i], OpEvent)), None)
        if idx is None:
            return
        ev = events[idx]
        infer = masked or any(sh is None or any(d < 0 for d in sh)
                              for sh in (self._graph_shape(ValueRef(idx, j)) for j in range(len(ev.results))))

        def dynamic_dim(ref: ValueRef, d: int) -> bool:
            shape = self._graph_shape(ref)
            return shape is None or d >= len(shape) or shape[d] < 0
        forms: dict = {}
        if e.name in sizes.SIZE_ARGS:
            own = len(ev.inputs) - ev.args.get(sizes.SHAPE_OPERANDS, 0)
            for aname in sizes.SIZE_ARGS[e.name]:
                form = ev.args.get(aname)
                syms = [form] if isinstance(form, sizes.SymDim) else \
                    [x for x in form if isinstance(x, sizes.SymDim)] if isinstance(form, list) else []
                # A reshape's inferred entry (-1) follows its operand's numel.
                source = self._graph_shape(ev.inputs[0]) if ev.inputs else None
                inferred_entry = (isinstance(form, list) and -1 in form and e.name in sizes.RESHAPES
                                  and source is not None and any(d < 0 for d in source))
                if not inferred_entry and not any(
                        x.operand < len(ev.inputs) and dynamic_dim(ev.inputs[x.operand], x.dim) for x in syms):
                    continue  # a static size: checked by value
                extra = tuple(self.ref_idents.get(r) for r in ev.inputs[own:])
                if any(x.operand >= own for x in syms) and (None in extra or any(
                        i[0] != "host" and not isinstance(i[0], int) for i in extra)):
                    raise Untapeable("a data-dependent size taken from a value the tape cannot find")
                forms[aname] = (form, extra)
        if forms and e.name == "aten._reshape_alias" and "size" in forms:
            # Its strides (dropped from the graph's op, a reshape) are those
            # of the view it stands for when they were so here.
            values = {info[1]: v for info, v in passed_args(op_info(e.func).args, args, kwargs)}
            size, stride, x = values.get("size"), values.get("stride"), values.get("self")
            if isinstance(size, list) and isinstance(stride, list) and stride == _view_strides(x, size):
                forms["stride"] = ("view-strides", ())
        if forms:
            sa, sk = e.spec
            sa, sk = list(sa), list(sk)
            keyed: dict = {}
            for i, aname, kwarg_only, _, _ in op_info(e.func).args:
                if aname not in forms:
                    continue
                if i < len(args) and not kwarg_only:
                    sa[i] = ("F", type(args[i]), None)
                    keyed[i] = forms[aname]
                else:
                    sk = [(k, ("F", type(kwargs[k]), None) if k == aname else leaf) for k, leaf in sk]
                    keyed[aname] = forms[aname]
            e.spec = (tuple(sa), tuple(sk))
            e.forms = keyed
            infer = True
        if infer:
            if any(r[0] == "real" for r in e.outs):
                raise Untapeable("real results with data-dependent sizes")
            e.infer = True
            e.outs = tuple(r if r[0] in ("same", "value") else ("infer",) for r in e.outs)
            # Shapes that follow from the inputs' shapes alone are memoized
            # per input layout (GPT-2's few lengths); a mask's count is not.
            e.memo = None if masked else {}

    def _graph_shape(self, ref: Optional[ValueRef]) -> Optional[list]:
        """The compiled graph's type of a recorded value (-1: a dynamic
        dim), or None when it was not validated."""
        handle = self.handles.get(ref.event) if ref is not None else None
        return self.compiled.node_shape(handle[0], ref.result) if handle is not None else None

    def _forms_match(self, e: Entry, func: Any, args: tuple, kwargs: dict) -> bool:
        tensors = form_operands(func, args, kwargs)
        for key, (form, extra) in e.forms.items():
            v = args[key] if type(key) is int else kwargs.get(key)
            if form == "view-strides":  # _reshape_alias's strides: those of the view it stands for
                if v != _view_strides(args[0], args[1] if len(args) > 1 else kwargs.get("size")):
                    return False
                continue
            operands = tensors
            if extra:  # sizes of values that are not operands (tracing: shape operands)
                found = [self._tensor_of(i) for i in extra]
                if any(t is None for t in found):
                    return False
                operands = tensors + found
            if not form_matches(form, v, operands):
                return False
        return True

    def _tensor_of(self, ident: tuple) -> Optional[torch.Tensor]:
        """This iteration's tensor with tape identity `ident` (a result of a
        replayed entry, or a host tensor by its number), or None."""
        if isinstance(ident[0], int):
            q, j = ident
            if q >= len(self.replayed):
                return None
            if self.replayed[q] is None:  # a result a pass replayed whole has not made (backward.py)
                backward.expand(self)
            r = self.replayed[q]
            flat = flat_results(r.out, r.entry.struct)
            return flat[j] if j < len(flat) and isinstance(flat[j], torch.Tensor) else None
        if ident[0] == "host":
            return self.host_tensors.get(ident[1])
        return None

    def _leave_tape(self, result: Any, held: list) -> None:
        """After a committed iteration recorded live: its tape, for the next.
        `held`: what the final state slots held before the commit (what a
        replay's end finds in them)."""
        if not _TAPES_ENABLED:
            return
        entries, limit, end = self.building, self.b_limit, self.b_end
        if limit is not None:
            end = None
        else:
            limit = len(entries)
            end.slots = [(s.name, None if t is None else self._ident(t) or ("?",))
                         for s, t in zip(self.final_slots, held)]
            end.dropped = list(self.trace.dropped_state)
            end.result = [self._ident(t) for t in _flat_tensors_deep(result)]
            if any(i is None for i in end.result) or any(i == ("?",) for _, i in end.slots):
                end = None
            elif any(f.kind == "arg" for f in self.trace.fetches):
                end = None  # writes its arguments in place: ends live (CoExecutor._commit)
        _prune_host_evals(entries[:limit])
        fed: dict[int, list[int]] = {}
        for src in self.feed_src.values():
            if src[0] == "in":
                fed.setdefault(src[1], []).append(src[2])
        for q, ks in fed.items():
            if q < len(entries):
                entries[q].feeds = tuple(ks)
        events = self.trace.events
        for e in entries[:limit]:
            if e.engine and e.engine_sites:
                lo, hi = e.engine_sites
                e.engine_sites = tuple(events[i].site for i in range(lo, hi))
        for q in sorted(self.b_events):
            if q >= limit:
                break
            try:
                self._shape_polymorphic(entries[q], self.b_events[q])
            except Untapeable as exc:
                limit = self._limit_before(entries, q, f"{entries[q].name}: {exc}")
                end = None
                break
        # Host tensors fed where the graph's feed has dynamic dims (Faster
        # R-CNN's RoIs from NumPy): those dims are checked by the feed's type.
        host_dynamic: dict[int, frozenset] = {}
        for i, n in self.feed_hosts.items():
            handle = self.handles.get(i)
            if handle is not None:
                dims = frozenset(d for d, w in enumerate(self.compiled.node_shape(handle[0], 0)) if w < 0)
                if dims:
                    host_dynamic[n] = dims
        # Results of ops the host ran on values (tracing.HOST_VALUE_OPS) fed
        # where the graph's feed has dynamic dims: those dims may differ in
        # a replay (the entries after them infer their shapes).
        events = self.trace.events
        for ref, ident in self.ref_idents.items():
            if not (len(ident) == 2 and isinstance(ident[0], int) and ident[0] < limit):
                continue
            e, j = entries[ident[0]], ident[1]
            handle = self.handles.get(ref.event)
            if e.value_shapes is None or handle is None or not isinstance(events[ref.event], FeedEvent) \
                    or j >= len(e.value_shapes):
                continue
            want = self.compiled.node_shape(handle[0], 0)
            if len(want) == len(e.value_shapes[j]):
                shapes = list(e.value_shapes)
                shapes[j] = tuple(-1 if w < 0 else d for w, d in zip(want, shapes[j]))
                e.value_shapes = tuple(shapes)
        # Relaxed alike in every tape of this key (tapes agree on a prefix
        # only if they check it alike): a host tensor relaxed once stays so.
        known = self.compiled.host_dynamic.setdefault(self.tape_key, {})
        grew = False
        for n, dims in host_dynamic.items():
            merged = known.get(n, frozenset()) | dims
            if merged != known.get(n):
                known[n], grew = merged, True
        tape = Tape(entries[:limit], end, limit)
        _relax_hosts(tape, known)
        tapes = self.compiled.tapes
        choices = tapes.pop(self.tape_key, [])
        if grew:
            for old in choices:
                _relax_hosts(old, known)
                _chain(old)
        if len(tapes) >= _MAX_TAPES:  # the least recently made goes
            del tapes[next(iter(tapes))]
        _chain(tape)
        tape.blocks = {start: backward.Block(start, stop, call) for start, stop, call in self.b_blocks
                       if stop <= limit and backward.eligible(tape.entries, start, stop)}
        # The new tape first; an identical older one goes.
        tapes[self.tape_key] = [tape] + [t for t in choices if t.signature != tape.signature][:_MAX_TAPES - 1]

    # -- replaying a tape ---------------------------------------------------------------
    def _replay_op(self, func: Any, args: tuple, kwargs: dict) -> Any:
        q = self.pos
        tape = self.tape
        e = tape.entries[q] if q < tape.limit else None
        clone, self._accumulate_clone = self._accumulate_clone, None
        if clone is not None and func is _COPY and len(args) == 2 and args[0] is clone[0] and args[1] is clone[1]:
            return args[0]  # the copy of a gradient taken over (see below): it already is that value
        if func is _NEW_EMPTY_STRIDED and e is not None and e.func is _DETACH and e.engine:
            out = self._replay_taken_over(e, args, kwargs)
            if out is not _MISS:
                return out
        if e is None or not self._fits(e, func, args, kwargs):
            if _TAPE_LOG:
                self._missed = f"{op_info(func).name}" + ("" if e is None or e.func is not func else " (other arguments)")
            if not self._choose_tape(q, lambda c: self._fits(c, func, args, kwargs)):
                return _MISS
            tape = self.tape
            e = tape.entries[q]
        kind = e.kind
        inferred = None
        memo_key = memo_recipes = None
        if e.infer:  # data-dependent sizes: shapes from these arguments
            if e.memo is not None:
                # Shapes that follow the inputs' shapes: recipes kept per input layout.
                memo_key = self._memo_key(e, args, kwargs)
                memo_recipes = e.memo.get(memo_key)
            if memo_recipes is None:
                if e.mask_reads and not self._read_masks(e, args, kwargs):
                    return _MISS
                try:
                    inferred = self._placeholders(func, e.name, args, kwargs)
                except Exception as exc:  # noqa: BLE001 - recorded live, it deviates or raises as it should
                    if _TAPE_LOG:
                        self._missed = f"{e.name} whose shape inference failed ({exc})"
                    return _MISS
                if e.memo is None:  # a boolean mask's count: a new data-dependent size
                    self.layout.append(tuple(tuple(t.shape) for t in _flat_tensors_deep(inferred)))
        if kind == "mat":
            return self._replay_answer(q, e, args[0], lambda v: func(v, *args[1:], **kwargs), func, args, kwargs)
        if kind == "rng" and e.mask_reads and not self._read_masks(e, args, kwargs):
            return _MISS  # (the values a random op reads, fetched as recorded)
        value_out = _MISS
        if e.value_shapes is not None:
            # Its results' shapes depend on the values: another shape is
            # another path from here on (no side effects: it runs again live).
            value_out = self._run_host_rng(func, e.name, args, kwargs)
            got = [tuple(t.shape) for t in _flat_tensors_deep(value_out)]
            if len(got) != len(e.value_shapes) or not all(
                    len(g) == len(w) and all(d == x or x < 0 for d, x in zip(g, w))
                    for g, w in zip(got, e.value_shapes)):
                if _TAPE_LOG:
                    self._missed = f"{e.name} whose result has another shape"
                return _MISS
        fwd = self._forward
        if fwd is not None:  # _note_nodes, its common case inline
            if fwd.entry.struct is None and isinstance(fwd.out, torch.Tensor):
                self._forward = None
                fwd.nodes = [grad_fn_of(fwd.out)]
            else:
                self._note_nodes()
        self.pos = q + 1
        self.current_site = e.site
        flat = flat_inputs(args, kwargs) if e.needs_flat else None
        for k in e.feeds:  # a fed value is taken when the op reads it
            t = flat[k]
            self.fed_values[(q, k)] = t.terra_real if isinstance(t, Placeholder) else t
        value = None
        if kind == "rng":
            for k in e.written:
                self._replay_written(flat[k])
            out = self._run_host_rng(func, e.name, args, kwargs) if value_out is _MISS else value_out
            if isinstance(out, Placeholder):
                value = out._terra_real
        elif kind == "pass" or e.real:
            out = func(*args, **kwargs)
        elif memo_recipes is not None:
            out = self._make_results(e, flat, memo_recipes)
        elif inferred is not None:
            out = inferred
            if memo_key is not None and len(e.memo) < MEMO_MAX:
                results = [out] if e.struct is None else list(out) if e.struct in (list, tuple) \
                    else tree_flatten(out)[0]
                recipes, real_made = self._recipe_list(results, flat)
                if not real_made:
                    e.memo[memo_key] = tuple(recipes)
        else:
            out = self._make_results(e, flat)
        if kind == "op":  # (the log replays ops at a deviation; random numbers log their own)
            self.log.append((func, args, kwargs, WeakResults(out, self) if e.engine else out, e.site))
            host = self._host_eval(func, e.name, args, kwargs, out) if e.host_eval else None
            if e.written:
                self._replay_writes(e, flat)
            if host is not None:
                self._host_result = host
                self._apply_host_result()
        if e.relaxed is not None:
            self.relaxed_feeds[q] = relaxed_value(e, args, kwargs)
        self._name_replayed(e, out)
        r = _Replayed(e, func, args, kwargs, out, value, None)
        self.replayed.append(r)
        if not e.engine and kind != "pass":
            self._forward = r
        if e.effects:
            self._emit(e.effects)
        if kind == "op" and e.host_eval and host is None:
            self._leave_fast()  # the host could not compute it this time
        return out

    def _replay_taken_over(self, e: Entry, args: tuple, kwargs: dict) -> Any:
        """AccumulateGrad copying a gradient where the tape took it over.

        The engine makes a new gradient the parameter's `.grad` without a
        copy (`detach`, what the tape has) only when nothing else references
        it; otherwise it copies it (`new_empty_strided` of its own layout,
        then `copy_`). The replay's records reference every result, so a
        replayed step can copy where the recorded one took the gradient
        over. Here the copy's allocation is replayed as the `detach` entry
        (the same value, as the copy would make it) and the `copy_` that
        follows is answered with its target; anything else is a miss."""
        x = args[0] if args else None
        if not isinstance(x, torch.Tensor) or not self._fits(e, _DETACH, (x,), {}):
            return _MISS
        size, stride = _arg_of(args, kwargs, 1, "size"), _arg_of(args, kwargs, 2, "stride")
        dtype = kwargs.get("dtype")
        if (size is None or list(size) != list(x.shape) or stride is None or list(stride) != list(x.stride())
                or (dtype is not None and dtype != x.dtype)):
            return _MISS
        out = self._replay_op(_DETACH, (x,), {})
        if out is _MISS:
            return out
        # The take-over may detach the detached gradient again (torch 1.13
        # with hooks): those entries are the same value too.
        entries, limit = self.tape.entries, self.tape.limit
        while (self.pos < limit and (n := entries[self.pos]).func is _DETACH and n.engine
               and self._fits(n, _DETACH, (out,), {})):
            again = self._replay_op(_DETACH, (out,), {})
            if again is _MISS:
                break
            out = again
        self._accumulate_clone = (out, x)
        return out

    def _fits(self, e: Entry, func: Any, args: tuple, kwargs: dict) -> bool:
        """Whether a call passes entry `e`'s checks (tape.py)."""
        return e.func is func and (e.kind == "pass" or (
            matches(e.spec, args, kwargs, self.idents, self._host_ident)
            and (e.forms is None or self._forms_match(e, func, args, kwargs))))

    def _memo_key(self, e: Entry, args: tuple, kwargs: dict) -> tuple:
        """What an inferred entry's result shapes depend on: every
        data-dependent size this iteration has met so far (`layout`: the
        shapes of relaxed host tensors and of boolean-mask results, in
        order; the same tape prefix with the same sizes gives every value
        the same shape) and its relaxed scalar (fed, so unchecked)."""
        return layout_key(self.layout, e, None if e.relaxed is None else relaxed_arg(e, args, kwargs))

    def _read_masks(self, e: Entry, args: tuple, kwargs: dict) -> bool:
        """The values of the boolean masks the graph computes that a
        replayed index needs for its result's size, fetched as the
        recording did; False if one is not available (the run failed, or a
        value the recording knew is not known now)."""
        flat = flat_inputs(args, kwargs)
        for k, answer in e.mask_reads:
            m = flat[k]
            if not isinstance(m, Placeholder):
                return False
            if m._terra_real is not None:
                continue
            if answer[0] != "fetch":
                return False
            value = self._fetch_point(answer[1], answer[2])
            if value is None:
                return False
            self.graph_reads += 1
            m._terra_real = value
        return True

    def _make_results(self, e: Entry, flat: Optional[list], recipes: Optional[tuple] = None) -> Any:
        outs = []
        for r in e.outs if recipes is None else recipes:
            k = r[0]
            if k == "new":
                ph = _make_wrapper(Placeholder, r[1], strides=r[2], storage_offset=r[3], dtype=r[4],
                                   device=placeholder.DEVICE, requires_grad=False)
                ph._terra_token = Token()
                ph._terra_where = r[5]
                outs.append(ph)
            elif k == "same":
                outs.append(flat[r[1]])
            elif k == "view":
                target = flat[r[1]]
                if isinstance(target, Placeholder):
                    outs.append(view_placeholder(target, r[2], r[3], r[4], r[5], target._terra_token, r[6]))
                else:
                    outs.append(_view_of_real(self, r, target))
            else:  # "value"
                outs.append(r[1])
        struct = e.struct
        if struct is None:
            return outs[0]
        if struct is list:
            return outs
        if struct is tuple:
            return tuple(outs)
        return tree_unflatten(outs, struct)

    def _forget_host_values(self, ts: Any) -> None:
        """Values the host computed for these real tensors' memory are
        stale: they were written (also the native replay's helper)."""
        values, ptrs = self.host_values, self.host_value_ptrs
        if not values:
            return
        for t in ts:
            if ptrs is None or t.data_ptr() in ptrs:
                values.pop(self.key(t), None)

    def _replay_writes(self, e: Entry, flat: list) -> None:
        """Entry `e`'s in-place writes into its flat inputs: a placeholder's
        value is stale, a real tensor's host-computed value too."""
        for k in e.written:
            t = flat[k]
            if type(t) is Placeholder:
                t._terra_real = None
            else:
                self._replay_written(t)

    def _replay_written(self, t: torch.Tensor) -> None:
        if isinstance(t, Placeholder):
            t._terra_real = None
        elif self.host_values:
            self._forget_host_values((t,))

    def _replay_read(self, t: torch.Tensor, kind: str, call: Any) -> Any:
        """A read by a tensor method (`numpy`, `bool`, ...) from the tape."""
        q = self.pos
        tape = self.tape
        e = tape.entries[q] if q < tape.limit else None

        def fits(c: Entry) -> bool:
            return c.kind == "mat" and c.func is None and c.mat_kind == kind and self._ident(t) == c.spec
        if e is None or not fits(e):
            if not self._choose_tape(q, fits):
                return _MISS
            e = self.tape.entries[q]
        return self._replay_answer(q, e, t, call, None, (t,), {"kind": kind})

    def _choose_tape(self, q: int, fits: Callable[[Entry], bool]) -> bool:
        """Another tape of this key that agrees with the current one on
        entries 0..q-1 (checks, results and run effects: what was replayed
        so far is a replay of it too) and whose entry `q` `fits` the call:
        an iteration that takes another branch than its tape replays the
        tape of an earlier iteration that took it."""
        for tape in self._agreeing_tapes(q):
            if tape is not self.tape and tape.limit > q and fits(tape.entries[q]):
                self.tape = tape
                return True
        return False

    def _agreeing_tapes(self, q: int) -> Iterator[Tape]:
        """The current tape, then the other tapes of this key that agree
        with it on entries 0..q-1 (equal digests, `_chain`)."""
        tape = self.tape
        yield tape
        here = tape.entries[q - 1].chain if q else None
        for t in self.tape_choices:
            if t is not tape and (q == 0 or (len(t.entries) >= q and t.entries[q - 1].chain == here)):
                yield t

    def _replay_answer(self, q: int, e: Entry, t: torch.Tensor, call: Any, func: Any, args: tuple,
                       kwargs: dict) -> Any:
        how = e.answer
        what = how[0]
        if what == "known" and (not isinstance(t, Placeholder) or t._terra_real is None):
            return _MISS
        host_value = None
        if what == "updated-host":
            host_value = self.host_values.get(self.key(t))
            if host_value is None:
                return _MISS
        if self._forward is not None:
            self._note_nodes()
        self.pos = q + 1
        self.current_site = e.site
        if e.effects:
            self._emit(e.effects)
        value = None
        if what in ("fetch", "updated-fetch"):
            value = self._fetch_point(how[1], how[2])
            if value is None:  # the run failed: record what was replayed, then deviate
                self._leave_fast()
                self._deviate_after_run_failure()
                value = t._terra_real if isinstance(t, Placeholder) else None
            else:
                self.graph_reads += 1
                if what == "fetch":
                    t._terra_real = value
                else:
                    with self.pause():
                        value = value.reshape(t.shape)
        elif what == "known":
            value = t._terra_real
        elif what == "updated-host":
            self.host_reads += 1
            value = host_value
        self.paused += 1  # (self.pause() without its context manager: reads are frequent)
        try:
            result = call(value if value is not None else t)
        finally:
            self.paused -= 1
        if self.fast:
            self.replayed.append(_Replayed(e, func, args, kwargs, None, value if what == "fetch" else None,
                                           result))
        return result

    def _note_nodes(self) -> None:
        """The autograd nodes of the last replayed forward op's results, as
        the recorder would have found them at this interaction."""
        r, self._forward = self._forward, None
        out, struct = r.out, r.entry.struct
        if struct is None:
            r.nodes = [grad_fn_of(out)] if isinstance(out, torch.Tensor) else []
            return
        r.nodes = [grad_fn_of(o) for o in flat_results(out, struct) if isinstance(o, torch.Tensor)]

    def _emit(self, effects: list) -> None:
        run = self.run
        for eff in effects:
            kind = eff[0]
            if kind == "case":
                run.send_case(eff[1], eff[2])
            elif kind == "loop":
                run.send_loop(eff[1], eff[2])
            else:
                src = eff[2]
                if src[0] == "relaxed":
                    value = self.relaxed_feeds[src[1]]
                else:
                    value = self.fed_values[src[1:]]
                run.feed(eff[1], tensor_spec(value))
            self.sent.append(eff)

    def _leave_fast(self, deviating: Optional[tuple] = None) -> None:
        """Catches up on the entries replayed so far (see tape.py): records
        them as they would have been recorded live, checks the Cursor
        decides what the replay sent, and sends what it decides beyond it.

        A replay runs without the loop hook (loops.LoopCounter.defer): it
        starts here, its counts going on from the tape's (LoopCounter.
        start_late). Where they cannot be known, the iteration goes on
        eagerly, its trace is not merged (`unmerged`), and later replays
        with these argument shapes count loops from their start
        (`loop_hook_keys`). `deviating`: (reason, site) of the deviation
        that leaves the tape, if one does."""
        if not self.fast:
            return
        counter = self.loop_counter
        uncounted = False
        if counter.deferred:
            uncounted = not self._count_loops_from_here(sys._getframe(1))
        self._catch_up_on_tape()
        if uncounted:
            self._deviate_unmerged(*(deviating or (
                "the replay left its tape inside a loop whose iteration it could not tell "
                "(loops are counted from the step's start from now on)", self.current_site)))

    def _count_loops_from_here(self, frame: Any) -> bool:
        """Starts the loop hook where the replay leaves its tape, going on
        from the counts of the tape's last entry replayed (loops.
        LoopCounter.start_late); False if they cannot be known."""
        raw: list = []
        _, reached = capture(frame, self.stop, raw)
        entries = self.tape.entries[:self.pos]
        issued = max((lv.activation for e in entries for lv in (e.loops or ())), default=0)
        last = following = None
        if entries:
            e = entries[-1]
            # A backward op's site is its forward op's, not a stack.
            last = (None if e.engine else e.site, e.loops or ())
        if self.pos < len(self.tape.entries):
            e = self.tape.entries[self.pos]
            following = (None if e.engine else e.site, e.loops or ())
        return self.loop_counter.start_late(frame, raw if reached else [], last, following, issued)

    def _deviate_unmerged(self, reason: str, site: Any) -> None:
        """Deviates without merging the iteration's trace: its loop contexts
        may be wrong (see _leave_fast). Replays with the same argument
        shapes count loops from their start from now on."""
        self.compiled.loop_hook_keys.add(self.tape_key)
        if self.deviation is None:
            self.unmerged = True
            self._deviate(reason, site)

    def _catch_up_on_tape(self) -> None:
        if self.deferred:
            backward.expand(self)
        self.fast = False
        entries = self.tape.entries
        expected = entries[self.pos] if self.pos < len(entries) else None
        # The backward passes replayed so far are passes of the tape this
        # iteration leaves too (backward.py).
        self.b_blocks = [(b.start, b.end, b.call) for b in self.tape.blocks.values() if b.end <= self.pos]
        if self.eager_threads and self.deviation is None and torch.get_num_threads() != 1:
            torch.set_num_threads(1)  # recording computes on the host (function._host_threads)
        if self._forward is not None:
            self._note_nodes()
        if _TAPE_LOG:
            e = self.tape.entries[self.pos] if self.pos < len(self.tape.entries) else None
            want = "the end" if e is None else f"{e.kind} {e.name or e.mat_kind} at {user_line(e.site)}"
            got, self._missed = self._missed, ""
            print(f"[terra] tape left at entry {self.pos} of {len(self.tape.entries)}: expected {want}"
                  + (f", got {got}" if got else ""),
                  file=sys.stderr, flush=True)
        replayed, self.replayed = self.replayed, []
        for r in replayed:  # values are recomputed in order
            if r.out is not None:
                for o in ([r.out] if isinstance(r.out, torch.Tensor) else tree_flatten(r.out)[0]):
                    if isinstance(o, Placeholder):
                        o._terra_real = None
        self.host_values.clear()
        # (A copy first: a dying result's callback (_Forget) may remove an
        # identity while this runs.)
        self.idents = {k: v for k, v in self.idents.copy().items() if v[0] in ("state", "arg", "host")}
        reads = (self.graph_reads, self.host_reads)
        self.replaying = []
        # Recorded as inside __torch_dispatch__: with this mode off (the
        # recorder's own torch calls must not come back to it).
        outside = self.mode_on()
        if outside:
            self.mode_off()
        try:
            for r in replayed:
                self._forced = r
                try:
                    if r.func is None:
                        self.materialize(r.args[0], r.kwargs["kind"], None, r.entry.site)
                    else:
                        self._dispatch(r.func, r.args, r.kwargs)
                finally:
                    self._forced = None
                if self.deviation is not None:
                    break
        finally:
            if outside:
                self.mode_back()
            decided, self.replaying = self.replaying, None
            self.graph_reads, self.host_reads = reads
        known = expected.engine_sites if expected is not None and expected.engine else ()
        if known and isinstance(known[0], Site):
            # Left inside the engine: the node running now has no post hook
            # that will fire (sites.BackwardSites.expect_running).
            self.backward.resolve()
            self.backward.expect_running(known[0])
        if self.deviation is not None:
            return
        sent = self.sent
        same = len(decided) >= len(sent) and all(
            d[:2] == s[:2] and (d[0] == "feed" or d[2] == s[2]) for (d, _), s in zip(decided, sent))
        if not same:
            self._deviate("the host left the recorded path where the replayed signals no longer hold")
            return
        for effect, value in decided[len(sent):]:
            self._send_now(effect, value)

    def _replay_end(self, result: Any) -> Optional[Any]:
        """The end of a fully replayed iteration, or None if it differs
        from the tape's."""
        tape = self.tape
        end = tape.end
        if end is None or self.pos != len(tape.entries):
            # Another tape that agrees so far and ends here.
            q = self.pos
            here = tape.entries[q - 1].chain if q and q <= len(tape.entries) else None
            tape = next((t for t in self.tape_choices if t is not tape and t.end is not None
                         and len(t.entries) == q and (q == 0 or t.entries[q - 1].chain == here)), None)
            if tape is None:
                return None
            self.tape, end = tape, tape.end
        flat = list(_flat_tensors_deep(result))
        if [self._ident(t) for t in flat] != end.result:
            return None
        registry = self.registry
        slots, held = registry.slot_values()
        checks = end.end_checks()
        if not checks.complete:
            return None
        if checks.generation != registry.generation:
            if [s.name for s in slots] != checks.names:
                return None
            checks.generation = registry.generation
        known, ident = self.idents.get, self._ident
        if [None if t is None else (known(id(t)) or ident(t)) for t in held] != checks.idents:
            return None
        self._emit(end.effects)
        self.run.finish_host()
        if self.serialized:
            self.run.start()
        # No user code runs from the check above on: the slots hold these.
        # What the commit copies is planned before the wait, off the
        # critical path of a graph that is still running.
        plan = self._commit_plan(end.commits, [held[k] for k in checks.commit_at])
        status = self._wait_run()
        self.run_result = status
        if status[0] != "ok":
            return self._replay_end_failed(result)
        with self.pause():  # once for all the end's fetches
            # Every value is fetched before the state is written (all of it
            # or none: a failure deviates, replaying from the old state).
            returns = [self.run.fetch(fid, inst) for _, fid, inst in end.returns]
            late = None if any(a is None for a in returns) else self._commit_direct(plan)
            if late is None:
                return self._replay_end_failed(result)
            # Published (fetch_into saw every commit), so no fetch fails now.
            by_name = {s.name: s for s in slots} if late or end.dropped else {}
            for name, fid, inst in late:
                by_name[name].set(to_torch(self.run.fetch(fid, inst)))
            returns = [to_torch(arr) for arr in returns]
        for name in end.dropped:
            by_name[name].set(None)
        for (i, _, _), v in zip(end.returns, returns):
            if flat[i]._terra_real is None:
                flat[i]._terra_real = v
        run, replayed = self.run, self.replayed  # entry q was replayed as replayed[q]
        for where, (fid, inst) in end.escapes.items():
            if not (isinstance(where, tuple) and len(where) == 2 and isinstance(where[0], int)):
                continue
            if replayed[where[0]] is None:
                continue  # a result of a pass replayed whole: nothing could keep it (backward._needed)
            out = replayed[where[0]].out
            flat = (out,) if isinstance(out, torch.Tensor) else tree_flatten(out)[0]
            o = flat[where[1]] if where[1] < len(flat) else None
            if isinstance(o, Placeholder) and o._terra_real is None and o._terra_resolve is None:
                resolve_later(o, run, fid, inst)
        self.log.clear()
        self.keepalive.clear()
        return self.trace

    def _wait_run(self) -> tuple:
        """Waits for the run to end; the time counts as host stall (the
        host waits for the graph, as at a fetch)."""
        self.retired = None  # the previous step's records, freed while the graph finishes
        start = time.perf_counter()
        status = self.run.wait()
        self.end_wait_s += time.perf_counter() - start
        return status

    def _commit_plan(self, commits: list, held: list) -> tuple:
        """Which of the run's final state values can be copied straight
        into the program's tensors (Run.fetch_into: one native call, no
        torch op, so no parallel region of torch's on the host), as
        (direct commits with their tensors, fetch_into's items, the
        commits left to the slots' setters: a slot without a plain CPU
        tensor). `held`: what each commit's slot holds. A CUDA graph's
        values are on the device, and the direct copy is a host one: its
        commits all go to the setters (Tensor.copy_), the program's CPU
        tensors among them (Adam's `step` counters: a device-to-device
        copy into host memory failed on the H200)."""
        if self.compiled.graph_device == "cuda":
            return [], [], list(commits)
        return commit_plan(commits, held, self.state_specs)

    def _commit_direct(self, plan: tuple) -> Optional[list]:
        """Commits what `_commit_plan` found can be copied directly. Each
        tensor written gets its autograd version bumped (bump_versions),
        as eager's in-place updates do: autograd checks saved
        tensors' versions. Returns the commits left to the slots' setters
        (the plan's, and a value of another dtype or shape), or None if a
        value was never published (then nothing was written)."""
        direct, items, late = plan
        if not direct:
            return late
        copied = self.run.fetch_into(items)
        if copied is None:
            return None
        late = list(late)
        written = []
        for (c, t), ok in zip(direct, copied):
            if ok:
                written.append(t)
            else:
                late.append(c)
        bump_versions(written)
        return late

    def _replay_end_failed(self, result: Any) -> Any:
        """The graph failed while a replayed iteration ended: record the
        iteration, then deviate as a recorded one would."""
        self._leave_fast()
        self.record_return(result)
        trace = self.finish()
        self._deviate_after_run_failure()
        self.log.clear()
        return trace


def commit_plan(commits: list, held: list, specs: dict) -> tuple:
    """TapeRecorder._commit_plan for a CPU graph: a commit (slot name,
    fetch point, instance) whose slot holds a plain CPU tensor (`held`) is
    direct, with the spec its tensor crossed with at the start (`specs`)
    when that is the same tensor on the same memory (`p.data = x` bypasses
    dispatch), else a new one; the rest go to the slots' setters. In one
    native call where the dispatch hook is built (TensorState.cpp: the
    Python loop cost Faster R-CNN's end ~80-180 us, reading each tensor's
    type, device and data pointer through Python)."""
    native = native_module.optional_function("commit_plan", dispatch=True)
    if native is not None and type(commits) is list and type(held) is list:
        return native(commits, held, specs, tensor_spec)
    return python_commit_plan(commits, held, specs)


def python_commit_plan(commits: list, held: list, specs: dict) -> tuple:
    """commit_plan without the native module (and its specification)."""
    direct, items, late = [], [], []
    plain = (torch.Tensor, torch.nn.Parameter)
    for c, cur in zip(commits, held):
        if cur is None or type(cur) not in plain or not cur.is_cpu or cur.layout is not torch.strided:
            late.append(c)
        else:
            direct.append((c, cur))
            spec = specs.get(c[0])
            if spec is None or spec[4] is not cur or spec[0] != cur.data_ptr():
                spec = tensor_spec(cur)
            items.append((c[1], c[2], spec))
    return direct, items, late


def bump_versions(tensors: list) -> None:
    """Bumps each tensor's autograd version, as an in-place op does: in
    one native call where the dispatch hook is built (TensorState.cpp),
    else by a no-op copy each (`t.copy_(t)`, ~1 us of dispatch)."""
    hook = native_module.optional_function("bump_versions", dispatch=True)
    if hook is not None:
        hook(tensors)
        return
    with torch.no_grad():
        for t in tensors:
            t.copy_(t)


def _prune_host_evals(entries: list[Entry]) -> None:
    """A replay computes a tiny op's value on the host only if a read the
    host answers itself needs it (directly or through other such ops):
    e.g. an optimizer's step counter, not every bias gradient of a narrow
    model."""
    needed: set = set()
    for e in entries:
        if e.kind == "mat" and e.answer is not None and e.answer[0] in ("known", "updated-host"):
            needed.add(e.spec if e.func is None else tensor_idents(e.spec)[0])
        elif e.mask_reads and e.spec is not None:  # an op's own reads (a mask's, a host op's values)
            inputs = tensor_idents(e.spec)
            needed.update(inputs[k] for k, answer in e.mask_reads if answer[0] == "known" and k < len(inputs))
    for q in range(len(entries) - 1, -1, -1):
        e = entries[q]
        if not e.host_eval or e.kind != "op":
            continue
        inputs = tensor_idents(e.spec)
        made = {(q, j) if r[0] != "same" else inputs[r[1]] for j, r in enumerate(e.outs)}
        made.update(inputs[k] for k in e.written)
        if made & needed:
            needed.update(inputs)
        else:
            e.host_eval = False


_make_wrapper = torch.Tensor._make_wrapper_subclass  # Placeholder.make, inlined in the replay


def _view_of_real(ex: TapeRecorder, r: tuple, target: torch.Tensor) -> Placeholder:
    """A "view" recipe's result on a real tensor: a placeholder with the
    identity the real view would have (its memory's token and base)."""
    return view_placeholder(target, r[2], r[3], r[4], r[5], ex._token_of(target), r[6], ex.base(target))


def form_operands(func: Any, args: tuple, kwargs: dict) -> list:
    """An op's tensor operands in schema order (tracing._operands), which
    the symbolic sizes of its forms refer to (sizes.SymDim)."""
    tensors: list = []
    for _, v in passed_args(op_info(func).args, args, kwargs):
        if isinstance(v, torch.Tensor):
            tensors.append(v)
        elif isinstance(v, (list, tuple)):
            tensors.extend(x for x in v if isinstance(x, torch.Tensor))
    return tensors


def _view_strides(x: Any, size: Any) -> Optional[list]:
    """The strides of `x.view(size)` (what reshape passes `_reshape_alias`),
    from metadata only; None if it is no view."""
    if not isinstance(x, torch.Tensor) or not isinstance(size, (list, tuple)):
        return None
    try:
        meta = torch.empty_strided(tuple(x.shape), tuple(x.stride()), dtype=x.dtype, device="meta")
        return list(meta.view(list(size)).stride())
    except RuntimeError:
        return None


def _relax_hosts(tape: Tape, dynamic: dict) -> None:
    """The checks of a tape's host tensors fed with dynamic dims, relaxed
    (tape.relax_host_shapes)."""
    if dynamic:
        for e in tape.entries:
            if e.kind != "mat" and e.spec is not None:
                e.spec = relax_host_shapes(e.spec, dynamic)


def _chain(tape: Tape) -> None:
    """Each entry's `chain`: a digest of the entries up to it (what they
    check, how they make results, what they send and answer, their sites
    and loop contexts, which a catch-up records), so two tapes
    whose entries agree up to `q` are told from the digests at `q`; the
    tape's `signature` also covers its end."""
    h = 0
    for q, e in enumerate(tape.entries):
        e.ids = tuple(None if r[0] == "same" else (q, j) for j, r in enumerate(e.outs))
        e.needs_flat = bool(e.written or e.feeds or e.struct is not None or len(e.outs) != 1
                            or e.outs[0][0] in ("same", "view") or e.infer)
        e.real = any(r[0] == "real" for r in e.outs)
        # Size forms the native replay checks itself: symbolic entries over
        # the op's operands and a view's strides (not sizes of values that
        # are not operands), with the op's arguments in schema order.
        e.native_forms = None
        if e.forms is not None and all(not extra for form, extra in e.forms.values()):
            e.native_forms = (tuple((k, form) for k, (form, _) in e.forms.items()), op_info(e.func).args)
        # Entries the native replay takes: results from the recipe, or from
        # the recipes memoized for the current layout of data-dependent sizes.
        e.makeable = (e.kind == "op" and not (e.real or e.mask_reads)
                      and (not e.infer or e.memo is not None)
                      and all(r[0] in ("new", "same", "view", "value", "infer") for r in e.outs)
                      and (e.struct is None or e.struct is list or e.struct is tuple
                           or (type(e.struct) is LeafSpec and len(e.outs) == 1)))
        # (The native replay keys memoized recipes by the layout alone.)
        e.plain = e.makeable and not (e.infer and e.relaxed is not None)
        # Ops the graph does not have, run on the host as they are (the
        # profiler handle `record_function` makes in zero_grad and step):
        # checked by the op alone (_fits), no feeds, results named.
        native_pass = (e.kind == "pass" and not (e.feeds or e.infer or e.written) and e.relaxed is None
                       and e.func not in (_COPY, _NEW_EMPTY_STRIDED)
                       and (e.struct is None or e.struct is list or e.struct is tuple))
        e.native = tuple(getattr(e, f) for f in _NATIVE_FIELDS) + (native_pass,) \
            if e.plain or native_pass else None
        h = hash((h, e.func, e.kind, e.mat_kind, repr(e.spec), repr(e.outs), repr(e.effects), repr(e.answer),
                  e.written, e.feeds, e.host_eval, repr(e.relaxed), e.site, repr(e.loops), e.engine_sites,
                  repr(e.forms), repr(e.mask_reads)))
        e.chain = h
    end = tape.end
    tape.signature = (h, tape.limit, None if end is None else repr(
        (end.effects, end.slots, end.dropped, end.commits, end.returns, end.result)))


class _Replayed:
    """An entry replayed in this iteration, for catching up on it."""

    __slots__ = ("entry", "func", "args", "kwargs", "out", "value", "result", "nodes")

    def __init__(self, entry: Entry, func: Any, args: tuple, kwargs: dict, out: Any, value: Any, result: Any):
        self.entry, self.func, self.args, self.kwargs = entry, func, args, kwargs
        self.out, self.value, self.result = out, value, result
        # The autograd nodes of a forward op's results, as the next
        # interaction found them (a later in-place op replaces grad_fn).
        self.nodes: Optional[list] = None

    # What the recorder takes from the entry when catching up (tracing.py).
    site = property(lambda self: self.entry.site)
    reached = property(lambda self: self.entry.reached)
    loops = property(lambda self: self.entry.loops)
    engine_sites = property(lambda self: self.entry.engine_sites)


_MISS = object()
# DirectMode.fast's answer to the dispatch hook: run this op yourself
# (DispatchHook.cpp), then hand its results to DirectMode.ran.
_RUN_HERE = object()
# An entry's attributes the native replay reads, in the order of
# NativeReplay.cpp's EntryField (Entry.native, which adds whether the entry
# is a pass): set once the tape is made, when entries no longer change.
_NATIVE_FIELDS = ("spec", "forms", "native_forms", "outs", "infer", "memo", "needs_flat", "feeds", "site",
                  "struct", "engine", "host_eval", "name", "written", "relaxed", "ids", "effects")
_DETACH = torch.ops.aten.detach.default
_COPY = torch.ops.aten.copy_.default
_NEW_EMPTY_STRIDED = torch.ops.aten.new_empty_strided.default


def _arg_of(args: tuple, kwargs: dict, i: int, name: str) -> Any:
    return args[i] if len(args) > i else kwargs.get(name)


def _native_replay() -> Optional[Callable]:
    """The native replay of plain entries (python/src/NativeReplay.cpp),
    configured with this module's classes; None without the native module
    or with TERRA_NATIVE_REPLAY=0 (every entry replayed in Python)."""
    if os.environ.get("TERRA_NATIVE_REPLAY", "1") == "0":
        return None
    from . import native  # noqa: PLC0415 - the module is built with the front end
    try:
        module = native.load()
    except native.NativeModuleMissing:
        return None
    module.replay_configure({"Placeholder": Placeholder, "Token": Token, "Replayed": _Replayed,
                             "Tensor": torch.Tensor, "LeafSpec": LeafSpec, "make_wrapper": _make_wrapper,
                             "match": _match,
                             "view_real": _view_of_real, "relaxed_value": relaxed_value, "SymDim": sizes.SymDim,
                             "miss": _MISS, "run_here": _RUN_HERE, "WeakResults": WeakResults, "element_types": ELEMENT_TYPES})
    return module.replay_plain


_MAX_TAPES = 16  # per compiled graph
# TERRA_TAPE=0 records every co-executed iteration (for comparisons).
_TAPES_ENABLED = os.environ.get("TERRA_TAPE", "1") != "0"
# TERRA_LOG=tape also says where each iteration leaves its tape.
_TAPE_LOG = "tape" in os.environ.get("TERRA_LOG", "").split(",")
# The native replay of plain entries (None: all in Python); tests may patch it.
NATIVE_REPLAY = _native_replay()
