// Pointwise ops lower to one broadcasting linalg.generic each.
// RUN: terra-opt %s -split-input-file -terra-convert-to-linalg | FileCheck %s

// CHECK-DAG:   #[[ID:.*]] = affine_map<(d0, d1) -> (d0, d1)>
// CHECK-DAG:   #[[ROW:.*]] = affine_map<(d0, d1) -> (d1)>
// CHECK-LABEL: terra.graph @add_broadcast_alpha
// CHECK:         %[[E:.*]] = tensor.empty() : tensor<3x4xf32>
// CHECK:         linalg.generic {indexing_maps = [#[[ID]], #[[ROW]], #[[ID]]], iterator_types = ["parallel", "parallel"]}
// CHECK-SAME:      ins(%{{.*}}, %{{.*}} : tensor<3x4xf32>, tensor<4xf32>) outs(%[[E]] : tensor<3x4xf32>)
// CHECK:           %[[S:.*]] = arith.mulf %{{.*}}, %{{.*}} : f32
// CHECK:           arith.addf %{{.*}}, %[[S]] : f32
// CHECK-NOT:     terra.op
terra.graph @add_broadcast_alpha {
  %a = terra.feed 1 : tensor<3x4xf32>
  %b = terra.feed 2 : tensor<4xf32>
  %r = terra.op "aten.add.Tensor"(%a, %b) args {alpha = 2 : i64} : (tensor<3x4xf32>, tensor<4xf32>) -> tensor<3x4xf32>
  terra.fetch 0 %r : tensor<3x4xf32>
}

// -----

// A dynamic dimension takes its size from a non-broadcast operand.
// CHECK-LABEL: terra.graph @relu_dynamic
// CHECK:         %[[D:.*]] = tensor.dim %{{.*}}, %c0 : tensor<?x8xf32>
// CHECK:         tensor.empty(%[[D]]) : tensor<?x8xf32>
// CHECK:         linalg.generic
// CHECK:           arith.maximumf
terra.graph @relu_dynamic {
  %a = terra.feed 1 : tensor<?x8xf32>
  %r = terra.op "aten.relu"(%a) : (tensor<?x8xf32>) -> tensor<?x8xf32>
  terra.fetch 0 %r : tensor<?x8xf32>
}

// -----

// Comparisons compute in the input dtype and produce i1.
// CHECK-LABEL: terra.graph @lt_scalar
// CHECK:         linalg.generic
// CHECK:           arith.cmpf olt
// CHECK:           linalg.yield %{{.*}} : i1
terra.graph @lt_scalar {
  %a = terra.feed 1 : tensor<5xf32>
  %r = terra.op "aten.lt.Scalar"(%a) args {other = 0.5 : f64} : (tensor<5xf32>) -> tensor<5xi1>
  terra.fetch 0 %r : tensor<5xi1>
}

// -----

// An unsupported variant (integer sqrt) stays for a host callback.
// CHECK-LABEL: terra.graph @int_sqrt_stays
// CHECK:         terra.op "aten.sqrt"
terra.graph @int_sqrt_stays {
  %a = terra.feed 1 : tensor<5xi64>
  %r = terra.op "aten.sqrt"(%a) : (tensor<5xi64>) -> tensor<5xi64>
  terra.fetch 0 %r : tensor<5xi64>
}

// -----

// Unsigned tensors (torch.uint8) stay for host callbacks: the lowerings'
// signless arithmetic has signed semantics (200 would convert to -56.0).
// CHECK-LABEL: terra.graph @uint8_stays
// CHECK:         terra.op "aten._to_copy"
// CHECK:         terra.op "aten.bitwise_xor.Tensor"
// CHECK-NOT:     linalg.generic
terra.graph @uint8_stays {
  %a = terra.feed 1 : tensor<5xui8>
  %f = terra.op "aten._to_copy"(%a) {dtype = "f32"} : (tensor<5xui8>) -> tensor<5xf32>
  %x = terra.op "aten.bitwise_xor.Tensor"(%a, %a) : (tensor<5xui8>, tensor<5xui8>) -> tensor<5xui8>
  terra.fetch 0 %f : tensor<5xf32>
  terra.fetch 1 %x : tensor<5xui8>
}

// -----

// clamp: a None bound is absent; maximumf then minimumf keep NaN inputs NaN.
// CHECK-LABEL: terra.graph @clamp_bounds
// CHECK:         linalg.generic
// CHECK:           arith.maximumf
// CHECK:           arith.minimumf
// CHECK:         linalg.generic
// CHECK-NOT:       arith.maximumf
// CHECK:           arith.minimumf
// CHECK:         linalg.generic
// CHECK:           arith.maxsi
// CHECK-NOT:     terra.op
terra.graph @clamp_bounds {
  %a = terra.feed 1 : tensor<4xf32>
  %r = terra.op "aten.clamp"(%a) args {min = -1.0 : f64, max = 2.5 : f64} : (tensor<4xf32>) -> tensor<4xf32>
  %s = terra.op "aten.clamp"(%a) args {min, max = 2.5 : f64} : (tensor<4xf32>) -> tensor<4xf32>
  %i = terra.feed 2 : tensor<4xi64>
  %t = terra.op "aten.clamp_min"(%i) args {min = 0 : i64} : (tensor<4xi64>) -> tensor<4xi64>
  terra.fetch 0 %r : tensor<4xf32>
  terra.fetch 1 %s : tensor<4xf32>
  terra.fetch 2 %t : tensor<4xi64>
}

// -----

