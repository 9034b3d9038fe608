// Convolutions and their gradients become calls of the runtime's
// convolution entry points on tensors, before bufferization: the zero
// padding of the input and the spread-out grad_output become the calls'
// padding and stride (the copies die), group splits the group count, a
// broadcast bias init the bias argument. Parameters after the memrefs:
// stride (h, w), padding before (h, w), padding after (h, w), dilation
// (h, w), groups, overwrite. Transposed convolutions lower to the same
// calls (grad_input for the forward, forward and grad_weight for the
// backward).
// RUN: terra-opt %s -split-input-file -terra-convert-to-linalg -terra-library-convolutions -canonicalize | FileCheck %s

// CHECK-LABEL: terra.graph @conv2d_bias
// CHECK-DAG:     %[[C1:.*]] = arith.constant 1 : i64
// CHECK-DAG:     %[[C2:.*]] = arith.constant 2 : i64
// CHECK-DAG:     %[[X:.*]] = terra.feed 1
// CHECK-DAG:     %[[B:.*]] = terra.feed 3
// CHECK-NOT:     tensor.pad
// CHECK:         bufferization.to_buffer %[[X]] read_only : tensor<2x3x9x9xf32> to memref<2x3x9x9xf32, strided<[?, ?, ?, ?], offset: ?>>
// CHECK:         bufferization.to_buffer %[[B]] read_only
// CHECK:         %[[OUT:.*]] = memref.alloc() : memref<2x4x5x5xf32>
// CHECK:         call @terra_lib_conv2d_f32(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[C2]], %[[C2]], %[[C1]], %[[C1]], %[[C1]], %[[C1]], %[[C1]], %[[C1]], %[[C1]], %[[C1]])
// CHECK:         %[[R:.*]] = bufferization.to_tensor %[[OUT]] restrict writable
// CHECK:         terra.fetch 4 %[[R]]
terra.graph @conv2d_bias {
  %x = terra.feed 1 : tensor<2x3x9x9xf32>
  %w = terra.feed 2 : tensor<4x3x3x3xf32>
  %b = terra.feed 3 : tensor<4xf32>
  %r = terra.op "aten.convolution"(%x, %w, %b) args {stride = [2, 2], padding = [1, 1], dilation = [1, 1], transposed = false, output_padding = [0, 0], groups = 1 : i64} : (tensor<2x3x9x9xf32>, tensor<4x3x3x3xf32>, tensor<4xf32>) -> tensor<2x4x5x5xf32>
  terra.fetch 4 %r : tensor<2x4x5x5xf32>
}

// -----

// Groups, dilation, a dynamic batch and no bias (an empty global).
// CHECK:       memref.global "private" constant @terra_lib_no_bias_f32 : memref<0xf32> = dense<>
// CHECK-LABEL: terra.graph @conv2d_groups_dynamic_no_bias
// CHECK-DAG:     %[[C0:.*]] = arith.constant 0 : i64
// CHECK-DAG:     %[[C1:.*]] = arith.constant 1 : i64
// CHECK-DAG:     %[[C2:.*]] = arith.constant 2 : i64
// CHECK-NOT:     linalg.conv
// CHECK:         memref.get_global @terra_lib_no_bias_f32
// CHECK:         memref.alloc(%{{.*}}) : memref<?x6x4x4xf32>
// CHECK:         call @terra_lib_conv2d_f32(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[C1]], %[[C1]], %[[C0]], %[[C0]], %[[C0]], %[[C0]], %[[C2]], %[[C2]], %[[C2]], %[[C1]])
terra.graph @conv2d_groups_dynamic_no_bias {
  %x = terra.feed 1 : tensor<?x4x8x8xf32>
  %w = terra.feed 2 : tensor<6x2x3x3xf32>
  %r = terra.op "aten.convolution"(%x, %w) args {bias = unit, stride = [1, 1], padding = [0, 0], dilation = [2, 2], transposed = false, output_padding = [0, 0], groups = 2 : i64} : (tensor<?x4x8x8xf32>, tensor<6x2x3x3xf32>) -> tensor<?x6x4x4xf32>
  terra.fetch 3 %r : tensor<?x6x4x4xf32>
}

