// Convolutions lower to tensor.pad + named linalg convolutions accumulating
// into the broadcast bias (or zeros); groups split channels into a group dim;
// 1-D runs as 2-D with a unit height; the backward op is one linalg.generic
// per requested gradient. Transposed convolutions reuse those builders: the
// forward is the input-gradient generic applied to x, its backward a named
// convolution (grad_input) and the weight-gradient generic with input and
// grad_output swapped (grad_weight).
// RUN: terra-opt %s -split-input-file -terra-convert-to-linalg | FileCheck %s

// CHECK-LABEL: terra.graph @conv2d_bias
// CHECK-DAG:     %[[X:.*]] = terra.feed 1 : tensor<2x3x9x9xf32>
// CHECK-DAG:     %[[W:.*]] = terra.feed 2 : tensor<4x3x3x3xf32>
// CHECK-DAG:     %[[B:.*]] = terra.feed 3 : tensor<4xf32>
// CHECK:         %[[E:.*]] = tensor.empty() : tensor<2x4x5x5xf32>
// CHECK:         %[[INIT:.*]] = linalg.broadcast ins(%[[B]] : tensor<4xf32>) outs(%[[E]] : tensor<2x4x5x5xf32>) dimensions = [0, 2, 3]
// CHECK:         %[[P:.*]] = tensor.pad %[[X]] low[0, 0, 1, 1] high[0, 0, 1, 1]
// CHECK:         } : tensor<2x3x9x9xf32> to tensor<2x3x11x11xf32>
// CHECK:         %[[R:.*]] = linalg.conv_2d_nchw_fchw {dilations = dense<1> : tensor<2xi64>, strides = dense<2> : tensor<2xi64>}
// CHECK-SAME:      ins(%[[P]], %[[W]] : tensor<2x3x11x11xf32>, tensor<4x3x3x3xf32>) outs(%[[INIT]] : tensor<2x4x5x5xf32>)
// CHECK:         terra.fetch 0 %[[R]]
// CHECK-NOT:     terra.op
terra.graph @conv2d_bias {
  %x = terra.feed 1 : tensor<2x3x9x9xf32>
  %w = terra.feed 2 : tensor<4x3x3x3xf32>
  %b = terra.feed 3 : tensor<4xf32>
  %r = terra.op "aten.convolution"(%x, %w, %b) args {stride = [2, 2], padding = [1, 1], dilation = [1, 1], transposed = false, output_padding = [0, 0], groups = 1 : i64} : (tensor<2x3x9x9xf32>, tensor<4x3x3x3xf32>, tensor<4xf32>) -> tensor<2x4x5x5xf32>
  terra.fetch 0 %r : tensor<2x4x5x5xf32>
}

// -----

// No bias (two operands, `bias = unit` in args), groups 2, dynamic batch and
// output channels: guards for the channel split and the static result dim.
// CHECK-LABEL: terra.graph @conv2d_groups_dynamic_no_bias
// CHECK:         %[[F:.*]] = tensor.dim %{{.*}}, %c0 : tensor<?x2x3x3xf32>
// CHECK:         %[[REM:.*]] = arith.remui %[[F]], %c2 : index
// CHECK:         %[[OK:.*]] = arith.cmpi eq, %[[REM]], %c0 : index
// CHECK:         cf.assert %[[OK]], "output channels must be divisible by groups"
// CHECK:         %[[Z:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%{{.*}} : tensor<?x?x4x4xf32>)
// CHECK:         %[[XG:.*]] = tensor.expand_shape %{{.*}} {{\[}}[0], [1, 2], [3], [4]] {{.*}} : tensor<?x4x8x8xf32> into tensor<?x2x2x8x8xf32>
// CHECK:         %[[WG:.*]] = tensor.expand_shape %{{.*}} {{\[}}[0, 1], [2], [3], [4]] {{.*}} : tensor<?x2x3x3xf32> into tensor<2x?x2x3x3xf32>
// CHECK:         %[[IG:.*]] = tensor.expand_shape %[[Z]] {{\[}}[0], [1, 2], [3], [4]] {{.*}} into tensor<?x2x?x4x4xf32>
// CHECK:         %[[C:.*]] = linalg.conv_2d_ngchw_gfchw {dilations = dense<2> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>}
// CHECK-SAME:      ins(%[[XG]], %[[WG]] : {{.*}}) outs(%[[IG]] : tensor<?x2x?x4x4xf32>)
// CHECK:         %[[M:.*]] = tensor.collapse_shape %[[C]] {{\[}}[0], [1, 2], [3], [4]] : tensor<?x2x?x4x4xf32> into tensor<?x?x4x4xf32>
// CHECK:         %[[D:.*]] = tensor.dim %[[M]], %c1
// CHECK:         %[[EQ:.*]] = arith.cmpi eq, %[[D]], %c6 : index
// CHECK:         cf.assert %[[EQ]], "size does not match the op's result type"
// CHECK:         tensor.cast %[[M]] : tensor<?x?x4x4xf32> to tensor<?x6x4x4xf32>
terra.graph @conv2d_groups_dynamic_no_bias {
  %x = terra.feed 1 : tensor<?x4x8x8xf32>
  %w = terra.feed 2 : tensor<?x2x3x3xf32>
  %r = terra.op "aten.convolution"(%x, %w) args {bias = unit, stride = [1, 1], padding = [0, 0], dilation = [2, 2], transposed = false, output_padding = [0, 0], groups = 2 : i64} : (tensor<?x4x8x8xf32>, tensor<?x2x3x3xf32>) -> tensor<?x6x4x4xf32>
  terra.fetch 0 %r : tensor<?x6x4x4xf32>
}

