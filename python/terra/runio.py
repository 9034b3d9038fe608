"""How tensors cross between the Python host and a graph run (the native
runtime's channels): no copies either way. A CUDA graph's fetches stay on
the device and arrive as DLPack capsules; a CPU graph's as numpy arrays."""
from __future__ import annotations

from typing import Any

import numpy as np
import torch
import torch.utils.dlpack

from . import native as _native
from .mlir_text import ELEMENT_TYPES, element_type


def tensor_spec(t: torch.Tensor) -> tuple:
    """How a tensor crosses to the runtime: no copy, kept alive by `t`.
    (Every state tensor crosses at the start and at the commit of each
    iteration: the size and stride tuples go as they are, and the element
    type is one dictionary lookup; `list()` copies and a call per dtype
    made this 6x slower.)"""
    element = ELEMENT_TYPES.get(t.dtype)
    if element is None:
        element_type(t.dtype)  # raises, naming the dtype
    return (t.data_ptr(), element, t.shape, t.stride(), t)


def tensor_specs(tensors: list, previous: list | None = None) -> list:
    """[tensor_spec(t) for t in tensors], in one native call where the
    native modules are built. The dispatch hook's (TensorState.cpp)
    reads the tensors' C++ side (their Python methods cost ~0.8 us per
    tensor in place) and returns a spec of `previous` (the last call's
    list, same order) again where it still describes its tensor (the same
    object, data pointer, sizes, strides and element type): the runtime
    reuses what it read from a spec it has seen (Graph.new_run,
    Run.fetch_into). Without the hook, StateWalk.cpp's, through the
    tensors' Python methods (~0.5 us per tensor in Python)."""
    reusing = _native.optional_function("tensor_specs", dispatch=True)
    if reusing is not None:
        return reusing(tensors, ELEMENT_TYPES, previous, tensor_spec)
    native = _native.optional_function("tensor_specs")
    if native is None:
        return [tensor_spec(t) for t in tensors]
    specs = native(tensors, ELEMENT_TYPES)
    if None in specs:  # a dtype with no element type: raise, naming it
        return [tensor_spec(t) for t in tensors]
    return specs


def to_torch(value: Any) -> torch.Tensor:
    """A fetched value (`Run.fetch`) as a tensor viewing the runtime's
    buffer: a numpy array from a CPU graph ((array of its bits,
    "bfloat16") for bfloat16), a DLPack capsule (a CUDA tensor) from a
    CUDA graph, or (capsule, "bool") for a bool one."""
    if isinstance(value, np.ndarray):
        return torch.from_numpy(value)
    if isinstance(value, tuple):
        if value[1] == "bfloat16":  # (int16 array of its bits, "bfloat16"): numpy has no bfloat16
            return torch.from_numpy(value[0]).view(torch.bfloat16)
        # (capsule of uint8, "bool"): DLPack before kDLBool
        return torch.utils.dlpack.from_dlpack(value[0]).view(torch.bool)
    return torch.utils.dlpack.from_dlpack(value)


def resolve_later(o: Any, run: Any, fid: int, inst: int) -> None:
    """Gives placeholder `o`, which may be read after its finished step, the
    value fetch point `fid` published, converted when it is read. The
    published buffer is taken now: holding the run instead would keep every
    buffer it published alive for as long as `o` lives (a history of losses
    would keep every step's state)."""
    value = run.fetch(fid, inst)
    if value is not None:
        o._terra_resolve = lambda value=value: to_torch(value)
