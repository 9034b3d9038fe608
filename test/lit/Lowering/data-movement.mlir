// Data movement: reshapes become collapse/expand_shape (tensor.reshape only
// when the reassociation is not static), transposes linalg.transpose,
// slicing extract/insert_slice, gathers linalg.generic with tensor.extract.
// RUN: terra-opt %s -split-input-file -terra-convert-to-linalg | FileCheck %s

// CHECK-LABEL: terra.graph @view_collapse
// CHECK:         %[[A:.*]] = terra.feed 1
// CHECK:         %[[C:.*]] = tensor.collapse_shape %[[A]] {{\[\[}}0, 1], [2]] : tensor<2x3x4xf32> into tensor<6x4xf32>
// CHECK:         terra.fetch 0 %[[C]]
terra.graph @view_collapse {
  %a = terra.feed 1 : tensor<2x3x4xf32>
  %r = terra.op "aten.view"(%a) args {size = [6, 4]} : (tensor<2x3x4xf32>) -> tensor<6x4xf32>
  terra.fetch 0 %r : tensor<6x4xf32>
}

// -----

// A dynamic batch dim keeps its size; the split dims are static.
// CHECK-LABEL: terra.graph @view_expand_dynamic
// CHECK:         %[[A:.*]] = terra.feed 1 : tensor<?x12xf32>
// CHECK:         %[[D:.*]] = tensor.dim %[[A]], %c0
// CHECK:         tensor.expand_shape %[[A]] {{\[\[}}0], [1, 2]] output_shape [%[[D]], 3, 4] : tensor<?x12xf32> into tensor<?x3x4xf32>
terra.graph @view_expand_dynamic {
  %a = terra.feed 1 : tensor<?x12xf32>
  %r = terra.op "aten.view"(%a) args {size = [-1, 3, 4]} : (tensor<?x12xf32>) -> tensor<?x3x4xf32>
  terra.fetch 0 %r : tensor<?x3x4xf32>
}

// -----

// 3x4 -> 2x6 has no finer grouping: collapse to 12, expand to 2x6.
// CHECK-LABEL: terra.graph @view_regroup
// CHECK:         %[[C:.*]] = tensor.collapse_shape %{{.*}} {{\[\[}}0, 1]] : tensor<3x4xf32> into tensor<12xf32>
// CHECK:         tensor.expand_shape %[[C]] {{\[\[}}0, 1]] output_shape [2, 6] : tensor<12xf32> into tensor<2x6xf32>
terra.graph @view_regroup {
  %a = terra.feed 1 : tensor<3x4xf32>
  %r = terra.op "aten.view"(%a) args {size = [2, 6]} : (tensor<3x4xf32>) -> tensor<2x6xf32>
  terra.fetch 0 %r : tensor<2x6xf32>
}

// -----

// Two dynamic result dims in one group: the sizes come from the arg (one
// -1 inferred), guarded, and a shape tensor feeds tensor.reshape.
// CHECK-LABEL: terra.graph @view_two_dynamic
// CHECK:         %[[N:.*]] = arith.divsi
// CHECK:         cf.assert %{{.*}}, "reshape: element count mismatch"
// CHECK:         %[[S:.*]] = tensor.from_elements %c2, %[[N]], %c8, %c8 : tensor<4xindex>
// CHECK:         tensor.reshape %{{.*}}(%[[S]]) : (tensor<?x?x64xf32>, tensor<4xindex>) -> tensor<?x?x8x8xf32>
terra.graph @view_two_dynamic {
  %a = terra.feed 1 : tensor<?x?x64xf32>
  %r = terra.op "aten.view"(%a) args {size = [2, -1, 8, 8]} : (tensor<?x?x64xf32>) -> tensor<?x?x8x8xf32>
  terra.fetch 0 %r : tensor<?x?x8x8xf32>
}

// -----

// CHECK-LABEL: terra.graph @squeeze_unsqueeze
// CHECK:         %[[S:.*]] = tensor.collapse_shape %{{.*}} {{\[\[}}0], [1, 2]] : tensor<?x1x4xf32> into tensor<?x4xf32>
// CHECK:         %[[D:.*]] = tensor.dim %[[S]], %c0
// CHECK:         tensor.expand_shape %[[S]] {{\[\[}}0], [1, 2]] output_shape [%[[D]], 4, 1] : tensor<?x4xf32> into tensor<?x4x1xf32>
terra.graph @squeeze_unsqueeze {
  %a = terra.feed 1 : tensor<?x1x4xf32>
  %s = terra.op "aten.squeeze.dim"(%a) args {dim = 1 : i64} : (tensor<?x1x4xf32>) -> tensor<?x4xf32>
  %u = terra.op "aten.unsqueeze"(%s) args {dim = -1 : i64} : (tensor<?x4xf32>) -> tensor<?x4x1xf32>
  terra.fetch 0 %u : tensor<?x4x1xf32>
}

// -----

