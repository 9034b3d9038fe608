// Losses: pointwise generics, reductions into 0-d tensors, and nll_loss's
// per-row gather of the target class (tensor.extract in the body). A None
// weight is no operand (`weight = unit` in the args).
// RUN: terra-opt %s -split-input-file -terra-convert-to-linalg | FileCheck %s

// Mean: sum of squares over every dim, divided by the element count.
// CHECK-DAG:   #[[ID:.*]] = affine_map<(d0, d1) -> (d0, d1)>
// CHECK-DAG:   #[[ALL:.*]] = affine_map<(d0, d1) -> ()>
// CHECK-LABEL: terra.graph @mse_loss_mean
// CHECK:         %[[N:.*]] = arith.constant 2.000000e+01 : f32
// CHECK:         %[[S:.*]] = linalg.generic {indexing_maps = [#[[ID]], #[[ID]], #[[ALL]]], iterator_types = ["reduction", "reduction"]}
// CHECK-SAME:      outs(%{{.*}} : tensor<f32>)
// CHECK:           %[[D:.*]] = arith.subf
// CHECK:           %[[SQ:.*]] = arith.mulf %[[D]], %[[D]]
// CHECK:           arith.addf %{{.*}}, %[[SQ]]
// CHECK:         linalg.generic {{.*}} ins(%[[S]] : tensor<f32>)
// CHECK:           arith.divf %{{.*}}, %[[N]] : f32
terra.graph @mse_loss_mean {
  %a = terra.feed 1 : tensor<4x5xf32>
  %b = terra.feed 2 : tensor<4x5xf32>
  %r = terra.op "aten.mse_loss"(%a, %b) args {reduction = 1 : i64} : (tensor<4x5xf32>, tensor<4x5xf32>) -> tensor<f32>
  terra.fetch 0 %r : tensor<f32>
}

// -----

// CHECK-LABEL: terra.graph @mse_loss_backward_none
// CHECK:         %[[TWO:.*]] = arith.constant 2.000000e+00 : f32
// CHECK:         linalg.generic {{.*}} iterator_types = ["parallel", "parallel"]}
// CHECK:           ^bb0(%[[G:.*]]: f32, %[[X:.*]]: f32, %[[T:.*]]: f32, %{{.*}}: f32):
// CHECK:           %[[D:.*]] = arith.subf %[[X]], %[[T]]
// CHECK:           %[[M:.*]] = arith.mulf %[[D]], %[[TWO]]
// CHECK:           arith.mulf %[[M]], %[[G]]
terra.graph @mse_loss_backward_none {
  %g = terra.feed 1 : tensor<4x5xf32>
  %a = terra.feed 2 : tensor<4x5xf32>
  %b = terra.feed 3 : tensor<4x5xf32>
  %r = terra.op "aten.mse_loss_backward"(%g, %a, %b) args {reduction = 0 : i64} : (tensor<4x5xf32>, tensor<4x5xf32>, tensor<4x5xf32>) -> tensor<4x5xf32>
  terra.fetch 0 %r : tensor<4x5xf32>
}

// -----

// Weighted mean over a dynamic batch: one reduction produces the loss sum and
// total_weight; ignored rows read class 0 with weight 0.
// CHECK-LABEL: terra.graph @nll_loss_weighted_mean
// CHECK:         %[[X:.*]] = terra.feed 1 : tensor<?x4xf32>
// CHECK:         %[[T:.*]] = terra.feed 2 : tensor<?xi64>
// CHECK:         %[[W:.*]] = terra.feed 3 : tensor<4xf32>
// CHECK:         cf.assert %{{.*}}, "nll_loss: self and target batch sizes differ"
// CHECK:         %[[R:.*]]:2 = linalg.generic {{.*}} iterator_types = ["reduction"]} ins(%[[T]] : tensor<?xi64>) outs(%{{.*}}, %{{.*}} : tensor<f32>, tensor<f32>)
// CHECK:           %[[IGN:.*]] = arith.cmpi eq, %{{.*}}, %c-100_i64 : i64
// CHECK:           %[[CLS:.*]] = arith.select %[[IGN]], %c0, %{{.*}} : index
// CHECK:           %[[WC:.*]] = tensor.extract %[[W]][%[[CLS]]] : tensor<4xf32>
// CHECK:           %[[ROW:.*]] = linalg.index 0 : index
// CHECK:           tensor.extract %[[X]][%[[ROW]], %[[CLS]]] : tensor<?x4xf32>
// CHECK:           arith.negf
// CHECK:         %[[MEAN:.*]] = linalg.generic {{.*}} ins(%[[R]]#0, %[[R]]#1 : tensor<f32>, tensor<f32>)
// CHECK:           arith.divf
// CHECK:         terra.fetch 0 %[[MEAN]]
// CHECK:         terra.fetch 1 %[[R]]#1
terra.graph @nll_loss_weighted_mean {
  %x = terra.feed 1 : tensor<?x4xf32>
  %t = terra.feed 2 : tensor<?xi64>
  %w = terra.feed 3 : tensor<4xf32>
  %r:2 = terra.op "aten.nll_loss_forward"(%x, %t, %w) args {ignore_index = -100 : i64, reduction = 1 : i64} : (tensor<?x4xf32>, tensor<?xi64>, tensor<4xf32>) -> (tensor<f32>, tensor<f32>)
  terra.fetch 0 %r#0 : tensor<f32>
  terra.fetch 1 %r#1 : tensor<f32>
}