// -----

// CHECK-LABEL: terra.graph @conv1d
// CHECK:         %[[X:.*]] = tensor.expand_shape %{{.*}} {{\[}}[0], [1], [2, 3]] output_shape [2, 4, 1, 16] : tensor<2x4x16xf32> into tensor<2x4x1x16xf32>
// CHECK:         %[[W:.*]] = tensor.expand_shape %{{.*}} {{\[}}[0], [1], [2, 3]] output_shape [5, 4, 1, 3] : tensor<5x4x3xf32> into tensor<5x4x1x3xf32>
// CHECK:         %[[P:.*]] = tensor.pad %[[X]] low[0, 0, 0, 1] high[0, 0, 0, 1]
// CHECK:         %[[R:.*]] = linalg.conv_2d_nchw_fchw {{.*}} ins(%[[P]], %[[W]] : tensor<2x4x1x18xf32>, tensor<5x4x1x3xf32>)
// CHECK:         tensor.collapse_shape %[[R]] {{\[}}[0], [1], [2, 3]] : tensor<2x5x1x16xf32> into tensor<2x5x16xf32>
terra.graph @conv1d {
  %x = terra.feed 1 : tensor<2x4x16xf32>
  %w = terra.feed 2 : tensor<5x4x3xf32>
  %r = terra.op "aten.convolution"(%x, %w) args {bias = unit, stride = [1], padding = [1], dilation = [1], transposed = false, output_padding = [0], groups = 1 : i64} : (tensor<2x4x16xf32>, tensor<5x4x3xf32>) -> tensor<2x5x16xf32>
  terra.fetch 0 %r : tensor<2x5x16xf32>
}

// -----

