// Pooling ops lower to a padded window reduction (a tensor.empty of the
// kernel's shape is the window operand); backward ops spread the grads every
// `stride` elements and reduce over the window of each input position.
// Unsupported args leave the op for the host.
// RUN: terra-opt %s -split-input-file -terra-convert-to-linalg | FileCheck %s

// Max and flat index in one generic; dynamic batch; ceil_mode; padded
// positions are excluded by bounds checks on the input coordinates.
// CHECK-DAG:   #[[IN:.*]] = affine_map<(d0, d1, d2, d3, d4, d5) -> (d0, d1, d2 * 2 + d4, d3 * 2 + d5)>
// CHECK-DAG:   #[[WIN:.*]] = affine_map<(d0, d1, d2, d3, d4, d5) -> (d4, d5)>
// CHECK-DAG:   #[[OUT:.*]] = affine_map<(d0, d1, d2, d3, d4, d5) -> (d0, d1, d2, d3)>
// CHECK-LABEL: terra.graph @max_pool_with_indices
// CHECK-DAG:     %[[M1:.*]] = arith.constant -1 : i64
// CHECK-DAG:     %[[NINF:.*]] = arith.constant 0xFF800000 : f32
// CHECK:         %[[P:.*]] = tensor.pad %{{.*}} low[0, 0, 1, 1] high[0, 0, 1, 1]
// CHECK:           tensor.yield %[[NINF]] : f32
// CHECK:         } : tensor<?x3x9x9xf32> to tensor<?x3x11x11xf32>
// CHECK:         %[[V0:.*]] = linalg.fill ins(%[[NINF]] : f32) outs(%{{.*}} : tensor<?x3x5x5xf32>)
// CHECK:         %[[I0:.*]] = linalg.fill ins(%[[M1]] : i64) outs(%{{.*}} : tensor<?x3x5x5xi64>)
// CHECK:         %[[W:.*]] = tensor.empty() : tensor<3x3xf32>
// CHECK:         %[[R:.*]]:2 = linalg.generic {indexing_maps = [#[[IN]], #[[WIN]], #[[OUT]], #[[OUT]]], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction", "reduction"]}
// CHECK-SAME:      ins(%[[P]], %[[W]] : tensor<?x3x11x11xf32>, tensor<3x3xf32>) outs(%[[V0]], %[[I0]] : tensor<?x3x5x5xf32>, tensor<?x3x5x5xi64>)
// CHECK:           arith.cmpi sge
// CHECK:           arith.cmpi slt
// CHECK:           %[[FIRST:.*]] = arith.cmpi eq, %{{.*}}, %[[M1]] : i64
// CHECK:           %[[GT:.*]] = arith.cmpf ogt
// CHECK:           %[[NAN:.*]] = arith.cmpf uno
// CHECK:           %[[IDX:.*]] = arith.index_cast %{{.*}} : index to i64
// CHECK:           %[[V:.*]] = arith.select %[[TAKE:.*]], %{{.*}}, %{{.*}} : f32
// CHECK:           %[[I:.*]] = arith.select %[[TAKE]], %[[IDX]], %{{.*}} : i64
// CHECK:           linalg.yield %[[V]], %[[I]] : f32, i64
// CHECK:         terra.fetch 0 %[[R]]#0
// CHECK:         terra.fetch 1 %[[R]]#1
terra.graph @max_pool_with_indices {
  %x = terra.feed 1 : tensor<?x3x9x9xf32>
  %r:2 = terra.op "aten.max_pool2d_with_indices"(%x) args {kernel_size = [3, 3], stride = [2, 2], padding = [1, 1], dilation = [1, 1], ceil_mode = true} : (tensor<?x3x9x9xf32>) -> (tensor<?x3x5x5xf32>, tensor<?x3x5x5xi64>)
  terra.fetch 0 %r#0 : tensor<?x3x5x5xf32>
  terra.fetch 1 %r#1 : tensor<?x3x5x5xi64>
}

// -----