// -----

// Reduction none: a parallel generic per row; total_weight is 0.
// CHECK-LABEL: terra.graph @nll_loss_no_weight_none
// CHECK:         linalg.generic {{.*}} iterator_types = ["parallel"]} ins(%{{.*}} : tensor<3xi64>) outs(%{{.*}} : tensor<3xf32>)
// CHECK-NOT:       tensor.extract %{{.*}}[%{{.*}}] : tensor<4xf32>
// CHECK:           tensor.extract %{{.*}}[%{{.*}}, %{{.*}}] : tensor<3x4xf32>
// CHECK:         %[[TW:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%{{.*}} : tensor<f32>)
// CHECK:         terra.fetch 1 %[[TW]]
terra.graph @nll_loss_no_weight_none {
  %x = terra.feed 1 : tensor<3x4xf32>
  %t = terra.feed 2 : tensor<3xi64>
  %r:2 = terra.op "aten.nll_loss_forward"(%x, %t) args {ignore_index = -100 : i64, reduction = 0 : i64, weight} : (tensor<3x4xf32>, tensor<3xi64>) -> (tensor<3xf32>, tensor<f32>)
  terra.fetch 0 %r#0 : tensor<3xf32>
  terra.fetch 1 %r#1 : tensor<f32>
}

// -----

// The gradient is nonzero only at (row, target[row]) of non-ignored rows.
// CHECK-DAG:   #[[ID:.*]] = affine_map<(d0, d1) -> (d0, d1)>
// CHECK-DAG:   #[[ROWS:.*]] = affine_map<(d0, d1) -> (d0)>
// CHECK-DAG:   #[[SCALAR:.*]] = affine_map<(d0, d1) -> ()>
// CHECK-LABEL: terra.graph @nll_loss_backward_mean
// CHECK:         linalg.generic {indexing_maps = [#[[ID]], #[[ROWS]], #[[SCALAR]], #[[SCALAR]], #[[ID]]], iterator_types = ["parallel", "parallel"]}
// CHECK:           %[[C:.*]] = linalg.index 1 : index
// CHECK:           %[[HIT:.*]] = arith.cmpi eq, %[[C]], %{{.*}} : index
// CHECK:           %[[KEEP:.*]] = arith.andi %[[HIT]], %{{.*}} : i1
// CHECK:           arith.divf
// CHECK:           arith.select %[[KEEP]], %{{.*}}, %{{.*}} : f32
terra.graph @nll_loss_backward_mean {
  %g = terra.feed 1 : tensor<f32>
  %x = terra.feed 2 : tensor<3x4xf32>
  %t = terra.feed 3 : tensor<3xi64>
  %tw = terra.feed 4 : tensor<f32>
  %r = terra.op "aten.nll_loss_backward"(%g, %x, %t, %tw) args {ignore_index = -100 : i64, reduction = 1 : i64, weight} : (tensor<f32>, tensor<3x4xf32>, tensor<3xi64>, tensor<f32>) -> tensor<3x4xf32>
  terra.fetch 0 %r : tensor<3x4xf32>
}

// -----

// Unsupported variants stay for a host callback: nll_loss over a spatial
// target (nll_loss2d's shapes) and an unknown reduction.
// CHECK-LABEL: terra.graph @unsupported_stay
// CHECK:         terra.op "aten.nll_loss_forward"
// CHECK:         terra.op "aten.mse_loss"
// CHECK-NOT:     linalg.generic
terra.graph @unsupported_stay {
  %x = terra.feed 1 : tensor<2x4x5xf32>
  %t = terra.feed 2 : tensor<2x5xi64>
  %r:2 = terra.op "aten.nll_loss_forward"(%x, %t) args {ignore_index = -100 : i64, reduction = 1 : i64} : (tensor<2x4x5xf32>, tensor<2x5xi64>) -> (tensor<f32>, tensor<f32>)
  %a = terra.feed 3 : tensor<4xf32>
  %m = terra.op "aten.mse_loss"(%a, %a) args {reduction = 3 : i64} : (tensor<4xf32>, tensor<4xf32>) -> tensor<f32>
  terra.fetch 0 %r#0 : tensor<f32>
  terra.fetch 1 %m : tensor<f32>
}

