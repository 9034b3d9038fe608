// Optimizer updates: one broadcasting linalg.generic per result; in-place
// forms have value semantics; a _foreach_ op becomes N independent generics.
// RUN: terra-opt %s -split-input-file -terra-convert-to-linalg | FileCheck %s

// addcdiv: self + value * t1 / t2, in ATen's operation order.
// CHECK-LABEL: terra.graph @addcdiv_inplace
// CHECK:         %[[V:.*]] = arith.constant -1.000000e-03 : f32
// CHECK:         linalg.generic
// CHECK-SAME:      ins(%{{.*}}, %{{.*}}, %{{.*}} : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
// CHECK:         ^bb0(%[[S:.*]]: f32, %[[T1:.*]]: f32, %[[T2:.*]]: f32, %{{.*}}: f32):
// CHECK:           %[[M:.*]] = arith.mulf %[[T1]], %[[V]] : f32
// CHECK:           %[[D:.*]] = arith.divf %[[M]], %[[T2]] : f32
// CHECK:           %[[R:.*]] = arith.addf %[[S]], %[[D]] : f32
// CHECK:           linalg.yield %[[R]] : f32
terra.graph @addcdiv_inplace {
  %p = terra.feed 1 : tensor<4xf32>
  %m = terra.feed 2 : tensor<4xf32>
  %d = terra.feed 3 : tensor<4xf32>
  %r = terra.op "aten.addcdiv_"(%p, %m, %d) args {value = -1.0e-03 : f64} : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  terra.fetch 0 %r : tensor<4xf32>
}

// -----

// lerp picks ATen's formula by |weight| < 0.5; a constant weight folds the
// choice: self + weight * (end - self) here.
// CHECK-LABEL: terra.graph @lerp_scalar
// CHECK:         %[[W:.*]] = arith.constant 1.000000e-01 : f32
// CHECK:         %[[D:.*]] = tensor.dim %{{.*}}, %c0 : tensor<?x4xf32>
// CHECK:         tensor.empty(%[[D]]) : tensor<?x4xf32>
// CHECK:         linalg.generic
// CHECK:         ^bb0(%[[S:.*]]: f32, %[[E:.*]]: f32, %{{.*}}: f32):
// CHECK:           %[[DIFF:.*]] = arith.subf %[[E]], %[[S]] : f32
// CHECK:           %[[M:.*]] = arith.mulf %[[DIFF]], %[[W]] : f32
// CHECK:           %[[R:.*]] = arith.addf %[[S]], %[[M]] : f32
// CHECK:           linalg.yield %[[R]] : f32
terra.graph @lerp_scalar {
  %a = terra.feed 1 : tensor<?x4xf32>
  %b = terra.feed 2 : tensor<?x4xf32>
  %r = terra.op "aten.lerp_.Scalar"(%a, %b) args {weight = 1.0e-01 : f64} : (tensor<?x4xf32>, tensor<?x4xf32>) -> tensor<?x4xf32>
  terra.fetch 0 %r : tensor<?x4xf32>
}

// -----

// With a tensor weight the choice is made per element.
// CHECK-LABEL: terra.graph @lerp_tensor
// CHECK:         linalg.generic
// CHECK:         ^bb0(%[[S:.*]]: f32, %[[E:.*]]: f32, %[[W:.*]]: f32, %{{.*}}: f32):
// CHECK:           %[[A:.*]] = math.absf %[[W]] : f32
// CHECK:           %[[SMALL:.*]] = arith.cmpf olt, %[[A]], %{{.*}} : f32
// CHECK:           %[[DIFF:.*]] = arith.subf %[[E]], %[[S]] : f32
// CHECK:           %[[WD:.*]] = arith.mulf %[[W]], %[[DIFF]] : f32
// CHECK:           %[[LO:.*]] = arith.addf %[[S]], %[[WD]] : f32
// CHECK:           %[[OMW:.*]] = arith.subf %{{.*}}, %[[W]] : f32
// CHECK:           %[[DW:.*]] = arith.mulf %[[DIFF]], %[[OMW]] : f32
// CHECK:           %[[HI:.*]] = arith.subf %[[E]], %[[DW]] : f32
// CHECK:           arith.select %[[SMALL]], %[[LO]], %[[HI]] : f32
terra.graph @lerp_tensor {
  %a = terra.feed 1 : tensor<4xf32>
  %b = terra.feed 2 : tensor<4xf32>
  %w = terra.feed 3 : tensor<4xf32>
  %r = terra.op "aten.lerp.Tensor"(%a, %b, %w) : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  terra.fetch 0 %r : tensor<4xf32>
}

