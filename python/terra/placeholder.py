"""Placeholders: the tensors the host program sees during co-execution.

A placeholder has the shape, strides, dtype and device of the value the
graph computes, but no data (spec 4.1). The host runs the user's step on
placeholders while the graph computes the values; autograd and optimizers
work on them as on any tensor, because every op on them goes to the
co-executor (a TorchDispatchMode) while the step runs.

A placeholder gets its value (`real`) in one of three ways: the host reads
it and the graph publishes it (a fetch), the iteration deviates from the
graph and the ops recorded so far are replayed eagerly, or it escapes the
step and is read later from its run's fetches. Once it has a value it
behaves as that value, so a placeholder that outlives the step is a normal
tensor to the rest of the program.
"""
from __future__ import annotations

from typing import Any, Callable, Optional

import torch
from torch.utils._pytree import tree_map

# What a placeholder without a value does when an op needs its data outside
# the co-executor; set by the front end: (placeholder) -> real tensor.
Resolver = Callable[["Placeholder"], torch.Tensor]


class ValueUnavailable(RuntimeError):
    """A placeholder's value is needed but the graph never published it."""


class Token:
    """The identity of a placeholder's memory: views share their base's."""

    __slots__ = ("__weakref__",)


# The device of the placeholders a co-executed step makes: the device of the
# function's graph (`terra.function(device=...)`), so that a program sees
# the devices eager would give it. One step runs at a time (function.
# _run_step), and set_device sets it when one starts.
DEVICE = torch.device("cpu")


def set_device(device: str) -> None:
    """Makes placeholders on `device` from now on (the native replay too)."""
    global DEVICE
    want = torch.device(device)
    if want.type == "cuda" and want.index is None:
        # Graphs run on device 0, where the program's tensors are (cuda:0).
        # An index-less device would not do: the autograd engine asserts
        # a device index when a backward reaches a placeholder (found on an
        # H100, session 19: "device_ready_queues_" INTERNAL ASSERT).
        want = torch.device("cuda", 0)
    if DEVICE == want:
        return
    DEVICE = want
    try:
        from . import native  # noqa: PLC0415 - built with the front end
        module = native.load()
    except ImportError:
        return
    if hasattr(module, "replay_set_device"):
        try:
            module.replay_set_device(DEVICE)
        except RuntimeError:
            pass  # the native replay is not configured (TERRA_NATIVE_REPLAY=0)


class Placeholder(torch.Tensor):
    """A tensor whose value the graph computes (see the module docstring)."""

    # Ops must reach __torch_dispatch__ with the placeholder itself, and
    # results must not be converted to this class by __torch_function__.
    __torch_function__ = torch._C._disabled_torch_function_impl

    @staticmethod
    def __new__(cls, meta: torch.Tensor, token: Optional[Token] = None, device: Any = None,
                offset: Optional[int] = None):
        return cls.make(meta.shape, meta.stride(), meta.storage_offset() if offset is None else offset,
                        meta.dtype, token, device)

    @classmethod
    def make(cls, shape: tuple, stride: tuple, offset: int, dtype: torch.dtype,
             token: Optional[Token] = None, device: Any = None) -> "Placeholder":
        """A placeholder from its metadata (no meta tensor needed), on
        `device` (default: the co-executed function's, `set_device`)."""
        r = torch.Tensor._make_wrapper_subclass(cls, shape, strides=stride, storage_offset=offset,
                                                dtype=dtype, device=device or DEVICE, requires_grad=False)
        r._terra_token = token if token is not None else Token()
        return r  # the other attributes start as the class defaults below

    # Defaults of the per-placeholder attributes (set on an instance when
    # they change; a replay makes many placeholders).
    # A view of real memory (e.g. `w.t()` of a parameter) is identified like
    # the real view would be: its address and its base's identity.
    _terra_addr = None
    _terra_base = None
    _terra_key = None  # the recorder's identity, cached (tracing.key)
    _terra_sig = None  # the meta cache's view of it (coexec._signature)
    _terra_real = None
    _terra_resolve = None  # () -> torch.Tensor, for escaped values
    _terra_where = ""  # the op that produced it, for errors

    def __repr__(self, *, tensor_contents: Any = None) -> str:  # noqa: D105
        if _recording():
            return torch.Tensor.__repr__(self, tensor_contents=tensor_contents)
        if self._terra_real is None and self._terra_resolve is None:
            return f"<terra placeholder {self.dtype} {list(self.shape)} without a value>"
        return repr(self.terra_real)

    # Conversions that torch refuses for tensor subclasses read the value.
    # Inside a step they go through the recorder's materialization hook
    # installed on torch.Tensor (a fetch from the graph).
    def numpy(self, *args: Any, **kwargs: Any) -> Any:  # noqa: D102
        if _recording():
            return torch.Tensor.numpy(self, *args, **kwargs)
        return self.terra_real.numpy(*args, **kwargs)

    def tolist(self) -> Any:  # noqa: D102
        if _recording():
            return torch.Tensor.tolist(self)
        return self.terra_real.tolist()

    def __array__(self, *args: Any) -> Any:  # noqa: D105
        if _recording():
            return torch.Tensor.__array__(self, *args)
        return self.terra_real.__array__(*args)

    @property
    def terra_real(self) -> torch.Tensor:
        """The value, fetching it from its graph run if needed."""
        if self._terra_real is None:
            resolve = self._terra_resolve
            if resolve is None:
                raise ValueUnavailable(
                    f"the value of a tensor computed inside a terra.function step ({self._terra_where}) "
                    "is not available: it left the step without being returned or read there, and "
                    "the graph did not publish it. Return it from the step, or read it inside the step.")
            self._terra_real = resolve()
        return self._terra_real

    @classmethod
    def __torch_dispatch__(cls, func: Any, types: Any, args: tuple = (), kwargs: Optional[dict] = None) -> Any:
        # Reached only where no co-executor intercepts the op (after the
        # step, after a deviation, or paused): run it on the values.
        kwargs = kwargs or {}
        reals: dict[int, Placeholder] = {}

        def unwrap(x: Any) -> Any:
            if isinstance(x, Placeholder):
                r = x.terra_real
                reals[id(r)] = x
                return r
            return x

        out = func(*tree_map(unwrap, args), **tree_map(unwrap, kwargs))
        if func in INPLACE_VIEWS and isinstance(args[0], Placeholder):
            restride(args[0], args[0].terra_real)  # `x.t_()` changed the value's metadata
        # An op that returns its (written) argument returns the placeholder.
        return tree_map(lambda o: reals.get(id(o), o) if isinstance(o, torch.Tensor) else o, out)