// grad_input correlates grad_output, spread every 2 elements at offset
// (K-1)*dil - pad = 1, with the flipped weight (d6 - d4 + 2); grad_weight
// correlates the padded input with grad_output; grad_bias is not requested
// and is zeros. Spatial (or kernel) loops are innermost.
// CHECK-DAG:   #[[ZMAP:.*]] = affine_map<(d0, d1, d2, d3, d4, d5, d6, d7) -> (d0, d1, d3, d6 - d4 + 2, d7 - d5 + 2)>
// CHECK-DAG:   #[[WMAP:.*]] = affine_map<(d0, d1, d2, d3, d4, d5, d6, d7) -> (d1, d3, d2, d4, d5)>
// CHECK-DAG:   #[[XMAP:.*]] = affine_map<(d0, d1, d2, d3, d4, d5, d6, d7) -> (d3, d0, d2, d4 * 2 + d6, d5 * 2 + d7)>
// CHECK-LABEL: terra.graph @conv_backward
// CHECK:         %[[GO:.*]] = terra.feed 1 : tensor<2x4x5x5xf32>
// CHECK:         %[[S:.*]] = tensor.insert_slice %[[GO]] into %{{.*}}[0, 0, 1, 1] [2, 4, 5, 5] [1, 1, 2, 2] : tensor<2x4x5x5xf32> into tensor<2x4x11x11xf32>
// CHECK:         linalg.generic {indexing_maps = [#[[ZMAP]], #[[WMAP]], #{{.*}}], iterator_types = ["parallel", "parallel", "parallel", "reduction", "reduction", "reduction", "parallel", "parallel"]}
// CHECK:           arith.mulf
// CHECK:           arith.addf
// CHECK:         %[[GI:.*]] = tensor.collapse_shape %{{.*}} : tensor<2x1x3x9x9xf32> into tensor<2x3x9x9xf32>
// CHECK:         tensor.pad
// CHECK:         linalg.generic {indexing_maps = [#[[XMAP]], #{{.*}}, #{{.*}}]
// CHECK:         %[[GW:.*]] = tensor.collapse_shape %{{.*}} : tensor<1x4x3x3x3xf32> into tensor<4x3x3x3xf32>
// CHECK:         %[[GB:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%{{.*}} : tensor<4xf32>)
// CHECK:         terra.fetch 0 %[[GI]]
// CHECK:         terra.fetch 1 %[[GW]]
// CHECK:         terra.fetch 2 %[[GB]]
terra.graph @conv_backward {
  %go = terra.feed 1 : tensor<2x4x5x5xf32>
  %x = terra.feed 2 : tensor<2x3x9x9xf32>
  %w = terra.feed 3 : tensor<4x3x3x3xf32>
  %r:3 = terra.op "aten.convolution_backward"(%go, %x, %w) args {bias_sizes = [4], stride = [2, 2], padding = [1, 1], dilation = [1, 1], transposed = false, output_padding = [0, 0], groups = 1 : i64, output_mask = [true, true, false]} : (tensor<2x4x5x5xf32>, tensor<2x3x9x9xf32>, tensor<4x3x3x3xf32>) -> (tensor<2x3x9x9xf32>, tensor<4x3x3x3xf32>, tensor<4xf32>)
  terra.fetch 0 %r#0 : tensor<2x3x9x9xf32>
  terra.fetch 1 %r#1 : tensor<4x3x3x3xf32>
  terra.fetch 2 %r#2 : tensor<4xf32>
}

// -----

// An op with only the requested result: grad_bias, a sum over (n, oh, ow).
// CHECK-DAG:   #[[GMAP:.*]] = affine_map<(d0, d1, d2, d3) -> (d1, d0, d2, d3)>
// CHECK-DAG:   #[[OMAP:.*]] = affine_map<(d0, d1, d2, d3) -> (d0)>
// CHECK-LABEL: terra.graph @conv_backward_bias_only
// CHECK:         %[[GO:.*]] = terra.feed 1 : tensor<2x4x5x5xf32>
// CHECK:         %[[R:.*]] = linalg.generic {indexing_maps = [#[[GMAP]], #[[OMAP]]], iterator_types = ["parallel", "reduction", "reduction", "reduction"]} ins(%[[GO]] : tensor<2x4x5x5xf32>) outs(%{{.*}} : tensor<4xf32>)
// CHECK:           arith.addf
// CHECK:         terra.fetch 0 %[[R]]
terra.graph @conv_backward_bias_only {
  %go = terra.feed 1 : tensor<2x4x5x5xf32>
  %x = terra.feed 2 : tensor<2x3x9x9xf32>
  %w = terra.feed 3 : tensor<4x3x3x3xf32>
  %r = terra.op "aten.convolution_backward"(%go, %x, %w) args {bias_sizes = [4], stride = [2, 2], padding = [1, 1], dilation = [1, 1], transposed = false, output_padding = [0, 0], groups = 1 : i64, output_mask = [false, false, true]} : (tensor<2x4x5x5xf32>, tensor<2x3x9x9xf32>, tensor<4x3x3x3xf32>) -> tensor<4xf32>
  terra.fetch 0 %r : tensor<4xf32>
}

// -----

