"""The GPU check's graphs (test/gpu/cases.py) are right, checked on the CPU.

On a GPU machine each case runs under terra-run-object --device cuda and is
compared with its torch reference (scripts/gpu-check.sh). Here the same
graphs run through the CPU pipeline (terra-run) against the same references
in torch on the CPU, so a case that fails on a GPU points at the GPU
backend, not at the case; and through the GPU pipeline's kernels run as
loops on the CPU (`terra-run --pipeline=gpu-loops`: the same kernel loop
nests, index arithmetic, bounds guards and split reductions, without
gpu.launch), so a wrong kernel structure fails here, not only on a GPU.
Needs terra-run in TERRA_BUILD_DIR (default build/).
"""
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]
BUILD = Path(os.environ.get("TERRA_BUILD_DIR", ROOT / "build"))
sys.path.insert(0, str(ROOT / "test" / "gpu"))
import cases  # noqa: E402


def _script(decisions):
    """terra-run-object's --case/--loop flags as a terra-run control script."""
    lines = []
    for flag, value in zip(decisions[::2], decisions[1::2]):
        point, v = value.split("=")
        lines.append(f"{flag[2:]} {point} {v}")
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("pipeline", ["cpu", "gpu-loops"])
@pytest.mark.parametrize("case", cases.CASES, ids=[c[0] for c in cases.CASES])
def test_case_matches_torch_on_cpu(case, pipeline, tmp_path):
    name, mlir, feeds, decisions, reference, rtol, atol = case
    (tmp_path / "g.mlir").write_text(mlir)
    (tmp_path / "control.txt").write_text(_script(decisions))
    rng = np.random.default_rng(0)
    args = [str(BUILD / "bin" / "terra-run"), str(tmp_path / "g.mlir"),
            f"--fetch-dir={tmp_path}", f"--script={tmp_path / 'control.txt'}",
            f"--pipeline={pipeline}"]
    values = {}
    for fid, (shape, dtype) in feeds.items():
        values[fid] = rng.standard_normal(shape).astype(dtype)
        np.save(tmp_path / f"feed{fid}.npy", values[fid])
        args.append(f"--feed={fid}={tmp_path / f'feed{fid}.npy'}")
    r = subprocess.run(args, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    expected = reference({k: torch.from_numpy(v) for k, v in values.items()})
    assert expected, name
    for fid, want in expected.items():
        got = np.load(tmp_path / f"{fid}_1.npy")
        assert got.shape == tuple(want.shape), (name, fid)
        np.testing.assert_allclose(got, want.numpy(), rtol=rtol, atol=atol, err_msg=f"{name} fetch {fid}")