# In-place view ops (they change their argument's sizes and strides) -> the
# view op computing the same view: the recorder records `x.t_()` as `t(x)`,
# and `x` takes the view's metadata (restride).
INPLACE_VIEWS = {torch.ops.aten.t_.default: torch.ops.aten.t.default,
                 torch.ops.aten.transpose_.default: torch.ops.aten.transpose.int,
                 torch.ops.aten.unsqueeze_.default: torch.ops.aten.unsqueeze.default,
                 torch.ops.aten.squeeze_.default: torch.ops.aten.squeeze.default,
                 torch.ops.aten.squeeze_.dim: torch.ops.aten.squeeze.dim,
                 torch.ops.aten.as_strided_.default: torch.ops.aten.as_strided.default}


def view_placeholder(target: torch.Tensor, shape: Any, stride: Any, rel: int, dtype: torch.dtype,
                     token: Token, where: str, real_base: Optional[tuple] = None) -> Placeholder:
    """A placeholder viewing `target`'s memory (`token`) at `rel` elements
    from `target`'s offset; a view of real memory keeps the address and
    base identity the real view would have (`real_base`: `target`'s)."""
    ph = Placeholder.make(shape, stride, target.storage_offset() + rel, dtype, token)
    if isinstance(target, Placeholder):
        addr, ph._terra_base = target._terra_addr, target._terra_base
    else:
        addr, ph._terra_base = target.data_ptr(), real_base
    if addr is not None:
        ph._terra_addr = addr + rel * ph.element_size()
    ph._terra_where = where
    return ph


def restride(x: torch.Tensor, like: torch.Tensor) -> None:
    """Gives `x` the sizes, strides and storage offset of `like`, a view of
    its memory, in place: what an in-place view op (`t_`, `unsqueeze_`,
    ...) does to its argument. A placeholder has no storage of its own:
    its metadata is set with torch's Python dispatch off, so the op's
    kernel changes the wrapper itself, and the recorder's cached identity
    is dropped (its value, if any, is `like`'s)."""
    args = (x, tuple(like.shape), tuple(like.stride()), like.storage_offset())
    if not isinstance(x, Placeholder):
        torch.ops.aten.as_strided_.default(*args)
        return
    guard = torch._C.ExcludeDispatchKeyGuard(torch._C.DispatchKeySet(torch._C.DispatchKey.Python))
    try:
        torch.ops.aten.as_strided_.default(*args)
    finally:
        del guard
    x._terra_key = x._terra_sig = None
    if isinstance(like, Placeholder):
        x._terra_addr, x._terra_base, x._terra_real = like._terra_addr, like._terra_base, like._terra_real
    else:
        x._terra_real = like


def _recording() -> bool:
    from . import tracing  # noqa: PLC0415 - tracing imports this module
    return tracing._ACTIVE is not None


def real(x: Any) -> Any:
    """`x` with every placeholder in it replaced by its value."""
    return tree_map(lambda t: t.terra_real if isinstance(t, Placeholder) else t, x)

