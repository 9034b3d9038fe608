// A tensor.empty that CSE made the destination of several ops is cloned per
// use, so one-shot bufferization gives each destination its own buffer
// (sharing one let a later op overwrite `ones` while it was still read).
// RUN: terra-opt %s -terra-split-empty-tensors | FileCheck %s

#id = affine_map<(i) -> (i)>

// Each clone is placed right before its user; the first use keeps the
// original.
// CHECK-LABEL: func.func @shared_destination
// CHECK:         %[[E0:.*]] = tensor.empty() : tensor<16xf32>
// CHECK-NEXT:    %[[E1:.*]] = tensor.empty() : tensor<16xf32>
// CHECK-NEXT:    linalg.fill ins(%{{.*}} : f32) outs(%[[E1]]
// CHECK-NEXT:    %[[E2:.*]] = tensor.empty() : tensor<16xf32>
// CHECK-NEXT:    linalg.fill ins(%{{.*}} : f32) outs(%[[E2]]
// CHECK-NEXT:    linalg.generic {{.*}} outs(%[[E0]]
func.func @shared_destination(%x: tensor<16xf32>) -> (tensor<16xf32>, tensor<16xf32>, tensor<16xf32>) {
  %one = arith.constant 1.0 : f32
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<16xf32>
  %ones = linalg.fill ins(%one : f32) outs(%e : tensor<16xf32>) -> tensor<16xf32>
  %zeros = linalg.fill ins(%zero : f32) outs(%e : tensor<16xf32>) -> tensor<16xf32>
  %neg = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%x : tensor<16xf32>) outs(%e : tensor<16xf32>) {
  ^bb0(%in: f32, %out: f32):
    %n = arith.negf %in : f32
    linalg.yield %n : f32
  } -> tensor<16xf32>
  return %ones, %zeros, %neg : tensor<16xf32>, tensor<16xf32>, tensor<16xf32>
}