// Grads and indices spread every 2 elements; a grad goes to (h, w) where its
// index equals h * W + w.
// CHECK-DAG:   #[[Z:.*]] = affine_map<(d0, d1, d2, d3, d4, d5) -> (d0, d1, d2 + d4, d3 + d5)>
// CHECK-LABEL: terra.graph @max_pool_backward
// CHECK-DAG:     %[[GO:.*]] = terra.feed 1 : tensor<2x3x4x4xf32>
// CHECK-DAG:     %[[IND:.*]] = terra.feed 3 : tensor<2x3x4x4xi64>
// CHECK:         %[[ZG:.*]] = tensor.insert_slice %[[GO]] into %{{.*}}[0, 0, 1, 1] [2, 3, 4, 4] [1, 1, 2, 2] : tensor<2x3x4x4xf32> into tensor<2x3x9x9xf32>
// CHECK:         %[[ZI:.*]] = tensor.insert_slice %[[IND]] into %{{.*}}[0, 0, 1, 1] [2, 3, 4, 4] [1, 1, 2, 2] : tensor<2x3x4x4xi64> into tensor<2x3x9x9xi64>
// CHECK:         linalg.generic {indexing_maps = [#[[Z]], #[[Z]], #{{.*}}, #{{.*}}]
// CHECK-SAME:      ins(%[[ZG]], %[[ZI]], %{{.*}} : tensor<2x3x9x9xf32>, tensor<2x3x9x9xi64>, tensor<2x2xf32>) outs(%{{.*}} : tensor<2x3x8x8xf32>)
// CHECK:           %[[T:.*]] = arith.index_cast %{{.*}} : index to i64
// CHECK:           %[[HIT:.*]] = arith.cmpi eq, %{{.*}}, %[[T]] : i64
// CHECK:           arith.select %[[HIT]]
terra.graph @max_pool_backward {
  %go = terra.feed 1 : tensor<2x3x4x4xf32>
  %x = terra.feed 2 : tensor<2x3x8x8xf32>
  %i = terra.feed 3 : tensor<2x3x4x4xi64>
  %r = terra.op "aten.max_pool2d_with_indices_backward"(%go, %x, %i) args {kernel_size = [2, 2], stride = [2, 2], padding = [0, 0], dilation = [1, 1], ceil_mode = false} : (tensor<2x3x4x4xf32>, tensor<2x3x8x8xf32>, tensor<2x3x4x4xi64>) -> tensor<2x3x8x8xf32>
  terra.fetch 0 %r : tensor<2x3x8x8xf32>
}

// -----

// CHW input (a unit batch is added and removed); count_include_pad = false
// gives per-position divisors, a compile-time constant.
// CHECK-LABEL: terra.graph @avg_pool_exclude_pad
// CHECK-DAG:     %[[DIV:.*]] = arith.constant dense<{{\[}}[4.000000e+00, 6.000000e+00, 6.000000e+00], [6.000000e+00, 9.000000e+00, 9.000000e+00], [6.000000e+00, 9.000000e+00, 9.000000e+00]]> : tensor<3x3xf32>
// CHECK:         %[[X:.*]] = tensor.expand_shape %{{.*}} {{\[}}[0, 1], [2], [3]] output_shape [1, 3, 6, 6]
// CHECK:         %[[P:.*]] = tensor.pad %[[X]] low[0, 0, 1, 1] high[0, 0, 1, 1]
// CHECK:         %[[S:.*]] = linalg.pooling_nchw_sum {dilations = dense<1> : tensor<2xi64>, strides = dense<2> : tensor<2xi64>} ins(%[[P]], %{{.*}} : tensor<1x3x8x8xf32>, tensor<3x3xf32>)
// CHECK:         linalg.generic {{.*}} ins(%[[S]], %[[DIV]] : tensor<1x3x3x3xf32>, tensor<3x3xf32>)
// CHECK:           arith.divf
// CHECK:         tensor.collapse_shape %{{.*}} {{\[}}[0, 1], [2], [3]] : tensor<1x3x3x3xf32> into tensor<3x3x3xf32>
terra.graph @avg_pool_exclude_pad {
  %x = terra.feed 1 : tensor<3x6x6xf32>
  %r = terra.op "aten.avg_pool2d"(%x) args {kernel_size = [3, 3], stride = [2, 2], padding = [1, 1], ceil_mode = false, count_include_pad = false, divisor_override} : (tensor<3x6x6xf32>) -> tensor<3x3x3xf32>
  terra.fetch 0 %r : tensor<3x3x3xf32>
}