// CHECK-LABEL: terra.graph @permute
// CHECK:         %[[E:.*]] = tensor.empty() : tensor<4x2x3xf32>
// CHECK:         linalg.transpose ins(%{{.*}} : tensor<2x3x4xf32>) outs(%[[E]] : tensor<4x2x3xf32>) permutation = [2, 0, 1]
terra.graph @permute {
  %a = terra.feed 1 : tensor<2x3x4xf32>
  %r = terra.op "aten.permute"(%a) args {dims = [-1, 0, 1]} : (tensor<2x3x4xf32>) -> tensor<4x2x3xf32>
  terra.fetch 0 %r : tensor<4x2x3xf32>
}

// -----

// CHECK-LABEL: terra.graph @transpose_int
// CHECK:         linalg.transpose ins(%{{.*}} : tensor<2x3x5xf32>) outs(%{{.*}} : tensor<5x3x2xf32>) permutation = [2, 1, 0]
terra.graph @transpose_int {
  %a = terra.feed 1 : tensor<2x3x5xf32>
  %r = terra.op "aten.transpose.int"(%a) args {dim0 = 0 : i64, dim1 = -1 : i64} : (tensor<2x3x5xf32>) -> tensor<5x3x2xf32>
  terra.fetch 0 %r : tensor<5x3x2xf32>
}

// -----

// A unit dim broadcasts (constant 0 in the map); new leading dims are not
// in the input map at all.
// CHECK-DAG:   #[[IN:.*]] = affine_map<(d0, d1, d2) -> (d1, 0)>
// CHECK-DAG:   #[[ID:.*]] = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
// CHECK-LABEL: terra.graph @expand
// CHECK:         linalg.generic {indexing_maps = [#[[IN]], #[[ID]]], iterator_types = ["parallel", "parallel", "parallel"]}
// CHECK-SAME:      ins(%{{.*}} : tensor<3x1xf32>) outs(%{{.*}} : tensor<2x3x4xf32>)
terra.graph @expand {
  %a = terra.feed 1 : tensor<3x1xf32>
  %r = terra.op "aten.expand"(%a) args {size = [2, -1, 4]} : (tensor<3x1xf32>) -> tensor<2x3x4xf32>
  terra.fetch 0 %r : tensor<2x3x4xf32>
}

// -----

// Static bounds are clamped at compile time (start -6 -> 1, end INT64_MAX -> 7).
// CHECK-LABEL: terra.graph @slice_step
// CHECK:         tensor.extract_slice %{{.*}}[0, 1] [4, 3] [1, 2] : tensor<4x7xf32> to tensor<4x3xf32>
terra.graph @slice_step {
  %a = terra.feed 1 : tensor<4x7xf32>
  %r = terra.op "aten.slice.Tensor"(%a) args {dim = 1 : i64, start = -6 : i64, end = 9223372036854775807 : i64, step = 2 : i64} : (tensor<4x7xf32>) -> tensor<4x3xf32>
  terra.fetch 0 %r : tensor<4x3xf32>
}

// -----

// On a dynamic dim the clamping is computed at run time.
// CHECK-LABEL: terra.graph @slice_dynamic
// CHECK:         %[[N:.*]] = tensor.dim %{{.*}}, %c0 : tensor<?x7xf32>
// CHECK:         %[[S:.*]] = arith.select
// CHECK:         %[[E:.*]] = arith.addi %[[N]], %c-1
// CHECK:         %[[L:.*]] = arith.subi
// CHECK:         tensor.extract_slice %{{.*}}[%[[S]], 0] [%[[L]], 7] [1, 1] : tensor<?x7xf32> to tensor<?x7xf32>
terra.graph @slice_dynamic {
  %a = terra.feed 1 : tensor<?x7xf32>
  %r = terra.op "aten.slice.Tensor"(%a) args {dim = 0 : i64, start = 1 : i64, end = -1 : i64, step = 1 : i64} : (tensor<?x7xf32>) -> tensor<?x7xf32>
  terra.fetch 0 %r : tensor<?x7xf32>
}

// -----

// The last piece of split.Tensor takes what is left of the dim.
// CHECK-LABEL: terra.graph @split
// CHECK:         tensor.extract_slice %{{.*}}[0, 0] [4, 3] [1, 1] : tensor<4x7xf32> to tensor<4x3xf32>
// CHECK:         tensor.extract_slice %{{.*}}[0, 3] [4, 3] [1, 1] : tensor<4x7xf32> to tensor<4x3xf32>
// CHECK:         tensor.extract_slice %{{.*}}[0, 6] [4, 1] [1, 1] : tensor<4x7xf32> to tensor<4x1xf32>
terra.graph @split {
  %a = terra.feed 1 : tensor<4x7xf32>
  %r:3 = terra.op "aten.split.Tensor"(%a) args {split_size = 3 : i64, dim = 1 : i64} : (tensor<4x7xf32>) -> (tensor<4x3xf32>, tensor<4x3xf32>, tensor<4x1xf32>)
  terra.fetch 0 %r#0 : tensor<4x3xf32>
  terra.fetch 1 %r#1 : tensor<4x3xf32>
  terra.fetch 2 %r#2 : tensor<4x1xf32>
}

// -----

