// terra-lower-graph: feed guards and terra.feed_types.
// A feed's static sizes are guarded like a state's; the runtime also checks
// the feed's type as the host sends it (terra.feed_types), so its guard is
// marked as one that cannot fail once the host has finished
// (-terra-commit-in-place may write state in place after it). A point fed
// with two types is checked by its guards alone.
// RUN: terra-opt %s -split-input-file -terra-convert-to-linalg -terra-lower-graph | FileCheck %s
// CHECK-LABEL: module attributes {terra.asserts = ["feed 2: expected shape [3, ?]"], terra.feed_types = {{\[\[}}2, "f32", array<i64: 3, -1>], [5, "f32", array<i64>]]
// CHECK:         call @terra_rt_feed_f32
// CHECK:         call @terra_rt_check(%{{.*}}, %{{.*}}) {terra.feed_guard} : (i1, i64) -> ()
// CHECK-LABEL: module attributes {terra.asserts = ["feed 2: expected shape [{{[34]}}]", "feed 2: expected shape [{{[34]}}]"], terra.feed_types = []
// CHECK-NOT:     terra.feed_guard

module {
  terra.graph @feeds {
    %x = terra.feed 2 : tensor<3x?xf32>
    %s = terra.feed 5 : tensor<f32>
    %y = terra.op "aten.mul.Tensor"(%x, %s) : (tensor<3x?xf32>, tensor<f32>) -> tensor<3x?xf32>
    terra.fetch 1 %y : tensor<3x?xf32>
  }
}

// -----

module {
  terra.graph @two_types {
    %c = terra.case_select 7 cases 2
    %r = scf.index_switch %c -> tensor<f32>
    case 0 {
      %a = terra.feed 2 : tensor<3xf32>
      %s = terra.op "aten.sum"(%a) : (tensor<3xf32>) -> tensor<f32>
      scf.yield %s : tensor<f32>
    }
    default {
      %b = terra.feed 2 : tensor<4xf32>
      %s = terra.op "aten.sum"(%b) : (tensor<4xf32>) -> tensor<f32>
      scf.yield %s : tensor<f32>
    }
    terra.fetch 1 %r : tensor<f32>
  }
}
