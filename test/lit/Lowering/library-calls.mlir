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
// CHECK:         call @terra_lib_batch_matmul_f32({{.*}}) {terra.writes = array<i64: 2>} : (memref<?x?x?xf32, strided<[?, ?, ?], offset: ?>>, memref<?x?x?xf32, strided<[?, ?, ?], offset: ?>>, memref<?x?x?xf32, strided<[?, ?, ?], offset: ?>>, i64) -> ()
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

// -----

// A linear layer's forward x * w^T: the transpose made only for the GEMM is
// not a kernel; BLAS reads w through a transposed view (its transpose flag).
// The output's alloc and zero fill in between do not get in the way, and the
// fill still folds into the call.
// CHECK-LABEL: func.func @linear_weight_transposed
// CHECK-SAME:    (%[[X:.*]]: memref<?x32xf32>, %[[W:.*]]: memref<64x32xf32>)
// CHECK-NOT:     linalg.transpose
// CHECK-NOT:     linalg.fill
// CHECK:         %[[WT:.*]] = memref.transpose %[[W]] (d0, d1) -> (d1, d0) : memref<64x32xf32> to memref<32x64xf32, strided<[1, 32]>>
// CHECK:         %[[CWT:.*]] = memref.cast %[[WT]] : memref<32x64xf32, strided<[1, 32]>> to memref<?x?xf32, strided<[?, ?], offset: ?>>
// CHECK:         %[[ONE:.*]] = arith.constant 1 : i64
// CHECK:         call @terra_lib_matmul_f32(%{{.*}}, %[[CWT]], %{{.*}}, %[[ONE]])
func.func @linear_weight_transposed(%x: memref<?x32xf32>, %w: memref<64x32xf32>) -> memref<?x64xf32> {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %wt = memref.alloc() : memref<32x64xf32>
  linalg.transpose ins(%w : memref<64x32xf32>) outs(%wt : memref<32x64xf32>) permutation = [1, 0]
  %n = memref.dim %x, %c0 : memref<?x32xf32>
  %y = memref.alloc(%n) : memref<?x64xf32>
  linalg.fill ins(%zero : f32) outs(%y : memref<?x64xf32>)
  linalg.matmul ins(%x, %wt : memref<?x32xf32>, memref<32x64xf32>) outs(%y : memref<?x64xf32>)
  return %y : memref<?x64xf32>
}

// -----

// The transposed buffer is kept when something else reads it, or when the
// source is written between the transpose and the GEMM.
// CHECK-LABEL: func.func @cpu_transpose_kept
// CHECK:         linalg.transpose
// CHECK:         call @terra_lib_matmul_f32(
// CHECK:         linalg.transpose
// CHECK:         linalg.fill
// CHECK:         call @terra_lib_matmul_f32(
// CHECK-NOT:     memref.transpose
func.func @cpu_transpose_kept(%x: memref<8x32xf32>, %w: memref<64x32xf32>, %y: memref<8x64xf32>,
                              %keep: memref<32x64xf32>) {
  %one = arith.constant 1.0 : f32
  %wt = memref.alloc() : memref<32x64xf32>
  linalg.transpose ins(%w : memref<64x32xf32>) outs(%wt : memref<32x64xf32>) permutation = [1, 0]
  linalg.matmul ins(%x, %wt : memref<8x32xf32>, memref<32x64xf32>) outs(%y : memref<8x64xf32>)
  memref.copy %wt, %keep : memref<32x64xf32> to memref<32x64xf32>
  %wt2 = memref.alloc() : memref<32x64xf32>
  linalg.transpose ins(%w : memref<64x32xf32>) outs(%wt2 : memref<32x64xf32>) permutation = [1, 0]
  linalg.fill ins(%one : f32) outs(%w : memref<64x32xf32>)
  linalg.matmul ins(%x, %wt2 : memref<8x32xf32>, memref<32x64xf32>) outs(%y : memref<8x64xf32>)
  return
}

// -----

