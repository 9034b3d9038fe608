// terra-split-deallocs: a bufferization.dealloc that retains nothing frees
// each memref on its own (under its condition unless that is a constant),
// instead of the upstream lowering's quadratic alias check; one that
// retains values is left to the upstream lowering.
// RUN: terra-opt %s -terra-split-deallocs | FileCheck %s

// CHECK-LABEL: func.func @retains_nothing
// CHECK-SAME:    (%[[A:.*]]: memref<f32>, %[[B:.*]]: memref<f32>, %[[C:.*]]: memref<f32>, %[[OWN:.*]]: i1)
// CHECK-NOT:     bufferization.dealloc
// CHECK:         memref.dealloc %[[A]] : memref<f32>
// CHECK-NEXT:    scf.if %[[OWN]] {
// CHECK-NEXT:      memref.dealloc %[[C]] : memref<f32>
// CHECK-NEXT:    }
// CHECK-NEXT:    return
func.func @retains_nothing(%a: memref<f32>, %b: memref<f32>, %c: memref<f32>, %own: i1) {
  %true = arith.constant true
  %false = arith.constant false
  bufferization.dealloc (%a, %b, %c : memref<f32>, memref<f32>, memref<f32>) if (%true, %false, %own)
  return
}

// CHECK-LABEL: func.func @retains_a_value
// CHECK:         bufferization.dealloc (%{{.*}}, %{{.*}} : memref<f32>, memref<f32>) if (%{{.*}}, %{{.*}}) retain (%{{.*}} : memref<f32>)
func.func @retains_a_value(%a: memref<f32>, %b: memref<f32>, %r: memref<f32>) -> i1 {
  %true = arith.constant true
  %o = bufferization.dealloc (%a, %b : memref<f32>, memref<f32>) if (%true, %true) retain (%r : memref<f32>)
  return %o : i1
}

// A single memref: the upstream lowering frees it directly already.
// CHECK-LABEL: func.func @one_memref
// CHECK:         bufferization.dealloc (%{{.*}} : memref<f32>) if (%{{.*}})
func.func @one_memref(%a: memref<f32>, %own: i1) {
  bufferization.dealloc (%a : memref<f32>) if (%own)
  return
}
