// terra-lower-graph: a guard in a linalg op's body (an index checked per
// element) calls terra_rt_check only when it fails; a guard outside any
// linalg op (a state's static size, checked once) calls it directly.
// RUN: terra-opt %s -terra-convert-to-linalg -terra-lower-graph | FileCheck %s

// CHECK-LABEL: func.func @gather()
// CHECK:         %[[OK:.*]] = arith.andi %{{.*}}, %{{.*}} : i1
// CHECK-NEXT:    %[[ID:.*]] = arith.constant 0 : i64
// CHECK-NEXT:    call @terra_rt_check(%[[OK]], %[[ID]]) : (i1, i64) -> ()
// CHECK:         linalg.generic
// CHECK:           %[[IN:.*]] = arith.cmpi ult, %{{.*}}, %{{.*}} : index
// CHECK-NEXT:      %[[TRUE:.*]] = arith.constant true
// CHECK-NEXT:      %[[BAD:.*]] = arith.xori %[[IN]], %[[TRUE]] : i1
// CHECK-NEXT:      scf.if %[[BAD]] {
// CHECK-NEXT:        %[[MSG:.*]] = arith.constant {{[1-9][0-9]*}} : i64
// CHECK-NEXT:        func.call @terra_rt_check(%[[IN]], %[[MSG]]) : (i1, i64) -> ()
// CHECK-NEXT:      }
// CHECK:           tensor.extract
// CHECK:           linalg.yield
module {
  terra.graph @gather {
    %x = terra.state "table" : tensor<4x5xf32>
    %i = terra.feed 0 : tensor<?xi64>
    %g = terra.op "aten.index.Tensor"(%x, %i) : (tensor<4x5xf32>, tensor<?xi64>) -> tensor<?x5xf32>
    terra.fetch 1 %g : tensor<?x5xf32>
  }
}
