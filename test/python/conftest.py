"""Makes the in-tree `terra` package importable (no install step)."""
import sys
from pathlib import Path

PYTHON = Path(__file__).resolve().parents[2] / "python"
if str(PYTHON) not in sys.path:
    sys.path.insert(0, str(PYTHON))
