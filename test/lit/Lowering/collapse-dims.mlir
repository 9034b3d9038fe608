// Adjacent loop dims that every operand walks in order become one loop, on
// values the graph computes (identity-layout buffers once bufferized); graph
// inputs (block arguments, buffers of any strides), dynamic shapes and
// broadcasts written with constant indices are left alone.
// RUN: terra-opt %s -split-input-file -terra-collapse-dims | FileCheck %s

#id = affine_map<(n, c, h, w) -> (n, c, h, w)>
#ch = affine_map<(n, c, h, w) -> (c)>

// A per-channel sum over (n, h, w): (h, w) become one reduction loop.
// CHECK-LABEL: func.func @channel_sum
// CHECK:         %[[X:.*]] = tensor.collapse_shape %{{.*}} {{\[\[}}0], [1], [2, 3]] : tensor<8x64x32x32xf32> into tensor<8x64x1024xf32>
// CHECK:         linalg.generic {{.*}} iterator_types = ["reduction", "parallel", "reduction"]} ins(%[[X]] :
func.func @channel_sum(%v: f32) -> tensor<64xf32> {
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<8x64x32x32xf32>
  %x = linalg.fill ins(%v : f32) outs(%e : tensor<8x64x32x32xf32>) -> tensor<8x64x32x32xf32>
  %o = tensor.empty() : tensor<64xf32>
  %i = linalg.fill ins(%z : f32) outs(%o : tensor<64xf32>) -> tensor<64xf32>
  %r = linalg.generic {indexing_maps = [#id, #ch], iterator_types = ["reduction", "parallel", "reduction", "reduction"]}
      ins(%x : tensor<8x64x32x32xf32>) outs(%i : tensor<64xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %s = arith.addf %acc, %a : f32
    linalg.yield %s : f32
  } -> tensor<64xf32>
  return %r : tensor<64xf32>
}

// -----

#id = affine_map<(n, c, h, w) -> (n, c, h, w)>

// An elementwise op on a 4-d tensor: one flat loop.
// CHECK-LABEL: func.func @elementwise
// CHECK:         tensor.collapse_shape %{{.*}} {{\[\[}}0, 1, 2, 3]] : tensor<2x3x4x5xf32> into tensor<120xf32>
// CHECK:         linalg.generic {{.*}} iterator_types = ["parallel"]}
// CHECK:         tensor.expand_shape
func.func @elementwise(%v: f32) -> tensor<2x3x4x5xf32> {
  %e = tensor.empty() : tensor<2x3x4x5xf32>
  %x = linalg.fill ins(%v : f32) outs(%e : tensor<2x3x4x5xf32>) -> tensor<2x3x4x5xf32>
  %o = tensor.empty() : tensor<2x3x4x5xf32>
  %r = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%x : tensor<2x3x4x5xf32>) outs(%o : tensor<2x3x4x5xf32>) {
  ^bb0(%a: f32, %b: f32):
    %m = arith.mulf %a, %a : f32
    linalg.yield %m : f32
  } -> tensor<2x3x4x5xf32>
  return %r : tensor<2x3x4x5xf32>
}

// -----

#id = affine_map<(n, c, h, w) -> (n, c, h, w)>
#b = affine_map<(n, c, h, w) -> (n, c, 0, 0)>

// A graph input (its buffer may have any strides), a dynamic shape and a
// broadcast with constant indices: left as they are.
// CHECK-LABEL: func.func @left_alone
// CHECK-NOT:     tensor.collapse_shape
// CHECK-COUNT-3: iterator_types = ["parallel", "parallel", "parallel", "parallel"]
func.func @left_alone(%arg: tensor<2x3x4x5xf32>, %n: index, %v: f32) -> (tensor<2x3x4x5xf32>, tensor<?x3x4x5xf32>, tensor<2x3x4x5xf32>) {
  %o = tensor.empty() : tensor<2x3x4x5xf32>
  %r = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%arg : tensor<2x3x4x5xf32>) outs(%o : tensor<2x3x4x5xf32>) {
  ^bb0(%a: f32, %b: f32):
    linalg.yield %a : f32
  } -> tensor<2x3x4x5xf32>
  %ed = tensor.empty(%n) : tensor<?x3x4x5xf32>
  %xd = linalg.fill ins(%v : f32) outs(%ed : tensor<?x3x4x5xf32>) -> tensor<?x3x4x5xf32>
  %od = tensor.empty(%n) : tensor<?x3x4x5xf32>
  %d = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%xd : tensor<?x3x4x5xf32>) outs(%od : tensor<?x3x4x5xf32>) {
  ^bb0(%a: f32, %b: f32):
    linalg.yield %a : f32
  } -> tensor<?x3x4x5xf32>
  %eb = tensor.empty() : tensor<2x3x1x1xf32>
  %xb = linalg.fill ins(%v : f32) outs(%eb : tensor<2x3x1x1xf32>) -> tensor<2x3x1x1xf32>
  %ob = tensor.empty() : tensor<2x3x4x5xf32>
  %bc = linalg.generic {indexing_maps = [#b, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%xb : tensor<2x3x1x1xf32>) outs(%ob : tensor<2x3x4x5xf32>) {
  ^bb0(%a: f32, %b: f32):
    linalg.yield %a : f32
  } -> tensor<2x3x4x5xf32>
  return %r, %d, %bc : tensor<2x3x4x5xf32>, tensor<?x3x4x5xf32>, tensor<2x3x4x5xf32>
}
