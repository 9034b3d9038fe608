// RUN: terra-opt %s -split-input-file -verify-diagnostics

// One case per verifier diagnostic of the terra dialect (TerraOps.cpp,
// TerraNodeOps.cpp), plus parse errors and a few ODS-generated constraint
// errors.

//===----------------------------------------------------------------------===//
// terra.op
//===----------------------------------------------------------------------===//

func.func @op_name_unqualified(%x: tensor<4xf32>) {
  // expected-error @+1 {{'terra.op' op op name 'relu' must be qualified by its framework, e.g. 'aten.add'}}
  %0 = terra.op "relu"(%x) : (tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @op_name_leading_dot(%x: tensor<4xf32>) {
  // expected-error @+1 {{op name '.relu' must be qualified by its framework}}
  %0 = terra.op ".relu"(%x) : (tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @op_name_trailing_dot(%x: tensor<4xf32>) {
  // expected-error @+1 {{op name 'aten.' must be qualified by its framework}}
  %0 = terra.op "aten."(%x) : (tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @op_name_empty() {
  // expected-error @+1 {{op name '' must be qualified by its framework}}
  terra.op ""() : () -> ()
  return
}

// -----

// ODS: results must be ranked tensors.
func.func @op_unranked_result(%x: tensor<4xf32>) {
  // expected-error @+1 {{'terra.op' op result #0 must be variadic of ranked tensor of any type values, but got 'tensor<*xf32>'}}
  %0 = terra.op "aten.relu"(%x) : (tensor<4xf32>) -> tensor<*xf32>
  return
}

// -----

// ODS: operands must be ranked tensors.
func.func @op_scalar_operand(%x: f32) {
  // expected-error @+1 {{'terra.op' op operand #0 must be variadic of ranked tensor of any type values, but got 'f32'}}
  %0 = terra.op "aten.relu"(%x) : (f32) -> tensor<f32>
  return
}

// -----

// ODS: args must be a dictionary.
func.func @op_args_not_dict(%x: tensor<4xf32>) {
  // expected-error @+1 {{'terra.op' op attribute 'args' failed to satisfy constraint: dictionary of named attribute values}}
  %0 = "terra.op"(%x) {name = "aten.relu", args = 1 : i64} : (tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// terra.feed / terra.fetch / terra.state
//===----------------------------------------------------------------------===//

// expected-error @+1 {{'terra.feed' op point id must be non-negative, got -1}}
%0 = terra.feed -1 : tensor<4xf32>

// -----

func.func @fetch_negative_id(%x: tensor<4xf32>) {
  // expected-error @+1 {{'terra.fetch' op point id must be non-negative, got -3}}
  terra.fetch -3 %x : tensor<4xf32>
  return
}

// -----

// The custom form only parses ranked tensor types.
// expected-error @+1 {{invalid kind of type specified: expected builtin.tensor, but found 'tensor<*xf32>'}}
%0 = terra.feed : tensor<*xf32>

// -----

// ODS: the generic form reaches the type constraint.
// expected-error @+1 {{'terra.feed' op result #0 must be ranked tensor of any type values, but got 'tensor<*xf32>'}}
%0 = "terra.feed"() : () -> tensor<*xf32>

// -----

func.func @fetch_unranked(%x: tensor<*xf32>) {
  // expected-error @+1 {{'terra.fetch' op operand #0 must be ranked tensor of any type values, but got 'tensor<*xf32>'}}
  "terra.fetch"(%x) : (tensor<*xf32>) -> ()
  return
}

// -----

// expected-error @+1 {{'terra.state' op needs a non-empty state name}}
%0 = terra.state "" : tensor<f32>

// -----

// ODS: the state name is required.
// expected-error @+1 {{'terra.state' op requires attribute 'name'}}
%0 = "terra.state"() : () -> tensor<f32>

// -----

// ODS: a state is a ranked tensor.
// expected-error @+1 {{'terra.state' op result #0 must be ranked tensor of any type values, but got 'memref<4xf32>'}}
%0 = "terra.state"() {name = "w"} : () -> memref<4xf32>

// -----

//===----------------------------------------------------------------------===//
// terra.case_select / terra.loop_cond / terra.undef
//===----------------------------------------------------------------------===//

// expected-error @+1 {{'terra.case_select' op divergence id must be non-negative, got -1}}
%0 = terra.case_select -1 cases 2

// -----

// expected-error @+1 {{'terra.case_select' op needs at least 2 cases, got 1}}
%0 = terra.case_select 0 cases 1

// -----

// expected-error @+1 {{'terra.case_select' op needs at least 2 cases, got 0}}
%0 = terra.case_select 4 cases 0

// -----

// expected-error @+1 {{'terra.case_select' op needs at least 2 cases, got -2}}
%0 = terra.case_select 4 cases -2

// -----

// ODS: the selected case is an index.
// expected-error @+1 {{'terra.case_select' op result #0 must be index, but got 'i32'}}
%0 = "terra.case_select"() {id = 0 : i64, cases = 2 : i64} : () -> i32

// -----

// ODS: the loop condition is an i1.
// expected-error @+1 {{'terra.loop_cond' op result #0 must be 1-bit signless integer, but got 'index'}}
%0 = "terra.loop_cond"() {id = 0 : i64} : () -> index

// -----

// ODS: undef stands for a ranked tensor.
// expected-error @+1 {{'terra.undef' op result #0 must be ranked tensor of any type values, but got 'f32'}}
%0 = "terra.undef"() : () -> f32

// -----

//===----------------------------------------------------------------------===//
// terra.graph
//===----------------------------------------------------------------------===//

// expected-error @+1 {{'terra.graph' op unrolled_loops entries must be [loop id, trip count] with non-negative values, got array<i64: 3>}}
terra.graph @unrolled_short attributes {unrolled_loops = [array<i64: 3>]} {
}

// -----

// expected-error @+1 {{'terra.graph' op unrolled_loops entries must be [loop id, trip count] with non-negative values, got array<i64: 3, 2, 1>}}
terra.graph @unrolled_long attributes {unrolled_loops = [array<i64: 3, 2, 1>]} {
}

// -----

// expected-error @+1 {{'terra.graph' op unrolled_loops entries must be [loop id, trip count] with non-negative values, got array<i64: -3, 2>}}
terra.graph @unrolled_negative_loop attributes {unrolled_loops = [array<i64: 4, 1>, array<i64: -3, 2>]} {
}

// -----

// expected-error @+1 {{'terra.graph' op unrolled_loops entries must be [loop id, trip count] with non-negative values, got array<i64: 3, -2>}}
terra.graph @unrolled_negative_trips attributes {unrolled_loops = [array<i64: 3, -2>]} {
}

// -----

// ODS: entries are array<i64> pairs.
// expected-error @+1 {{attribute 'unrolled_loops' failed to satisfy constraint: [loop, trips] pairs}}
terra.graph @unrolled_not_arrays attributes {unrolled_loops = [3, 2]} {
}

// -----

terra.graph @graph_with_trace {
  // expected-error @+1 {{'terra.trace' op may not appear in a terra.graph}}
  terra.trace @inner {
  }
}

// -----

terra.graph @graph_with_loop_begin {
  // expected-error @+1 {{'terra.loop_begin' op may not appear in a terra.graph}}
  terra.loop_begin
}

// -----

terra.graph @graph_with_loop_iter {
  // expected-error @+1 {{'terra.loop_iter' op may not appear in a terra.graph}}
  terra.loop_iter
}

// -----

terra.graph @graph_with_loop_end {
  // expected-error @+1 {{'terra.loop_end' op may not appear in a terra.graph}}
  terra.loop_end
}

// -----

terra.graph @graph_with_node {
  // expected-error @+1 {{'terra.node' op may not appear in a terra.graph}}
  terra.node 0 start succ [1]
}

// -----

terra.graph @graph_with_loop_node {
  // expected-error @+1 {{'terra.loop_node' op may not appear in a terra.graph}}
  terra.loop_node 0 trips [1] succ [1] {
  }
}

// -----

// A TraceGraph nested in a graph is caught by the Symbol trait.
terra.graph @graph_with_trace_graph {
  // expected-error @+1 {{'terra.trace_graph' op symbol's parent must have the SymbolTable trait}}
  terra.trace_graph @inner traces 1 {
    terra.node 0 start succ [1]
    terra.node 1 end
  }
}

// -----

// ODS: a graph has a single block.
// expected-error @+1 {{'terra.graph' op expects region #0 to have 0 or 1 blocks}}
terra.graph @graph_two_blocks {
^bb0:
  %0 = terra.undef : tensor<f32>
^bb1:
  %1 = terra.undef : tensor<f32>
}

// -----

//===----------------------------------------------------------------------===//
// terra.trace and the loop markers
//===----------------------------------------------------------------------===//

terra.trace @trace_disallowed_op {
  // expected-error @+1 {{'arith.constant' op is not allowed in a terra.trace; a trace holds only terra.op, terra.feed, terra.fetch, terra.state and loop markers}}
  %c = arith.constant dense<1.0> : tensor<4xf32>
}

// -----

terra.trace @trace_with_case_select {
  // expected-error @+1 {{'terra.case_select' op is not allowed in a terra.trace}}
  %0 = terra.case_select 0 cases 2
}

// -----

terra.trace @trace_with_undef {
  // expected-error @+1 {{'terra.undef' op is not allowed in a terra.trace}}
  %0 = terra.undef : tensor<f32>
}

// -----

terra.trace @trace_with_loop_cond {
  // expected-error @+1 {{'terra.loop_cond' op is not allowed in a terra.trace}}
  %0 = terra.loop_cond 0
}

// -----

// A nested trace is caught by the Symbol trait before the trace's own check.
terra.trace @trace_in_trace {
  // expected-error @+1 {{'terra.trace' op symbol's parent must have the SymbolTable trait}}
  terra.trace @inner {
  }
}

// -----

// A TraceGraph node in a trace is caught by the node's own parent check.
terra.trace @trace_with_node {
  // expected-error @+1 {{'terra.node' op must be inside a terra.trace_graph or terra.loop_node}}
  terra.node 0 start succ [1]
}

// -----

terra.trace @loop_iter_outside_loop {
  %x = terra.feed : tensor<4xf32>
  // expected-error @+1 {{'terra.loop_iter' op is outside of any loop of the trace}}
  terra.loop_iter
}

// -----

terra.trace @loop_iter_after_loop {
  terra.loop_begin
  terra.loop_iter
  terra.loop_end
  // expected-error @+1 {{'terra.loop_iter' op is outside of any loop of the trace}}
  terra.loop_iter
}

// -----

terra.trace @loop_end_without_begin {
  // expected-error @+1 {{'terra.loop_end' op closes a loop that was never opened}}
  terra.loop_end
}

// -----

terra.trace @loop_end_twice {
  terra.loop_begin
  terra.loop_iter
  terra.loop_end
  // expected-error @+1 {{'terra.loop_end' op closes a loop that was never opened}}
  terra.loop_end
}

// -----

terra.trace @op_before_first_iter {
  %x = terra.feed : tensor<4xf32>
  terra.loop_begin
  // expected-error @+1 {{'terra.op' op runs inside a loop before its first terra.loop_iter}}
  %y = terra.op "aten.relu"(%x) : (tensor<4xf32>) -> tensor<4xf32>
  terra.loop_iter
  terra.loop_end
}

// -----

terra.trace @feed_before_first_iter {
  terra.loop_begin
  // expected-error @+1 {{'terra.feed' op runs inside a loop before its first terra.loop_iter}}
  %x = terra.feed : tensor<4xf32>
  terra.loop_end
}

// -----

terra.trace @fetch_before_first_iter {
  %x = terra.feed : tensor<4xf32>
  terra.loop_begin
  // expected-error @+1 {{'terra.fetch' op runs inside a loop before its first terra.loop_iter}}
  terra.fetch %x : tensor<4xf32>
  terra.loop_iter
  terra.loop_end
}

// -----

// The first iteration of the inner loop does not count for the outer one.
terra.trace @op_before_first_iter_after_inner_loop {
  %x = terra.feed : tensor<4xf32>
  terra.loop_begin
  terra.loop_iter
  terra.loop_begin
  terra.loop_iter
  terra.loop_end
  terra.loop_end
  terra.loop_begin
  // expected-error @+1 {{'terra.op' op runs inside a loop before its first terra.loop_iter}}
  %y = terra.op "aten.relu"(%x) : (tensor<4xf32>) -> tensor<4xf32>
  terra.loop_end
}

// -----

terra.trace @nested_loop_before_first_iter {
  terra.loop_begin
  // expected-error @+1 {{'terra.loop_begin' op enters a nested loop before the first terra.loop_iter of the enclosing loop}}
  terra.loop_begin
  terra.loop_end
  terra.loop_end
}

// -----

// expected-error @+1 {{'terra.trace' op leaves a loop open at its end}}
terra.trace @loop_left_open {
  %x = terra.feed : tensor<4xf32>
  // expected-note @+1 {{loop opened here}}
  terra.loop_begin
  terra.loop_iter
  %y = terra.op "aten.relu"(%x) : (tensor<4xf32>) -> tensor<4xf32>
}

// -----

// The note points at the innermost loop left open.
// expected-error @+1 {{'terra.trace' op leaves a loop open at its end}}
terra.trace @nested_loop_left_open {
  terra.loop_begin
  terra.loop_iter
  // expected-note @+1 {{loop opened here}}
  terra.loop_begin
}

// -----

// ODS: loop markers only live in a trace.
func.func @loop_begin_outside_trace() {
  // expected-error @+1 {{'terra.loop_begin' op expects parent op 'terra.trace'}}
  terra.loop_begin
  return
}

// -----

// expected-error @+1 {{'terra.loop_iter' op expects parent op 'terra.trace'}}
terra.loop_iter

// -----

// expected-error @+1 {{'terra.loop_end' op expects parent op 'terra.trace'}}
terra.loop_end

// -----

// ODS: a trace has a single block.
// expected-error @+1 {{'terra.trace' op expects region #0 to have 0 or 1 blocks}}
terra.trace @trace_two_blocks {
^bb0:
  %0 = terra.feed : tensor<f32>
^bb1:
  %1 = terra.feed : tensor<f32>
}

// -----

//===----------------------------------------------------------------------===//
// terra.node
//===----------------------------------------------------------------------===//

// expected-error @+1 {{'terra.node' op must be inside a terra.trace_graph or terra.loop_node}}
terra.node 0 start succ [1]

// -----

func.func @node_in_func() {
  // expected-error @+1 {{'terra.node' op must be inside a terra.trace_graph or terra.loop_node}}
  terra.node 2 op "aten.relu"() -> (tensor<f32>) succ [1]
  return
}

// -----

terra.trace_graph @node_negative_id traces 1 {
  terra.node 0 start succ [1]
  terra.node 1 end
  // expected-error @+1 {{'terra.node' op node id must be non-negative, got -2}}
  terra.node -2 feed -> (tensor<f32>) succ [1]
}

// -----

terra.trace_graph @node_unknown_kind traces 1 {
  terra.node 0 start succ [1]
  terra.node 1 end
  // expected-error @+1 {{unknown node kind 'branch'; expected start, end, op, feed or state}}
  terra.node 2 branch succ [1]
}

// -----

// Loop nodes are terra.loop_node ops, never terra.node.
terra.trace_graph @node_kind_loop traces 1 {
  terra.node 0 start succ [2]
  terra.node 1 end
  // expected-error @+1 {{'terra.node' op of kind 'loop' must be written as a terra.loop_node}}
  terra.node 2 loop succ [1]
}

// -----

terra.trace_graph @op_node_without_sources traces 1 {
  terra.node 0 start succ [2]
  terra.node 1 end
  // expected-error @+1 {{expected '('}}
  terra.node 2 op "aten.ones" -> (tensor<f32>) succ [1]
}

// -----

terra.trace_graph @op_node_without_name traces 1 {
  terra.node 0 start succ [2]
  terra.node 1 end
  // expected-error @+1 {{'terra.node' op of kind 'op' needs a name}}
  terra.node 2 op () -> (tensor<f32>) succ [1]
}

// -----

terra.trace_graph @state_node_without_name traces 1 {
  terra.node 0 start succ [1]
  terra.node 1 end
  // expected-error @+1 {{'terra.node' op of kind 'state' needs a name}}
  terra.node 2 state -> (tensor<f32>)
}

// -----

terra.trace_graph @start_node_with_name traces 1 {
  // expected-error @+1 {{'terra.node' op of kind 'start' takes no name}}
  terra.node 0 start "entry" succ [1]
  terra.node 1 end
}

// -----

terra.trace_graph @end_node_with_name traces 1 {
  terra.node 0 start succ [1]
  // expected-error @+1 {{'terra.node' op of kind 'end' takes no name}}
  terra.node 1 end "exit"
}

// -----

terra.trace_graph @feed_node_with_name traces 1 {
  terra.node 0 start succ [2]
  terra.node 1 end
  // expected-error @+1 {{'terra.node' op of kind 'feed' takes no name}}
  terra.node 2 feed "x" -> (tensor<f32>) succ [1]
}

// -----

terra.trace_graph @feed_node_with_args traces 1 {
  terra.node 0 start succ [2]
  terra.node 1 end
  // expected-error @+1 {{'terra.node' op only op nodes take args}}
  terra.node 2 feed args {scale = 2 : i64} -> (tensor<f32>) succ [1]
}

// -----

terra.trace_graph @state_node_with_args traces 1 {
  terra.node 0 start succ [1]
  terra.node 1 end
  // expected-error @+1 {{'terra.node' op only op nodes take args}}
  terra.node 2 state "w" args {} -> (tensor<f32>)
}

// -----

// The custom form only parses sources for op nodes; the generic form reaches
// the check. (Generic nodes come first in these cases: a custom `terra.node`
// followed by a generic op would take the op's quoted name for its own.)
"terra.trace_graph"() <{num_traces = 1 : i64, sym_name = "feed_node_with_sources"}> ({
  // expected-error @+1 {{'terra.node' op only op nodes have input sources}}
  "terra.node"() <{id = 2 : i64, kind = 3 : i32, result_types = [tensor<f32>], sources = [array<i64: 0, 0, 0>], succ = array<i64: 1>, fetch_ids = array<i64: -1>}> : () -> ()
  terra.node 0 start succ [2]
  terra.node 1 end
}) : () -> ()

// -----

terra.trace_graph @start_node_with_results traces 1 {
  // expected-error @+1 {{'terra.node' op of kind 'start' has no results}}
  terra.node 0 start -> (tensor<f32>) succ [1]
  terra.node 1 end
}

// -----

terra.trace_graph @end_node_with_results traces 1 {
  terra.node 0 start succ [1]
  // expected-error @+1 {{'terra.node' op of kind 'end' has no results}}
  terra.node 1 end -> (tensor<f32>)
}

// -----

terra.trace_graph @feed_node_without_result traces 1 {
  terra.node 0 start succ [2]
  terra.node 1 end
  // expected-error @+1 {{'terra.node' op of kind 'feed' needs exactly one result type}}
  terra.node 2 feed succ [1]
}

// -----

terra.trace_graph @feed_node_two_results traces 1 {
  terra.node 0 start succ [2]
  terra.node 1 end
  // expected-error @+1 {{'terra.node' op of kind 'feed' needs exactly one result type}}
  terra.node 2 feed -> (tensor<f32>, tensor<f32>) succ [1]
}

// -----

terra.trace_graph @state_node_two_results traces 1 {
  terra.node 0 start succ [1]
  terra.node 1 end
  // expected-error @+1 {{'terra.node' op of kind 'state' needs exactly one result type}}
  terra.node 2 state "w" -> (tensor<f32>, tensor<f32>)
}

// -----

terra.trace_graph @node_unranked_result traces 1 {
  terra.node 0 start succ [2]
  terra.node 1 end
  // expected-error @+1 {{'terra.node' op result types must be ranked tensors, got tensor<*xf32>}}
  terra.node 2 op "aten.ones"() -> (tensor<4xf32>, tensor<*xf32>) succ [1]
}

// -----

terra.trace_graph @node_scalar_result traces 1 {
  terra.node 0 start succ [2]
  terra.node 1 end
  // expected-error @+1 {{'terra.node' op result types must be ranked tensors, got f32}}
  terra.node 2 feed -> (f32) succ [1]
}

// -----

// ODS: result_types holds types.
"terra.trace_graph"() <{num_traces = 1 : i64, sym_name = "node_result_types_not_types"}> ({
  // expected-error @+1 {{'terra.node' op attribute 'result_types' failed to satisfy constraint: type array attribute}}
  "terra.node"() <{id = 2 : i64, kind = 3 : i32, result_types = [1 : i64], sources = [], succ = array<i64: 1>, fetch_ids = array<i64: -1>}> : () -> ()
  terra.node 0 start succ [2]
  terra.node 1 end
}) : () -> ()

// -----

terra.trace_graph @fetch_ids_too_many traces 1 {
  terra.node 0 start succ [2]
  terra.node 1 end
  // expected-error @+1 {{'terra.node' op has 2 fetch ids for 1 results}}
  terra.node 2 op "aten.ones"() -> (tensor<f32>) succ [1] fetch [0, 1]
}

// -----

terra.trace_graph @fetch_ids_too_few traces 1 {
  terra.node 0 start succ [2]
  terra.node 1 end
  // expected-error @+1 {{'terra.node' op has 1 fetch ids for 2 results}}
  terra.node 2 op "aten.ones"() -> (tensor<f32>, tensor<f32>) succ [1] fetch [0]
}

// -----

terra.trace_graph @fetch_ids_without_results traces 1 {
  terra.node 0 start succ [2]
  terra.node 1 end
  // expected-error @+1 {{'terra.node' op has 1 fetch ids for 0 results}}
  terra.node 2 op "aten.ones"() succ [1] fetch [0]
}

// -----

terra.trace_graph @fetch_id_below_minus_one traces 1 {
  terra.node 0 start succ [2]
  terra.node 1 end
  // expected-error @+1 {{'terra.node' op fetch ids must be non-negative, or -1 for a result that is not fetched}}
  terra.node 2 op "aten.ones"() -> (tensor<f32>, tensor<f32>) succ [1] fetch [0, -2]
}

// -----

terra.trace_graph @source_negative_node traces 1 {
  terra.node 0 start succ [2]
  terra.node 1 end
  // expected-error @+1 {{'terra.node' op source fields must be non-negative}}
  terra.node 2 op "aten.relu"(-1:0) -> (tensor<f32>) succ [1]
}

// -----

terra.trace_graph @source_negative_result traces 1 {
  terra.node 0 start succ [2]
  terra.node 1 end
  // expected-error @+1 {{'terra.node' op source fields must be non-negative}}
  terra.node 2 op "aten.relu"(2:-1) -> (tensor<f32>) succ [1]
}

// -----

terra.trace_graph @source_negative_age traces 1 {
  terra.node 0 start succ [2]
  terra.node 1 end
  // expected-error @+1 {{'terra.node' op source fields must be non-negative}}
  terra.node 2 op "aten.relu"(2:0 | 2:0:-1) -> (tensor<f32>) succ [1]
}

// -----

terra.trace_graph @source_missing_result traces 1 {
  terra.node 0 start succ [2]
  terra.node 1 end
  // expected-error @+1 {{expected ':'}}
  terra.node 2 op "aten.relu"(2) -> (tensor<f32>) succ [1]
}

// -----

// An empty slot cannot be written in the custom form.
"terra.trace_graph"() <{num_traces = 1 : i64, sym_name = "source_empty_slot"}> ({
  // expected-error @+1 {{'terra.node' op input slot needs at least one node:result source}}
  "terra.node"() <{id = 2 : i64, kind = 2 : i32, name = "aten.relu", result_types = [tensor<f32>], sources = [array<i64>], succ = array<i64: 1>, fetch_ids = array<i64: -1>}> : () -> ()
  terra.node 0 start succ [2]
  terra.node 1 end
}) : () -> ()

// -----

"terra.trace_graph"() <{num_traces = 1 : i64, sym_name = "source_partial_triple"}> ({
  // expected-error @+1 {{'terra.node' op input slot needs at least one node:result source}}
  "terra.node"() <{id = 2 : i64, kind = 2 : i32, name = "aten.relu", result_types = [tensor<f32>], sources = [array<i64: 0, 0>], succ = array<i64: 1>, fetch_ids = array<i64: -1>}> : () -> ()
  terra.node 0 start succ [2]
  terra.node 1 end
}) : () -> ()

// -----

"terra.trace_graph"() <{num_traces = 1 : i64, sym_name = "source_slot_not_array"}> ({
  // expected-error @+1 {{'terra.node' op input slot must be an array<i64> of node:result:age triples, got 0 : i64}}
  "terra.node"() <{id = 2 : i64, kind = 2 : i32, name = "aten.relu", result_types = [tensor<f32>], sources = [0 : i64], succ = array<i64: 1>, fetch_ids = array<i64: -1>}> : () -> ()
  terra.node 0 start succ [2]
  terra.node 1 end
}) : () -> ()

// -----

terra.trace_graph @op_node_without_succ traces 1 {
  terra.node 0 start succ [2]
  terra.node 1 end
  // expected-error @+1 {{'terra.node' op of kind 'op' needs at least one successor}}
  terra.node 2 op "aten.ones"() -> (tensor<f32>)
}

// -----

terra.trace_graph @feed_node_without_succ traces 1 {
  terra.node 0 start succ [2]
  terra.node 1 end
  // expected-error @+1 {{'terra.node' op of kind 'feed' needs at least one successor}}
  terra.node 2 feed -> (tensor<f32>) succ []
}

// -----

terra.trace_graph @end_node_with_succ traces 1 {
  terra.node 0 start succ [1]
  // expected-error @+1 {{'terra.node' op of kind 'end' has no successors}}
  terra.node 1 end succ [0]
}

// -----

terra.trace_graph @state_node_with_succ traces 1 {
  terra.node 0 start succ [1]
  terra.node 1 end
  // expected-error @+1 {{'terra.node' op of kind 'state' has no successors}}
  terra.node 2 state "w" -> (tensor<f32>) succ [1]
}

// -----

//===----------------------------------------------------------------------===//
// terra.loop_node
//===----------------------------------------------------------------------===//

// expected-error @+1 {{'terra.loop_node' op must be inside a terra.trace_graph or terra.loop_node}}
terra.loop_node 0 trips [1] succ [1] {
}

// -----

terra.trace_graph @loop_node_negative_id traces 1 {
  terra.node 0 start succ [1]
  terra.node 1 end
  // expected-error @+1 {{'terra.loop_node' op node id must be non-negative, got -4}}
  terra.loop_node -4 trips [1] succ [1] {
    terra.node 5 start succ [6]
    terra.node 6 end
  }
}

// -----

terra.trace_graph @loop_node_without_trips traces 1 {
  terra.node 0 start succ [2]
  terra.node 1 end
  // expected-error @+1 {{'terra.loop_node' op needs at least one observed trip count}}
  terra.loop_node 2 trips [] succ [1] {
    terra.node 3 start succ [4]
    terra.node 4 end
  }
}

// -----

terra.trace_graph @loop_node_negative_trips traces 1 {
  terra.node 0 start succ [2]
  terra.node 1 end
  // expected-error @+1 {{'terra.loop_node' op trip counts must be non-negative}}
  terra.loop_node 2 trips [2, -1] succ [1] {
    terra.node 3 start succ [4]
    terra.node 4 end
  }
}

// -----

terra.trace_graph @loop_node_without_succ traces 1 {
  terra.node 0 start succ [2]
  terra.node 1 end
  // expected-error @+1 {{'terra.loop_node' op needs at least one successor}}
  terra.loop_node 2 trips [1] succ [] {
    terra.node 3 start succ [4]
    terra.node 4 end
  }
}

// -----

//===----------------------------------------------------------------------===//
// terra.trace_graph: levels, ids, successors and sources
//===----------------------------------------------------------------------===//

// expected-error @+1 {{'terra.trace_graph' op trace count must be non-negative, got -1}}
terra.trace_graph @negative_trace_count traces -1 {
  terra.node 0 start succ [1]
  terra.node 1 end
}

// -----

// expected-error @+1 {{'terra.trace_graph' op level needs exactly one start and one end node, found 0 and 0}}
terra.trace_graph @empty_level traces 1 {
}

// -----

// expected-error @+1 {{'terra.trace_graph' op level needs exactly one start and one end node, found 0 and 1}}
terra.trace_graph @level_without_start traces 1 {
  terra.node 1 end
}

// -----

// expected-error @+1 {{'terra.trace_graph' op level needs exactly one start and one end node, found 1 and 2}}
terra.trace_graph @level_two_ends traces 1 {
  terra.node 0 start succ [1]
  terra.node 1 end
  terra.node 2 end
}

// -----

terra.trace_graph @loop_level_two_starts traces 1 {
  terra.node 0 start succ [2]
  terra.node 1 end
  // expected-error @+1 {{'terra.loop_node' op level needs exactly one start and one end node, found 2 and 1}}
  terra.loop_node 2 trips [1] succ [1] {
    terra.node 3 start succ [5]
    terra.node 4 end
    terra.node 5 start succ [4]
  }
}

// -----

// A loop body's start and end do not count for the enclosing level.
// expected-error @+1 {{'terra.trace_graph' op level needs exactly one start and one end node, found 0 and 0}}
terra.trace_graph @level_only_loop traces 1 {
  terra.loop_node 2 trips [1] succ [2] {
    terra.node 3 start succ [4]
    terra.node 4 end
  }
}

// -----

terra.trace_graph @op_in_trace_graph traces 1 {
  terra.node 0 start succ [1]
  terra.node 1 end
  // expected-error @+1 {{'terra.state' op may not appear in a TraceGraph level}}
  %w = terra.state "w" : tensor<f32>
}

// -----

terra.trace_graph @op_in_loop_level traces 1 {
  terra.node 0 start succ [2]
  terra.node 1 end
  terra.loop_node 2 trips [1] succ [1] {
    terra.node 3 start succ [4]
    terra.node 4 end
    // expected-error @+1 {{'terra.undef' op may not appear in a TraceGraph level}}
    %u = terra.undef : tensor<f32>
  }
}

// -----

// Loop markers are caught by their own parent check first.
terra.trace_graph @loop_marker_in_trace_graph traces 1 {
  terra.node 0 start succ [1]
  terra.node 1 end
  // expected-error @+1 {{'terra.loop_begin' op expects parent op 'terra.trace'}}
  terra.loop_begin
}

// -----

terra.trace_graph @duplicate_id traces 1 {
  terra.node 0 start succ [2]
  terra.node 1 end
  terra.node 2 feed -> (tensor<f32>) succ [1]
  // expected-error @+1 {{'terra.node' op reuses node id 2}}
  terra.node 2 op "aten.relu"(2:0) -> (tensor<f32>) succ [1]
}

// -----

// Ids are unique over all levels, not only within one.
terra.trace_graph @duplicate_id_across_levels traces 1 {
  terra.node 0 start succ [2]
  terra.node 1 end
  terra.loop_node 2 trips [1] succ [1] {
    terra.node 3 start succ [4]
    terra.node 4 end
  }
  // expected-error @+1 {{'terra.node' op reuses node id 3}}
  terra.node 3 feed -> (tensor<f32>) succ [1]
}

// -----

terra.trace_graph @duplicate_loop_id traces 1 {
  terra.node 0 start succ [2]
  terra.node 1 end
  // expected-error @+1 {{'terra.loop_node' op reuses node id 2}}
  terra.loop_node 2 trips [1] succ [1] {
    terra.node 2 start succ [4]
    terra.node 4 end
  }
}

// -----

terra.trace_graph @successor_unknown traces 1 {
  // expected-error @+1 {{'terra.node' op successor 9 is not a node of the same level}}
  terra.node 0 start succ [9]
  terra.node 1 end
}

// -----

terra.trace_graph @successor_into_loop_body traces 1 {
  // expected-error @+1 {{'terra.node' op successor 3 is not a node of the same level}}
  terra.node 0 start succ [3]
  terra.node 1 end
  terra.loop_node 2 trips [1] succ [1] {
    terra.node 3 start succ [4]
    terra.node 4 end
  }
}

// -----

terra.trace_graph @successor_out_of_loop_body traces 1 {
  terra.node 0 start succ [2]
  terra.node 1 end
  terra.loop_node 2 trips [1] succ [1] {
    // expected-error @+1 {{'terra.node' op successor 1 is not a node of the same level}}
    terra.node 3 start succ [1]
    terra.node 4 end
  }
}

// -----

terra.trace_graph @loop_successor_unknown traces 1 {
  terra.node 0 start succ [2]
  terra.node 1 end
  // expected-error @+1 {{'terra.loop_node' op successor 7 is not a node of the same level}}
  terra.loop_node 2 trips [1] succ [7] {
    terra.node 3 start succ [4]
    terra.node 4 end
  }
}

// -----

terra.trace_graph @source_unknown_node traces 1 {
  terra.node 0 start succ [2]
  terra.node 1 end
  // expected-error @+1 {{'terra.node' op input source refers to unknown node 42}}
  terra.node 2 op "aten.relu"(42:0) -> (tensor<f32>) succ [1]
}

// -----

terra.trace_graph @source_unknown_node_in_loop traces 1 {
  terra.node 0 start succ [2]
  terra.node 1 end
  terra.loop_node 2 trips [1] succ [1] {
    terra.node 3 start succ [5]
    terra.node 4 end
    // expected-error @+1 {{'terra.node' op input source refers to unknown node 6}}
    terra.node 5 op "aten.relu"(5:0:1 | 6:0) -> (tensor<f32>) succ [4]
  }
}

// -----

// ODS: a TraceGraph has a single block.
// expected-error @+1 {{'terra.trace_graph' op expects region #0 to have 0 or 1 blocks}}
terra.trace_graph @two_blocks traces 1 {
^bb0:
  terra.node 0 start succ [1]
  terra.node 1 end
^bb1:
}

// -----

// expected-error @+1 {{'terra.loop_cond' op loop id must be non-negative, got -3}}
%0 = terra.loop_cond -3

// -----

terra.trace @dim_of_missing_operand {
  %x = terra.feed : tensor<4x6xf32>
  // expected-error @+1 {{'terra.op' op arg 'size' refers to operand 1 of an op with 1 operands}}
  %v = terra.op "aten.view"(%x) args {size = [#terra.dim<1, 0>, 6]} : (tensor<4x6xf32>) -> tensor<4x6xf32>
}

// -----

terra.trace @dim_past_rank {
  %x = terra.feed : tensor<4x6xf32>
  // expected-error @+1 {{'terra.op' op arg 'size' refers to dim 2 of operand 0, which has rank 2}}
  %v = terra.op "aten.view"(%x) args {size = [#terra.dim<0, 2>, -1]} : (tensor<4x6xf32>) -> tensor<4x6xf32>
}

// -----

terra.trace @too_many_shape_operands {
  %x = terra.feed : tensor<4x6xf32>
  // expected-error @+1 {{'terra.op' op 'terra.shape_operands' must be a count of at most the op's 1 operands}}
  %v = terra.op "aten.view"(%x) args {size = [24], terra.shape_operands = 2} : (tensor<4x6xf32>) -> tensor<24xf32>
}
