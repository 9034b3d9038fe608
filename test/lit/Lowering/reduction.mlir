// Reductions lower to one linalg.generic with reduction iterators over the
// input's shape, on an init filled with the reduction's identity; keepdim
// keeps reduced dims as size-1 dims read at index 0. Softmax is the stable
// max / sum-of-exp / pointwise sequence.
// RUN: terra-opt %s -split-input-file -terra-convert-to-linalg | FileCheck %s

// CHECK-DAG:   #[[ID:.*]] = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
// CHECK-DAG:   #[[KEEP:.*]] = affine_map<(d0, d1, d2) -> (d0, d1, 0)>
// CHECK-LABEL: terra.graph @sum_keepdim_negative_dim
// CHECK:         %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK:         %[[E:.*]] = tensor.empty() : tensor<2x3x1xf32>
// CHECK:         %[[INIT:.*]] = linalg.fill ins(%[[ZERO]] : f32) outs(%[[E]] : tensor<2x3x1xf32>)
// CHECK:         %[[R:.*]] = linalg.generic {indexing_maps = [#[[ID]], #[[KEEP]]], iterator_types = ["parallel", "parallel", "reduction"]}
// CHECK-SAME:      ins(%{{.*}} : tensor<2x3x4xf32>) outs(%[[INIT]] : tensor<2x3x1xf32>)
// CHECK:           ^bb0(%[[IN:.*]]: f32, %[[ACC:.*]]: f32):
// CHECK:             arith.addf %[[ACC]], %[[IN]] : f32
// CHECK:         terra.fetch 0 %[[R]]
// CHECK-NOT:     terra.op
terra.graph @sum_keepdim_negative_dim {
  %a = terra.feed 1 : tensor<2x3x4xf32>
  %r = terra.op "aten.sum.dim_IntList"(%a) args {dim = [-1], keepdim = true} : (tensor<2x3x4xf32>) -> tensor<2x3x1xf32>
  terra.fetch 0 %r : tensor<2x3x1xf32>
}

// -----

// Reducing a dynamic dim: the mean divides by its runtime extent.
// CHECK-DAG:   #[[ID:.*]] = affine_map<(d0, d1) -> (d0, d1)>
// CHECK-DAG:   #[[COL:.*]] = affine_map<(d0, d1) -> (d1)>
// CHECK-LABEL: terra.graph @mean_dynamic_batch
// CHECK:         %[[A:.*]] = terra.feed 1 : tensor<?x4xf32>
// CHECK:         %[[S:.*]] = linalg.generic {indexing_maps = [#[[ID]], #[[COL]]], iterator_types = ["reduction", "parallel"]}
// CHECK-SAME:      ins(%[[A]] : tensor<?x4xf32>) outs(%{{.*}} : tensor<4xf32>)
// CHECK:         %[[D:.*]] = tensor.dim %[[A]], %{{.*}} : tensor<?x4xf32>
// CHECK:         %[[DI:.*]] = arith.index_cast %[[D]] : index to i64
// CHECK:         %[[N:.*]] = arith.sitofp %[[DI]] : i64 to f32
// CHECK:         linalg.generic {{.*}} iterator_types = ["parallel"]} ins(%[[S]] : tensor<4xf32>)
// CHECK:           arith.divf %{{.*}}, %[[N]] : f32
terra.graph @mean_dynamic_batch {
  %a = terra.feed 1 : tensor<?x4xf32>
  %r = terra.op "aten.mean.dim"(%a) args {dim = [0]} : (tensor<?x4xf32>) -> tensor<4xf32>
  terra.fetch 0 %r : tensor<4xf32>
}

// -----

// An empty dim list reduces every dim into a 0-d tensor; max starts at -inf.
// CHECK-DAG:   #[[SCALAR:.*]] = affine_map<(d0, d1) -> ()>
// CHECK-LABEL: terra.graph @amax_all_dims
// CHECK:         %[[NINF:.*]] = arith.constant 0xFF800000 : f32
// CHECK:         %[[INIT:.*]] = linalg.fill ins(%[[NINF]] : f32) outs(%{{.*}} : tensor<f32>)
// CHECK:         linalg.generic {indexing_maps = [#{{.*}}, #[[SCALAR]]], iterator_types = ["reduction", "reduction"]}
// CHECK-SAME:      outs(%[[INIT]] : tensor<f32>)
// CHECK:           arith.maximumf
terra.graph @amax_all_dims {
  %a = terra.feed 1 : tensor<3x5xf32>
  %r = terra.op "aten.amax"(%a) args {dim = []} : (tensor<3x5xf32>) -> tensor<f32>
  terra.fetch 0 %r : tensor<f32>
}