// -----

// Operands are the lists one after the other: self[0], self[1], other[0], other[1].
// CHECK-LABEL: terra.graph @foreach_add_list
// CHECK:         %[[A0:.*]] = terra.feed 1
// CHECK:         %[[A1:.*]] = terra.feed 2
// CHECK:         %[[B0:.*]] = terra.feed 3
// CHECK:         %[[B1:.*]] = terra.feed 4
// CHECK:         %[[R0:.*]] = linalg.generic {{.*}} ins(%[[A0]], %[[B0]] : tensor<3xf32>, tensor<3xf32>)
// CHECK:         %[[R1:.*]] = linalg.generic {{.*}} ins(%[[A1]], %[[B1]] : tensor<2x5xf32>, tensor<2x5xf32>)
// CHECK:         terra.fetch 0 %[[R0]]
// CHECK:         terra.fetch 1 %[[R1]]
terra.graph @foreach_add_list {
  %a0 = terra.feed 1 : tensor<3xf32>
  %a1 = terra.feed 2 : tensor<2x5xf32>
  %b0 = terra.feed 3 : tensor<3xf32>
  %b1 = terra.feed 4 : tensor<2x5xf32>
  %r:2 = terra.op "aten._foreach_add_.List"(%a0, %a1, %b0, %b1) args {alpha = 5.0e-01 : f64} : (tensor<3xf32>, tensor<2x5xf32>, tensor<3xf32>, tensor<2x5xf32>) -> (tensor<3xf32>, tensor<2x5xf32>)
  terra.fetch 0 %r#0 : tensor<3xf32>
  terra.fetch 1 %r#1 : tensor<2x5xf32>
}

// -----

// A ScalarList gives element i its own scalar.
// CHECK-LABEL: terra.graph @foreach_div_scalar_list
// CHECK-DAG:     %[[C4:.*]] = arith.constant 4.000000e+00 : f32
// CHECK-DAG:     %[[C2:.*]] = arith.constant 2.000000e+00 : f32
// CHECK:         linalg.generic
// CHECK:           arith.divf %{{.*}}, %[[C2]] : f32
// CHECK:         linalg.generic
// CHECK:           arith.divf %{{.*}}, %[[C4]] : f32
terra.graph @foreach_div_scalar_list {
  %a0 = terra.feed 1 : tensor<3xf32>
  %a1 = terra.feed 2 : tensor<2xf32>
  %r:2 = terra.op "aten._foreach_div.ScalarList"(%a0, %a1) args {scalars = [2.0 : f64, 4.0 : f64]} : (tensor<3xf32>, tensor<2xf32>) -> (tensor<3xf32>, tensor<2xf32>)
  terra.fetch 0 %r#0 : tensor<3xf32>
  terra.fetch 1 %r#1 : tensor<2xf32>
}

// -----

