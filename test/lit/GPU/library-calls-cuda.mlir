// RUN: terra-opt %s -split-input-file -terra-library-calls=backend=cuda | FileCheck %s
// RUN: not terra-opt %s -split-input-file -terra-library-calls=backend=rocm 2>&1 | FileCheck %s --check-prefix=BAD

// Contiguous operands go to cuBLAS as they are; the zero fill folds into
// the call (overwrite = 1).
// CHECK:       func.func private @terra_cuda_matmul_f32(memref<?x?xf32, strided<[?, ?], offset: ?>>, memref<?x?xf32, strided<[?, ?], offset: ?>>, memref<?x?xf32, strided<[?, ?], offset: ?>>, i64) attributes {llvm.emit_c_interface}
// CHECK-LABEL: func.func @matmul_contiguous
// CHECK-SAME:    (%[[A:.*]]: memref<?x64xf32>, %[[B:.*]]: memref<64x32xf32>, %[[C:.*]]: memref<?x32xf32>)
// CHECK-NOT:     linalg.fill
// CHECK-NOT:     linalg.copy
// CHECK-DAG:     %[[CA:.*]] = memref.cast %[[A]] : memref<?x64xf32> to memref<?x?xf32, strided<[?, ?], offset: ?>>
// CHECK-DAG:     %[[CB:.*]] = memref.cast %[[B]]
// CHECK-DAG:     %[[CC:.*]] = memref.cast %[[C]]
// CHECK-DAG:     %[[ONE:.*]] = arith.constant 1 : i64
// CHECK:         call @terra_cuda_matmul_f32(%[[CA]], %[[CB]], %[[CC]], %[[ONE]])
// BAD: terra-library-calls: unknown backend 'rocm' (expected 'cpu' or 'cuda')
func.func @matmul_contiguous(%a: memref<?x64xf32>, %b: memref<64x32xf32>, %c: memref<?x32xf32>) {
  %zero = arith.constant 0.0 : f32
  linalg.fill ins(%zero : f32) outs(%c : memref<?x32xf32>)
  linalg.matmul ins(%a, %b : memref<?x64xf32>, memref<64x32xf32>) outs(%c : memref<?x32xf32>)
  return
}

// -----

// A strided view (a feed) cannot be proven contiguous: it is copied into a
// fresh buffer first, by linalg.copy (a generated kernel later). Without a
// zero fill the call accumulates (overwrite = 0).
// CHECK:       func.func private @terra_cuda_batch_matmul_f64(
// CHECK-LABEL: func.func @batch_matmul_strided
// CHECK-SAME:    (%[[A:.*]]: memref<4x8x16xf64, strided<[?, ?, ?], offset: ?>>, %[[B:.*]]: memref<4x16x8xf64>, %[[C:.*]]: memref<4x8x8xf64>)
// CHECK:         %[[COPY:.*]] = memref.alloc() : memref<4x8x16xf64>
// CHECK:         linalg.copy ins(%[[A]] : {{.*}}) outs(%[[COPY]] : memref<4x8x16xf64>)
// CHECK-DAG:     %[[CA:.*]] = memref.cast %[[COPY]]
// CHECK-DAG:     %[[ZERO:.*]] = arith.constant 0 : i64
// CHECK:         call @terra_cuda_batch_matmul_f64(%[[CA]], %{{.*}}, %{{.*}}, %[[ZERO]])
func.func @batch_matmul_strided(%a: memref<4x8x16xf64, strided<[?, ?, ?], offset: ?>>, %b: memref<4x16x8xf64>, %c: memref<4x8x8xf64>) {
  linalg.batch_matmul ins(%a, %b : memref<4x8x16xf64, strided<[?, ?, ?], offset: ?>>, memref<4x16x8xf64>) outs(%c : memref<4x8x8xf64>)
  return
}

// -----

// Stays generated code: an output that is not contiguous, an element type
// cuBLAS has no GEMM for here, and convolutions (no cuDNN entry points yet).
// CHECK-LABEL: func.func @stays_linalg
// CHECK-NOT:     call @terra_cuda
// CHECK:         linalg.matmul
// CHECK:         linalg.matmul
// CHECK:         linalg.conv_2d_nchw_fchw
func.func @stays_linalg(%a: memref<8x8xf32>, %c: memref<8x8xf32, strided<[?, ?], offset: ?>>,
                        %i: memref<8x8xi64>, %ic: memref<8x8xi64>,
                        %x: memref<1x1x8x8xf32>, %w: memref<1x1x3x3xf32>, %y: memref<1x1x6x6xf32>) {
  linalg.matmul ins(%a, %a : memref<8x8xf32>, memref<8x8xf32>) outs(%c : memref<8x8xf32, strided<[?, ?], offset: ?>>)
  linalg.matmul ins(%i, %i : memref<8x8xi64>, memref<8x8xi64>) outs(%ic : memref<8x8xi64>)
  linalg.conv_2d_nchw_fchw ins(%x, %w : memref<1x1x8x8xf32>, memref<1x1x3x3xf32>) outs(%y : memref<1x1x6x6xf32>)
  return
}