// A transposed convolution (weight Cin x Cout x KH x KW) is the input
// gradient of the ordinary convolution with the same weight: x spread every
// 2 elements at offset (K-1)*dil - pad = 1 into zeros sized for the 10x10
// output (5x5, stride 2, padding 1, output_padding 1), correlated with the
// flipped weight; then the bias is added.
// CHECK-DAG:   #[[ZMAP:.*]] = affine_map<(d0, d1, d2, d3, d4, d5, d6, d7) -> (d0, d1, d3, d6 - d4 + 2, d7 - d5 + 2)>
// CHECK-DAG:   #[[WMAP:.*]] = affine_map<(d0, d1, d2, d3, d4, d5, d6, d7) -> (d1, d3, d2, d4, d5)>
// CHECK-DAG:   #[[BMAP:.*]] = affine_map<(d0, d1, d2, d3) -> (d1)>
// CHECK-DAG:   #[[ID:.*]] = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
// CHECK-LABEL: terra.graph @conv_transpose_bias
// CHECK-DAG:     %[[X:.*]] = terra.feed 1 : tensor<1x4x5x5xf32>
// CHECK-DAG:     %[[W:.*]] = terra.feed 2 : tensor<4x2x3x3xf32>
// CHECK-DAG:     %[[B:.*]] = terra.feed 3 : tensor<2xf32>
// CHECK:         %[[S:.*]] = tensor.insert_slice %[[X]] into %{{.*}}[0, 0, 1, 1] [1, 4, 5, 5] [1, 1, 2, 2] : tensor<1x4x5x5xf32> into tensor<1x4x12x12xf32>
// CHECK:         %[[SG:.*]] = tensor.expand_shape %[[S]] {{\[}}[0], [1, 2], [3], [4]] {{.*}} into tensor<1x1x4x12x12xf32>
// CHECK:         %[[WG:.*]] = tensor.expand_shape %[[W]] {{\[}}[0, 1], [2], [3], [4]] {{.*}} into tensor<1x4x2x3x3xf32>
// CHECK:         %[[G:.*]] = linalg.generic {indexing_maps = [#[[ZMAP]], #[[WMAP]], #{{.*}}], iterator_types = ["parallel", "parallel", "parallel", "reduction", "reduction", "reduction", "parallel", "parallel"]}
// CHECK-SAME:      ins(%[[SG]], %[[WG]] : tensor<1x1x4x12x12xf32>, tensor<1x4x2x3x3xf32>) outs(%{{.*}} : tensor<1x1x2x10x10xf32>)
// CHECK-SAME:      terra.library = "conv2d_grad_input"
// CHECK:         %[[Y:.*]] = tensor.collapse_shape %[[G]] {{.*}} into tensor<1x2x10x10xf32>
// CHECK:         %[[R:.*]] = linalg.generic {indexing_maps = [#[[BMAP]], #[[ID]]], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%[[B]] : tensor<2xf32>) outs(%[[Y]] : tensor<1x2x10x10xf32>)
// CHECK:           arith.addf
// CHECK:         terra.fetch 0 %[[R]]
// CHECK-NOT:     terra.op
terra.graph @conv_transpose_bias {
  %x = terra.feed 1 : tensor<1x4x5x5xf32>
  %w = terra.feed 2 : tensor<4x2x3x3xf32>
  %b = terra.feed 3 : tensor<2xf32>
  %r = terra.op "aten.convolution"(%x, %w, %b) args {stride = [2, 2], padding = [1, 1], dilation = [1, 1], transposed = true, output_padding = [1, 1], groups = 1 : i64} : (tensor<1x4x5x5xf32>, tensor<4x2x3x3xf32>, tensor<2xf32>) -> tensor<1x2x10x10xf32>
  terra.fetch 0 %r : tensor<1x2x10x10xf32>
}

// -----

