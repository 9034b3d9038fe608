// scf.index_switch with tensor results becomes a chain of scf.if; one-shot
// bufferization then keeps the buffers of the two results (the same value
// yielded twice, and a value defined before the switch) apart.
// RUN: terra-opt %s -split-input-file -terra-switch-to-if | FileCheck %s
// RUN: terra-opt %s -split-input-file -terra-switch-to-if -one-shot-bufferize="bufferize-function-boundaries" | FileCheck %s --check-prefix=BUF

// CHECK-LABEL: func.func @three_cases
// CHECK:         %[[C2:.*]] = arith.constant 2 : index
// CHECK:         %[[IS2:.*]] = arith.cmpi eq, %arg0, %[[C2]] : index
// CHECK:         %[[R:.*]]:2 = scf.if %[[IS2]] -> (tensor<4xf32>, tensor<4xf32>) {
// CHECK:           linalg.fill
// CHECK:           scf.yield %[[Z:.*]], %[[Z]]
// CHECK:         } else {
// CHECK:           %[[C5:.*]] = arith.constant 5 : index
// CHECK:           %[[IS5:.*]] = arith.cmpi eq, %arg0, %[[C5]] : index
// CHECK:           %[[IN:.*]]:2 = scf.if %[[IS5]] -> (tensor<4xf32>, tensor<4xf32>) {
// CHECK:             scf.yield %arg1, %arg1
// CHECK:           } else {
// CHECK:             tensor.empty
// CHECK:           }
// CHECK:           scf.yield %[[IN]]#0, %[[IN]]#1
// CHECK:         }
// CHECK-NOT:     scf.index_switch
// CHECK:         linalg.add ins(%[[R]]#0, %arg1
// The add gets a fresh buffer: writing into the switch result in place would
// also change the result it shares a buffer with.
// BUF-LABEL: func.func @three_cases
// BUF:         %[[R:.*]]:2 = scf.if
// BUF:         scf.yield %{{.*}}#0, %{{.*}}#1
// BUF-NEXT:    }
// BUF-NEXT:    %[[OUT:.*]] = memref.alloc() {{.*}} : memref<4xf32>
// BUF-NEXT:    linalg.add ins(%[[R]]#0, %arg1 : {{.*}}) outs(%[[OUT]] : memref<4xf32>)
func.func @three_cases(%c: index, %v: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %cst = arith.constant 0.0 : f32
  %r:2 = scf.index_switch %c -> tensor<4xf32>, tensor<4xf32>
  case 2 {
    %e = tensor.empty() : tensor<4xf32>
    %z = linalg.fill ins(%cst : f32) outs(%e : tensor<4xf32>) -> tensor<4xf32>
    scf.yield %z, %z : tensor<4xf32>, tensor<4xf32>
  }
  case 5 {
    scf.yield %v, %v : tensor<4xf32>, tensor<4xf32>
  }
  default {
    %e = tensor.empty() : tensor<4xf32>
    scf.yield %e, %e : tensor<4xf32>, tensor<4xf32>
  }
  %a = linalg.add ins(%r#0, %v : tensor<4xf32>, tensor<4xf32>) outs(%r#0 : tensor<4xf32>) -> tensor<4xf32>
  return %a, %r#1 : tensor<4xf32>, tensor<4xf32>
}

// -----

// Switches without tensor results (communication only) stay.
// CHECK-LABEL: func.func @no_tensor_results
// CHECK:         scf.index_switch
func.func @no_tensor_results(%c: index) {
  scf.index_switch %c
  case 0 {
    scf.yield
  }
  default {
  }
  return
}
