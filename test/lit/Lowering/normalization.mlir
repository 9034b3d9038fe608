// Layer and batch norm: two-pass statistics (sum, then sum of squared
// deviations) as reduction generics, and one pointwise generic per output.
// Per-row statistics are read through maps that pin the normalized dims to
// 0, per-channel ones through maps that keep dim 1 only. A None optional
// tensor is no operand (`name = unit` in the args).
// RUN: terra-opt %s -split-input-file -terra-convert-to-linalg | FileCheck %s

// CHECK-DAG:   #[[ID:.*]] = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
// CHECK-DAG:   #[[ROW:.*]] = affine_map<(d0, d1, d2) -> (d0, d1, 0)>
// CHECK-DAG:   #[[AFFINE:.*]] = affine_map<(d0, d1, d2) -> (d2)>
// CHECK-LABEL: terra.graph @layer_norm
// CHECK:         %[[ONE:.*]] = arith.constant 1.000000e+00 : f32
// CHECK:         %[[N:.*]] = arith.constant 4.000000e+00 : f32
// CHECK:         %[[EPS:.*]] = arith.constant 9.99999974E-6 : f32
// CHECK:         %[[X:.*]] = terra.feed 1 : tensor<?x3x4xf32>
// CHECK:         %[[W:.*]] = terra.feed 2
// CHECK:         %[[B:.*]] = terra.feed 3
// CHECK:         %[[D:.*]] = tensor.dim %[[X]], %c0
// CHECK:         tensor.empty(%[[D]]) : tensor<?x3x1xf32>
// CHECK:         %[[SUM:.*]] = linalg.generic {indexing_maps = [#[[ID]], #[[ROW]]], iterator_types = ["parallel", "parallel", "reduction"]}
// CHECK:         %[[MEAN:.*]] = linalg.generic {{.*}} ins(%[[SUM]] : tensor<?x3x1xf32>)
// CHECK:           arith.divf %{{.*}}, %[[N]]
// CHECK:         %[[SQ:.*]] = linalg.generic {indexing_maps = [#[[ID]], #[[ROW]], #[[ROW]]], iterator_types = ["parallel", "parallel", "reduction"]}
// CHECK-SAME:      ins(%[[X]], %[[MEAN]] : tensor<?x3x4xf32>, tensor<?x3x1xf32>)
// CHECK:         %[[RSTD:.*]] = linalg.generic {{.*}} ins(%[[SQ]] : tensor<?x3x1xf32>)
// CHECK:           %[[VAR:.*]] = arith.divf %{{.*}}, %[[N]]
// CHECK:           %[[VE:.*]] = arith.addf %[[VAR]], %[[EPS]]
// CHECK:           %[[SD:.*]] = math.sqrt %[[VE]]
// CHECK:           arith.divf %[[ONE]], %[[SD]]
// CHECK:         %[[OUT:.*]] = linalg.generic {indexing_maps = [#[[ID]], #[[ROW]], #[[ROW]], #[[AFFINE]], #[[AFFINE]], #[[ID]]], iterator_types = ["parallel", "parallel", "parallel"]}
// CHECK-SAME:      ins(%[[X]], %[[MEAN]], %[[RSTD]], %[[W]], %[[B]] :
// CHECK:         terra.fetch 0 %[[OUT]]
// CHECK:         terra.fetch 1 %[[MEAN]]
// CHECK:         terra.fetch 2 %[[RSTD]]
terra.graph @layer_norm {
  %x = terra.feed 1 : tensor<?x3x4xf32>
  %w = terra.feed 2 : tensor<4xf32>
  %b = terra.feed 3 : tensor<4xf32>
  %r:3 = terra.op "aten.native_layer_norm"(%x, %w, %b) args {eps = 1.0e-05 : f64, normalized_shape = [4]} : (tensor<?x3x4xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<?x3x4xf32>, tensor<?x3x1xf32>, tensor<?x3x1xf32>)
  terra.fetch 0 %r#0 : tensor<?x3x4xf32>
  terra.fetch 1 %r#1 : tensor<?x3x1xf32>
  terra.fetch 2 %r#2 : tensor<?x3x1xf32>
}

// -----