// -----

// max.dim carries the value and its index (linalg.index) in one generic.
// CHECK-LABEL: terra.graph @max_dim_indices
// CHECK:         %[[R:.*]]:2 = linalg.generic {{.*}} iterator_types = ["parallel", "reduction"]}
// CHECK-SAME:      outs(%{{.*}}, %{{.*}} : tensor<3xf32>, tensor<3xi64>)
// CHECK:           %[[GT:.*]] = arith.cmpf ogt
// CHECK:           %[[I:.*]] = linalg.index 1 : index
// CHECK:           %[[I64:.*]] = arith.index_cast %[[I]] : index to i64
// CHECK:           arith.select %{{.*}}, %{{.*}}, %{{.*}} : f32
// CHECK:           arith.select %{{.*}}, %[[I64]], %{{.*}} : i64
// CHECK:         terra.fetch 0 %[[R]]#0
// CHECK:         terra.fetch 1 %[[R]]#1
terra.graph @max_dim_indices {
  %a = terra.feed 1 : tensor<3x5xf32>
  %v, %i = terra.op "aten.max.dim"(%a) args {dim = 1 : i64} : (tensor<3x5xf32>) -> (tensor<3xf32>, tensor<3xi64>)
  terra.fetch 0 %v : tensor<3xf32>
  terra.fetch 1 %i : tensor<3xi64>
}

// -----

// CHECK-DAG:   #[[ID:.*]] = affine_map<(d0, d1) -> (d0, d1)>
// CHECK-DAG:   #[[ROW:.*]] = affine_map<(d0, d1) -> (d0, 0)>
// CHECK-LABEL: terra.graph @softmax
// CHECK:         %[[MAX:.*]] = linalg.generic {indexing_maps = [#[[ID]], #[[ROW]]], iterator_types = ["parallel", "reduction"]}
// CHECK:           arith.maximumf
// CHECK:         %[[SUM:.*]] = linalg.generic {indexing_maps = [#[[ID]], #[[ROW]], #[[ROW]]], iterator_types = ["parallel", "reduction"]}
// CHECK-SAME:      ins(%{{.*}}, %[[MAX]] : tensor<2x8xf32>, tensor<2x1xf32>)
// CHECK:           arith.subf
// CHECK:           math.exp
// CHECK:           arith.addf
// CHECK:         linalg.generic {indexing_maps = [#[[ID]], #[[ROW]], #[[ROW]], #[[ID]]], iterator_types = ["parallel", "parallel"]}
// CHECK-SAME:      ins(%{{.*}}, %[[MAX]], %[[SUM]] : tensor<2x8xf32>, tensor<2x1xf32>, tensor<2x1xf32>)
// CHECK:           math.exp
// CHECK:           arith.divf
terra.graph @softmax {
  %a = terra.feed 1 : tensor<2x8xf32>
  %r = terra.op "aten._softmax"(%a) args {dim = -1 : i64, half_to_float = false} : (tensor<2x8xf32>) -> tensor<2x8xf32>
  terra.fetch 0 %r : tensor<2x8xf32>
}

// -----

// grad - exp(output) * sum(grad).
// CHECK-LABEL: terra.graph @log_softmax_backward
// CHECK:         %[[G:.*]] = terra.feed 1
// CHECK:         %[[Y:.*]] = terra.feed 2
// CHECK:         %[[SUM:.*]] = linalg.generic {{.*}} iterator_types = ["parallel", "reduction"]} ins(%[[G]] : tensor<2x8xf32>)
// CHECK:         linalg.generic {{.*}} ins(%[[G]], %[[Y]], %[[SUM]] : tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x1xf32>)
// CHECK:           %[[E:.*]] = math.exp
// CHECK:           %[[P:.*]] = arith.mulf %[[E]]
// CHECK:           arith.subf %{{.*}}, %[[P]]
terra.graph @log_softmax_backward {
  %g = terra.feed 1 : tensor<2x8xf32>
  %y = terra.feed 2 : tensor<2x8xf32>
  %r = terra.op "aten._log_softmax_backward_data"(%g, %y) args {dim = 1 : i64, input_dtype = "torch.float32"} : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  terra.fetch 0 %r : tensor<2x8xf32>
}

// -----

