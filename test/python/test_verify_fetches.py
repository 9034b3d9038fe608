"""A fetched buffer is never written by the graph after it is published
(docs/runtime.md, "Zero-copy fetches"): the programs of the suite with
graph loops and with slices written in place around fetches, run again
with the runtime's check on (TERRA_VERIFY_FETCHES=1: every zero-copy fetch
is hashed when published and again when the graph frees it, and a change
fails the run, which the test sees as a fallback). The check is read once
per process, hence the subprocess."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent

PROGRAMS = [
    "test_spec_conformance.py",
    "test_function.py::test_writes_through_slices_and_selects_co_execute",
    "test_function.py::test_advanced_indexing_with_slices_co_executes",
    "test_function.py::test_a_value_shaped_result_of_a_new_size_is_a_new_path_not_an_error",
    "test_loops.py",
]


def test_loop_and_slice_programs_never_write_a_fetched_buffer() -> None:
    env = dict(os.environ, TERRA_VERIFY_FETCHES="1")
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "faulthandler_timeout=300",
         *PROGRAMS],
        cwd=HERE, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-2000:]
    assert " passed" in proc.stdout, proc.stdout[-2000:]