// unsafe_split (an RNN cell's gate chunks) is split's values.
// CHECK-LABEL: terra.graph @unsafe_split
// CHECK:         tensor.extract_slice %{{.*}}[0, 0] [8, 8] [1, 1] : tensor<8x24xf32> to tensor<8x8xf32>
// CHECK:         tensor.extract_slice %{{.*}}[0, 8] [8, 8] [1, 1] : tensor<8x24xf32> to tensor<8x8xf32>
// CHECK:         tensor.extract_slice %{{.*}}[0, 16] [8, 8] [1, 1] : tensor<8x24xf32> to tensor<8x8xf32>
// CHECK-NOT:     terra.op
terra.graph @unsafe_split {
  %a = terra.feed 1 : tensor<8x24xf32>
  %r:3 = terra.op "aten.unsafe_split.Tensor"(%a) args {split_size = 8 : i64, dim = 1 : i64} : (tensor<8x24xf32>) -> (tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>)
  terra.fetch 0 %r#0 : tensor<8x8xf32>
  terra.fetch 1 %r#1 : tensor<8x8xf32>
  terra.fetch 2 %r#2 : tensor<8x8xf32>
}

// -----

// CHECK-LABEL: terra.graph @select
// CHECK:         tensor.extract_slice %{{.*}}[0, 6] [4, 1] [1, 1] : tensor<4x7xf32> to tensor<4xf32>
terra.graph @select {
  %a = terra.feed 1 : tensor<4x7xf32>
  %r = terra.op "aten.select.int"(%a) args {dim = 1 : i64, index = -1 : i64} : (tensor<4x7xf32>) -> tensor<4xf32>
  terra.fetch 0 %r : tensor<4xf32>
}

// -----

// CHECK-LABEL: terra.graph @slice_backward
// CHECK:         %[[Z:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%{{.*}} : tensor<4x7xf32>)
// CHECK:         tensor.insert_slice %{{.*}} into %[[Z]][0, 1] [4, 3] [1, 2] : tensor<4x3xf32> into tensor<4x7xf32>
terra.graph @slice_backward {
  %g = terra.feed 1 : tensor<4x3xf32>
  %r = terra.op "aten.slice_backward"(%g) args {input_sizes = [4, 7], dim = 1 : i64, start = 1 : i64, end = 9223372036854775807 : i64, step = 2 : i64} : (tensor<4x3xf32>) -> tensor<4x7xf32>
  terra.fetch 0 %r : tensor<4x7xf32>
}

// -----

// CHECK-LABEL: terra.graph @cat
// CHECK:         %[[E:.*]] = tensor.empty() : tensor<2x8xf32>
// CHECK:         %[[I:.*]] = tensor.insert_slice %{{.*}} into %[[E]][0, 0] [2, 3] [1, 1]
// CHECK:         tensor.insert_slice %{{.*}} into %[[I]][0, 3] [2, 5] [1, 1]
terra.graph @cat {
  %a = terra.feed 1 : tensor<2x3xf32>
  %b = terra.feed 2 : tensor<2x5xf32>
  %r = terra.op "aten.cat"(%a, %b) args {dim = -1 : i64} : (tensor<2x3xf32>, tensor<2x5xf32>) -> tensor<2x8xf32>
  terra.fetch 0 %r : tensor<2x8xf32>
}

// -----

// Stacking inserts rank-reduced slices.
// CHECK-LABEL: terra.graph @stack
// CHECK:         %[[E:.*]] = tensor.empty() : tensor<3x2x3xf32>
// CHECK:         %[[I:.*]] = tensor.insert_slice %{{.*}} into %[[E]][0, 0, 0] [3, 1, 3] [1, 1, 1] : tensor<3x3xf32> into tensor<3x2x3xf32>
// CHECK:         tensor.insert_slice %{{.*}} into %[[I]][0, 1, 0] [3, 1, 3] [1, 1, 1] : tensor<3x3xf32> into tensor<3x2x3xf32>
terra.graph @stack {
  %a = terra.feed 1 : tensor<3x3xf32>
  %b = terra.feed 2 : tensor<3x3xf32>
  %r = terra.op "aten.stack"(%a, %b) args {dim = 1 : i64} : (tensor<3x3xf32>, tensor<3x3xf32>) -> tensor<3x2x3xf32>
  terra.fetch 0 %r : tensor<3x2x3xf32>
}

// -----

// CHECK-DAG:   #[[IDX:.*]] = affine_map<(d0, d1, d2) -> (d0, d1)>
// CHECK-LABEL: terra.graph @embedding
// CHECK:         %[[W:.*]] = terra.feed 1 : tensor<10x4xf32>
// CHECK:         linalg.generic {indexing_maps = [#[[IDX]], #{{.*}}]
// CHECK:         ^bb0(%[[IN:.*]]: i64, %{{.*}}: f32):
// CHECK:           %[[D:.*]] = linalg.index 2 : index
// CHECK:           %[[I:.*]] = arith.index_cast %[[IN]] : i64 to index
// CHECK:           cf.assert %{{.*}}, "embedding: index out of range in self"
// CHECK:           %[[V:.*]] = tensor.extract %[[W]][%[[I]], %[[D]]] : tensor<10x4xf32>
// CHECK:           linalg.yield %[[V]] : f32
terra.graph @embedding {
  %w = terra.feed 1 : tensor<10x4xf32>
  %i = terra.feed 2 : tensor<?x3xi64>
  %r = terra.op "aten.embedding"(%w, %i) : (tensor<10x4xf32>, tensor<?x3xi64>) -> tensor<?x3x4xf32>
  terra.fetch 0 %r : tensor<?x3x4xf32>
}

