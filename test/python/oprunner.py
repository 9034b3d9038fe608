"""Runs single aten ops through the compiled CPU path (terra-run) so tests can
compare them with eager PyTorch (with TERRA_CPU_GRAPHS=gpu-loops, through the
GPU pipeline with its kernels as CPU loops).

A test describes an op by its aten overload name, its tensor inputs and its
non-tensor args; this module writes a one-op ``terra.graph`` whose inputs are
feeds and whose results are fetches, runs it with ``terra-run`` and returns the
fetched arrays.
"""
from __future__ import annotations

import os
import struct
import subprocess
import tempfile
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[2]
BUILD = Path(os.environ.get("TERRA_BUILD_DIR", ROOT / "build"))
TERRA_RUN = BUILD / "bin" / "terra-run"

_MLIR_DTYPES = {
    torch.float32: "f32",
    torch.float64: "f64",
    torch.float16: "f16",
    torch.int64: "i64",
    torch.int32: "i32",
    torch.bool: "i1",
    torch.int8: "i8",
    torch.uint8: "ui8",
}


def mlir_type(t: torch.Tensor, dynamic: Sequence[int] = ()) -> str:
    dims = ["?" if i in dynamic else str(s) for i, s in enumerate(t.shape)]
    return "tensor<" + "".join(d + "x" for d in dims) + _MLIR_DTYPES[t.dtype] + ">"


def float_literal(value: float) -> str:
    """An MLIR float literal: exact, with the '.' MLIR requires before an
    exponent, and non-finite values as their f64 bit pattern."""
    if value != value or value in (float("inf"), float("-inf")):
        return "0x" + struct.pack(">d", value).hex().upper()
    text = repr(value)
    mantissa, _, exponent = text.partition("e")
    if "." not in mantissa:
        mantissa += ".0"
    return mantissa + ("e" + exponent if exponent else "")


def mlir_attr(value: Any) -> str:
    """A Python value as an MLIR attribute in the args dictionary."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return f"{value} : i64"
    if isinstance(value, float):
        return f"{float_literal(value)} : f64"
    if isinstance(value, str):
        return '"' + value + '"'
    if value is None:
        return "unit"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(mlir_attr(v) for v in value) + "]"
    raise TypeError(f"cannot express {value!r} as an MLIR attribute")


def graph_text(name: str, inputs: Sequence[torch.Tensor], args: dict[str, Any],
               outputs: Sequence[torch.Tensor], dynamic: Sequence[int] = (),
               static_inputs: Sequence[int] = ()) -> str:
    """A one-op terra.graph: feeds 1..n, the op, fetches 0..m-1; the
    `dynamic` dims are dynamic in every type but the `static_inputs`'."""
    lines = ["module {", "  terra.graph @op {"]
    in_dynamic = [() if i in static_inputs else dynamic for i in range(len(inputs))]
    for i, t in enumerate(inputs):
        lines.append(f"    %in{i} = terra.feed {i + 1} : {mlir_type(t, in_dynamic[i])}")
    operands = ", ".join(f"%in{i}" for i in range(len(inputs)))
    in_types = ", ".join(mlir_type(t, d) for t, d in zip(inputs, in_dynamic))
    out_types = ", ".join(mlir_type(t, dynamic) for t in outputs)
    arg_text = ""
    if args:
        arg_text = " args {" + ", ".join(f"{k} = {mlir_attr(v)}" for k, v in sorted(args.items())) + "}"
    lines.append(f'    %out:{len(outputs)} = terra.op "{name}"({operands}){arg_text} '
                 f": ({in_types}) -> ({out_types})")
    for j in range(len(outputs)):
        lines.append(f"    terra.fetch {j} %out#{j} : {mlir_type(outputs[j], dynamic)}")
    lines += ["  }", "}"]
    return "\n".join(lines) + "\n"


