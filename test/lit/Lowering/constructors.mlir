// Constructors: a linalg.fill of a tensor.empty shaped by the result type
// (dynamic dims from `self`), or a linalg.generic over linalg.index (arange).
// RUN: terra-opt %s -split-input-file -terra-convert-to-linalg | FileCheck %s

// CHECK-LABEL: terra.graph @zeros
// CHECK:         %[[Z:.*]] = arith.constant 0.000000e+00 : f32
// CHECK:         %[[E:.*]] = tensor.empty() : tensor<2x3xf32>
// CHECK:         %[[F:.*]] = linalg.fill ins(%[[Z]] : f32) outs(%[[E]] : tensor<2x3xf32>)
// CHECK:         terra.fetch 0 %[[F]]
terra.graph @zeros {
  %r = terra.op "aten.zeros"() args {size = [2, 3]} : () -> tensor<2x3xf32>
  terra.fetch 0 %r : tensor<2x3xf32>
}

// -----

// The dtype comes from the result type, the dynamic dim from self.
// CHECK-LABEL: terra.graph @full_like_dynamic
// CHECK:         %[[V:.*]] = arith.constant 2 : i64
// CHECK:         %[[A:.*]] = terra.feed 1 : tensor<?x4xf32>
// CHECK:         %[[D:.*]] = tensor.dim %[[A]], %c0
// CHECK:         %[[E:.*]] = tensor.empty(%[[D]]) : tensor<?x4xi64>
// CHECK:         linalg.fill ins(%[[V]] : i64) outs(%[[E]] : tensor<?x4xi64>)
terra.graph @full_like_dynamic {
  %a = terra.feed 1 : tensor<?x4xf32>
  %r = terra.op "aten.full_like"(%a) args {fill_value = 2 : i64} : (tensor<?x4xf32>) -> tensor<?x4xi64>
  terra.fetch 0 %r : tensor<?x4xi64>
}

// -----

// fill_.Tensor takes its value from a 0-d operand.
// CHECK-LABEL: terra.graph @fill_tensor
// CHECK:         %[[V:.*]] = terra.feed 2 : tensor<f64>
// CHECK:         %[[X:.*]] = tensor.extract %[[V]][] : tensor<f64>
// CHECK:         %[[T:.*]] = arith.truncf %[[X]] : f64 to f32
// CHECK:         linalg.fill ins(%[[T]] : f32) outs(%{{.*}} : tensor<3xf32>)
terra.graph @fill_tensor {
  %a = terra.feed 1 : tensor<3xf32>
  %v = terra.feed 2 : tensor<f64>
  %r = terra.op "aten.fill_.Tensor"(%a, %v) : (tensor<3xf32>, tensor<f64>) -> tensor<3xf32>
  terra.fetch 0 %r : tensor<3xf32>
}

// -----

// Float arange computes start + i * step in f64, like ATen's CPU kernel.
// CHECK-LABEL: terra.graph @arange_float
// CHECK:         linalg.generic {{.*}} outs(%{{.*}} : tensor<4xf32>)
// CHECK:           %[[I:.*]] = linalg.index 0 : index
// CHECK:           %[[I64:.*]] = arith.index_cast %[[I]] : index to i64
// CHECK:           %[[F:.*]] = arith.sitofp %[[I64]] : i64 to f64
// CHECK:           %[[M:.*]] = arith.mulf %[[F]], %{{.*}} : f64
// CHECK:           %[[A:.*]] = arith.addf %[[M]], %{{.*}} : f64
// CHECK:           %[[R:.*]] = arith.truncf %[[A]] : f64 to f32
// CHECK:           linalg.yield %[[R]] : f32
terra.graph @arange_float {
  %r = terra.op "aten.arange.start_step"() args {start = 0.0 : f64, end = 1.0 : f64, step = 0.25 : f64} : () -> tensor<4xf32>
  terra.fetch 0 %r : tensor<4xf32>
}

// -----

// Integer bounds stay in i64.
// CHECK-LABEL: terra.graph @arange_int
// CHECK-DAG:     %[[START:.*]] = arith.constant 10 : i64
// CHECK-DAG:     %[[STEP:.*]] = arith.constant -3 : i64
// CHECK:         linalg.generic
// CHECK:           %[[M:.*]] = arith.muli %{{.*}}, %[[STEP]] : i64
// CHECK:           %[[A:.*]] = arith.addi %[[M]], %[[START]] : i64
// CHECK:           linalg.yield %[[A]] : i64
terra.graph @arange_int {
  %r = terra.op "aten.arange.start_step"() args {start = 10 : i64, end = 0 : i64, step = -3 : i64} : () -> tensor<4xi64>
  terra.fetch 0 %r : tensor<4xi64>
}

// -----

// A dynamic dim with no size arg and no operand to take it from: the op
// stays for the host, and the IR is left untouched.
// CHECK-LABEL: terra.graph @zeros_unknown_size_stays
// CHECK-NEXT:    %[[R:.*]] = terra.op "aten.zeros"() : () -> tensor<?x3xf32>
// CHECK-NEXT:    terra.fetch 0 %[[R]]
terra.graph @zeros_unknown_size_stays {
  %r = terra.op "aten.zeros"() : () -> tensor<?x3xf32>
  terra.fetch 0 %r : tensor<?x3xf32>
}

// -----

// arange(t) with t a dim of a shape operand: the length is computed at run
// time, ceil((end - start) / step) clamped at 0 (the division by a unit
// step folds away).
// CHECK-LABEL: terra.graph @arange_symbolic_end
// CHECK:         %[[I:.*]] = terra.feed 1 : tensor<4x?xi64>
// CHECK:         %[[T:.*]] = tensor.dim %[[I]], %c1
// CHECK:         %[[N:.*]] = arith.subi %[[T]], %c2
// CHECK:         %[[L:.*]] = arith.maxsi %[[N]], %c0
// CHECK:         tensor.empty(%[[L]]) : tensor<?xi64>
// CHECK-NOT:     terra.op
terra.graph @arange_symbolic_end {
  %i = terra.feed 1 : tensor<4x?xi64>
  %r = terra.op "aten.arange.start"(%i) args {start = 2 : i64, end = #terra.dim<0, 1>, terra.shape_operands = 1} : (tensor<4x?xi64>) -> tensor<?xi64>
  terra.fetch 0 %r : tensor<?xi64>
}
