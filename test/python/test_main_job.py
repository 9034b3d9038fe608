"""The README's main job (examples/train.py) runs and matches eager."""
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_main_job_matches_eager_without_fallbacks():
    env = dict(os.environ, TERRA_BACKGROUND_COMPILE="1")  # as users run it
    proc = subprocess.run([sys.executable, str(ROOT / "examples" / "train.py")], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "parameters match eager after 3 epochs: True" in out, out
    assert "each co-executed step matches eager's step from the same state: True" in out, out
    # The smaller last batch costs nothing with dynamic_batch, at either size.
    assert out.count(" 0 fallbacks") == 2, out
    assert "(bound by the graph)" in out, out