// terra-hoist-above-receives moves a weight's transpose to the top of the
// graph, before the feed its GEMM waits for: feeds, checks, fresh
// buffers, host callbacks (their results are fresh buffers) and other GEMMs
// that write only fresh buffers (their `terra.writes`) lie between, none of
// which write the weight, so the transpose still becomes a view. A call
// that may write the weight (an unknown function taking it) keeps the
// other transpose a kernel.
// CHECK-LABEL: func.func @hoisted_weight_transpose
// CHECK:         linalg.transpose ins(%[[W2:.*]] : memref<16x16xf32>)
// CHECK-NOT:     linalg.transpose
// CHECK:         %[[W1T:.*]] = memref.transpose %{{.*}} (d0, d1) -> (d1, d0) : memref<16x8xf32> to memref<8x16xf32, strided<[1, 8]>>
// CHECK:         %[[C1:.*]] = memref.cast %[[W1T]]
// CHECK:         call @terra_lib_matmul_f32(%{{.*}}, %[[C1]],
// CHECK:         call @terra_rt_host_call(
// CHECK:         call @opaque(
// CHECK:         call @terra_lib_matmul_f32(
func.func private @terra_rt_state_f32(i64) -> memref<*xf32>
func.func private @opaque(memref<*xf32>)
func.func private @terra_rt_feed_contiguous_f32(i64, i64) -> memref<*xf32>
func.func private @terra_rt_check(i1, i64)
func.func private @terra_rt_host_call(i64)
func.func @hoisted_weight_transpose() -> (memref<4x16xf32>, memref<4x16xf32>) {
  %c0 = arith.constant 0 : i64
  %c1 = arith.constant 1 : i64
  %c2 = arith.constant 2 : i64
  %true = arith.constant true
  %zero = arith.constant 0.0 : f32
  %s1 = call @terra_rt_state_f32(%c0) : (i64) -> memref<*xf32>
  %w1 = memref.cast %s1 : memref<*xf32> to memref<16x8xf32>
  %s2 = call @terra_rt_state_f32(%c1) : (i64) -> memref<*xf32>
  %w2 = memref.cast %s2 : memref<*xf32> to memref<16x16xf32>
  %w1t = memref.alloc() : memref<8x16xf32>
  linalg.transpose ins(%w1 : memref<16x8xf32>) outs(%w1t : memref<8x16xf32>) permutation = [1, 0]
  %w2t = memref.alloc() : memref<16x16xf32>
  linalg.transpose ins(%w2 : memref<16x16xf32>) outs(%w2t : memref<16x16xf32>) permutation = [1, 0]
  call @terra_rt_check(%true, %c2) : (i1, i64) -> ()
  %f = call @terra_rt_feed_contiguous_f32(%c2, %c2) : (i64, i64) -> memref<*xf32>
  %x = memref.cast %f : memref<*xf32> to memref<4x8xf32>
  %h = memref.alloc() : memref<4x16xf32>
  linalg.fill ins(%zero : f32) outs(%h : memref<4x16xf32>)
  linalg.matmul ins(%x, %w1t : memref<4x8xf32>, memref<8x16xf32>) outs(%h : memref<4x16xf32>)
  call @terra_rt_host_call(%c2) : (i64) -> ()
  call @opaque(%s2) : (memref<*xf32>) -> ()
  %y = memref.alloc() : memref<4x16xf32>
  linalg.fill ins(%zero : f32) outs(%y : memref<4x16xf32>)
  linalg.matmul ins(%h, %w2t : memref<4x16xf32>, memref<16x16xf32>) outs(%y : memref<4x16xf32>)
  return %h, %y : memref<4x16xf32>, memref<4x16xf32>
}

// -----

// A loop between the transpose and its GEMM writes only through its
// loop-carried buffer, which is rooted at a fresh allocation (the buffer
// roots terra-protect-fetches solves): the transpose still becomes a view.
// (The GEMM's output is a fresh buffer too: one that may alias the source,
// a function argument here, would keep the transpose.)
// CHECK-LABEL: func.func @loop_between
// CHECK-NOT:     linalg.transpose
// CHECK:         scf.for
// CHECK:         memref.transpose
// CHECK:         call @terra_lib_matmul_f32(
func.func private @terra_rt_state_f32(i64) -> memref<*xf32>
func.func @loop_between(%x: memref<4x8xf32>) -> (memref<16xf32>, memref<4x16xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c16 = arith.constant 16 : index
  %i0 = arith.constant 0 : i64
  %one = arith.constant 1.0 : f32
  %s = call @terra_rt_state_f32(%i0) : (i64) -> memref<*xf32>
  %w = memref.cast %s : memref<*xf32> to memref<16x8xf32>
  %wt = memref.alloc() : memref<8x16xf32>
  linalg.transpose ins(%w : memref<16x8xf32>) outs(%wt : memref<8x16xf32>) permutation = [1, 0]
  %init = memref.alloc() : memref<16xf32>
  %r = scf.for %i = %c0 to %c16 step %c1 iter_args(%acc = %init) -> (memref<16xf32>) {
    memref.store %one, %acc[%i] : memref<16xf32>
    scf.yield %acc : memref<16xf32>
  }
  %y = memref.alloc() : memref<4x16xf32>
  linalg.matmul ins(%x, %wt : memref<4x8xf32>, memref<8x16xf32>) outs(%y : memref<4x16xf32>)
  return %r, %y : memref<16xf32>, memref<4x16xf32>
}

// -----

// A GEMM whose output may be the transposed source's memory (both function
// arguments here) keeps its transpose: BLAS would read what it writes.
// CHECK-LABEL: func.func @output_may_alias_source
// CHECK:         linalg.transpose
// CHECK-NOT:     memref.transpose
func.func @output_may_alias_source(%x: memref<16x16xf32>, %w: memref<16x16xf32>) {
  %wt = memref.alloc() : memref<16x16xf32>
  linalg.transpose ins(%w : memref<16x16xf32>) outs(%wt : memref<16x16xf32>) permutation = [1, 0]
  linalg.matmul ins(%x, %wt : memref<16x16xf32>, memref<16x16xf32>) outs(%w : memref<16x16xf32>)
  return
}