// -----

// CHECK-LABEL: terra.graph @avg_pool_backward
// CHECK-DAG:     %[[FOUR:.*]] = arith.constant 4.000000e+00 : f32
// CHECK:         %[[SC:.*]] = linalg.generic
// CHECK:           arith.divf %{{.*}}, %[[FOUR]] : f32
// CHECK:         %[[Z:.*]] = tensor.insert_slice %[[SC]] into %{{.*}}[0, 0, 1, 1] [2, 3, 4, 4] [1, 1, 2, 2] : tensor<2x3x4x4xf32> into tensor<2x3x9x9xf32>
// CHECK:         %[[R:.*]] = linalg.pooling_nchw_sum {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>} ins(%[[Z]], %{{.*}} : tensor<2x3x9x9xf32>, tensor<2x2xf32>) outs(%{{.*}} : tensor<2x3x8x8xf32>)
// CHECK:         terra.fetch 0 %[[R]]
terra.graph @avg_pool_backward {
  %go = terra.feed 1 : tensor<2x3x4x4xf32>
  %x = terra.feed 2 : tensor<2x3x8x8xf32>
  %r = terra.op "aten.avg_pool2d_backward"(%go, %x) args {kernel_size = [2, 2], stride = [2, 2], padding = [0, 0], ceil_mode = false, count_include_pad = true, divisor_override} : (tensor<2x3x4x4xf32>, tensor<2x3x8x8xf32>) -> tensor<2x3x8x8xf32>
  terra.fetch 0 %r : tensor<2x3x8x8xf32>
}

// -----

// Sizes that divide: avg pooling with kernel = stride = in / out.
// CHECK-LABEL: terra.graph @adaptive_global
// CHECK-DAG:     %[[N:.*]] = arith.constant 4.900000e+01 : f32
// CHECK:         linalg.pooling_nchw_sum {dilations = dense<1> : tensor<2xi64>, strides = dense<7> : tensor<2xi64>} ins(%{{.*}}, %{{.*}} : tensor<2x8x7x7xf32>, tensor<7x7xf32>)
// CHECK:           arith.divf %{{.*}}, %[[N]] : f32
terra.graph @adaptive_global {
  %x = terra.feed 1 : tensor<2x8x7x7xf32>
  %r = terra.op "aten._adaptive_avg_pool2d"(%x) args {output_size = [1, 1]} : (tensor<2x8x7x7xf32>) -> tensor<2x8x1x1xf32>
  terra.fetch 0 %r : tensor<2x8x1x1xf32>
}

// -----