def run_graph(text: str, feeds: Sequence[np.ndarray], script: str = "") -> dict[int, list[np.ndarray]]:
    """Runs a terra.graph module with feeds 1..n; returns fetches by id."""
    with tempfile.TemporaryDirectory() as tmp:
        tmpdir = Path(tmp)
        (tmpdir / "g.mlir").write_text(text)
        cmd = [str(TERRA_RUN), str(tmpdir / "g.mlir"), "--fetch-dir", str(tmpdir)]
        if os.environ.get("TERRA_CPU_GRAPHS", "") == "gpu-loops":
            # Every op through the GPU pipeline, its kernels as CPU loops.
            cmd += ["--pipeline", "gpu-loops"]
        for i, a in enumerate(feeds):
            # Not np.ascontiguousarray: it turns 0-d arrays into 1-d ones.
            np.save(tmpdir / f"in{i}.npy", np.array(a, order="C", copy=True))
            cmd += ["--feed", f"{i + 1}={tmpdir / f'in{i}.npy'}"]
        if script:
            (tmpdir / "script.txt").write_text(script)
            cmd += ["--script", str(tmpdir / "script.txt")]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        if proc.returncode != 0:
            raise RuntimeError(f"terra-run failed:\n{proc.stderr}\n--- graph ---\n{text}")
        fetches: dict[int, list[np.ndarray]] = {}
        for f in sorted(tmpdir.glob("*_*.npy")):
            point, inst = f.stem.split("_")
            fetches.setdefault(int(point), []).append((int(inst), np.load(f)))
        return {k: [a for _, a in sorted(v)] for k, v in fetches.items()}


def run_op(name: str, inputs: Sequence[torch.Tensor], args: dict[str, Any] | None = None,
           outputs: Sequence[torch.Tensor] | None = None,
           dynamic: Sequence[int] = (), static_inputs: Sequence[int] = ()) -> list[np.ndarray]:
    """Compiles and runs one op; `outputs` (eager results) give the result types."""
    args = args or {}
    assert outputs is not None, "pass the eager outputs to type the graph"
    text = graph_text(name, inputs, args, outputs, dynamic, static_inputs)
    fetched = run_graph(text, [t.detach().numpy() for t in inputs])
    return [fetched[j][0] for j in range(len(outputs))]


def aten(name: str):
    """torch.ops.aten.<op>.<overload> for 'aten.op.overload' (or 'aten.op')."""
    parts = name.split(".")[1:]
    packet = getattr(torch.ops.aten, parts[0])
    return getattr(packet, parts[1] if len(parts) > 1 else "default")


def check_op(name: str, inputs: Sequence[torch.Tensor], args: dict[str, Any] | None = None,
             *, kwargs_for_torch: dict[str, Any] | None = None, rtol: float = 1e-5,
             atol: float = 1e-5, dynamic: Sequence[int] = (), static_inputs: Sequence[int] = ()) -> None:
    """Runs `name` eagerly and compiled and asserts the results match."""
    args = args or {}
    expected = aten(name)(*inputs, **(kwargs_for_torch if kwargs_for_torch is not None else args))
    expected = list(expected) if isinstance(expected, (tuple, list)) else [expected]
    got = run_op(name, inputs, args, expected, dynamic, static_inputs)
    for e, g in zip(expected, got):
        np.testing.assert_allclose(g, e.detach().numpy(), rtol=rtol, atol=atol,
                                   err_msg=f"{name} args={args}")


