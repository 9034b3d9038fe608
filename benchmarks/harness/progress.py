"""A dependency-free progress bar on stderr (stdout stays clean for the summary)."""

from __future__ import annotations

import sys
import time
from typing import Optional, TextIO


class Progress:
    """``[#####.....]  12/40  30%  resnet50/eager``; redrawn at most every 0.1 s.

    On a non-terminal stream it prints one line per label change instead of
    carriage-return redraws, so CI logs stay readable.
    """

    def __init__(self, total: int, stream: Optional[TextIO] = None, width: int = 30,
                 enabled: bool = True) -> None:
        self.total = max(total, 1)
        self.stream = stream if stream is not None else sys.stderr
        self.width = width
        self.enabled = enabled
        self.done = 0
        self.label = ""
        self._last_draw = 0.0
        self._tty = bool(getattr(self.stream, "isatty", lambda: False)())

    def render(self) -> str:
        frac = min(self.done / self.total, 1.0)
        filled = int(round(frac * self.width))
        bar = "#" * filled + "." * (self.width - filled)
        return f"[{bar}] {self.done:>{len(str(self.total))}}/{self.total} {frac:4.0%}  {self.label}"

    def set_label(self, label: str) -> None:
        self.label = label
        if self.enabled and not self._tty:
            self.stream.write(self.render() + "\n")
            self.stream.flush()
        self._draw(force=True)

    def advance(self, n: int = 1) -> None:
        self.done += n
        self._draw()

    def message(self, text: str) -> None:
        """Print a line without corrupting the bar."""
        if self.enabled and self._tty:
            self.stream.write("\r\x1b[K")
        self.stream.write(text + "\n")
        self.stream.flush()
        self._draw(force=True)

    def close(self) -> None:
        self.label = "done"
        self._draw(force=True)
        if self.enabled:
            self.stream.write("\n" if self._tty else self.render() + "\n")
            self.stream.flush()

    def _draw(self, force: bool = False) -> None:
        if not (self.enabled and self._tty):
            return
        now = time.monotonic()
        if force or now - self._last_draw >= 0.1 or self.done >= self.total:
            self._last_draw = now
            self.stream.write("\r\x1b[K" + self.render())
            self.stream.flush()
