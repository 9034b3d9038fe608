// grid_sampler_2d: a gather generic over the output reading the grid point
// and its corners with tensor.extract; its backward a scatter-add loop nest
// (grad_input) and a channel reduction (grad_grid). Unsupported modes stay
// terra.op (host ops).
// RUN: terra-opt %s -split-input-file -terra-convert-to-linalg | FileCheck %s

// Bilinear, zeros padding: one generic over [N, C, Ho, Wo]; the batch sizes
// of input and grid are guarded equal; four corners, each read at clamped
// indices and selected to 0 outside the input.
// CHECK-LABEL: terra.graph @bilinear
// CHECK:         cf.assert {{.*}} "grid_sampler_2d: input and grid batch sizes differ"
// CHECK:         linalg.generic
// CHECK-SAME:      iterator_types = ["parallel", "parallel", "parallel", "parallel"]
// CHECK-COUNT-2:   tensor.extract {{.*}} : tensor<?x3x4x2xf32>
// CHECK:           math.floor
// CHECK-COUNT-4:   tensor.extract {{.*}} : tensor<?x8x5x6xf32>
// CHECK:         } -> tensor<?x8x3x4xf32>
// CHECK-NOT:     terra.op
terra.graph @bilinear {
  %x = terra.feed 1 : tensor<?x8x5x6xf32>
  %g = terra.feed 2 : tensor<?x3x4x2xf32>
  %y = terra.op "aten.grid_sampler_2d"(%x, %g) args {align_corners = false, interpolation_mode = 0 : i64, padding_mode = 0 : i64} : (tensor<?x8x5x6xf32>, tensor<?x3x4x2xf32>) -> tensor<?x8x3x4xf32>
  terra.fetch 0 %y : tensor<?x8x3x4xf32>
}

// -----

// Nearest with border padding: the coordinate is clipped, then rounded half
// to even; one corner.
// CHECK-LABEL: terra.graph @nearest_border
// CHECK:         linalg.generic
// CHECK:           arith.maximumf
// CHECK:           arith.minimumf
// CHECK:           math.roundeven
// CHECK-COUNT-1:   tensor.extract {{.*}} : tensor<2x3x5x5xf32>
// CHECK-NOT:       tensor.extract {{.*}} : tensor<2x3x5x5xf32>
// CHECK:         } -> tensor<2x3x2x2xf32>
terra.graph @nearest_border {
  %x = terra.feed 1 : tensor<2x3x5x5xf32>
  %g = terra.feed 2 : tensor<2x2x2x2xf32>
  %y = terra.op "aten.grid_sampler_2d"(%x, %g) args {align_corners = true, interpolation_mode = 1 : i64, padding_mode = 1 : i64} : (tensor<2x3x5x5xf32>, tensor<2x2x2x2xf32>) -> tensor<2x3x2x2xf32>
  terra.fetch 0 %y : tensor<2x3x2x2xf32>
}

// -----

// The backward: grad_input is zeros carried through loops over the grid
// points (n, ho, wo) and an inner loop over channels that adds into the
// four corners in place; grad_grid reduces over channels (the last
// iterator) and is then scaled by the unnormalization's factor.
// CHECK-LABEL: terra.graph @backward
// CHECK:         linalg.fill
// CHECK:         scf.for
// CHECK:           scf.for
// CHECK:             scf.for
// CHECK:               math.floor
// CHECK:               scf.for
// CHECK-COUNT-4:         tensor.insert
// CHECK:         linalg.generic
// CHECK-SAME:      iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]
// CHECK:         linalg.generic
// CHECK-NOT:     terra.op
terra.graph @backward {
  %go = terra.feed 1 : tensor<?x4x7x7xf32>
  %x = terra.feed 2 : tensor<?x4x8x8xf32>
  %g = terra.feed 3 : tensor<?x7x7x2xf32>
  %r:2 = terra.op "aten.grid_sampler_2d_backward"(%go, %x, %g) args {align_corners = false, interpolation_mode = 0 : i64, output_mask = [true, true], padding_mode = 0 : i64} : (tensor<?x4x7x7xf32>, tensor<?x4x8x8xf32>, tensor<?x7x7x2xf32>) -> (tensor<?x4x8x8xf32>, tensor<?x7x7x2xf32>)
  terra.fetch 0 %r#0 : tensor<?x4x8x8xf32>
  terra.fetch 1 %r#1 : tensor<?x7x7x2xf32>
}

// -----

// Reflection padding (2) and bicubic interpolation (2) are not lowered: the
// ops stay terra.op and run on the host.
// CHECK-LABEL: terra.graph @unsupported
// CHECK-COUNT-2: terra.op "aten.grid_sampler_2d"
terra.graph @unsupported {
  %x = terra.feed 1 : tensor<2x3x5x5xf32>
  %g = terra.feed 2 : tensor<2x2x2x2xf32>
  %a = terra.op "aten.grid_sampler_2d"(%x, %g) args {align_corners = false, interpolation_mode = 0 : i64, padding_mode = 2 : i64} : (tensor<2x3x5x5xf32>, tensor<2x2x2x2xf32>) -> tensor<2x3x2x2xf32>
  %b = terra.op "aten.grid_sampler_2d"(%x, %g) args {align_corners = false, interpolation_mode = 2 : i64, padding_mode = 0 : i64} : (tensor<2x3x5x5xf32>, tensor<2x2x2x2xf32>) -> tensor<2x3x2x2xf32>
  terra.fetch 0 %a : tensor<2x3x2x2xf32>
  terra.fetch 1 %b : tensor<2x3x2x2xf32>
}
