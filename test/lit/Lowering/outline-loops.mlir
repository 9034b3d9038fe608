// RUN: terra-opt %s -terra-outline-loops -split-input-file | FileCheck %s
// RUN: terra-opt %s -terra-outline-loops=min-ops=6 -split-input-file | FileCheck %s --check-prefix=MIN

// Each outermost loop nest becomes a private noinline function; constants
// are cloned into it (bounds stay known), other values become arguments,
// nested loops move with their outer loop.
// CHECK-LABEL: func.func @g(
// CHECK-SAME:      %[[A:.*]]: memref<4x8xf32>, %[[B:.*]]: memref<4x8xf32>, %[[S:.*]]: f32)
// CHECK:         call @g_loop0(%[[A]], %[[S]], %[[B]]) : (memref<4x8xf32>, f32, memref<4x8xf32>) -> ()
// CHECK-NEXT:    %[[R:.*]] = call @g_loop1(%[[B]]) : (memref<4x8xf32>) -> f32
// CHECK-NEXT:    return %[[R]]
// CHECK:       func.func private @g_loop0(%[[X:.*]]: memref<4x8xf32>, %[[Y:.*]]: f32, %[[Z:.*]]: memref<4x8xf32>)
// CHECK-SAME:      passthrough = ["noinline"]
// CHECK-DAG:     %[[C0:.*]] = arith.constant 0 : index
// CHECK-DAG:     %[[C4:.*]] = arith.constant 4 : index
// CHECK:         scf.for %{{.*}} = %[[C0]] to %[[C4]]
// CHECK:           scf.for
// CHECK:             memref.load %[[X]]
// CHECK:             arith.mulf %{{.*}}, %[[Y]]
// CHECK:             memref.store %{{.*}}, %[[Z]]
// CHECK:         return
// CHECK:       func.func private @g_loop1(%{{.*}}: memref<4x8xf32>) -> f32
// CHECK:         %[[SUM:.*]] = scf.for {{.*}} -> (f32)
// CHECK:         return %[[SUM]] : f32

// With min-ops=6 the reduction (5 ops) stays inline.
// MIN-LABEL: func.func @g(
// MIN:         call @g_loop0(
// MIN-NEXT:    scf.for
// MIN-NOT:   func.func private @g_loop1
func.func @g(%a: memref<4x8xf32>, %b: memref<4x8xf32>, %s: f32) -> f32 {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %c8 = arith.constant 8 : index
  %z = arith.constant 0.0 : f32
  scf.for %i = %c0 to %c4 step %c1 {
    scf.for %j = %c0 to %c8 step %c1 {
      %v = memref.load %a[%i, %j] : memref<4x8xf32>
      %m = arith.mulf %v, %s : f32
      memref.store %m, %b[%i, %j] : memref<4x8xf32>
    }
  }
  %r = scf.for %i = %c0 to %c4 step %c1 iter_args(%acc = %z) -> f32 {
    %v = memref.load %b[%i, %c0] : memref<4x8xf32>
    %n = arith.addf %acc, %v : f32
    scf.yield %n : f32
  }
  return %r : f32
}

// -----

// Loops inside an scf.if are outlined too; a name already taken is not
// reused.
// CHECK-LABEL: func.func @h(
// CHECK:         scf.if
// CHECK-NEXT:      call @[[NAME:h_loop0_[0-9]+]](
// CHECK:       func.func private @[[NAME]](
// CHECK:       func.func private @h_loop0()
func.func @h(%a: memref<16xf32>, %p: i1) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c16 = arith.constant 16 : index
  %f = arith.constant 1.0 : f32
  scf.if %p {
    scf.for %i = %c0 to %c16 step %c1 {
      memref.store %f, %a[%i] : memref<16xf32>
    }
  }
  return
}
func.func private @h_loop0() {
  return
}
