"""Makes the in-tree `terra` package importable (no install step)."""
import sys
from pathlib import Path

PYTHON = Path(__file__).resolve().parents[2] / "python"
if str(PYTHON) not in sys.path:
    sys.path.insert(0, str(PYTHON))

# Tests count phases per call (traced, co-executed, eager): they compile in
# the caller's thread so a call's phase does not depend on how fast the
# compiler is. Background compilation has its own tests
# (test_function.py, "background").
import os  # noqa: E402

os.environ.setdefault("TERRA_BACKGROUND_COMPILE", "0")