// A relaxed scalar list (front end: relax.py) is fed as a trailing 1-d
// operand: element i's scalar is extracted from it, cast to the element type.
// CHECK-LABEL: terra.graph @foreach_addcdiv_fed_scalars
// CHECK-DAG:     %[[I0:.*]] = arith.constant 0 : index
// CHECK-DAG:     %[[I1:.*]] = arith.constant 1 : index
// CHECK:         %[[S0:.*]] = tensor.extract %[[S:.*]][%[[I0]]] : tensor<2xf32>
// CHECK:         linalg.generic
// CHECK:           arith.mulf %[[S0]], %{{.*}} : f32
// CHECK:         %[[S1:.*]] = tensor.extract %[[S]][%[[I1]]] : tensor<2xf32>
// CHECK:         linalg.generic
// CHECK:           arith.mulf %[[S1]], %{{.*}} : f32
terra.graph @foreach_addcdiv_fed_scalars {
  %p0 = terra.feed 1 : tensor<3xf32>
  %p1 = terra.feed 2 : tensor<2xf32>
  %s = terra.feed 3 : tensor<2xf32>
  %r:2 = terra.op "aten._foreach_addcdiv_.ScalarList"(%p0, %p1, %p0, %p1, %p0, %p1, %s) : (tensor<3xf32>, tensor<2xf32>, tensor<3xf32>, tensor<2xf32>, tensor<3xf32>, tensor<2xf32>, tensor<2xf32>) -> (tensor<3xf32>, tensor<2xf32>)
  terra.fetch 0 %r#0 : tensor<3xf32>
  terra.fetch 1 %r#1 : tensor<2xf32>
}

// -----

// A relaxed alpha is fed as a trailing 0-d operand shared by every element.
// CHECK-LABEL: terra.graph @foreach_add_fed_alpha
// CHECK:         %[[A:.*]] = tensor.extract %[[LR:.*]][] : tensor<f32>
// CHECK:         linalg.generic
// CHECK:           arith.mulf %{{.*}}, %[[A]] : f32
// CHECK:         %[[B:.*]] = tensor.extract %[[LR]][] : tensor<f32>
// CHECK:         linalg.generic
// CHECK:           arith.mulf %{{.*}}, %[[B]] : f32
terra.graph @foreach_add_fed_alpha {
  %a0 = terra.feed 1 : tensor<3xf32>
  %a1 = terra.feed 2 : tensor<2xf32>
  %lr = terra.feed 3 : tensor<f32>
  %r:2 = terra.op "aten._foreach_add_.List"(%a0, %a1, %a0, %a1, %lr) : (tensor<3xf32>, tensor<2xf32>, tensor<3xf32>, tensor<2xf32>, tensor<f32>) -> (tensor<3xf32>, tensor<2xf32>)
  terra.fetch 0 %r#0 : tensor<3xf32>
  terra.fetch 1 %r#1 : tensor<2xf32>
}

// -----

// Fed scalars that do not match the lists (one per element): left for the host.
// CHECK-LABEL: terra.graph @foreach_fed_scalars_wrong_length_stays
// CHECK:         terra.op "aten._foreach_div_.ScalarList"
// CHECK-NOT:     linalg.generic
terra.graph @foreach_fed_scalars_wrong_length_stays {
  %a0 = terra.feed 1 : tensor<3xf32>
  %a1 = terra.feed 2 : tensor<2xf32>
  %s = terra.feed 3 : tensor<3xf32>
  %r:2 = terra.op "aten._foreach_div_.ScalarList"(%a0, %a1, %s) : (tensor<3xf32>, tensor<2xf32>, tensor<3xf32>) -> (tensor<3xf32>, tensor<2xf32>)
  terra.fetch 0 %r#0 : tensor<3xf32>
  terra.fetch 1 %r#1 : tensor<2xf32>
}

// -----

// Operand count not a multiple of the result count: left for the host.
// CHECK-LABEL: terra.graph @foreach_bad_arity_stays
// CHECK:         terra.op "aten._foreach_mul.List"
// CHECK-NOT:     linalg.generic
terra.graph @foreach_bad_arity_stays {
  %a0 = terra.feed 1 : tensor<3xf32>
  %a1 = terra.feed 2 : tensor<2xf32>
  %b0 = terra.feed 3 : tensor<3xf32>
  %r:2 = terra.op "aten._foreach_mul.List"(%a0, %a1, %b0) : (tensor<3xf32>, tensor<2xf32>, tensor<3xf32>) -> (tensor<3xf32>, tensor<2xf32>)
  terra.fetch 0 %r#0 : tensor<3xf32>
  terra.fetch 1 %r#1 : tensor<2xf32>
}

// -----

