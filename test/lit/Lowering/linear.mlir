// Matrix products lower to named linalg ops on zero-filled inits; a plain
// addmm (a linear layer) accumulates into the broadcast bias, as ATen does,
// and a scaled one adds the scaled bias after the product; dynamic
// contraction dims get a runtime guard.
// RUN: terra-opt %s -split-input-file -terra-convert-to-linalg | FileCheck %s

// CHECK-LABEL: terra.graph @mm
// CHECK:         %[[Z:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%{{.*}} : tensor<5x3xf32>)
// CHECK:         linalg.matmul ins(%{{.*}}, %{{.*}} : tensor<5x7xf32>, tensor<7x3xf32>) outs(%[[Z]] : tensor<5x3xf32>)
terra.graph @mm {
  %a = terra.feed 1 : tensor<5x7xf32>
  %b = terra.feed 2 : tensor<7x3xf32>
  %r = terra.op "aten.mm"(%a, %b) : (tensor<5x7xf32>, tensor<7x3xf32>) -> tensor<5x3xf32>
  terra.fetch 0 %r : tensor<5x3xf32>
}

// -----

// CHECK-LABEL: terra.graph @addmm_dynamic
// CHECK:         %[[K1:.*]] = tensor.dim %{{.*}}, %c1 : tensor<?x?xf32>
// CHECK:         %[[K2:.*]] = tensor.dim %{{.*}}, %c0 : tensor<?x3xf32>
// CHECK:         %[[EQ:.*]] = arith.cmpi eq, %[[K1]], %[[K2]]
// CHECK:         cf.assert %[[EQ]], "mismatched contraction dimensions"
// CHECK:         %[[INIT:.*]] = linalg.generic {{.*}} ins(%{{.*}} : tensor<3xf32>) outs(%{{.*}} : tensor<?x3xf32>)
// CHECK-NEXT:    ^bb0(%[[IN:.*]]: f32, %{{.*}}: f32):
// CHECK-NEXT:      linalg.yield %[[IN]] : f32
// CHECK:         %[[R:.*]] = linalg.matmul ins(%{{.*}}, %{{.*}} : tensor<?x?xf32>, tensor<?x3xf32>) outs(%[[INIT]] : tensor<?x3xf32>)
// CHECK-NOT:     linalg.generic
// CHECK:         terra.fetch 0 %[[R]]
terra.graph @addmm_dynamic {
  %bias = terra.feed 1 : tensor<3xf32>
  %a = terra.feed 2 : tensor<?x?xf32>
  %b = terra.feed 3 : tensor<?x3xf32>
  %r = terra.op "aten.addmm"(%bias, %a, %b) : (tensor<3xf32>, tensor<?x?xf32>, tensor<?x3xf32>) -> tensor<?x3xf32>
  terra.fetch 0 %r : tensor<?x3xf32>
}

// -----

// beta/alpha scaling: the product on a zero fill, then one elementwise op.
// CHECK-LABEL: terra.graph @addmm_scaled
// CHECK:         %[[Z:.*]] = linalg.fill
// CHECK:         %[[P:.*]] = linalg.matmul {{.*}} outs(%[[Z]] : tensor<4x3xf32>)
// CHECK:         linalg.generic {{.*}} ins(%{{.*}}, %[[P]] : tensor<3xf32>, tensor<4x3xf32>)
// CHECK:           arith.mulf
// CHECK:           arith.mulf
// CHECK:           arith.addf
terra.graph @addmm_scaled {
  %bias = terra.feed 1 : tensor<3xf32>
  %a = terra.feed 2 : tensor<4x5xf32>
  %b = terra.feed 3 : tensor<5x3xf32>
  %r = terra.op "aten.addmm"(%bias, %a, %b) args {beta = 0.5 : f64, alpha = 2.0 : f64} : (tensor<3xf32>, tensor<4x5xf32>, tensor<5x3xf32>) -> tensor<4x3xf32>
  terra.fetch 0 %r : tensor<4x3xf32>
}

// -----

// CHECK-LABEL: terra.graph @bmm
// CHECK:         linalg.batch_matmul ins(%{{.*}}, %{{.*}} : tensor<2x5x7xf32>, tensor<2x7x3xf32>)
terra.graph @bmm {
  %a = terra.feed 1 : tensor<2x5x7xf32>
  %b = terra.feed 2 : tensor<2x7x3xf32>
  %r = terra.op "aten.bmm"(%a, %b) : (tensor<2x5x7xf32>, tensor<2x7x3xf32>) -> tensor<2x5x3xf32>
  terra.fetch 0 %r : tensor<2x5x3xf32>
}

// -----

// Integer matmul is not lowered: it becomes a host op.
// CHECK-LABEL: terra.graph @int_mm_stays
// CHECK:         terra.op "aten.mm"
terra.graph @int_mm_stays {
  %a = terra.feed 1 : tensor<5x7xi64>
  %b = terra.feed 2 : tensor<7x3xi64>
  %r = terra.op "aten.mm"(%a, %b) : (tensor<5x7xi64>, tensor<7x3xi64>) -> tensor<5x3xi64>
  terra.fetch 0 %r : tensor<5x3xi64>
}

// -----

// bf16 and f16 products accumulate in f32 and round once; addmm adds the
// bias in f32 before rounding.
// CHECK-LABEL: terra.graph @bf16_mm_accumulates_in_f32
// CHECK:         %[[Z:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%{{.*}} : tensor<5x3xf32>)
// CHECK:         %[[P:.*]] = linalg.matmul ins(%{{.*}}, %{{.*}} : tensor<5x7xbf16>, tensor<7x3xbf16>) outs(%[[Z]] : tensor<5x3xf32>)
// CHECK:         linalg.generic {{.*}} ins(%[[P]] : tensor<5x3xf32>) outs(%{{.*}} : tensor<5x3xbf16>)
// CHECK:           arith.truncf %{{.*}} : f32 to bf16
terra.graph @bf16_mm_accumulates_in_f32 {
  %a = terra.feed 1 : tensor<5x7xbf16>
  %b = terra.feed 2 : tensor<7x3xbf16>
  %r = terra.op "aten.mm"(%a, %b) : (tensor<5x7xbf16>, tensor<7x3xbf16>) -> tensor<5x3xbf16>
  terra.fetch 0 %r : tensor<5x3xbf16>
}

// -----

// CHECK-LABEL: terra.graph @f16_addmm_adds_the_bias_in_f32
// CHECK:         %[[P:.*]] = linalg.matmul ins(%{{.*}}, %{{.*}} : tensor<5x7xf16>, tensor<7x3xf16>) outs(%{{.*}} : tensor<5x3xf32>)
// CHECK:         linalg.generic {{.*}} ins(%{{.*}}, %[[P]] : tensor<3xf16>, tensor<5x3xf32>) outs(%{{.*}} : tensor<5x3xf16>)
// CHECK:           %[[B:.*]] = arith.extf %{{.*}} : f16 to f32
// CHECK:           %[[S:.*]] = arith.addf %[[B]], %{{.*}} : f32
// CHECK:           arith.truncf %[[S]] : f32 to f16
terra.graph @f16_addmm_adds_the_bias_in_f32 {
  %bias = terra.feed 1 : tensor<3xf16>
  %a = terra.feed 2 : tensor<5x7xf16>
  %b = terra.feed 3 : tensor<7x3xf16>
  %r = terra.op "aten.addmm"(%bias, %a, %b) : (tensor<3xf16>, tensor<5x7xf16>, tensor<7x3xf16>) -> tensor<5x3xf16>
  terra.fetch 0 %r : tensor<5x3xf16>
}