// rsub(self, other, alpha) = other - alpha * self.
// CHECK-LABEL: terra.graph @rsub_scalar
// CHECK:         %[[ONE:.*]] = arith.constant 1.000000e+00 : f32
// CHECK:         linalg.generic
// CHECK:           %[[S:.*]] = arith.mulf %{{.*}}, %{{.*}} : f32
// CHECK:           arith.subf %{{.*}}, %[[S]] : f32
// CHECK-NOT:     terra.op
terra.graph @rsub_scalar {
  %a = terra.feed 1 : tensor<4xf32>
  %r = terra.op "aten.rsub.Scalar"(%a) args {other = 1.0 : f64, alpha = 2 : i64} : (tensor<4xf32>) -> tensor<4xf32>
  terra.fetch 0 %r : tensor<4xf32>
}

// -----

// triu(x, 1): keep where col - row >= 1 over the last two dims.
// CHECK-LABEL: terra.graph @triu
// CHECK:         linalg.generic
// CHECK:           %[[I:.*]] = linalg.index 1 : index
// CHECK:           %[[J:.*]] = linalg.index 2 : index
// CHECK:           %[[D:.*]] = arith.subi %[[J]], %[[I]]
// CHECK:           arith.cmpi sge, %[[D]], %c1
// CHECK:           arith.select
terra.graph @triu {
  %x = terra.feed 1 : tensor<2x4x4xf32>
  %r = terra.op "aten.triu"(%x) args {diagonal = 1 : i64} : (tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
  terra.fetch 0 %r : tensor<2x4x4xf32>
}

// -----

// In-place forms are recorded functionally: sigmoid_ and tanh_ lower as
// sigmoid and tanh.
// CHECK-LABEL: terra.graph @inplace_sigmoid_tanh
// CHECK:         linalg.generic
// CHECK:           arith.negf
// CHECK:           math.exp
// CHECK:         linalg.generic
// CHECK:           math.tanh
// CHECK-NOT:     terra.op
terra.graph @inplace_sigmoid_tanh {
  %x = terra.feed 1 : tensor<8x8xf32>
  %s = terra.op "aten.sigmoid_"(%x) : (tensor<8x8xf32>) -> tensor<8x8xf32>
  %t = terra.op "aten.tanh_"(%s) : (tensor<8x8xf32>) -> tensor<8x8xf32>
  terra.fetch 0 %t : tensor<8x8xf32>
}

// -----

// xlogy: 0 where x == 0, NaN where y is NaN, x * log(y) otherwise.
// CHECK-LABEL: terra.graph @xlogy
// CHECK:         linalg.generic
// CHECK:           %[[L:.*]] = math.log
// CHECK:           %[[P:.*]] = arith.mulf %{{.*}}, %[[L]]
// CHECK:           %[[Z:.*]] = arith.cmpf oeq
// CHECK:           %[[N:.*]] = arith.cmpf uno
// CHECK:           %[[S:.*]] = arith.select %[[Z]], %{{.*}}, %[[P]]
// CHECK:           arith.select %[[N]], %{{.*}}, %[[S]]
// CHECK-NOT:     terra.op
terra.graph @xlogy {
  %x = terra.feed 1 : tensor<4x5xf32>
  %y = terra.feed 2 : tensor<5xf32>
  %r = terra.op "aten.xlogy.Tensor"(%x, %y) : (tensor<4x5xf32>, tensor<5xf32>) -> tensor<4x5xf32>
  terra.fetch 0 %r : tensor<4x5xf32>
}

// -----

// masked_fill: the value where the (broadcast) mask holds, else self.
// CHECK-LABEL: terra.graph @masked_fill
// CHECK:         %[[V:.*]] = arith.constant -2.500000e+00 : f32
// CHECK:         linalg.generic
// CHECK:           arith.select %{{.*}}, %[[V]], %{{.*}} : f32
// CHECK-NOT:     terra.op
terra.graph @masked_fill {
  %x = terra.feed 1 : tensor<4x5xf32>
  %m = terra.feed 2 : tensor<5xi1>
  %r = terra.op "aten.masked_fill.Scalar"(%x, %m) args {value = -2.5 : f64} : (tensor<4x5xf32>, tensor<5xi1>) -> tensor<4x5xf32>
  terra.fetch 0 %r : tensor<4x5xf32>
}

// -----

// remainder: Python's modulo (the divisor's sign); bitwise_not: xor -1.
// CHECK-LABEL: terra.graph @remainder_bitwise_not
// CHECK:         linalg.generic
// CHECK:           %[[M:.*]] = arith.remf
// CHECK:           arith.addf %[[M]]
// CHECK:           arith.select
// CHECK:         linalg.generic
// CHECK:           arith.remsi
// CHECK:         linalg.generic
// CHECK:           arith.xori %{{.*}}, %c-1_i64
// CHECK-NOT:     terra.op
terra.graph @remainder_bitwise_not {
  %x = terra.feed 1 : tensor<6xf32>
  %i = terra.feed 2 : tensor<6xi64>
  %r = terra.op "aten.remainder.Scalar"(%x) args {other = 2.0 : f64} : (tensor<6xf32>) -> tensor<6xf32>
  %s = terra.op "aten.remainder.Tensor"(%i, %i) : (tensor<6xi64>, tensor<6xi64>) -> tensor<6xi64>
  %n = terra.op "aten.bitwise_not"(%s) : (tensor<6xi64>) -> tensor<6xi64>
  terra.fetch 0 %r : tensor<6xf32>
  terra.fetch 1 %n : tensor<6xi64>
}
