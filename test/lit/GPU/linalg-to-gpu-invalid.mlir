// RUN: terra-opt %s -verify-diagnostics -pass-pipeline="builtin.module(func.func(terra-linalg-to-gpu{block-size=2048}))" -o /dev/null

// expected-error @+1 {{terra-linalg-to-gpu: block-size must be in [1, 1024], got 2048}}
func.func @bad_block_size() {
  return
}
