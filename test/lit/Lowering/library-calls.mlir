// Bufferized GEMMs become calls of the runtime's library entry points; a
// zero fill right before the op folds into the call. (Convolutions go to the
// library earlier, on tensors: library-convolutions.mlir.)
// RUN: terra-opt %s -split-input-file -terra-library-calls | FileCheck %s

// CHECK-LABEL: func.func private @terra_lib_matmul_f32(memref<?x?xf32, strided<[?, ?], offset: ?>>, memref<?x?xf32, strided<[?, ?], offset: ?>>, memref<?x?xf32, strided<[?, ?], offset: ?>>, i64) attributes {llvm.emit_c_interface}
// CHECK-LABEL: func.func @mm_fill
// CHECK-NOT:     linalg.fill
// CHECK-DAG:     %[[ONE:.*]] = arith.constant 1 : i64
// CHECK-DAG:     %[[A:.*]] = memref.cast %arg0 : memref<5x7xf32> to memref<?x?xf32, strided<[?, ?], offset: ?>>
// CHECK-DAG:     %[[B:.*]] = memref.cast %arg1 : memref<7x3xf32> to memref<?x?xf32, strided<[?, ?], offset: ?>>
// CHECK-DAG:     %[[C:.*]] = memref.cast %arg2 : memref<5x3xf32> to memref<?x?xf32, strided<[?, ?], offset: ?>>
// CHECK:         call @terra_lib_matmul_f32(%[[A]], %[[B]], %[[C]], %[[ONE]])
// CHECK-NOT:     linalg.matmul
func.func @mm_fill(%a: memref<5x7xf32>, %b: memref<7x3xf32>, %c: memref<5x3xf32>) {
  %zero = arith.constant 0.0 : f32
  linalg.fill ins(%zero : f32) outs(%c : memref<5x3xf32>)
  linalg.matmul ins(%a, %b : memref<5x7xf32>, memref<7x3xf32>) outs(%c : memref<5x3xf32>)
  return
}

// -----

// Accumulation (no fill) passes 0; a transposed view keeps its strides.
// CHECK-LABEL: func.func @mm_accumulate
// CHECK:         %[[Z:.*]] = arith.constant 0 : i64
// CHECK:         call @terra_lib_matmul_f64({{.*}}, {{.*}}, {{.*}}, %[[Z]])
func.func @mm_accumulate(%a: memref<5x7xf64, strided<[1, 5]>>, %b: memref<7x3xf64>, %c: memref<5x3xf64>) {
  linalg.matmul ins(%a, %b : memref<5x7xf64, strided<[1, 5]>>, memref<7x3xf64>) outs(%c : memref<5x3xf64>)
  return
}

// -----

// A non-zero fill is not folded.
// CHECK-LABEL: func.func @mm_fill_one
// CHECK:         linalg.fill
// CHECK:         call @terra_lib_batch_matmul_f32({{.*}}) : (memref<?x?x?xf32, strided<[?, ?, ?], offset: ?>>, memref<?x?x?xf32, strided<[?, ?, ?], offset: ?>>, memref<?x?x?xf32, strided<[?, ?, ?], offset: ?>>, i64) -> ()
func.func @mm_fill_one(%a: memref<2x5x7xf32>, %b: memref<2x7x3xf32>, %c: memref<2x5x3xf32>) {
  %one = arith.constant 1.0 : f32
  linalg.fill ins(%one : f32) outs(%c : memref<2x5x3xf32>)
  linalg.batch_matmul ins(%a, %b : memref<2x5x7xf32>, memref<2x7x3xf32>) outs(%c : memref<2x5x3xf32>)
  return
}

// -----

// Convolutions are not this pass's: a bufferized one stays linalg.
// CHECK-LABEL: func.func @conv
// CHECK-NOT:     call
// CHECK:         linalg.conv_2d_nchw_fchw
func.func @conv(%i: memref<1x3x9x9xf32>, %w: memref<4x3x3x3xf32>, %o: memref<1x4x4x4xf32>) {
  linalg.conv_2d_nchw_fchw {strides = dense<2> : tensor<2xi64>, dilations = dense<1> : tensor<2xi64>}
    ins(%i, %w : memref<1x3x9x9xf32>, memref<4x3x3x3xf32>) outs(%o : memref<1x4x4x4xf32>)
  return
}

// -----

// Integer products and tensor-semantics ops are left alone.
// CHECK-LABEL: func.func @untouched
// CHECK:         linalg.matmul ins(%arg0, %arg1 : memref<5x7xi32>
// CHECK:         linalg.matmul ins(%arg3, %arg4 : tensor<5x7xf32>
// CHECK-NOT:     call
func.func @untouched(%a: memref<5x7xi32>, %b: memref<7x3xi32>, %c: memref<5x3xi32>,
                     %ta: tensor<5x7xf32>, %tb: tensor<7x3xf32>, %tc: tensor<5x3xf32>) -> tensor<5x3xf32> {
  linalg.matmul ins(%a, %b : memref<5x7xi32>, memref<7x3xi32>) outs(%c : memref<5x3xi32>)
  %r = linalg.matmul ins(%ta, %tb : tensor<5x7xf32>, tensor<7x3xf32>) outs(%tc : tensor<5x3xf32>) -> tensor<5x3xf32>
  return %r : tensor<5x3xf32>
}