// -----

// A 1-D f64 convolution: height 1, padding on the width only.
// CHECK-LABEL: terra.graph @conv1d_f64
// CHECK-DAG:     %[[C0:.*]] = arith.constant 0 : i64
// CHECK-DAG:     %[[C1:.*]] = arith.constant 1 : i64
// CHECK:         call @terra_lib_conv2d_f64(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[C1]], %[[C1]], %[[C0]], %[[C1]], %[[C0]], %[[C1]], %[[C1]], %[[C1]], %[[C1]], %[[C1]])
// CHECK:         tensor.collapse_shape {{.*}} : tensor<2x5x1x16xf64> into tensor<2x5x16xf64>
terra.graph @conv1d_f64 {
  %x = terra.feed 1 : tensor<2x4x16xf64>
  %w = terra.feed 2 : tensor<5x4x3xf64>
  %r = terra.op "aten.convolution"(%x, %w) args {bias = unit, stride = [1], padding = [1], dilation = [1], transposed = false, output_padding = [0], groups = 1 : i64} : (tensor<2x4x16xf64>, tensor<5x4x3xf64>) -> tensor<2x5x16xf64>
  terra.fetch 3 %r : tensor<2x5x16xf64>
}

// -----

// Both gradients with stride 2: grad_input takes grad_output itself (not
// the spread-out copy), grad_weight the unpadded input; grad_bias stays a
// generated reduction.
// CHECK-LABEL: terra.graph @conv_backward
// CHECK-DAG:     %[[C1:.*]] = arith.constant 1 : i64
// CHECK-DAG:     %[[C2:.*]] = arith.constant 2 : i64
// CHECK-DAG:     %[[GO:.*]] = terra.feed 1
// CHECK-DAG:     %[[X:.*]] = terra.feed 2
// CHECK-NOT:     tensor.insert_slice
// CHECK-NOT:     tensor.pad
// CHECK:         bufferization.to_buffer %[[GO]] read_only
// CHECK:         call @terra_lib_conv2d_grad_input_f32(%{{.*}}, %{{.*}}, %{{.*}}, %[[C2]], %[[C2]], %[[C1]], %[[C1]], %[[C1]], %[[C1]], %[[C1]], %[[C1]], %[[C1]], %[[C1]])
// CHECK:         bufferization.to_buffer %[[X]] read_only
// CHECK:         call @terra_lib_conv2d_grad_weight_f32(%{{.*}}, %{{.*}}, %{{.*}}, %[[C2]], %[[C2]], %[[C1]], %[[C1]], %[[C1]], %[[C1]], %[[C1]], %[[C1]], %[[C1]], %[[C1]])
// CHECK:         linalg.generic
// CHECK-SAME:      iterator_types = ["parallel", "reduction", "reduction", "reduction"]
terra.graph @conv_backward {
  %go = terra.feed 1 : tensor<2x4x5x5xf32>
  %x = terra.feed 2 : tensor<2x3x9x9xf32>
  %w = terra.feed 3 : tensor<4x3x3x3xf32>
  %r:3 = terra.op "aten.convolution_backward"(%go, %x, %w) args {bias_sizes = [4], stride = [2, 2], padding = [1, 1], dilation = [1, 1], transposed = false, output_padding = [0, 0], groups = 1 : i64, output_mask = [true, true, true]} : (tensor<2x4x5x5xf32>, tensor<2x3x9x9xf32>, tensor<4x3x3x3xf32>) -> (tensor<2x3x9x9xf32>, tensor<4x3x3x3xf32>, tensor<4xf32>)
  terra.fetch 4 %r#0 : tensor<2x3x9x9xf32>
  terra.fetch 5 %r#1 : tensor<4x3x3x3xf32>
  terra.fetch 6 %r#2 : tensor<4xf32>
}