// Integer addcdiv is an error in PyTorch: not lowered.
// CHECK-LABEL: terra.graph @addcdiv_int_stays
// CHECK:         terra.op "aten.addcdiv"
terra.graph @addcdiv_int_stays {
  %p = terra.feed 1 : tensor<4xi64>
  %r = terra.op "aten.addcdiv"(%p, %p, %p) : (tensor<4xi64>, tensor<4xi64>, tensor<4xi64>) -> tensor<4xi64>
  terra.fetch 0 %r : tensor<4xi64>
}

// -----

// torch 2.x's `.Tensor` overloads: a 0-d `other` shared by every element
// (Adam's step counters + tensor(1.0), alpha 2 here), cast to each
// element's type; a fed (relaxed) alpha is one more 0-d operand.
// CHECK-LABEL: terra.graph @foreach_add_tensor
// CHECK-DAG:     %[[TWO:.*]] = arith.constant 2.000000e+00 : f32
// CHECK-DAG:     %[[O:.*]] = tensor.extract %{{.*}}[] : tensor<f64>
// CHECK:         %[[OF:.*]] = arith.truncf %[[O]] : f64 to f32
// CHECK:         %[[S:.*]] = arith.mulf %[[OF]], %[[TWO]] : f32
// CHECK:         linalg.generic
// CHECK:           arith.addf %{{.*}}, %[[S]] : f32
// CHECK:         linalg.generic
// CHECK-LABEL: terra.graph @foreach_mul_tensor_fed
// CHECK:         %[[C:.*]] = tensor.extract %{{.*}}[] : tensor<f32>
// CHECK:         linalg.generic
// CHECK:           arith.mulf %{{.*}}, %[[C]] : f32
// CHECK-LABEL: terra.graph @foreach_sub_tensor_fed_alpha
// CHECK:         %[[O2:.*]] = tensor.extract %{{.*}}[] : tensor<f32>
// CHECK:         %[[A2:.*]] = tensor.extract %{{.*}}[] : tensor<f32>
// CHECK:         %[[S2:.*]] = arith.mulf %[[A2]], %[[O2]] : f32
// CHECK:         arith.subf %{{.*}}, %[[S2]] : f32
// CHECK-LABEL: terra.graph @foreach_add_tensor_not_0d_stays
// CHECK:         terra.op "aten._foreach_add_.Tensor"
terra.graph @foreach_add_tensor {
  %a0 = terra.feed 1 : tensor<f32>
  %a1 = terra.feed 2 : tensor<f32>
  %one = terra.feed 3 : tensor<f64>
  %r:2 = terra.op "aten._foreach_add_.Tensor"(%a0, %a1, %one) args {alpha = 2.0 : f64} : (tensor<f32>, tensor<f32>, tensor<f64>) -> (tensor<f32>, tensor<f32>)
  terra.fetch 0 %r#0 : tensor<f32>
  terra.fetch 1 %r#1 : tensor<f32>
}
terra.graph @foreach_mul_tensor_fed {
  %a0 = terra.feed 1 : tensor<3xf32>
  %c = terra.feed 2 : tensor<f32>
  %r = terra.op "aten._foreach_mul_.Tensor"(%a0, %c) : (tensor<3xf32>, tensor<f32>) -> tensor<3xf32>
  terra.fetch 0 %r : tensor<3xf32>
}
terra.graph @foreach_sub_tensor_fed_alpha {
  %a0 = terra.feed 1 : tensor<3xf32>
  %o = terra.feed 2 : tensor<f32>
  %alpha = terra.feed 3 : tensor<f32>
  %r = terra.op "aten._foreach_sub.Tensor"(%a0, %o, %alpha) : (tensor<3xf32>, tensor<f32>, tensor<f32>) -> tensor<3xf32>
  terra.fetch 0 %r : tensor<3xf32>
}
terra.graph @foreach_add_tensor_not_0d_stays {
  %a0 = terra.feed 1 : tensor<3xf32>
  %o = terra.feed 2 : tensor<3xf32>
  %r = terra.op "aten._foreach_add_.Tensor"(%a0, %o) : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  terra.fetch 0 %r : tensor<3xf32>
}
