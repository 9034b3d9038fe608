"""Pieces of the benchmark harness, one concern per module.

``modes`` (which execution modes exist and how they wrap a step),
``measure`` (timing, loss/parameter capture, correctness), ``report``
(results.json / results.md), ``charts`` (PNG figures) and ``progress``
(the stderr progress bar). ``benchmarks/run.py`` is the command line.
"""