// -----

// CHECK-LABEL: terra.graph @gather
// CHECK:         linalg.generic
// CHECK:           %[[D0:.*]] = linalg.index 0 : index
// CHECK:           %[[I:.*]] = arith.index_cast %{{.*}} : i64 to index
// CHECK:           tensor.extract %{{.*}}[%[[D0]], %[[I]]] : tensor<4x5xf32>
terra.graph @gather {
  %a = terra.feed 1 : tensor<4x5xf32>
  %i = terra.feed 2 : tensor<4x2xi64>
  %r = terra.op "aten.gather"(%a, %i) args {dim = 1 : i64} : (tensor<4x5xf32>, tensor<4x2xi64>) -> tensor<4x2xf32>
  terra.fetch 0 %r : tensor<4x2xf32>
}

// -----

// Scatter-add: one gradient row per index, added in place into the result.
// CHECK-LABEL: terra.graph @embedding_backward
// CHECK:         %[[Z:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%{{.*}} : tensor<10x4xf32>)
// CHECK:         scf.for %[[N:.*]] = %c0 to %c6 step %c1 iter_args(%[[ACC:.*]] = %[[Z]]) -> (tensor<10x4xf32>)
// CHECK:           %[[I:.*]] = arith.index_cast
// CHECK:           %[[G:.*]] = tensor.extract_slice %{{.*}}[%[[N]], 0] [1, 4] [1, 1] : tensor<6x4xf32> to tensor<4xf32>
// CHECK:           %[[R:.*]] = tensor.extract_slice %[[ACC]][%[[I]], 0] [1, 4] [1, 1] : tensor<10x4xf32> to tensor<4xf32>
// CHECK:           %[[U:.*]] = linalg.generic {{.*}} ins(%[[G]] : tensor<4xf32>) outs(%[[R]] : tensor<4xf32>)
// CHECK:             arith.addf
// CHECK:           %[[NEW:.*]] = tensor.insert_slice %[[U]] into %[[ACC]][%[[I]], 0] [1, 4] [1, 1]
// CHECK:           scf.yield %[[NEW]]
terra.graph @embedding_backward {
  %g = terra.feed 1 : tensor<6x4xf32>
  %i = terra.feed 2 : tensor<6xi64>
  %r = terra.op "aten.embedding_dense_backward"(%g, %i) args {num_weights = 10 : i64, padding_idx = -1 : i64, scale_grad_by_freq = false} : (tensor<6x4xf32>, tensor<6xi64>) -> tensor<10x4xf32>
  terra.fetch 0 %r : tensor<10x4xf32>
}

// -----

// Two dynamic dims to split and no size arg: the sizes are unknown, so the
// op stays for a host callback.
// CHECK-LABEL: terra.graph @view_unknown_sizes_stays
// CHECK:         terra.op "aten.view"
terra.graph @view_unknown_sizes_stays {
  %a = terra.feed 1 : tensor<?x?x64xf32>
  %r = terra.op "aten.view"(%a) : (tensor<?x?x64xf32>) -> tensor<?x?x8x8xf32>
  terra.fetch 0 %r : tensor<?x?x8x8xf32>
}

// -----

// unbind: one rank-reduced slice per result.
// CHECK-LABEL: terra.graph @unbind
// CHECK:         tensor.extract_slice %{{.*}}[0, 0] [1, 4] [1, 1] : tensor<2x4xf32> to tensor<4xf32>
// CHECK:         tensor.extract_slice %{{.*}}[1, 0] [1, 4] [1, 1] : tensor<2x4xf32> to tensor<4xf32>
// CHECK-NOT:     terra.op
terra.graph @unbind {
  %x = terra.feed 1 : tensor<2x4xf32>
  %a:2 = terra.op "aten.unbind.int"(%x) args {dim = 0 : i64} : (tensor<2x4xf32>) -> (tensor<4xf32>, tensor<4xf32>)
  terra.fetch 0 %a#0 : tensor<4xf32>
  terra.fetch 1 %a#1 : tensor<4xf32>
}

// -----