// Uneven windows: two masked contractions (floor/ceil window masks), then a
// division by the window sizes.
// CHECK-DAG:   #[[XH:.*]] = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d4, d3)>
// CHECK-DAG:   #[[MH:.*]] = affine_map<(d0, d1, d2, d3, d4) -> (d2, d4)>
// CHECK-DAG:   #[[XW:.*]] = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d4)>
// CHECK-DAG:   #[[MW:.*]] = affine_map<(d0, d1, d2, d3, d4) -> (d3, d4)>
// CHECK-LABEL: terra.graph @adaptive_uneven
// CHECK-DAG:     %[[CNT:.*]] = arith.constant dense<{{\[}}[6.000000e+00, 6.000000e+00, 6.000000e+00], [9.000000e+00, 9.000000e+00, 9.000000e+00], [6.000000e+00, 6.000000e+00, 6.000000e+00]]> : tensor<3x3xf32>
// CHECK-DAG:     %[[MASKW:.*]] = arith.constant dense<{{\[}}[true, true, true, false, false, false, false], [false, false, true, true, true, false, false], [false, false, false, false, true, true, true]]> : tensor<3x7xi1>
// CHECK-DAG:     %[[MASKH:.*]] = arith.constant dense<{{\[}}[true, true, false, false, false], [false, true, true, true, false], [false, false, false, true, true]]> : tensor<3x5xi1>
// CHECK:         %[[T:.*]] = linalg.generic {indexing_maps = [#[[XH]], #[[MH]], #{{.*}}], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]} ins(%{{.*}}, %[[MASKH]] : tensor<2x8x5x7xf32>, tensor<3x5xi1>)
// CHECK:           arith.select
// CHECK:         %[[U:.*]] = linalg.generic {indexing_maps = [#[[XW]], #[[MW]], #{{.*}}], {{.*}} ins(%[[T]], %[[MASKW]] : tensor<2x8x3x7xf32>, tensor<3x7xi1>)
// CHECK:         linalg.generic {{.*}} ins(%[[U]], %[[CNT]] : tensor<2x8x3x3xf32>, tensor<3x3xf32>)
// CHECK:           arith.divf
terra.graph @adaptive_uneven {
  %x = terra.feed 1 : tensor<2x8x5x7xf32>
  %r = terra.op "aten._adaptive_avg_pool2d"(%x) args {output_size = [3, 3]} : (tensor<2x8x5x7xf32>) -> tensor<2x8x3x3xf32>
  terra.fetch 0 %r : tensor<2x8x3x3xf32>
}

// -----

// The backward contracts the scaled grads with the transposed masks.
// CHECK-DAG:   #[[GW:.*]] = affine_map<(d0, d1, d2, d3, d4) -> (d4, d3)>
// CHECK-DAG:   #[[GH:.*]] = affine_map<(d0, d1, d2, d3, d4) -> (d4, d2)>
// CHECK-LABEL: terra.graph @adaptive_backward_uneven
// CHECK:         %[[S:.*]] = linalg.generic
// CHECK:           arith.divf
// CHECK:         %[[T:.*]] = linalg.generic {indexing_maps = [#{{.*}}, #[[GW]], #{{.*}}], {{.*}} ins(%[[S]], %{{.*}} : tensor<2x8x3x3xf32>, tensor<3x7xi1>) outs(%{{.*}} : tensor<2x8x3x7xf32>)
// CHECK:         linalg.generic {indexing_maps = [#{{.*}}, #[[GH]], #{{.*}}], {{.*}} ins(%[[T]], %{{.*}} : tensor<2x8x3x7xf32>, tensor<3x5xi1>) outs(%{{.*}} : tensor<2x8x5x7xf32>)
terra.graph @adaptive_backward_uneven {
  %go = terra.feed 1 : tensor<2x8x3x3xf32>
  %x = terra.feed 2 : tensor<2x8x5x7xf32>
  %r = terra.op "aten._adaptive_avg_pool2d_backward"(%go, %x) : (tensor<2x8x3x3xf32>, tensor<2x8x5x7xf32>) -> tensor<2x8x5x7xf32>
  terra.fetch 0 %r : tensor<2x8x5x7xf32>
}

// -----