// Unsupported variants stay for a host callback: an out-of-range dim, and
// a mean into an integer type.
// CHECK-LABEL: terra.graph @unsupported_stay
// CHECK:         terra.op "aten.sum.dim_IntList"
// CHECK:         terra.op "aten.mean.dim"
// CHECK-NOT:     linalg.generic
terra.graph @unsupported_stay {
  %a = terra.feed 1 : tensor<3x5xf32>
  %r = terra.op "aten.sum.dim_IntList"(%a) args {dim = [2]} : (tensor<3x5xf32>) -> tensor<3xf32>
  %m = terra.op "aten.mean.dim"(%a) args {dim = [1]} : (tensor<3x5xf32>) -> tensor<3xi64>
  terra.fetch 0 %r : tensor<3xf32>
  terra.fetch 1 %m : tensor<3xi64>
}

// -----

// var_mean: the mean, then the sum of squared deviations from it (the mean
// read at each row's position), divided by N - correction (4 - 1, folded).
// CHECK-DAG:   #[[ID:.*]] = affine_map<(d0, d1) -> (d0, d1)>
// CHECK-DAG:   #[[ROW:.*]] = affine_map<(d0, d1) -> (d0)>
// CHECK-LABEL: terra.graph @var_mean_unbiased
// CHECK-DAG:     %[[THREE:.*]] = arith.constant 3.000000e+00 : f32
// CHECK-DAG:     %[[FOUR:.*]] = arith.constant 4.000000e+00 : f32
// CHECK:         %[[SUM:.*]] = linalg.generic {indexing_maps = [#[[ID]], #[[ROW]]], iterator_types = ["parallel", "reduction"]}
// CHECK:         %[[MEAN:.*]] = linalg.generic
// CHECK:           arith.divf %{{.*}}, %[[FOUR]] : f32
// CHECK:         %[[SQ:.*]] = linalg.generic {indexing_maps = [#[[ID]], #[[ROW]], #[[ROW]]], iterator_types = ["parallel", "reduction"]} ins(%{{.*}}, %[[MEAN]] :
// CHECK:           %[[DEV:.*]] = arith.subf
// CHECK:           arith.mulf %[[DEV]], %[[DEV]] : f32
// CHECK:         %[[VAR:.*]] = linalg.generic {{.*}} ins(%[[SQ]] :
// CHECK:           arith.divf %{{.*}}, %[[THREE]] : f32
// CHECK:         terra.fetch 0 %[[VAR]]
// CHECK:         terra.fetch 1 %[[MEAN]]
terra.graph @var_mean_unbiased {
  %a = terra.feed 1 : tensor<3x4xf32>
  %r:2 = terra.op "aten.var_mean.correction"(%a) args {dim = [1], correction = 1 : i64, keepdim = false} : (tensor<3x4xf32>) -> (tensor<3xf32>, tensor<3xf32>)
  terra.fetch 0 %r#0 : tensor<3xf32>
  terra.fetch 1 %r#1 : tensor<3xf32>
}

// -----

// cumsum: an scf.for along the dim whose carry is one column's running sum
// in f64 (aten's CPU accumulator for float), each output rounded to f32.
// CHECK-LABEL: terra.graph @cumsum_rows
// CHECK:         %[[C5:.*]] = arith.constant 5 : index
// CHECK:         %[[CARRY:.*]] = linalg.fill ins(%{{.*}} : f64) outs(%{{.*}} : tensor<3x1xf64>)
// CHECK:         %[[R:.*]]:2 = scf.for %[[I:.*]] = %{{.*}} to %[[C5]] step %{{.*}} iter_args(%[[OUT:.*]] = %{{.*}}, %[[ACC:.*]] = %[[CARRY]]) -> (tensor<3x5xf32>, tensor<3x1xf64>)
// CHECK:           %[[COL:.*]] = tensor.extract_slice %{{.*}}[0, %[[I]]] [3, 1] [1, 1] : tensor<3x5xf32> to tensor<3x1xf32>
// CHECK:           %[[SUM:.*]] = linalg.generic {{.*}} ins(%[[ACC]], %[[COL]] : tensor<3x1xf64>, tensor<3x1xf32>)
// CHECK:             arith.extf
// CHECK:             arith.addf
// CHECK:           %[[ROUND:.*]] = linalg.generic {{.*}} ins(%[[SUM]] : tensor<3x1xf64>)
// CHECK:             arith.truncf
// CHECK:           %[[NEXT:.*]] = tensor.insert_slice %[[ROUND]] into %[[OUT]][0, %[[I]]] [3, 1] [1, 1]
// CHECK:           scf.yield %[[NEXT]], %[[SUM]]
// CHECK:         terra.fetch 0 %[[R]]#0
terra.graph @cumsum_rows {
  %a = terra.feed 1 : tensor<3x5xf32>
  %r = terra.op "aten.cumsum"(%a) args {dim = 1 : i64} : (tensor<3x5xf32>) -> tensor<3x5xf32>
  terra.fetch 0 %r : tensor<3x5xf32>
}