// Advanced indexing reads the index tensors in a generic and extracts from
// self (negative indices wrap); index_put writes a copy element by element
// in an scf.for (repeated positions: the last value wins).
// CHECK-LABEL: terra.graph @advanced_indexing
// CHECK:         linalg.generic
// CHECK:           arith.select
// CHECK:           cf.assert {{.*}} "index: index out of range"
// CHECK:           tensor.extract
// CHECK:         linalg.copy
// CHECK:         scf.for
// CHECK:           tensor.insert
// CHECK-NOT:     terra.op
terra.graph @advanced_indexing {
  %x = terra.feed 1 : tensor<4x5xf32>
  %i = terra.feed 2 : tensor<?xi64>
  %j = terra.feed 3 : tensor<?xi64>
  %v = terra.feed 4 : tensor<f32>
  %g = terra.op "aten.index.Tensor"(%x, %i) : (tensor<4x5xf32>, tensor<?xi64>) -> tensor<?x5xf32>
  %p = terra.op "aten.index_put"(%x, %i, %j, %v) args {accumulate = false} : (tensor<4x5xf32>, tensor<?xi64>, tensor<?xi64>, tensor<f32>) -> tensor<4x5xf32>
  terra.fetch 0 %g : tensor<?x5xf32>
  terra.fetch 1 %p : tensor<4x5xf32>
}

// -----

// A boolean mask: a loop counts the true elements (the result's size), a
// second copies the selected rows; the masked index_put writes (here adds)
// the value rows into a copy of self, row by row.
// CHECK-LABEL: terra.graph @masked_indexing
// CHECK:         %[[N:.*]] = scf.for
// CHECK:         tensor.empty(%[[N]]) : tensor<?x8xf32>
// CHECK:         scf.for
// CHECK:           scf.if
// CHECK:             tensor.insert_slice
// CHECK:         linalg.copy
// CHECK:         scf.for
// CHECK:           scf.if
// CHECK:             arith.addf
// CHECK:         cf.assert {{.*}} "index_put: the values do not match the mask's true elements"
// CHECK-NOT:     terra.op
terra.graph @masked_indexing {
  %x = terra.feed 1 : tensor<4x3x8xf32>
  %m = terra.feed 2 : tensor<4x3xi1>
  %g = terra.op "aten.index.Tensor"(%x, %m) : (tensor<4x3x8xf32>, tensor<4x3xi1>) -> tensor<?x8xf32>
  %p = terra.op "aten.index_put"(%x, %m, %g) args {accumulate = true} : (tensor<4x3x8xf32>, tensor<4x3xi1>, tensor<?x8xf32>) -> tensor<4x3x8xf32>
  terra.fetch 0 %p : tensor<4x3x8xf32>
}

// -----