// -----

// Padding wider than the kernel reaches (1x1, padding 1): the lowering
// computes the gradient of the input padded by the excess and slices it;
// the call computes that larger gradient with no padding of its own.
// CHECK-LABEL: terra.graph @conv_backward_wide_padding
// CHECK-DAG:     %[[C0:.*]] = arith.constant 0 : i64
// CHECK-DAG:     %[[C1:.*]] = arith.constant 1 : i64
// CHECK-DAG:     %[[C2:.*]] = arith.constant 2 : i64
// CHECK:         %[[DX:.*]] = memref.alloc() : memref<2x4x10x10xf32>
// CHECK:         call @terra_lib_conv2d_grad_input_f32(%{{.*}}, %{{.*}}, %{{.*}}, %[[C1]], %[[C1]], %[[C0]], %[[C0]], %[[C0]], %[[C0]], %[[C1]], %[[C1]], %[[C2]], %[[C1]])
// CHECK:         %[[T:.*]] = bufferization.to_tensor %[[DX]]
// CHECK:         tensor.extract_slice %[[T]][0, 0, 1, 1] [2, 4, 8, 8] [1, 1, 1, 1]
// CHECK:         call @terra_lib_conv2d_grad_weight_f32(%{{.*}}, %{{.*}}, %{{.*}}, %[[C1]], %[[C1]], %[[C1]], %[[C1]], %[[C1]], %[[C1]], %[[C1]], %[[C1]], %[[C2]], %[[C1]])
terra.graph @conv_backward_wide_padding {
  %go = terra.feed 1 : tensor<2x8x10x10xf32>
  %x = terra.feed 2 : tensor<2x4x8x8xf32>
  %w = terra.feed 3 : tensor<8x2x1x1xf32>
  %r:2 = terra.op "aten.convolution_backward"(%go, %x, %w) args {bias_sizes = [8], stride = [1, 1], padding = [1, 1], dilation = [1, 1], transposed = false, output_padding = [0, 0], groups = 2 : i64, output_mask = [true, true, false]} : (tensor<2x8x10x10xf32>, tensor<2x4x8x8xf32>, tensor<8x2x1x1xf32>) -> (tensor<2x4x8x8xf32>, tensor<8x2x1x1xf32>)
  terra.fetch 4 %r#0 : tensor<2x4x8x8xf32>
  terra.fetch 5 %r#1 : tensor<8x2x1x1xf32>
}

// -----

// A transposed convolution (DCGAN's upsampling layer: 4x4 kernel, stride 2,
// padding 1) is the grad_input call with x as grad_output: x itself, not
// the spread-out copy, into an overwritten output; the bias is added after.
// CHECK-LABEL: terra.graph @conv_transpose_bias
// CHECK-DAG:     %[[C1:.*]] = arith.constant 1 : i64
// CHECK-DAG:     %[[C2:.*]] = arith.constant 2 : i64
// CHECK-DAG:     %[[X:.*]] = terra.feed 1
// CHECK-DAG:     %[[W:.*]] = terra.feed 2
// CHECK-DAG:     %[[B:.*]] = terra.feed 3
// CHECK-NOT:     tensor.insert_slice
// CHECK:         bufferization.to_buffer %[[X]] read_only
// CHECK:         bufferization.to_buffer %[[W]] read_only
// CHECK:         %[[OUT:.*]] = memref.alloc() : memref<2x4x8x8xf32>
// CHECK:         call @terra_lib_conv2d_grad_input_f32(%{{.*}}, %{{.*}}, %{{.*}}, %[[C2]], %[[C2]], %[[C1]], %[[C1]], %[[C1]], %[[C1]], %[[C1]], %[[C1]], %[[C1]], %[[C1]])
// CHECK:         %[[Y:.*]] = bufferization.to_tensor %[[OUT]] restrict writable
// CHECK:         %[[R:.*]] = linalg.generic {{.*}} ins(%[[B]] : tensor<4xf32>) outs(%[[Y]] : tensor<2x4x8x8xf32>)
// CHECK:         terra.fetch 4 %[[R]]
terra.graph @conv_transpose_bias {
  %x = terra.feed 1 : tensor<2x8x4x4xf32>
  %w = terra.feed 2 : tensor<8x4x4x4xf32>
  %b = terra.feed 3 : tensor<4xf32>
  %r = terra.op "aten.convolution"(%x, %w, %b) args {stride = [2, 2], padding = [1, 1], dilation = [1, 1], transposed = true, output_padding = [0, 0], groups = 1 : i64} : (tensor<2x8x4x4xf32>, tensor<8x4x4x4xf32>, tensor<4xf32>) -> tensor<2x4x8x8xf32>
  terra.fetch 4 %r : tensor<2x4x8x8xf32>
}