// output_mask [true, false, false] with one result: only grad_input, from
// one reduction of (sum g, sum g * xhat) per row.
// CHECK-LABEL: terra.graph @layer_norm_backward_input_only
// CHECK:         %[[S:.*]]:2 = linalg.generic {{.*}} iterator_types = ["parallel", "reduction"]}
// CHECK-SAME:      outs(%{{.*}}, %{{.*}} : tensor<2x1xf32>, tensor<2x1xf32>)
// CHECK:         %[[DX:.*]] = linalg.generic {{.*}} iterator_types = ["parallel", "parallel"]}
// CHECK-SAME:      ins(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[S]]#0, %[[S]]#1 :
// CHECK-NOT:     linalg.generic
// CHECK:         terra.fetch 0 %[[DX]]
terra.graph @layer_norm_backward_input_only {
  %g = terra.feed 1 : tensor<2x6xf32>
  %x = terra.feed 2 : tensor<2x6xf32>
  %m = terra.feed 3 : tensor<2x1xf32>
  %s = terra.feed 4 : tensor<2x1xf32>
  %r = terra.op "aten.native_layer_norm_backward"(%g, %x, %m, %s) args {bias, normalized_shape = [6], output_mask = [true, false, false], weight} : (tensor<2x6xf32>, tensor<2x6xf32>, tensor<2x1xf32>, tensor<2x1xf32>) -> tensor<2x6xf32>
  terra.fetch 0 %r : tensor<2x6xf32>
}

// -----

