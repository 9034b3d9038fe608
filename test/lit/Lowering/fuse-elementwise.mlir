// terra-fuse-elementwise: elementwise chains fuse as upstream does, but a
// matmul keeps its named form (for terra-library-calls) even when a
// transpose feeds it or its result is reshaped.
// RUN: terra-opt %s -split-input-file -terra-fuse-elementwise | FileCheck %s

// Two elementwise ops fuse into one generic.
// CHECK-LABEL: func.func @chain
// CHECK:         linalg.generic
// CHECK:           arith.addf
// CHECK:           arith.mulf
// CHECK-NOT:     linalg.generic
func.func @chain(%a: tensor<8xf32>, %b: tensor<8xf32>) -> tensor<8xf32> {
  %e = tensor.empty() : tensor<8xf32>
  %s = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]} ins(%a, %b : tensor<8xf32>, tensor<8xf32>) outs(%e : tensor<8xf32>) {
  ^bb0(%x: f32, %y: f32, %o: f32):
    %r = arith.addf %x, %y : f32
    linalg.yield %r : f32
  } -> tensor<8xf32>
  %p = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]} ins(%s, %b : tensor<8xf32>, tensor<8xf32>) outs(%e : tensor<8xf32>) {
  ^bb0(%x: f32, %y: f32, %o: f32):
    %r = arith.mulf %x, %y : f32
    linalg.yield %r : f32
  } -> tensor<8xf32>
  return %p : tensor<8xf32>
}

// -----

// A transposed weight and a reshaped result (a linear layer on a 3-d
// input): the matmul stays a linalg.matmul, the transpose a separate op.
// CHECK-LABEL: func.func @linear_3d
// CHECK:         linalg.transpose
// CHECK:         linalg.matmul
// CHECK:         tensor.expand_shape
// CHECK:         linalg.generic
// CHECK-SAME:      iterator_types = ["parallel", "parallel", "parallel"]
// CHECK-NOT:       "reduction"
func.func @linear_3d(%x: tensor<2x4x8xf32>, %w: tensor<16x8xf32>, %bias: tensor<16xf32>) -> tensor<2x4x16xf32> {
  %zero = arith.constant 0.0 : f32
  %xc = tensor.collapse_shape %x [[0, 1], [2]] : tensor<2x4x8xf32> into tensor<8x8xf32>
  %te = tensor.empty() : tensor<8x16xf32>
  %wt = linalg.transpose ins(%w : tensor<16x8xf32>) outs(%te : tensor<8x16xf32>) permutation = [1, 0]
  %me = tensor.empty() : tensor<8x16xf32>
  %mz = linalg.fill ins(%zero : f32) outs(%me : tensor<8x16xf32>) -> tensor<8x16xf32>
  %m = linalg.matmul ins(%xc, %wt : tensor<8x8xf32>, tensor<8x16xf32>) outs(%mz : tensor<8x16xf32>) -> tensor<8x16xf32>
  %m3 = tensor.expand_shape %m [[0, 1], [2]] output_shape [2, 4, 16] : tensor<8x16xf32> into tensor<2x4x16xf32>
  %oe = tensor.empty() : tensor<2x4x16xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d2)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%m3, %bias : tensor<2x4x16xf32>, tensor<16xf32>) outs(%oe : tensor<2x4x16xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %s = arith.addf %a, %b : f32
    linalg.yield %s : f32
  } -> tensor<2x4x16xf32>
  return %r : tensor<2x4x16xf32>
}

// -----

// The same with a batch matmul over collapsed heads, its result expanded
// back (attention scores).
// CHECK-LABEL: func.func @attention_scores
// CHECK:         linalg.transpose
// CHECK:         linalg.batch_matmul
// CHECK:         tensor.expand_shape
func.func @attention_scores(%q: tensor<3x2x4x5xf32>, %k: tensor<6x4x5xf32>) -> tensor<3x2x4x4xf32> {
  %zero = arith.constant 0.0 : f32
  %q3 = tensor.collapse_shape %q [[0, 1], [2], [3]] : tensor<3x2x4x5xf32> into tensor<6x4x5xf32>
  %te = tensor.empty() : tensor<6x5x4xf32>
  %kt = linalg.transpose ins(%k : tensor<6x4x5xf32>) outs(%te : tensor<6x5x4xf32>) permutation = [0, 2, 1]
  %e = tensor.empty() : tensor<6x4x4xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<6x4x4xf32>) -> tensor<6x4x4xf32>
  %s = linalg.batch_matmul ins(%q3, %kt : tensor<6x4x5xf32>, tensor<6x5x4xf32>) outs(%z : tensor<6x4x4xf32>) -> tensor<6x4x4xf32>
  %s4 = tensor.expand_shape %s [[0, 1], [2], [3]] output_shape [3, 2, 4, 4] : tensor<6x4x4xf32> into tensor<3x2x4x4xf32>
  %oe = tensor.empty() : tensor<3x2x4x4xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%s4 : tensor<3x2x4x4xf32>) outs(%oe : tensor<3x2x4x4xf32>) {
  ^bb0(%a: f32, %o: f32):
    %m = arith.mulf %a, %a : f32
    linalg.yield %m : f32
  } -> tensor<3x2x4x4xf32>
  return %r : tensor<3x2x4x4xf32>
}