// The transposed backward: grad_input is the ordinary convolution of the
// padded grad_output with the same weight; grad_weight the ordinary weight
// gradient with the padded grad_output as input and x as grad_output;
// grad_bias sums grad_output over (n, oh, ow).
// CHECK-DAG:   #[[XMAP:.*]] = affine_map<(d0, d1, d2, d3, d4, d5, d6, d7) -> (d3, d0, d2, d4 * 2 + d6, d5 * 2 + d7)>
// CHECK-DAG:   #[[GMAP:.*]] = affine_map<(d0, d1, d2, d3) -> (d1, d0, d2, d3)>
// CHECK-LABEL: terra.graph @conv_transpose_backward
// CHECK-DAG:     %[[GO:.*]] = terra.feed 1 : tensor<2x2x10x10xf32>
// CHECK-DAG:     %[[X:.*]] = terra.feed 2 : tensor<2x4x5x5xf32>
// CHECK-DAG:     %[[W:.*]] = terra.feed 3 : tensor<4x2x3x3xf32>
// CHECK:         %[[P:.*]] = tensor.pad %[[GO]] low[0, 0, 1, 1] high[0, 0, 1, 1]
// CHECK:         %[[GI:.*]] = linalg.conv_2d_nchw_fchw {dilations = dense<1> : tensor<2xi64>, strides = dense<2> : tensor<2xi64>}
// CHECK-SAME:      ins(%[[P]], %[[W]] : tensor<2x2x12x12xf32>, tensor<4x2x3x3xf32>) outs(%{{.*}} : tensor<2x4x5x5xf32>)
// CHECK:         %[[P2:.*]] = tensor.pad %[[GO]] low[0, 0, 1, 1] high[0, 0, 1, 1]
// CHECK:         %[[PG:.*]] = tensor.expand_shape %[[P2]] {{.*}} into tensor<2x1x2x12x12xf32>
// CHECK:         %[[XG:.*]] = tensor.expand_shape %[[X]] {{.*}} into tensor<2x1x4x5x5xf32>
// CHECK:         %[[GWG:.*]] = linalg.generic {indexing_maps = [#[[XMAP]], #{{.*}}, #{{.*}}]
// CHECK-SAME:      ins(%[[PG]], %[[XG]] : tensor<2x1x2x12x12xf32>, tensor<2x1x4x5x5xf32>) outs(%{{.*}} : tensor<1x4x2x3x3xf32>)
// CHECK-SAME:      terra.library = "conv2d_grad_weight", terra.stride = array<i64: 2, 2>
// CHECK:         %[[GW:.*]] = tensor.collapse_shape %[[GWG]] {{.*}} into tensor<4x2x3x3xf32>
// CHECK:         %[[GB:.*]] = linalg.generic {indexing_maps = [#[[GMAP]], #{{.*}}]{{.*}} ins(%[[GO]] : tensor<2x2x10x10xf32>) outs(%{{.*}} : tensor<2xf32>)
// CHECK:         terra.fetch 0 %[[GI]]
// CHECK:         terra.fetch 1 %[[GW]]
// CHECK:         terra.fetch 2 %[[GB]]
terra.graph @conv_transpose_backward {
  %go = terra.feed 1 : tensor<2x2x10x10xf32>
  %x = terra.feed 2 : tensor<2x4x5x5xf32>
  %w = terra.feed 3 : tensor<4x2x3x3xf32>
  %r:3 = terra.op "aten.convolution_backward"(%go, %x, %w) args {bias_sizes = [2], stride = [2, 2], padding = [1, 1], dilation = [1, 1], transposed = true, output_padding = [1, 1], groups = 1 : i64, output_mask = [true, true, true]} : (tensor<2x2x10x10xf32>, tensor<2x4x5x5xf32>, tensor<4x2x3x3xf32>) -> (tensor<2x4x5x5xf32>, tensor<4x2x3x3xf32>, tensor<2xf32>)
  terra.fetch 0 %r#0 : tensor<2x4x5x5xf32>
  terra.fetch 1 %r#1 : tensor<4x2x3x3xf32>
  terra.fetch 2 %r#2 : tensor<2xf32>
}

// -----

// output_padding >= stride (dilation 2, stride 1, output_padding 1): the
// ordinary convolution from the 9x9 output has 5x5 outputs for the 4x4
// input, so x gets a zero row and column appended before it is spread, and
// grad_input is cut back to 4x4.
// CHECK-LABEL: terra.graph @conv_transpose_output_padding_past_stride
// CHECK-DAG:     %[[X:.*]] = terra.feed 1 : tensor<2x3x4x4xf32>
// CHECK:         %[[XP:.*]] = tensor.pad %[[X]] low[0, 0, 0, 0] high[0, 0, 1, 1]
// CHECK:         tensor.insert_slice %[[XP]] into %{{.*}}[0, 0, 4, 4] [2, 3, 5, 5] [1, 1, 1, 1] : tensor<2x3x5x5xf32> into tensor<2x3x13x13xf32>
// CHECK:         linalg.generic
// CHECK-SAME:      outs(%{{.*}} : tensor<2x1x2x9x9xf32>)
// CHECK-SAME:      terra.dilation = array<i64: 2, 2>, terra.library = "conv2d_grad_input"
// CHECK:         %[[C:.*]] = linalg.conv_2d_nchw_fchw {dilations = dense<2> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>} {{.*}} outs(%{{.*}} : tensor<2x3x5x5xf32>)
// CHECK:         %[[GI:.*]] = tensor.extract_slice %[[C]][0, 0, 0, 0] [2, 3, 4, 4] [1, 1, 1, 1]
// CHECK:         terra.fetch 1 %[[GI]]
terra.graph @conv_transpose_output_padding_past_stride {
  %x = terra.feed 1 : tensor<2x3x4x4xf32>
  %w = terra.feed 2 : tensor<3x2x3x3xf32>
  %r = terra.op "aten.convolution"(%x, %w) args {bias = unit, stride = [1, 1], padding = [0, 0], dilation = [2, 2], transposed = true, output_padding = [1, 1], groups = 1 : i64} : (tensor<2x3x4x4xf32>, tensor<3x2x3x3xf32>) -> tensor<2x2x9x9xf32>
  terra.fetch 0 %r : tensor<2x2x9x9xf32>
  %go = terra.feed 3 : tensor<2x2x9x9xf32>
  %gx = terra.op "aten.convolution_backward"(%go, %x, %w) args {bias_sizes = [2], stride = [1, 1], padding = [0, 0], dilation = [2, 2], transposed = true, output_padding = [1, 1], groups = 1 : i64, output_mask = [true, false, false]} : (tensor<2x2x9x9xf32>, tensor<2x3x4x4xf32>, tensor<3x2x3x3xf32>) -> tensor<2x3x4x4xf32>
  terra.fetch 1 %gx : tensor<2x3x4x4xf32>
}

