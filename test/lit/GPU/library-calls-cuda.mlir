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

// -----

// A transpose made only for the GEMM (a linear layer's weight gradient
// x^T * dy) is not a kernel: cuBLAS reads x through a transposed view, as a
// column-major operand. The graph's shape check, the output's alloc and its
// zero fill between them do not get in the way.
// CHECK-LABEL: func.func @transposed_operand
// CHECK-SAME:    (%[[X:.*]]: memref<?x16xf32>, %[[DY:.*]]: memref<?x8xf32>)
// CHECK-NOT:     linalg.transpose
// CHECK:         %[[OUT:.*]] = memref.alloc() : memref<16x8xf32>
// CHECK:         %[[XT:.*]] = memref.transpose %[[X]] (d0, d1) -> (d1, d0) : memref<?x16xf32> to memref<16x?xf32, strided<[1, 16]>>
// CHECK-NOT:     linalg.copy
// CHECK:         %[[CXT:.*]] = memref.cast %[[XT]] : memref<16x?xf32, strided<[1, 16]>> to memref<?x?xf32, strided<[?, ?], offset: ?>>
// CHECK:         call @terra_cuda_matmul_f32(%[[CXT]],
// CHECK:         return %[[OUT]]
func.func private @terra_rt_check(i1, i64)
func.func @transposed_operand(%x: memref<?x16xf32>, %dy: memref<?x8xf32>) -> memref<16x8xf32> {
  %c0 = arith.constant 0 : index
  %c3 = arith.constant 3 : i64
  %zero = arith.constant 0.0 : f32
  %n = memref.dim %x, %c0 : memref<?x16xf32>
  %xt = memref.alloc(%n) : memref<16x?xf32>
  linalg.transpose ins(%x : memref<?x16xf32>) outs(%xt : memref<16x?xf32>) permutation = [1, 0]
  %m = memref.dim %dy, %c0 : memref<?x8xf32>
  %same = arith.cmpi eq, %n, %m : index
  func.call @terra_rt_check(%same, %c3) : (i1, i64) -> ()
  %out = memref.alloc() : memref<16x8xf32>
  linalg.fill ins(%zero : f32) outs(%out : memref<16x8xf32>)
  linalg.matmul ins(%xt, %dy : memref<16x?xf32>, memref<?x8xf32>) outs(%out : memref<16x8xf32>)
  return %out : memref<16x8xf32>
}

// -----

// Attention scores q * k^T: the batch transpose of the two innermost dims
// folds the same way.
// CHECK-LABEL: func.func @batch_transposed_operand
// CHECK-NOT:     linalg.transpose
// CHECK:         memref.transpose %{{.*}} (d0, d1, d2) -> (d0, d2, d1)
// CHECK:         call @terra_cuda_batch_matmul_f32(
func.func @batch_transposed_operand(%q: memref<4x32x16xf32>, %k: memref<4x32x16xf32>) -> memref<4x32x32xf32> {
  %kt = memref.alloc() : memref<4x16x32xf32>
  linalg.transpose ins(%k : memref<4x32x16xf32>) outs(%kt : memref<4x16x32xf32>) permutation = [0, 2, 1]
  %s = memref.alloc() : memref<4x32x32xf32>
  linalg.batch_matmul ins(%q, %kt : memref<4x32x16xf32>, memref<4x16x32xf32>) outs(%s : memref<4x32x32xf32>)
  return %s : memref<4x32x32xf32>
}

// -----

// The transpose stays a kernel when its buffer has another reader, when the
// source could be written in between, or when the source is a strided view
// (then the transposed buffer is contiguous and used as is).
// CHECK-LABEL: func.func @transpose_kept
// CHECK:         linalg.transpose
// CHECK:         call @terra_cuda_matmul_f32(
// CHECK:         linalg.transpose
// CHECK:         linalg.fill
// CHECK:         call @terra_cuda_matmul_f32(
// CHECK:         linalg.transpose
// CHECK:         call @terra_cuda_matmul_f32(
// CHECK-NOT:     memref.transpose
func.func @transpose_kept(%x: memref<8x16xf32>, %w: memref<8x8xf32>, %o: memref<16x8xf32>,
                          %v: memref<8x16xf32, strided<[?, ?], offset: ?>>) -> memref<16x8xf32> {
  %one = arith.constant 1.0 : f32
  %a = memref.alloc() : memref<16x8xf32>
  linalg.transpose ins(%x : memref<8x16xf32>) outs(%a : memref<16x8xf32>) permutation = [1, 0]
  linalg.matmul ins(%a, %w : memref<16x8xf32>, memref<8x8xf32>) outs(%o : memref<16x8xf32>)
  %b = memref.alloc() : memref<16x8xf32>
  linalg.transpose ins(%x : memref<8x16xf32>) outs(%b : memref<16x8xf32>) permutation = [1, 0]
  linalg.fill ins(%one : f32) outs(%x : memref<8x16xf32>)
  linalg.matmul ins(%b, %w : memref<16x8xf32>, memref<8x8xf32>) outs(%o : memref<16x8xf32>)
  %c = memref.alloc() : memref<16x8xf32>
  linalg.transpose ins(%v : memref<8x16xf32, strided<[?, ?], offset: ?>>) outs(%c : memref<16x8xf32>) permutation = [1, 0]
  linalg.matmul ins(%c, %w : memref<16x8xf32>, memref<8x8xf32>) outs(%o : memref<16x8xf32>)
  return %a : memref<16x8xf32>
}
