"""Terra-MLIR benchmark suite: the Terra paper's ten training programs and a harness.

The programs live in :mod:`benchmarks.programs` and are plain eager PyTorch;
:mod:`benchmarks.run` times them under eager, terra and torch.compile.
"""
