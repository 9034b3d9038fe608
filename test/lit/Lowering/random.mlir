// Random ops: Philox4x32-10 in arith inside one linalg.generic, counter from
// linalg.index (see lib/Lowering/TerraToLinalg/Random.cpp for the convention).
// RUN: terra-opt %s -split-input-file -terra-convert-to-linalg | FileCheck %s

// Seed and offset as 0-d operands: split into 32-bit words outside the
// loop; each element runs ten Philox rounds (two 32x32->64 products each)
// and keeps the element iff u < 1 - p. Output and mask come from the same
// generic.
// CHECK-LABEL: terra.graph @dropout_seed_operands
// CHECK:         %[[X:.*]] = terra.feed 1 : tensor<4xf32>
// CHECK:         %[[SEED:.*]] = tensor.extract %{{.*}}[] : tensor<i64>
// CHECK:         %[[OFF:.*]] = tensor.extract %{{.*}}[] : tensor<i64>
// CHECK:         %[[K0:.*]] = arith.trunci %[[SEED]] : i64 to i32
// CHECK:         %[[R:.*]]:2 = linalg.generic
// CHECK-SAME:      ins(%[[X]] : tensor<4xf32>) outs(%{{.*}}, %{{.*}} : tensor<4xf32>, tensor<4xi1>)
// CHECK:           %[[I:.*]] = linalg.index 0 : index
// CHECK-COUNT-19:  arith.mului_extended
// CHECK:           %[[U24:.*]] = arith.shrui %{{.*}}, %c8_i32 : i32
// CHECK:           %[[UF:.*]] = arith.uitofp %[[U24]] : i32 to f64
// CHECK:           %[[U:.*]] = arith.mulf %[[UF]], %{{.*}} : f64
// CHECK:           %[[KEEP:.*]] = arith.cmpf olt, %[[U]], %{{.*}} : f64
// CHECK:           %[[M:.*]] = arith.uitofp %[[KEEP]] : i1 to f32
// CHECK:           %[[XM:.*]] = arith.mulf %{{.*}}, %[[M]] : f32
// CHECK:           %[[OUT:.*]] = arith.mulf %[[XM]], %{{.*}} : f32
// CHECK:           linalg.yield %[[OUT]], %[[KEEP]] : f32, i1
// CHECK:         terra.fetch 0 %[[R]]#0
// CHECK:         terra.fetch 1 %[[R]]#1
terra.graph @dropout_seed_operands {
  %a = terra.feed 1 : tensor<4xf32>
  %s = terra.feed 2 : tensor<i64>
  %o = terra.feed 3 : tensor<i64>
  %r:2 = terra.op "aten.native_dropout"(%a, %s, %o) args {p = 5.0e-01 : f64, train = true} : (tensor<4xf32>, tensor<i64>, tensor<i64>) -> (tensor<4xf32>, tensor<4xi1>)
  terra.fetch 0 %r#0 : tensor<4xf32>
  terra.fetch 1 %r#1 : tensor<4xi1>
}

// -----

// The element counter is the row-major linear index.
// CHECK-LABEL: terra.graph @dropout_dynamic_args
// CHECK:         linalg.generic
// CHECK:           %[[I0:.*]] = linalg.index 0 : index
// CHECK:           %[[S:.*]] = arith.muli %[[I0]], %c8 : index
// CHECK:           %[[I1:.*]] = linalg.index 1 : index
// CHECK:           %[[LIN:.*]] = arith.addi %[[S]], %[[I1]] : index
// CHECK:           arith.index_cast %[[LIN]] : index to i64
terra.graph @dropout_dynamic_args {
  %a = terra.feed 1 : tensor<?x8xf32>
  %r:2 = terra.op "aten.native_dropout"(%a) args {p = 2.5e-01 : f64, train = true, seed = 42 : i64, offset = 0 : i64} : (tensor<?x8xf32>) -> (tensor<?x8xf32>, tensor<?x8xi1>)
  terra.fetch 0 %r#0 : tensor<?x8xf32>
  terra.fetch 1 %r#1 : tensor<?x8xi1>
}

// -----

// Not training: the input passes through and the mask is all true.
// CHECK-LABEL: terra.graph @dropout_eval
// CHECK:         %[[T:.*]] = arith.constant true
// CHECK:         %[[X:.*]] = terra.feed 1
// CHECK:         %[[M:.*]] = linalg.fill ins(%[[T]] : i1) outs(%{{.*}} : tensor<4xi1>)
// CHECK:         terra.fetch 0 %[[X]]
// CHECK:         terra.fetch 1 %[[M]]
terra.graph @dropout_eval {
  %a = terra.feed 1 : tensor<4xf32>
  %r:2 = terra.op "aten.native_dropout"(%a) args {p = 5.0e-01 : f64, train = false} : (tensor<4xf32>) -> (tensor<4xf32>, tensor<4xi1>)
  terra.fetch 0 %r#0 : tensor<4xf32>
  terra.fetch 1 %r#1 : tensor<4xi1>
}

// -----

// CHECK-LABEL: terra.graph @dropout_backward
// CHECK:         %[[SC:.*]] = arith.constant 2.000000e+00 : f32
// CHECK:         linalg.generic
// CHECK:         ^bb0(%[[G:.*]]: f32, %[[MK:.*]]: i1, %{{.*}}: f32):
// CHECK:           %[[MF:.*]] = arith.uitofp %[[MK]] : i1 to f32
// CHECK:           %[[GM:.*]] = arith.mulf %[[G]], %[[MF]] : f32
// CHECK:           arith.mulf %[[GM]], %[[SC]] : f32
terra.graph @dropout_backward {
  %g = terra.feed 1 : tensor<4xf32>
  %m = terra.feed 2 : tensor<4xi1>
  %r = terra.op "aten.native_dropout_backward"(%g, %m) args {scale = 2.0 : f64} : (tensor<4xf32>, tensor<4xi1>) -> tensor<4xf32>
  terra.fetch 0 %r : tensor<4xf32>
}

// -----

// No seed/offset (args or operands): left for the host, which uses torch's RNG.
// CHECK-LABEL: terra.graph @dropout_without_seed_stays
// CHECK-NEXT:    terra.feed 1
// CHECK-NEXT:    terra.op "aten.native_dropout"
terra.graph @dropout_without_seed_stays {
  %a = terra.feed 1 : tensor<4xf32>
  %r:2 = terra.op "aten.native_dropout"(%a) args {p = 5.0e-01 : f64, train = true} : (tensor<4xf32>) -> (tensor<4xf32>, tensor<4xi1>)
  terra.fetch 0 %r#0 : tensor<4xf32>
  terra.fetch 1 %r#1 : tensor<4xi1>
}