// A dynamic input size (pooling after a pooling whose size varies between
// merged paths): each dim is a gather over windows bounded by
// ceil(in / out) + 1 (the extent of an empty window operand), their bounds
// computed from the run-time sizes in the body; then a division by the
// window sizes. The backward gathers, for each input position, the outputs
// whose windows contain it, the same way with the sizes swapped.
// CHECK-LABEL: terra.graph @adaptive_dynamic
// CHECK:         cf.assert %{{.*}}, "adaptive pooling of an empty input"
// CHECK:         %[[WH:.*]] = tensor.empty(%{{.*}}) : tensor<?xf32>
// CHECK:         %[[T:.*]] = linalg.generic {{.*}} ins(%[[WH]] : tensor<?xf32>) outs(%{{.*}} : tensor<2x8x3x?xf32>)
// CHECK:           arith.cmpi ult
// CHECK:           tensor.extract %{{.*}} : tensor<2x8x?x?xf32>
// CHECK:           arith.select
// CHECK:         %[[U:.*]] = linalg.generic {{.*}} outs(%{{.*}} : tensor<2x8x3x3xf32>)
// CHECK:           tensor.extract %[[T]]
// CHECK:         linalg.generic {{.*}} ins(%[[U]] : tensor<2x8x3x3xf32>)
// CHECK:           arith.divui
// CHECK:           arith.sitofp
// CHECK:           arith.divf
// CHECK-NOT:     terra.op
// CHECK-LABEL: terra.graph @adaptive_backward_dynamic
// CHECK:         cf.assert %{{.*}}, "adaptive pooling gradient of an empty input or output"
// CHECK:         arith.divf
// CHECK:         linalg.generic {{.*}} outs(%{{.*}} : tensor<2x8x?x?xf32>)
// CHECK:           tensor.extract
// CHECK:         linalg.generic {{.*}} outs(%{{.*}} : tensor<2x8x?x?xf32>)
// CHECK-NOT:     terra.op
terra.graph @adaptive_dynamic {
  %x = terra.feed 1 : tensor<2x8x?x?xf32>
  %r = terra.op "aten._adaptive_avg_pool2d"(%x) args {output_size = [3, 3]} : (tensor<2x8x?x?xf32>) -> tensor<2x8x3x3xf32>
  terra.fetch 0 %r : tensor<2x8x3x3xf32>
}
terra.graph @adaptive_backward_dynamic {
  %go = terra.feed 1 : tensor<2x8x?x?xf32>
  %x = terra.feed 2 : tensor<2x8x?x?xf32>
  %r = terra.op "aten._adaptive_avg_pool2d_backward"(%go, %x) : (tensor<2x8x?x?xf32>, tensor<2x8x?x?xf32>) -> tensor<2x8x?x?xf32>
  terra.fetch 0 %r : tensor<2x8x?x?xf32>
}

// -----

// Padding above half the kernel is rejected by PyTorch: left to the host.
// CHECK-LABEL: terra.graph @max_pool_bad_padding_stays
// CHECK:         terra.op "aten.max_pool2d_with_indices"
// CHECK-NOT:     linalg.
terra.graph @max_pool_bad_padding_stays {
  %x = terra.feed 1 : tensor<1x1x6x6xf32>
  %r:2 = terra.op "aten.max_pool2d_with_indices"(%x) args {kernel_size = [2, 2], stride = [2, 2], padding = [2, 2], dilation = [1, 1], ceil_mode = false} : (tensor<1x1x6x6xf32>) -> (tensor<1x1x5x5xf32>, tensor<1x1x5x5xi64>)
  terra.fetch 0 %r#0 : tensor<1x1x5x5xf32>
}

// -----

// Nearest upsampling by 2: the input map divides the spatial indices; its
// backward sums each 2x2 block (two reduction dims).
// CHECK-DAG:   #[[DIV:.*]] = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2 floordiv 2, d3 floordiv 2)>
// CHECK-DAG:   #[[BLK:.*]] = affine_map<(d0, d1, d2, d3, d4, d5) -> (d0, d1, d2 * 2 + d4, d3 * 2 + d5)>
// CHECK-LABEL: terra.graph @upsample_nearest
// CHECK:         linalg.generic {indexing_maps = [#[[DIV]], {{.*}}], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
// CHECK:         linalg.generic {indexing_maps = [#[[BLK]], {{.*}}], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction", "reduction"]}
// CHECK:           arith.addf
// CHECK-NOT:     terra.op
terra.graph @upsample_nearest {
  %x = terra.feed 1 : tensor<1x2x3x4xf32>
  %y = terra.op "aten.upsample_nearest2d.vec"(%x) args {output_size, scale_factors = [2.0 : f64, 2.0 : f64]} : (tensor<1x2x3x4xf32>) -> tensor<1x2x6x8xf32>
  %g = terra.op "aten.upsample_nearest2d_backward.vec"(%y) args {output_size, input_size = [1, 2, 3, 4], scale_factors = [2.0 : f64, 2.0 : f64]} : (tensor<1x2x6x8xf32>) -> tensor<1x2x3x4xf32>
  terra.fetch 0 %g : tensor<1x2x3x4xf32>
}
