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

// CSE merged a loop body's destination with an equal empty tensor before
// the loop: the use in the body gets its own empty there, so each trip
// writes a fresh buffer (a trip's fetched value is not overwritten by the
// next trip), and the original keeps only its use in its own block.
// CHECK-LABEL: func.func @loop_body_destination
// CHECK:         %[[E0:.*]] = tensor.empty() : tensor<16xf32>
// CHECK-NEXT:    %[[INIT:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%[[E0]]
// CHECK:         scf.for
// CHECK-NEXT:      %[[E1:.*]] = tensor.empty() : tensor<16xf32>
// CHECK-NEXT:      linalg.generic {{.*}} outs(%[[E1]]
// CHECK-LABEL: func.func @only_use_in_a_loop
// CHECK-NOT:     tensor.empty
// CHECK:         scf.for
// CHECK-NEXT:      %[[E:.*]] = tensor.empty() : tensor<16xf32>
// CHECK-NEXT:      linalg.generic {{.*}} outs(%[[E]]
func.func @loop_body_destination(%n: index) -> tensor<16xf32> {
  %zero = arith.constant 0.0 : f32
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %e = tensor.empty() : tensor<16xf32>
  %init = linalg.fill ins(%zero : f32) outs(%e : tensor<16xf32>) -> tensor<16xf32>
  %r = scf.for %i = %c0 to %n step %c1 iter_args(%acc = %init) -> (tensor<16xf32>) {
    %t = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
        ins(%acc : tensor<16xf32>) outs(%e : tensor<16xf32>) {
    ^bb0(%in: f32, %out: f32):
      %y = math.tanh %in : f32
      linalg.yield %y : f32
    } -> tensor<16xf32>
    scf.yield %t : tensor<16xf32>
  }
  return %r : tensor<16xf32>
}

func.func @only_use_in_a_loop(%x: tensor<16xf32>, %n: index) -> tensor<16xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %e = tensor.empty() : tensor<16xf32>
  %r = scf.for %i = %c0 to %n step %c1 iter_args(%acc = %x) -> (tensor<16xf32>) {
    %t = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
        ins(%acc : tensor<16xf32>) outs(%e : tensor<16xf32>) {
    ^bb0(%in: f32, %out: f32):
      %y = math.tanh %in : f32
      linalg.yield %y : f32
    } -> tensor<16xf32>
    scf.yield %t : tensor<16xf32>
  }
  return %r : tensor<16xf32>
}

// A zero fill of an empty tensor that CSE made the destination of several
// GEMMs: each GEMM after the first gets its own empty tensor and fill right
// before it (bufferization would otherwise copy the one filled buffer into
// each destination, and the library call would not see the fill before the
// GEMM). A read of the filled tensor keeps the original, and then no GEMM
// does (its write would need a copy).
// CHECK-LABEL: func.func @shared_zero_fill
// CHECK:         %[[E0:.*]] = tensor.empty() : tensor<4x8xf32>
// CHECK-NEXT:    %[[Z0:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%[[E0]]
// CHECK-NEXT:    %[[E1:.*]] = tensor.empty() : tensor<4x8xf32>
// CHECK-NEXT:    %[[Z1:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%[[E1]]
// CHECK-NEXT:    linalg.matmul ins(%arg0, %arg1 : {{.*}}) outs(%[[Z1]] : tensor<4x8xf32>)
// CHECK-NEXT:    %[[E2:.*]] = tensor.empty() : tensor<4x8xf32>
// CHECK-NEXT:    %[[Z2:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%[[E2]]
// CHECK-NEXT:    linalg.matmul ins(%arg0, %arg2 : {{.*}}) outs(%[[Z2]] : tensor<4x8xf32>)
// CHECK:         linalg.generic {{.*}} ins(%[[Z0]] : tensor<4x8xf32>)
func.func @shared_zero_fill(%a: tensor<4x16xf32>, %b: tensor<16x8xf32>, %c: tensor<16x8xf32>)
    -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x8xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<4x8xf32>) -> tensor<4x8xf32>
  %p = linalg.matmul ins(%a, %b : tensor<4x16xf32>, tensor<16x8xf32>) outs(%z : tensor<4x8xf32>) -> tensor<4x8xf32>
  %q = linalg.matmul ins(%a, %c : tensor<4x16xf32>, tensor<16x8xf32>) outs(%z : tensor<4x8xf32>) -> tensor<4x8xf32>
  %e2 = tensor.empty() : tensor<4x8xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]}
      ins(%z : tensor<4x8xf32>) outs(%e2 : tensor<4x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    linalg.yield %in : f32
  } -> tensor<4x8xf32>
  return %p, %q, %r : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>
}