// -----

// smooth_l1_loss: quadratic inside beta, linear outside, summed.
// CHECK-LABEL: terra.graph @smooth_l1_loss_sum
// CHECK:         linalg.generic {{.*}} iterator_types = ["reduction", "reduction"]}
// CHECK:           %[[D:.*]] = arith.subf
// CHECK:           %[[A:.*]] = math.absf %[[D]]
// CHECK:           %[[SMALL:.*]] = arith.cmpf olt, %[[A]]
// CHECK:           %[[L:.*]] = arith.select %[[SMALL]]
// CHECK:           arith.addf %{{.*}}, %[[L]]
// CHECK-NOT:     terra.op
terra.graph @smooth_l1_loss_sum {
  %a = terra.feed 1 : tensor<4x5xf32>
  %b = terra.feed 2 : tensor<4x5xf32>
  %r = terra.op "aten.smooth_l1_loss"(%a, %b) args {reduction = 2 : i64, beta = 0.5 : f64} : (tensor<4x5xf32>, tensor<4x5xf32>) -> tensor<f32>
  terra.fetch 0 %r : tensor<f32>
}

// -----

// binary_cross_entropy_with_logits without weights, the stable form; with a
// weight it stays a terra.op (a host callback).
// CHECK-LABEL: terra.graph @bce_with_logits
// CHECK:         linalg.generic
// CHECK:           arith.maximumf
// CHECK:           math.exp
// CHECK:           math.exp
// CHECK:           math.log
// CHECK:         terra.op "aten.binary_cross_entropy_with_logits"(%{{.*}}, %{{.*}}, %{{.*}})
terra.graph @bce_with_logits {
  %a = terra.feed 1 : tensor<4x5xf32>
  %b = terra.feed 2 : tensor<4x5xf32>
  %w = terra.feed 3 : tensor<5xf32>
  %r = terra.op "aten.binary_cross_entropy_with_logits"(%a, %b) args {weight, pos_weight, reduction = 1 : i64} : (tensor<4x5xf32>, tensor<4x5xf32>) -> tensor<f32>
  %s = terra.op "aten.binary_cross_entropy_with_logits"(%a, %b, %w) args {pos_weight, reduction = 1 : i64} : (tensor<4x5xf32>, tensor<4x5xf32>, tensor<5xf32>) -> tensor<f32>
  terra.fetch 0 %r : tensor<f32>
  terra.fetch 1 %s : tensor<f32>
}

// -----

// A dynamic batch against a target of fixed size (DCGAN's `ones(b, 1)`
// labels with dynamic_batch): lowered, with a run-time guard; a static 1
// against a dynamic size could be broadcasting and stays for the host.
// CHECK-LABEL: terra.graph @bce_with_logits_dynamic_batch_static_target
// CHECK:         cf.assert {{.*}} "binary_cross_entropy_with_logits: self and target differ"
// CHECK:         tensor.cast %{{.*}} : tensor<16x1xf32> to tensor<?x1xf32>
// CHECK:         linalg.generic
// CHECK-NOT:     terra.op
terra.graph @bce_with_logits_dynamic_batch_static_target {
  %x = terra.feed 1 : tensor<?x1xf32>
  %t = terra.feed 2 : tensor<16x1xf32>
  %r = terra.op "aten.binary_cross_entropy_with_logits"(%x, %t) args {pos_weight = unit, reduction = 1 : i64, weight = unit} : (tensor<?x1xf32>, tensor<16x1xf32>) -> tensor<f32>
  terra.fetch 0 %r : tensor<f32>
}

// -----

// CHECK-LABEL: terra.graph @mse_loss_unit_against_dynamic_stays
// CHECK:         terra.op "aten.mse_loss"
terra.graph @mse_loss_unit_against_dynamic_stays {
  %x = terra.feed 1 : tensor<?x4xf32>
  %t = terra.feed 2 : tensor<1x4xf32>
  %r = terra.op "aten.mse_loss"(%x, %t) args {reduction = 1 : i64} : (tensor<?x4xf32>, tensor<1x4xf32>) -> tensor<f32>
  terra.fetch 0 %r : tensor<f32>
}