// Training with five results: results 3 and 4 are the updated running stats
// (momentum 0.1, unbiased variance: M - 1 = 19).
// CHECK-DAG:   #[[ID:.*]] = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
// CHECK-DAG:   #[[CH:.*]] = affine_map<(d0, d1, d2) -> (d1)>
// CHECK-LABEL: terra.graph @batch_norm_training_functional
// CHECK-DAG:     %[[M1:.*]] = arith.constant 1.900000e+01 : f32
// CHECK-DAG:     %[[KEEP:.*]] = arith.constant 0.899999976 : f32
// CHECK-DAG:     %[[MOM:.*]] = arith.constant 1.000000e-01 : f32
// CHECK:         %[[SUM:.*]] = linalg.generic {indexing_maps = [#[[ID]], #[[CH]]], iterator_types = ["reduction", "parallel", "reduction"]}
// CHECK:         %[[MEAN:.*]] = linalg.generic {{.*}} ins(%[[SUM]] : tensor<3xf32>)
// CHECK:         %[[SQ:.*]] = linalg.generic {indexing_maps = [#[[ID]], #[[CH]], #[[CH]]], iterator_types = ["reduction", "parallel", "reduction"]}
// CHECK:         %[[INV:.*]] = linalg.generic {{.*}} ins(%[[SQ]] : tensor<3xf32>)
// CHECK:           math.sqrt
// CHECK:         %[[RM:.*]] = linalg.generic {{.*}} ins(%[[MEAN]], %{{.*}} : tensor<3xf32>, tensor<3xf32>)
// CHECK:           arith.mulf %{{.*}}, %[[KEEP]]
// CHECK:           arith.mulf %{{.*}}, %[[MOM]]
// CHECK:         %[[RV:.*]] = linalg.generic {{.*}} ins(%[[SQ]], %{{.*}} : tensor<3xf32>, tensor<3xf32>)
// CHECK:           arith.divf %{{.*}}, %[[M1]]
// CHECK:         %[[OUT:.*]] = linalg.generic {indexing_maps = [#[[ID]], #[[CH]], #[[CH]], #[[CH]], #[[CH]], #[[ID]]], iterator_types = ["parallel", "parallel", "parallel"]}
// CHECK-SAME:      ins(%{{.*}}, %[[MEAN]], %[[INV]], %{{.*}}, %{{.*}} :
// CHECK:         terra.fetch 0 %[[OUT]]
// CHECK:         terra.fetch 1 %[[RM]]
// CHECK:         terra.fetch 2 %[[RV]]
terra.graph @batch_norm_training_functional {
  %x = terra.feed 1 : tensor<4x3x5xf32>
  %w = terra.feed 2 : tensor<3xf32>
  %b = terra.feed 3 : tensor<3xf32>
  %rm = terra.feed 4 : tensor<3xf32>
  %rv = terra.feed 5 : tensor<3xf32>
  %r:5 = terra.op "aten.native_batch_norm"(%x, %w, %b, %rm, %rv) args {eps = 1.0e-05 : f64, momentum = 1.0e-01 : f64, training = true} : (tensor<4x3x5xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> (tensor<4x3x5xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>)
  terra.fetch 0 %r#0 : tensor<4x3x5xf32>
  terra.fetch 1 %r#3 : tensor<3xf32>
  terra.fetch 2 %r#4 : tensor<3xf32>
}

// -----

// Eval uses the running stats; save_mean/save_invstd are empty, as in aten.
// CHECK-LABEL: terra.graph @batch_norm_eval
// CHECK:         %[[X:.*]] = terra.feed 1 : tensor<4x3xf32>
// CHECK:         %[[RM:.*]] = terra.feed 2
// CHECK:         %[[RV:.*]] = terra.feed 3
// CHECK:         %[[INV:.*]] = linalg.generic {{.*}} ins(%[[RV]] : tensor<3xf32>)
// CHECK:         %[[EMPTY:.*]] = tensor.empty() : tensor<0xf32>
// CHECK:         %[[OUT:.*]] = linalg.generic {{.*}} ins(%[[X]], %[[RM]], %[[INV]] : tensor<4x3xf32>, tensor<3xf32>, tensor<3xf32>)
// CHECK-NOT:       arith.addf
// CHECK:         terra.fetch 0 %[[OUT]]
// CHECK:         terra.fetch 1 %[[EMPTY]]
terra.graph @batch_norm_eval {
  %x = terra.feed 1 : tensor<4x3xf32>
  %rm = terra.feed 2 : tensor<3xf32>
  %rv = terra.feed 3 : tensor<3xf32>
  %r:3 = terra.op "aten.native_batch_norm"(%x, %rm, %rv) args {bias, eps = 1.0e-05 : f64, momentum = 1.0e-01 : f64, training = false, weight} : (tensor<4x3xf32>, tensor<3xf32>, tensor<3xf32>) -> (tensor<4x3xf32>, tensor<0xf32>, tensor<0xf32>)
  terra.fetch 0 %r#0 : tensor<4x3xf32>
  terra.fetch 1 %r#1 : tensor<0xf32>
}

// -----

// Two single-result reductions give sum(dy) and sum((x - mean) * dy) per
// channel (one two-result reduction is not vectorized); per-channel
// coefficients (invstd * weight, dotp * invstd^2 / M, sum(dy) / M) leave the
// pass over the input without divisions; the sums also give grad_weight
// (times invstd) and grad_bias (sum(dy) itself).
// CHECK-LABEL: terra.graph @batch_norm_backward_train
// CHECK:         %[[G:.*]] = terra.feed 1
// CHECK:         %[[X:.*]] = terra.feed 2
// CHECK:         %[[W:.*]] = terra.feed 3
// CHECK:         %[[SM:.*]] = terra.feed 4
// CHECK:         %[[SI:.*]] = terra.feed 5
// CHECK:         %[[SG:.*]] = linalg.generic {{.*}} iterator_types = ["reduction", "parallel", "reduction"]}
// CHECK-SAME:      ins(%[[G]] :
// CHECK:         %[[DOT:.*]] = linalg.generic {{.*}} iterator_types = ["reduction", "parallel", "reduction"]}
// CHECK-SAME:      ins(%[[G]], %[[X]], %[[SM]] :
// CHECK:         %[[SCALE:.*]] = linalg.generic {{.*}} ins(%[[SI]], %[[W]] :
// CHECK:         %[[K:.*]] = linalg.generic {{.*}} ins(%[[DOT]], %[[SI]] :
// CHECK:         %[[GM:.*]] = linalg.generic {{.*}} ins(%[[SG]] :
// CHECK:           arith.divf
// CHECK:         %[[DX:.*]] = linalg.generic {{.*}} ins(%[[G]], %[[SCALE]], %[[X]], %[[SM]], %[[K]], %[[GM]] :
// CHECK-NOT:       arith.divf
// CHECK:         %[[DW:.*]] = linalg.generic {{.*}} ins(%[[DOT]], %[[SI]] :
// CHECK:           arith.mulf
// CHECK:         terra.fetch 0 %[[DX]]
// CHECK:         terra.fetch 1 %[[DW]]
// CHECK:         terra.fetch 2 %[[SG]]
terra.graph @batch_norm_backward_train {
  %g = terra.feed 1 : tensor<4x3x5xf32>
  %x = terra.feed 2 : tensor<4x3x5xf32>
  %w = terra.feed 3 : tensor<3xf32>
  %sm = terra.feed 4 : tensor<3xf32>
  %si = terra.feed 5 : tensor<3xf32>
  %r:3 = terra.op "aten.native_batch_norm_backward"(%g, %x, %w, %sm, %si) args {eps = 1.0e-05 : f64, output_mask = [true, true, true], running_mean, running_var, train = true} : (tensor<4x3x5xf32>, tensor<4x3x5xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> (tensor<4x3x5xf32>, tensor<3xf32>, tensor<3xf32>)
  terra.fetch 0 %r#0 : tensor<4x3x5xf32>
  terra.fetch 1 %r#1 : tensor<3xf32>
  terra.fetch 2 %r#2 : tensor<3xf32>
}

// -----

// Unsupported variants stay for a host callback: eval batch norm without
// running stats, and a normalized_shape that does not match the input.
// CHECK-LABEL: terra.graph @unsupported_stay
// CHECK:         terra.op "aten.native_batch_norm"
// CHECK:         terra.op "aten.native_layer_norm"
// CHECK-NOT:     linalg.generic
terra.graph @unsupported_stay {
  %x = terra.feed 1 : tensor<4x3xf32>
  %r:3 = terra.op "aten.native_batch_norm"(%x) args {bias, eps = 1.0e-05 : f64, momentum = 1.0e-01 : f64, running_mean, running_var, training = false, weight} : (tensor<4x3xf32>) -> (tensor<4x3xf32>, tensor<0xf32>, tensor<0xf32>)
  %l:3 = terra.op "aten.native_layer_norm"(%x) args {bias, eps = 1.0e-05 : f64, normalized_shape = [5], weight} : (tensor<4x3xf32>) -> (tensor<4x3xf32>, tensor<4x1xf32>, tensor<4x1xf32>)
  terra.fetch 0 %r#0 : tensor<4x3xf32>
  terra.fetch 1 %l#0 : tensor<4x3xf32>
}

// -----

// cuDNN's batch norm (torch on CUDA) lowers like native_batch_norm: the
// reserve space is empty, so its torch.uint8 type does not keep the op on
// the host; the running stats follow it as results 4 and 5.
// CHECK-LABEL: terra.graph @cudnn_batch_norm
// CHECK-NOT:     terra.op
// CHECK:         terra.fetch 1
terra.graph @cudnn_batch_norm {
  %x = terra.feed 1 : tensor<4x3xf32>
  %w = terra.feed 2 : tensor<3xf32>
  %b = terra.feed 3 : tensor<3xf32>
  %rm = terra.feed 4 : tensor<3xf32>
  %rv = terra.feed 5 : tensor<3xf32>
  %dy = terra.feed 6 : tensor<4x3xf32>
  %o:6 = terra.op "aten.cudnn_batch_norm"(%x, %w, %b, %rm, %rv) args {training = true, exponential_average_factor = 1.0e-01 : f64, epsilon = 1.0e-05 : f64} : (tensor<4x3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> (tensor<4x3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<0xui8>, tensor<3xf32>, tensor<3xf32>)
  %g:3 = terra.op "aten.cudnn_batch_norm_backward"(%x, %dy, %w, %rm, %rv, %o#1, %o#2, %o#3) args {epsilon = 1.0e-05 : f64} : (tensor<4x3xf32>, tensor<4x3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<0xui8>) -> (tensor<4x3xf32>, tensor<3xf32>, tensor<3xf32>)
  terra.fetch 0 %o#0 : tensor<4x3xf32>
  terra.fetch 1 %g#0 : tensor<4x3xf32>
}

// -----

// A reserve space that is not empty keeps cuDNN's ops on the host.
// CHECK-LABEL: terra.graph @cudnn_batch_norm_reserved
// CHECK:         terra.op "aten.cudnn_batch_norm"
terra.graph @cudnn_batch_norm_reserved {
  %x = terra.feed 1 : tensor<4x3xf32>
  %w = terra.feed 2 : tensor<3xf32>
  %o:4 = terra.op "aten.cudnn_batch_norm"(%x, %w, %w, %w, %w) args {training = true, exponential_average_factor = 1.0e-01 : f64, epsilon = 1.0e-05 : f64} : (tensor<4x3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> (tensor<4x3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<16xui8>)
  terra.fetch 0 %o#0 : tensor<4x3xf32>
}
