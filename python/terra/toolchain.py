"""Finding and running the C++ tools (terra-opt, terra-run) as subprocesses.

There are no MLIR Python bindings on the project machines, so until the
pybind11 front end exists the Python side drives the compiler through its
command-line tools. The build directory is TERRA_BUILD_DIR (default
<repo>/build), as for the other Python tests.
"""
from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path
from typing import Optional, Sequence

REPO = Path(__file__).resolve().parents[2]


class ToolError(RuntimeError):
    """A tool failed; the message holds its stderr."""


def build_dir() -> Path:
    return Path(os.environ.get("TERRA_BUILD_DIR", REPO / "build"))


def tool(name: str) -> Path:
    path = build_dir() / "bin" / name
    if not path.exists():
        raise ToolError(f"{path} does not exist; build it (ninja -C {build_dir()} {name}) "
                        "or point TERRA_BUILD_DIR at a build that has it")
    return path


def run_tool(name: str, argv: Sequence[str], stdin: Optional[str] = None,
             timeout: float = 600) -> str:
    """Runs a tool and returns its stdout; raises ToolError on failure."""
    proc = subprocess.run([str(tool(name)), *argv], input=stdin, capture_output=True,
                          text=True, timeout=timeout)
    if proc.returncode != 0:
        raise ToolError(f"{name} {' '.join(argv)} failed ({proc.returncode}):\n{proc.stderr}")
    return proc.stdout


def terra_opt(text: str, passes: Sequence[str], debuginfo: bool = True) -> str:
    """`terra-opt <passes>` on MLIR text (sites kept with --mlir-print-debuginfo,
    since they are op identity)."""
    flags = list(passes) + (["--mlir-print-debuginfo", "--mlir-print-local-scope"] if debuginfo else [])
    return run_tool("terra-opt", flags + ["-"], stdin=text)


def trace_graph(module: str) -> str:
    """The TraceGraph (`-terra-merge-traces`) of a module of traces, printed
    without locations (so two graphs compare as text)."""
    return terra_opt(module, ["-terra-merge-traces"], debuginfo=False)


def same_graph_ignoring_count(a: str, b: str) -> bool:
    """True if two printed TraceGraphs differ only in their trace count: the
    later trace was already covered (merging it changed nothing)."""
    strip = lambda s: re.sub(r"(terra\.trace_graph @\S+ traces) \d+", r"\1 N", s)  # noqa: E731
    return strip(a) == strip(b)


def host_ops(graph: str) -> list[str]:
    """Names of the `terra.op`s that `-terra-convert-to-linalg` leaves in a
    graph (no lowering, or one that declined): they would need a host
    executor, which terra-run does not have."""
    lowered = terra_opt(graph, ["-terra-convert-to-linalg"], debuginfo=False)
    return sorted(set(re.findall(r'terra\.op "([^"]+)"', lowered)))