// -----

// Groups 2 and a dynamic batch: weight dim 0 (input channels) splits into
// the groups, the output has weight dim 1 times groups channels.
// CHECK-LABEL: terra.graph @conv_transpose_groups
// CHECK:         tensor.expand_shape %{{.*}} {{\[}}[0], [1, 2], [3], [4]] {{.*}} : tensor<?x4x11x11xf32> into tensor<?x2x2x11x11xf32>
// CHECK:         tensor.expand_shape %{{.*}} {{\[}}[0, 1], [2], [3], [4]] {{.*}} : tensor<4x3x3x3xf32> into tensor<2x2x3x3x3xf32>
// CHECK:         linalg.generic
// CHECK-SAME:      outs(%{{.*}} : tensor<?x2x3x9x9xf32>)
// CHECK:         tensor.collapse_shape %{{.*}} {{\[}}[0], [1, 2], [3], [4]] : tensor<?x2x3x9x9xf32> into tensor<?x6x9x9xf32>
// CHECK-NOT:     terra.op
terra.graph @conv_transpose_groups {
  %x = terra.feed 1 : tensor<?x4x5x5xf32>
  %w = terra.feed 2 : tensor<4x3x3x3xf32>
  %r = terra.op "aten.convolution"(%x, %w) args {bias = unit, stride = [2, 2], padding = [1, 1], dilation = [1, 1], transposed = true, output_padding = [0, 0], groups = 2 : i64} : (tensor<?x4x5x5xf32>, tensor<4x3x3x3xf32>) -> tensor<?x6x9x9xf32>
  terra.fetch 0 %r : tensor<?x6x9x9xf32>
}

// -----

// Transposed convolutions with a dynamic spatial size, or an output_padding
// that PyTorch rejects (not smaller than stride or dilation), are not
// lowered: they stay host ops.
// CHECK-LABEL: terra.graph @transposed_stays
// CHECK:         terra.op "aten.convolution"
// CHECK:         terra.op "aten.convolution"
// CHECK-NOT:     linalg.
terra.graph @transposed_stays {
  %x = terra.feed 1 : tensor<1x4x?x5xf32>
  %w = terra.feed 2 : tensor<4x2x3x3xf32>
  %r = terra.op "aten.convolution"(%x, %w) args {bias = unit, stride = [2, 2], padding = [0, 0], dilation = [1, 1], transposed = true, output_padding = [0, 0], groups = 1 : i64} : (tensor<1x4x?x5xf32>, tensor<4x2x3x3xf32>) -> tensor<1x2x?x11xf32>
  terra.fetch 0 %r : tensor<1x2x?x11xf32>
  %y = terra.feed 3 : tensor<1x4x5x5xf32>
  %s = terra.op "aten.convolution"(%y, %w) args {bias = unit, stride = [2, 2], padding = [0, 0], dilation = [1, 1], transposed = true, output_padding = [2, 2], groups = 1 : i64} : (tensor<1x4x5x5xf32>, tensor<4x2x3x3xf32>) -> tensor<1x2x13x13xf32>
  terra.fetch 1 %s : tensor<1x2x13x13xf32>
}