// -----

// Its backward: grad_input is the forward call on grad_output with the
// same weight (no bias), grad_weight the weight-gradient call with
// grad_output as the input and x as grad_output; both take the unpadded
// grad_output. grad_bias stays a generated reduction.
// CHECK-LABEL: terra.graph @conv_transpose_backward
// CHECK-DAG:     %[[C1:.*]] = arith.constant 1 : i64
// CHECK-DAG:     %[[C2:.*]] = arith.constant 2 : i64
// CHECK-DAG:     %[[GO:.*]] = terra.feed 1
// CHECK-DAG:     %[[X:.*]] = terra.feed 2
// CHECK-NOT:     tensor.pad
// CHECK:         bufferization.to_buffer %[[GO]] read_only
// CHECK:         memref.get_global @terra_lib_no_bias_f32
// CHECK:         memref.alloc() : memref<2x8x4x4xf32>
// CHECK:         call @terra_lib_conv2d_f32(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[C2]], %[[C2]], %[[C1]], %[[C1]], %[[C1]], %[[C1]], %[[C1]], %[[C1]], %[[C1]], %[[C1]])
// CHECK:         %[[GOB:.*]] = bufferization.to_buffer %[[GO]] read_only
// CHECK:         %[[GOC:.*]] = memref.cast %[[GOB]]
// CHECK:         %[[XB:.*]] = bufferization.to_buffer %[[X]] read_only
// CHECK:         %[[XC:.*]] = memref.cast %[[XB]]
// CHECK:         memref.alloc() : memref<8x4x4x4xf32>
// CHECK:         call @terra_lib_conv2d_grad_weight_f32(%[[GOC]], %[[XC]], %{{.*}}, %[[C2]], %[[C2]], %[[C1]], %[[C1]], %[[C1]], %[[C1]], %[[C1]], %[[C1]], %[[C1]], %[[C1]])
// CHECK:         linalg.generic
// CHECK-SAME:      iterator_types = ["parallel", "reduction", "reduction", "reduction"]
terra.graph @conv_transpose_backward {
  %go = terra.feed 1 : tensor<2x4x8x8xf32>
  %x = terra.feed 2 : tensor<2x8x4x4xf32>
  %w = terra.feed 3 : tensor<8x4x4x4xf32>
  %r:3 = terra.op "aten.convolution_backward"(%go, %x, %w) args {bias_sizes = [4], stride = [2, 2], padding = [1, 1], dilation = [1, 1], transposed = true, output_padding = [0, 0], groups = 1 : i64, output_mask = [true, true, true]} : (tensor<2x4x8x8xf32>, tensor<2x8x4x4xf32>, tensor<8x4x4x4xf32>) -> (tensor<2x8x4x4xf32>, tensor<8x4x4x4xf32>, tensor<4xf32>)
  terra.fetch 4 %r#0 : tensor<2x8x4x4xf32>
  terra.fetch 5 %r#1 : tensor<8x4x4x4xf32>
  terra.fetch 6 %r#2 : tensor<4xf32>
}

