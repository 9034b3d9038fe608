"""MLIR textual syntax for what the tracer records: tensor types, `args`
attributes and call-stack locations.

The tracer writes MLIR text directly (there are no MLIR Python bindings on
the project machines, see TOOLCHAIN.md), so everything it prints must parse
with `terra-opt` exactly as the JSON importer (`terra-translate
--import-trace`) would have built it: the same attribute kinds for args and
the same location shape for sites (docs/trace-format.md).
"""
from __future__ import annotations

import math
import struct
from typing import Any, Sequence

import torch

from .sizes import SymDim

# torch dtype -> MLIR element type (and the dtype name used in `args`).
ELEMENT_TYPES: dict[torch.dtype, str] = {
    torch.float32: "f32",
    torch.float64: "f64",
    torch.float16: "f16",
    torch.bfloat16: "bf16",
    torch.int64: "i64",
    torch.int32: "i32",
    torch.int16: "i16",
    torch.int8: "i8",
    torch.uint8: "ui8",
    torch.bool: "i1",
}


class UnsupportedValue(TypeError):
    """A value the recording conventions cannot express (complex dtype,
    an exotic Python object as an op argument, ...)."""


def element_type(dtype: torch.dtype) -> str:
    """The MLIR element type of a torch dtype; raises for unsupported ones."""
    try:
        return ELEMENT_TYPES[dtype]
    except KeyError:
        raise UnsupportedValue(f"dtype {dtype} has no MLIR element type here") from None


def tensor_type(dtype: torch.dtype, shape: Sequence[int]) -> str:
    """`tensor<2x3xf32>` (rank 0: `tensor<f32>`; a negative size is a
    dynamic dim, `?`)."""
    return "tensor<" + "".join("?x" if d < 0 else f"{d}x" for d in shape) + element_type(dtype) + ">"


def string_literal(s: str) -> str:
    """An MLIR string literal: quotes, backslashes and non-printable bytes escaped."""
    out = []
    for byte in s.encode("utf-8"):
        c = chr(byte)
        if c in ('"', "\\") or byte < 0x20 or byte >= 0x7F:
            out.append(f"\\{byte:02X}")
        else:
            out.append(c)
    return '"' + "".join(out) + '"'


def float_literal(v: float) -> str:
    """An f64 literal that round-trips exactly (hex bits for inf/nan)."""
    if math.isnan(v) or math.isinf(v):
        bits = struct.unpack("<Q", struct.pack("<d", v))[0]
        return f"0x{bits:016X}"
    r = repr(float(v))
    if "e" in r and "." not in r.split("e")[0]:  # MLIR needs a '.' before the exponent
        mant, exp = r.split("e")
        r = f"{mant}.0e{exp}"
    return r


def attribute(value: Any) -> str:
    """A Python argument value as an MLIR attribute (the `args` conventions:
    bool -> BoolAttr, int -> i64, float -> f64, str -> StringAttr, list ->
    ArrayAttr, None -> unit, torch.dtype -> its element type name, a
    symbolic size -> `#terra.dim<operand, dim>`)."""
    if value is None:
        return "unit"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        if not -(2**63) <= value < 2**63:
            raise UnsupportedValue(f"integer {value} does not fit in 64 bits")
        return f"{value} : i64"
    if isinstance(value, float):
        return f"{float_literal(value)} : f64"
    if isinstance(value, str):
        return string_literal(value)
    if isinstance(value, torch.dtype):
        return string_literal(element_type(value))
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(attribute(v) for v in value) + "]"
    if isinstance(value, SymDim):
        return value.mlir()
    raise UnsupportedValue(f"cannot express {type(value).__name__} {value!r} as an MLIR attribute")


def dictionary(args: dict[str, Any]) -> str:
    """`{alpha = 1 : i64, dim = [0 : i64]}` with keys sorted, as MLIR keeps them."""
    return "{" + ", ".join(f"{k} = {attribute(v)}" for k, v in sorted(args.items())) + "}"
