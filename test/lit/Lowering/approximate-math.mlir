// f32 transcendental functions become polynomial arithmetic (no libm call, so
// the loops around them vectorize); f64 and sqrt/sin/cos stay math ops;
// log of a subnormal argument is rescaled into the normal range first.
// RUN: terra-opt %s -terra-approximate-math | FileCheck %s

// CHECK-LABEL: func.func @approximated
// CHECK-NOT:     math.exp {{.*}} : f32
// CHECK-NOT:     math.erf
// CHECK-NOT:     math.tanh
// CHECK:         math.fma
// CHECK:         math.exp %arg1 : f64
// CHECK:         math.sqrt %arg0 : f32
// CHECK:         math.sin %arg0 : f32
func.func @approximated(%x: f32, %y: f64, %v: vector<8xf32>) -> (f32, f32, f64, vector<8xf32>, f32, f32) {
  %a = math.exp %x : f32
  %b = math.erf %x : f32
  %c = math.exp %y : f64
  %d = math.tanh %v : vector<8xf32>
  %e = math.sqrt %x : f32
  %f = math.sin %x : f32
  return %a, %b, %c, %d, %e, %f : f32, f32, f64, vector<8xf32>, f32, f32
}

// CHECK-LABEL: func.func @log_subnormal
// CHECK-DAG:     %[[MIN:.*]] = arith.constant 1.17549435E-38 : f32
// CHECK-DAG:     %[[SCALE:.*]] = arith.constant 0x4B800000 : f32
// CHECK-DAG:     %[[CORR:.*]] = arith.constant 16.6355324 : f32
// CHECK:         %[[SMALL:.*]] = arith.cmpf olt, %arg0, %[[MIN]] : f32
// CHECK:         %[[SCALED:.*]] = arith.mulf %arg0, %[[SCALE]] : f32
// CHECK:         arith.select %[[SMALL]], %[[SCALED]], %arg0 : f32
// CHECK-NOT:     math.log
// CHECK:         arith.select %[[SMALL]], %[[CORR]]
// CHECK:         arith.subf
func.func @log_subnormal(%x: f32) -> f32 {
  %l = math.log %x : f32
  return %l : f32
}