// -----

// DCGAN's first layer (1x1 -> 4x4, stride 1, no padding): x spread into
// 7x7 zeros at offset 3 is what the call's 4x4 kernel reads when it
// convolves the 4x4 output down to x's 1x1 with no padding.
// CHECK-LABEL: terra.graph @conv_transpose_first_layer
// CHECK-DAG:     %[[C0:.*]] = arith.constant 0 : i64
// CHECK-DAG:     %[[C1:.*]] = arith.constant 1 : i64
// CHECK:         memref.alloc() : memref<2x6x4x4xf32>
// CHECK:         call @terra_lib_conv2d_grad_input_f32(%{{.*}}, %{{.*}}, %{{.*}}, %[[C1]], %[[C1]], %[[C0]], %[[C0]], %[[C0]], %[[C0]], %[[C1]], %[[C1]], %[[C1]], %[[C1]])
// CHECK-NOT:     linalg.
terra.graph @conv_transpose_first_layer {
  %x = terra.feed 1 : tensor<2x8x1x1xf32>
  %w = terra.feed 2 : tensor<8x6x4x4xf32>
  %r = terra.op "aten.convolution"(%x, %w) args {bias = unit, stride = [1, 1], padding = [0, 0], dilation = [1, 1], transposed = true, output_padding = [0, 0], groups = 1 : i64} : (tensor<2x8x1x1xf32>, tensor<8x6x4x4xf32>) -> tensor<2x6x4x4xf32>
  terra.fetch 4 %r : tensor<2x6x4x4xf32>
}

// -----

// An init that is neither zeros nor a broadcast bias is copied into the
// output, which the call accumulates into (overwrite = 0).
// CHECK-LABEL: func.func @accumulate
// CHECK-SAME:    (%{{.*}}: tensor<1x3x9x9xf32>, %{{.*}}: tensor<4x3x3x3xf32>, %[[INIT:.*]]: tensor<1x4x4x4xf32>)
// CHECK-DAG:     %[[C0:.*]] = arith.constant 0 : i64
// CHECK:         %[[OUT:.*]] = memref.alloc() : memref<1x4x4x4xf32>
// CHECK:         bufferization.materialize_in_destination %[[INIT]] in restrict writable %[[OUT]]
// CHECK:         call @terra_lib_conv2d_f32({{.*}}, %[[C0]])
func.func @accumulate(%i: tensor<1x3x9x9xf32>, %w: tensor<4x3x3x3xf32>, %o: tensor<1x4x4x4xf32>) -> tensor<1x4x4x4xf32> {
  %r = linalg.conv_2d_nchw_fchw {strides = dense<2> : tensor<2xi64>, dilations = dense<1> : tensor<2xi64>}
    ins(%i, %w : tensor<1x3x9x9xf32>, tensor<4x3x3x3xf32>) outs(%o : tensor<1x4x4x4xf32>) -> tensor<1x4x4x4xf32>
  return %r : tensor<1x4x4x4xf32>
}

// -----

