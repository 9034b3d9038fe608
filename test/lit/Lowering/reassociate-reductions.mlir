// The accumulating addf of a float sum reduction gets `reassoc`; adds in
// parallel-only generics, and reductions combining by another op, keep
// their flags.
// RUN: terra-opt %s -terra-reassociate-reductions | FileCheck %s

#id = affine_map<(i, j) -> (i, j)>
#row = affine_map<(i, j) -> (i)>

// CHECK-LABEL: func.func @sum_rows
// CHECK:         arith.mulf %{{.*}}, %{{.*}} : f32
// CHECK:         arith.addf %{{.*}}, %{{.*}} fastmath<reassoc> : f32
func.func @sum_rows(%x: tensor<4x8xf32>, %init: tensor<4xf32>) -> tensor<4xf32> {
  %r = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<4x8xf32>) outs(%init : tensor<4xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %sq = arith.mulf %a, %a : f32
    %s = arith.addf %acc, %sq : f32
    linalg.yield %s : f32
  } -> tensor<4xf32>
  return %r : tensor<4xf32>
}

// CHECK-LABEL: func.func @pointwise_and_max
// CHECK:         arith.addf %{{.*}}, %{{.*}} : f32
// CHECK-NOT:     reassoc
// CHECK:         arith.maximumf
// CHECK-NOT:     reassoc
func.func @pointwise_and_max(%x: tensor<4x8xf32>, %y: tensor<4x8xf32>, %init: tensor<4xf32>) -> (tensor<4x8xf32>, tensor<4xf32>) {
  %p = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %y : tensor<4x8xf32>, tensor<4x8xf32>) outs(%x : tensor<4x8xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %s = arith.addf %a, %b : f32
    linalg.yield %s : f32
  } -> tensor<4x8xf32>
  %m = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<4x8xf32>) outs(%init : tensor<4xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %s = arith.maximumf %acc, %a : f32
    linalg.yield %s : f32
  } -> tensor<4xf32>
  return %p, %m : tensor<4x8xf32>, tensor<4xf32>
}