def check_expected(name: str, inputs: Sequence[torch.Tensor], args: dict[str, Any] | None,
                   expected: Any, *, rtol: float = 1e-5, atol: float = 1e-5,
                   dynamic: Sequence[int] = ()) -> list[np.ndarray]:
    """Like check_op, with the eager result given: for ops whose aten call does not
    take (*inputs, **args) (list operands, tensors after ints, in-place updates,
    dtype kwargs). Integer and bool results must match exactly."""
    expected = list(expected) if isinstance(expected, (tuple, list)) else [expected]
    got = run_op(name, inputs, args or {}, expected, dynamic)
    for e, g in zip(expected, got):
        e = e.detach().numpy()
        assert g.shape == e.shape, f"{name} args={args}: shape {g.shape} != {e.shape}"
        if e.dtype.kind in "biu":
            np.testing.assert_array_equal(g, e, err_msg=f"{name} args={args}")
        else:
            np.testing.assert_allclose(g, e, rtol=rtol, atol=atol, err_msg=f"{name} args={args}")
    return got


class _MlirFloat(float):
    """A float whose repr is an MLIR float literal: MLIR needs a '.' in
    exponent forms, so 1e-05 is written 1.0e-05."""

    def __repr__(self) -> str:
        r = float.__repr__(self)
        if "e" in r and "." not in r:
            r = r.replace("e", ".0e")
        return r


def bind_schema(name: str, *args: Any, **kwargs: Any):
    """Binds Python arguments to the aten schema of `name` the way a trace
    records them: tensors become operands in schema order, a None `Tensor?`
    is no operand and is recorded as `name = unit` in the args, other values
    are args under their schema names (a torch.dtype as its string).
    Returns (operands, operand_names, args, call) where call(tensors) runs
    the eager op with the given tensors in the operands' places."""
    schema = aten(name)._schema
    params = list(schema.arguments)
    bound: dict[str, Any] = {p.name: v for p, v in zip(params, args)}
    bound.update(kwargs)
    operands: list[torch.Tensor] = []
    names: list[str] = []
    op_args: dict[str, Any] = {}
    for p in params:
        if p.name not in bound:
            continue
        v = bound[p.name]
        if isinstance(v, torch.Tensor):
            operands.append(v)
            names.append(p.name)
        else:
            op_args[p.name] = (str(v) if isinstance(v, torch.dtype)
                               else _MlirFloat(v) if type(v) is float else v)

    def call(tensors: Sequence[torch.Tensor]):
        it = iter(tensors)
        values = {k: (next(it) if isinstance(v, torch.Tensor) else v) for k, v in
                  ((p.name, bound[p.name]) for p in params if p.name in bound)}
        positional, kw = [], {}
        last = max((i for i, p in enumerate(params) if p.name in values and not p.kwarg_only),
                   default=-1)
        for i, p in enumerate(params):
            if p.kwarg_only:
                if p.name in values:
                    kw[p.name] = values[p.name]
            elif i <= last:
                positional.append(values[p.name] if p.name in values else p.default_value)
        return aten(name)(*positional, **kw)

    return operands, names, op_args, call


def check_schema_op(name: str, *args: Any, rtol: float = 1e-5, atol: float = 1e-5,
                    dynamic: Sequence[int] = (), extra_results: Sequence[str] = (),
                    **kwargs: Any) -> list[np.ndarray]:
    """check_op for ops whose tensor and non-tensor parameters interleave or
    whose optional tensors may be None (see bind_schema). Eager results that
    are None (masked gradients) are not results of the graph op. Each name
    in `extra_results` is a tensor parameter that the eager op updates in
    place; its updated value is expected as one more result (the
    functional form). Returns the compiled results."""
    operands, names, op_args, call = bind_schema(name, *args, **kwargs)
    eager_in = [t.clone() for t in operands]
    expected = call(eager_in)
    expected = list(expected) if isinstance(expected, (tuple, list)) else [expected]
    expected = [e for e in expected if e is not None]
    expected += [eager_in[names.index(n)] for n in extra_results]
    got = run_op(name, operands, op_args, expected, dynamic)
    for i, (e, g) in enumerate(zip(expected, got)):
        np.testing.assert_allclose(g, e.detach().numpy(), rtol=rtol, atol=atol,
                                   err_msg=f"{name} result {i} args={op_args}")
    return got