// Symbolic sizes (#terra.dim): a reshape whose two dynamic dims are read
// from a shape operand (the lowering sees only the data operand), the
// third inferred.
// CHECK-LABEL: terra.graph @view_symbolic_sizes
// CHECK:         %[[X:.*]] = terra.feed 1 : tensor<?x16xf32>
// CHECK:         %[[S:.*]] = terra.feed 2 : tensor<?x?xi64>
// CHECK-DAG:     %[[B:.*]] = tensor.dim %[[S]], %c0
// CHECK-DAG:     %[[T:.*]] = tensor.dim %[[S]], %c1
// CHECK:         tensor.from_elements %[[B]], %[[T]], %{{.*}} : tensor<3xindex>
// CHECK:         tensor.reshape %[[X]]
// CHECK-NOT:     terra.op
terra.graph @view_symbolic_sizes {
  %x = terra.feed 1 : tensor<?x16xf32>
  %s = terra.feed 2 : tensor<?x?xi64>
  %r = terra.op "aten.view"(%x, %s) args {size = [#terra.dim<1, 0>, #terra.dim<1, 1>, -1], terra.shape_operands = 1} : (tensor<?x16xf32>, tensor<?x?xi64>) -> tensor<?x?x?xf32>
  terra.fetch 0 %r : tensor<?x?x?xf32>
}

// -----

// expand of a 0-d value to a size taken from another value's dim.
// CHECK-LABEL: terra.graph @expand_symbolic_size
// CHECK:         %[[G:.*]] = terra.feed 1 : tensor<f32>
// CHECK:         %[[P:.*]] = terra.feed 2 : tensor<?x8xf32>
// CHECK:         %[[N:.*]] = tensor.dim %[[P]], %c0
// CHECK:         %[[E:.*]] = tensor.empty(%[[N]]) : tensor<?x2xf32>
// CHECK:         linalg.generic {{.*}} ins(%[[G]] : tensor<f32>) outs(%[[E]] : tensor<?x2xf32>)
terra.graph @expand_symbolic_size {
  %g = terra.feed 1 : tensor<f32>
  %p = terra.feed 2 : tensor<?x8xf32>
  %r = terra.op "aten.expand"(%g, %p) args {size = [#terra.dim<1, 0>, 2], terra.shape_operands = 1} : (tensor<f32>, tensor<?x8xf32>) -> tensor<?x2xf32>
  terra.fetch 0 %r : tensor<?x2xf32>
}

// -----

// slice_backward: the sliced dim's full size is a dim of grad_output.
// CHECK-LABEL: terra.graph @slice_backward_symbolic_input_size
// CHECK:         %[[G:.*]] = terra.feed 1 : tensor<?x?xf32>
// CHECK-DAG:     %[[N0:.*]] = tensor.dim %[[G]], %c0
// CHECK-DAG:     %[[N1:.*]] = tensor.dim %[[G]], %c1
// CHECK:         tensor.empty(%[[N0]], %[[N1]]) : tensor<?x?xf32>
// CHECK:         tensor.insert_slice %[[G]]
terra.graph @slice_backward_symbolic_input_size {
  %g = terra.feed 1 : tensor<?x?xf32>
  %r = terra.op "aten.slice_backward"(%g) args {dim = 0 : i64, end = 9223372036854775807 : i64, input_sizes = [#terra.dim<0, 0>, #terra.dim<0, 1>], start = 0 : i64, step = 1 : i64} : (tensor<?x?xf32>) -> tensor<?x?xf32>
  terra.fetch 0 %r : tensor<?x?xf32>
}

// -----

// A slice whose end is learnt to follow another value's dim (mask[:t]).
// CHECK-LABEL: terra.graph @slice_symbolic_end
// CHECK:         %[[M:.*]] = terra.feed 1 : tensor<64x64xf32>
// CHECK:         %[[I:.*]] = terra.feed 2 : tensor<4x?xi64>
// CHECK:         %[[T:.*]] = tensor.dim %[[I]], %c1
// CHECK:         arith.cmpi slt, %[[T]]
// CHECK:         tensor.extract_slice %[[M]][%{{.*}}, 0] [%{{.*}}, 64] [1, 1] : tensor<64x64xf32> to tensor<?x64xf32>
terra.graph @slice_symbolic_end {
  %m = terra.feed 1 : tensor<64x64xf32>
  %i = terra.feed 2 : tensor<4x?xi64>
  %r = terra.op "aten.slice.Tensor"(%m, %i) args {dim = 0 : i64, start = 0 : i64, end = #terra.dim<1, 1>, terra.shape_operands = 1} : (tensor<64x64xf32>, tensor<4x?xi64>) -> tensor<?x64xf32>
  terra.fetch 0 %r : tensor<?x64xf32>
}

// -----

// constant_pad_nd: (before, after) pairs from the last dim backwards; a
// negative amount crops (the backward of a padding).
// CHECK-LABEL: terra.graph @constant_pad_nd
// CHECK:         %[[V:.*]] = arith.constant 5.000000e-01 : f32
// CHECK:         tensor.pad %{{.*}} low[0, 2, 1] high[0, 0, 3]
// CHECK:           tensor.yield %[[V]]
// CHECK:         tensor.extract_slice %{{.*}}[0, 0, 1] [2, 3, 3] [1, 1, 1] : tensor<2x3x4xf32> to tensor<2x3x3xf32>
// CHECK-NOT:     terra.op
terra.graph @constant_pad_nd {
  %x = terra.feed 1 : tensor<2x3x4xf32>
  %r = terra.op "aten.constant_pad_nd"(%x) args {pad = [1, 3, 2, 0], value = 5.000000e-01 : f64} : (tensor<2x3x4xf32>) -> tensor<2x5x8xf32>
  %c = terra.op "aten.constant_pad_nd"(%x) args {pad = [-1, 0]} : (tensor<2x3x4xf32>) -> tensor<2x3x3xf32>
  terra.fetch 0 %r : tensor<2x5x8xf32>
  terra.fetch 1 %c : tensor<2x3x3xf32>
}

// -----

// index_put with fewer index tensors than dims (a gather's gradient:
// new_zeros + index_put_ of rows, accumulating): an scf.for over the
// indices that extracts each row of values, adds the destination row to it
// and inserts it back (repeated positions accumulate in index order).
// CHECK-LABEL: terra.graph @index_put_rows
// CHECK:         cf.assert {{.*}} "index_put: values do not match the indices"
// CHECK:         linalg.copy
// CHECK:         scf.for
// CHECK:           cf.assert {{.*}} "index_put: index out of range"
// CHECK:           tensor.extract_slice {{.*}} : tensor<?x3x2xf32> to tensor<3x2xf32>
// CHECK:           tensor.extract_slice {{.*}} : tensor<4x3x2xf32> to tensor<3x2xf32>
// CHECK:           linalg.generic
// CHECK:             arith.addf
// CHECK:           tensor.insert_slice {{.*}} into tensor<4x3x2xf32>
// CHECK-NOT:     terra.op
terra.graph @index_put_rows {
  %x = terra.feed 1 : tensor<4x3x2xf32>
  %i = terra.feed 2 : tensor<?xi64>
  %v = terra.feed 3 : tensor<?x3x2xf32>
  %p = terra.op "aten.index_put"(%x, %i, %v) args {accumulate = true} : (tensor<4x3x2xf32>, tensor<?xi64>, tensor<?x3x2xf32>) -> tensor<4x3x2xf32>
  terra.fetch 0 %p : tensor<4x3x2xf32>
}

// -----

// affine_grid_generator: one generic over [N, H, W, 2] that computes the
// base grid's coordinates from the loop indices (linspace from the nearer
// end, scaled without align_corners) and combines them with theta's row;
// N follows theta.
// CHECK-LABEL: terra.graph @affine_grid
// CHECK:         tensor.dim %{{.*}}, %c0{{.*}} : tensor<?x2x3xf32>
// CHECK:         linalg.generic
// CHECK:           linalg.index 2
// CHECK:           arith.select
// CHECK:           tensor.extract {{.*}} : tensor<?x2x3xf32>
// CHECK:         } -> tensor<?x4x5x2xf32>
// CHECK-NOT:     terra.op
terra.graph @affine_grid {
  %t = terra.feed 1 : tensor<?x2x3xf32>
  %g = terra.op "aten.affine_grid_generator"(%t, %t) args {align_corners = false, size = [#terra.dim<1, 0>, 8 : i64, 4 : i64, 5 : i64], terra.shape_operands = 1 : i64} : (tensor<?x2x3xf32>, tensor<?x2x3xf32>) -> tensor<?x4x5x2xf32>
  terra.fetch 0 %g : tensor<?x4x5x2xf32>
}

// -----

// repeat tiles the input: each output index reads the input at i mod size
// (a leading new dim and a unit dim read index 0).
// CHECK-DAG:   #[[IN:.*]] = affine_map<(d0, d1, d2) -> (0, d2 mod 3)>
// CHECK-LABEL: terra.graph @repeat
// CHECK:         linalg.generic {indexing_maps = [#[[IN]], #{{.*}}], iterator_types = ["parallel", "parallel", "parallel"]} ins(%{{.*}} : tensor<1x3xf32>) outs(%{{.*}} : tensor<2x4x6xf32>)
// CHECK-NOT:     terra.op
terra.graph @repeat {
  %a = terra.feed 1 : tensor<1x3xf32>
  %r = terra.op "aten.repeat"(%a) args {repeats = [2, 4, 2]} : (tensor<1x3xf32>) -> tensor<2x4x6xf32>
  terra.fetch 0 %r : tensor<2x4x6xf32>
}

// -----

// pixel_shuffle reads channel c*r*r + (y mod r)*r + (x mod r) at
// (y floordiv r, x floordiv r); pixel_unshuffle is the inverse map.
// CHECK-DAG:   #[[PS:.*]] = affine_map<(d0, d1, d2, d3) -> (d0, d1 * 4 + (d2 mod 2) * 2 + d3 mod 2, d2 floordiv 2, d3 floordiv 2)>
// CHECK-DAG:   #[[PU:.*]] = affine_map<(d0, d1, d2, d3) -> (d0, d1 floordiv 4, d2 * 2 + (d1 mod 4) floordiv 2, d3 * 2 + d1 mod 2)>
// CHECK-LABEL: terra.graph @pixel_shuffle
// CHECK:         linalg.generic {indexing_maps = [#[[PS]], #{{.*}}]{{.*}} ins(%{{.*}} : tensor<1x8x3x5xf32>) outs(%{{.*}} : tensor<1x2x6x10xf32>)
// CHECK:         linalg.generic {indexing_maps = [#[[PU]], #{{.*}}]{{.*}} ins(%{{.*}} : tensor<1x2x6x10xf32>) outs(%{{.*}} : tensor<1x8x3x5xf32>)
// CHECK-NOT:     terra.op
terra.graph @pixel_shuffle {
  %a = terra.feed 1 : tensor<1x8x3x5xf32>
  %s = terra.op "aten.pixel_shuffle"(%a) args {upscale_factor = 2 : i64} : (tensor<1x8x3x5xf32>) -> tensor<1x2x6x10xf32>
  %u = terra.op "aten.pixel_unshuffle"(%s) args {downscale_factor = 2 : i64} : (tensor<1x2x6x10xf32>) -> tensor<1x8x3x5xf32>
  terra.fetch 0 %u : tensor<1x8x3x5xf32>
}

// -----

// flip reads index size - 1 - i along the flipped dims.
// CHECK-DAG:   #[[F:.*]] = affine_map<(d0, d1, d2) -> (-d0 + 1, d1, -d2 + 3)>
// CHECK-LABEL: terra.graph @flip
// CHECK:         linalg.generic {indexing_maps = [#[[F]], #{{.*}}]
// CHECK-NOT:     terra.op
terra.graph @flip {
  %a = terra.feed 1 : tensor<2x3x4xf32>
  %r = terra.op "aten.flip"(%a) args {dims = [0, -1]} : (tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  terra.fetch 0 %r : tensor<2x3x4xf32>
}

// -----

// diagonal: the square block the diagonal crosses (rows 3.. for offset -3),
// then its (i, i) elements through an affine map.
// CHECK-DAG:   #[[DIAG:.*]] = affine_map<(d0) -> (d0, d0)>
// CHECK-LABEL: terra.graph @diagonal_below
// CHECK:         %[[BLOCK:.*]] = tensor.extract_slice %{{.*}}[3, 0] [3, 3] [1, 1] : tensor<6x4xf32> to tensor<3x3xf32>
// CHECK:         linalg.generic {indexing_maps = [#[[DIAG]], #{{.*}}], iterator_types = ["parallel"]} ins(%[[BLOCK]] : tensor<3x3xf32>)
terra.graph @diagonal_below {
  %a = terra.feed 1 : tensor<6x4xf32>
  %r = terra.op "aten.diagonal"(%a) args {offset = -3 : i64, dim1 = 0 : i64, dim2 = 1 : i64} : (tensor<6x4xf32>) -> tensor<3xf32>
  terra.fetch 0 %r : tensor<3xf32>
}

// -----

// diagonal_scatter: elements with col - row == offset read the source at
// their row, the others the input.
// CHECK-LABEL: terra.graph @diagonal_scatter
// CHECK:         %[[SRC:.*]] = terra.feed 2 : tensor<3xf32>
// CHECK:         linalg.generic
// CHECK:           %[[ROW:.*]] = linalg.index 0 : index
// CHECK:           %[[COL:.*]] = linalg.index 1 : index
// CHECK:           %[[D:.*]] = arith.subi %[[COL]], %[[ROW]] : index
// CHECK:           %[[ON:.*]] = arith.cmpi eq, %[[D]], %{{.*}} : index
// CHECK:           scf.if %[[ON]] -> (f32) {
// CHECK:             tensor.extract %[[SRC]][%[[ROW]]] : tensor<3xf32>
// CHECK:           } else {
terra.graph @diagonal_scatter {
  %a = terra.feed 1 : tensor<4x4xf32>
  %s = terra.feed 2 : tensor<3xf32>
  %r = terra.op "aten.diagonal_scatter"(%a, %s) args {offset = 1 : i64, dim1 = 0 : i64, dim2 = 1 : i64} : (tensor<4x4xf32>, tensor<3xf32>) -> tensor<4x4xf32>
  terra.fetch 0 %r : tensor<4x4xf32>
}

// -----

// index_add: an scf.for over the index adding source row i into row
// index[i] (bounds asserted), in order.
// CHECK-LABEL: terra.graph @index_add_rows
// CHECK:         %[[SELF:.*]] = terra.feed 1 : tensor<5x3xf32>
// CHECK:         %[[IDX:.*]] = terra.feed 2 : tensor<4xi64>
// CHECK:         %[[SRC:.*]] = terra.feed 3 : tensor<4x3xf32>
// CHECK:         scf.for %[[I:.*]] = %{{.*}} iter_args(%[[ACC:.*]] = %[[SELF]]) -> (tensor<5x3xf32>)
// CHECK:           %[[J64:.*]] = tensor.extract %[[IDX]][%[[I]]] : tensor<4xi64>
// CHECK:           %[[J:.*]] = arith.index_cast %[[J64]] : i64 to index
// CHECK:           cf.assert %{{.*}}, "index_add: index out of range"
// CHECK:           %[[ADD:.*]] = tensor.extract_slice %[[SRC]][%[[I]], 0] [1, 3] [1, 1]
// CHECK:           %[[DST:.*]] = tensor.extract_slice %[[ACC]][%[[J]], 0] [1, 3] [1, 1]
// CHECK:           %[[SUM:.*]] = linalg.generic {{.*}} ins(%[[DST]], %[[ADD]] :
// CHECK:           tensor.insert_slice %[[SUM]] into %[[ACC]][%[[J]], 0] [1, 3] [1, 1]
terra.graph @index_add_rows {
  %a = terra.feed 1 : tensor<5x3xf32>
  %i = terra.feed 2 : tensor<4xi64>
  %s = terra.feed 3 : tensor<4x3xf32>
  %r = terra.op "aten.index_add"(%a, %i, %s) args {dim = 0 : i64, alpha = 1 : i64} : (tensor<5x3xf32>, tensor<4xi64>, tensor<4x3xf32>) -> tensor<5x3xf32>
  terra.fetch 0 %r : tensor<5x3xf32>
}

// -----

// unfold: window i's element k reads index i * step + k of the dim.
// CHECK-LABEL: terra.graph @unfold_windows
// CHECK:         %[[STEP:.*]] = arith.constant 3 : index
// CHECK:         %[[X:.*]] = terra.feed 1 : tensor<3x10xf32>
// CHECK:         linalg.generic {{.*}} outs(%{{.*}} : tensor<3x3x4xf32>)
// CHECK:           %[[B:.*]] = linalg.index 0 : index
// CHECK:           %[[W:.*]] = linalg.index 1 : index
// CHECK:           %[[K:.*]] = linalg.index 2 : index
// CHECK:           %[[START:.*]] = arith.muli %[[W]], %[[STEP]] : index
// CHECK:           %[[AT:.*]] = arith.addi %[[START]], %[[K]] : index
// CHECK:           tensor.extract %[[X]][%[[B]], %[[AT]]] : tensor<3x10xf32>
terra.graph @unfold_windows {
  %a = terra.feed 1 : tensor<3x10xf32>
  %r = terra.op "aten.unfold"(%a) args {dimension = 1 : i64, size = 4 : i64, step = 3 : i64} : (tensor<3x10xf32>) -> tensor<3x3x4xf32>
  terra.fetch 0 %r : tensor<3x3x4xf32>
}