// A gradient generic written by hand is matched as well when its maps are
// the ones its tag gives: grad_weight with stride 2 from an unpadded 9x9
// input, accumulated into the given init.
// CHECK-LABEL: func.func @grad_weight_accumulate
// CHECK-SAME:    (%[[X:.*]]: tensor<2x1x3x9x9xf32>, %[[GO:.*]]: tensor<2x1x4x4x4xf32>, %[[INIT:.*]]: tensor<1x4x3x3x3xf32>)
// CHECK-DAG:     %[[C0:.*]] = arith.constant 0 : i64
// CHECK-DAG:     %[[C1:.*]] = arith.constant 1 : i64
// CHECK-DAG:     %[[C2:.*]] = arith.constant 2 : i64
// CHECK-DAG:     %[[X4:.*]] = tensor.collapse_shape %[[X]] {{\[}}[0], [1, 2], [3], [4]]
// CHECK-DAG:     %[[I4:.*]] = tensor.collapse_shape %[[INIT]] {{\[}}[0, 1], [2], [3], [4]]
// CHECK:         bufferization.to_buffer %[[X4]] read_only
// CHECK:         bufferization.materialize_in_destination %[[I4]] in restrict writable
// CHECK:         call @terra_lib_conv2d_grad_weight_f32(%{{.*}}, %{{.*}}, %{{.*}}, %[[C2]], %[[C2]], %[[C0]], %[[C0]], %[[C0]], %[[C0]], %[[C1]], %[[C1]], %[[C1]], %[[C0]])
// CHECK:         tensor.expand_shape %{{.*}} {{\[}}[0, 1], [2], [3], [4]] output_shape [1, 4, 3, 3, 3]
// CHECK-NOT:     linalg.generic
#gwx = affine_map<(g, f, c, n, oh, ow, i, j) -> (n, g, c, oh * 2 + i, ow * 2 + j)>
#gwg = affine_map<(g, f, c, n, oh, ow, i, j) -> (n, g, f, oh, ow)>
#gwo = affine_map<(g, f, c, n, oh, ow, i, j) -> (g, f, c, i, j)>
func.func @grad_weight_accumulate(%x: tensor<2x1x3x9x9xf32>, %go: tensor<2x1x4x4x4xf32>, %gw: tensor<1x4x3x3x3xf32>) -> tensor<1x4x3x3x3xf32> {
  %g = linalg.generic {indexing_maps = [#gwx, #gwg, #gwo],
                       iterator_types = ["parallel", "parallel", "parallel", "reduction", "reduction", "reduction", "parallel", "parallel"]}
      ins(%x, %go : tensor<2x1x3x9x9xf32>, tensor<2x1x4x4x4xf32>) outs(%gw : tensor<1x4x3x3x3xf32>)
      attrs = {terra.library = "conv2d_grad_weight", terra.stride = array<i64: 2, 2>, terra.dilation = array<i64: 1, 1>} {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  } -> tensor<1x4x3x3x3xf32>
  return %g : tensor<1x4x3x3x3xf32>
}

// -----

// Integer convolutions and a tagged generic whose maps disagree with its
// tag (stride 1 recorded, stride 2 in the maps) stay linalg.
// CHECK-LABEL: func.func @untouched
// CHECK-NOT:     call
// CHECK:         linalg.conv_2d_nchw_fchw
// CHECK:         linalg.generic
#mx = affine_map<(g, f, c, n, oh, ow, i, j) -> (n, g, c, oh * 2 + i, ow * 2 + j)>
#mg = affine_map<(g, f, c, n, oh, ow, i, j) -> (n, g, f, oh, ow)>
#mo = affine_map<(g, f, c, n, oh, ow, i, j) -> (g, f, c, i, j)>
func.func @untouched(%ii: tensor<1x3x9x9xi32>, %wi: tensor<4x3x3x3xi32>, %oi: tensor<1x4x4x4xi32>,
                     %x: tensor<2x1x3x9x9xf32>, %go: tensor<2x1x4x4x4xf32>, %gw: tensor<1x4x3x3x3xf32>)
    -> (tensor<1x4x4x4xi32>, tensor<1x4x3x3x3xf32>) {
  %ri = linalg.conv_2d_nchw_fchw {strides = dense<2> : tensor<2xi64>, dilations = dense<1> : tensor<2xi64>}
    ins(%ii, %wi : tensor<1x3x9x9xi32>, tensor<4x3x3x3xi32>) outs(%oi : tensor<1x4x4x4xi32>) -> tensor<1x4x4x4xi32>
  %g = linalg.generic {indexing_maps = [#mx, #mg, #mo],
                       iterator_types = ["parallel", "parallel", "parallel", "reduction", "reduction", "reduction", "parallel", "parallel"]}
      ins(%x, %go : tensor<2x1x3x9x9xf32>, tensor<2x1x4x4x4xf32>) outs(%gw : tensor<1x4x3x3x3xf32>)
      attrs = {terra.library = "conv2d_grad_weight", terra.stride = array<i64: 1, 1>, terra.dilation = array<i64: 1, 1>} {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  } -> tensor<1x4x3x3x3xf32>
  return %ri, %g : tensor<1x4x4x4xi32>, tensor<1x4x3x3x3xf32>
}

// -----

// Dynamic spatial sizes (a pooling whose output size varies between merged
// paths feeds the convolution): the output sizes are computed at run time
// and the padding after the input is left to the entry point, encoded as
// -1 - the preferred padding (-2: prefer 1); the padding before it is known.
// CHECK-LABEL: terra.graph @conv_dynamic_spatial
// CHECK-DAG:     %[[C1:.*]] = arith.constant 1 : i64
// CHECK-DAG:     %[[C2:.*]] = arith.constant 2 : i64
// CHECK-DAG:     %[[CM2:.*]] = arith.constant -2 : i64
// CHECK-NOT:     tensor.pad
// CHECK:         cf.assert %{{.*}}, "convolution input is smaller than the dilated kernel"
// CHECK:         memref.alloc(%{{.*}}, %{{.*}}) : memref<2x4x?x?xf32>
// CHECK:         call @terra_lib_conv2d_f32(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[C2]], %[[C2]], %[[C1]], %[[C1]], %[[CM2]], %[[CM2]], %[[C1]], %[[C1]], %[[C1]], %[[C1]])
// CHECK-NOT:     tensor.insert_slice
// CHECK:         call @terra_lib_conv2d_grad_input_f32(%{{.*}}, %{{.*}}, %{{.*}}, %[[C2]], %[[C2]], %[[C1]], %[[C1]], %[[CM2]], %[[CM2]], %[[C1]], %[[C1]], %[[C1]], %[[C1]])
// CHECK:         call @terra_lib_conv2d_grad_weight_f32(%{{.*}}, %{{.*}}, %{{.*}}, %[[C2]], %[[C2]], %[[C1]], %[[C1]], %[[CM2]], %[[CM2]], %[[C1]], %[[C1]], %[[C1]], %[[C1]])
// CHECK-NOT:     linalg.conv_2d
terra.graph @conv_dynamic_spatial {
  %x = terra.feed 1 : tensor<2x3x?x?xf32>
  %w = terra.feed 2 : tensor<4x3x3x3xf32>
  %r = terra.op "aten.convolution"(%x, %w) args {bias = unit, stride = [2, 2], padding = [1, 1], dilation = [1, 1], transposed = false, output_padding = [0, 0], groups = 1 : i64} : (tensor<2x3x?x?xf32>, tensor<4x3x3x3xf32>) -> tensor<2x4x?x?xf32>
  terra.fetch 3 %r : tensor<2x4x?x?xf32>
  %go = terra.feed 4 : tensor<2x4x?x?xf32>
  %g:2 = terra.op "aten.convolution_backward"(%go, %x, %w) args {bias_sizes = [4], stride = [2, 2], padding = [1, 1], dilation = [1, 1], transposed = false, output_padding = [0, 0], groups = 1 : i64, output_mask = [true, true, false]} : (tensor<2x4x?x?xf32>, tensor<2x3x?x?xf32>, tensor<4x3x3x3xf32>) -> (tensor<2x3x?x?xf32>, tensor<4x3x3x3xf32>)
  terra.fetch 5 %g#0 : tensor<2x3x?x?xf32>
  terra.fetch 6 %g#1 : tensor<4x3x3x3xf32>
}
