#ifndef TERRA_OPS_TD
#define TERRA_OPS_TD

include "terra/Dialect/TerraDialect.td"
include "terra/Dialect/TerraAttrs.td"
include "mlir/IR/EnumAttr.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/IR/RegionKindInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

//===----------------------------------------------------------------------===//
// Stage 1: recorded traces
//===----------------------------------------------------------------------===//

def Terra_TraceOp : Terra_Op<"trace", [Symbol, IsolatedFromAbove, SingleBlock,
                                       NoTerminator]> {
  let summary = "one iteration's DL ops in execution order";
  let description = [{
    A `terra.trace` holds what the tracer recorded for one call of the user's
    step function: `terra.op` DL ops in execution order, `terra.feed` values
    that came from the host, `terra.state` reads of persistent state,
    `terra.fetch` materializations, and the loop markers `terra.loop_begin`,
    `terra.loop_iter` and `terra.loop_end`. Data flow is plain SSA, also
    across loop iterations, so the provenance of every input is explicit.

    ```mlir
    terra.trace @iter0 {
      %x = terra.feed : tensor<4xf32> loc(#site0)
      %y = terra.op "aten.relu"(%x) : (tensor<4xf32>) -> tensor<4xf32> loc(#site1)
      terra.fetch %y : tensor<4xf32>
    }
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = "$sym_name attr-dict-with-keyword $body";
  let hasRegionVerifier = 1;
  let skipDefaultBuilders = 1;
  let builders = [OpBuilder<(ins "::llvm::StringRef":$name)>];
}

def Terra_DLOp : Terra_Op<"op"> {
  let summary = "a framework DL op (generic)";
  let description = [{
    One framework op, e.g. `aten.convolution`, with its tensor operands, its
    non-tensor arguments as the `args` dictionary and ranked tensor results.
    Its location is its site. Two ops are the same TraceGraph node only if
    name, `args`, site and result dtypes/ranks agree (spec section 2.2).
    Entries of size args may be `#terra.dim<operand, dim>`; an operand
    that only such entries refer to is one of the trailing
    `terra.shape_operands` inputs.

    ```mlir
    %r = terra.op "aten.add"(%a, %b) args {alpha = 1 : i64}
           : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    ```
  }];
  let arguments = (ins StrAttr:$name, OptionalAttr<DictionaryAttr>:$args,
                       Variadic<AnyRankedTensor>:$inputs);
  let results = (outs Variadic<AnyRankedTensor>:$results);
  let assemblyFormat = [{
    $name `(` $inputs `)` (`args` $args^)? attr-dict `:` functional-type($inputs, $results)
  }];
  let extraClassDeclaration = [{
    /// The number of trailing operands that only `#terra.dim` entries of
    /// size args refer to (the `terra.shape_operands` arg; 0 if absent):
    /// values whose dims an op's sizes follow but that it does not read.
    unsigned getNumShapeOperands();
    /// The operands the op computes on: its inputs without the shape
    /// operands.
    ::mlir::OperandRange getDataInputs();
  }];
  let hasVerifier = 1;
}

def Terra_FeedOp : Terra_Op<"feed"> {
  let summary = "a value fed by the host program";
  let description = [{
    A tensor that comes from the host (input data, a Python scalar, a value
    the host fetched and hands back). In a trace the feed-point `id` may be
    left out; trace merging assigns it. In a `terra.graph` the op blocks on
    the feed channel `(id, dynamic instance)`.
  }];
  let arguments = (ins OptionalAttr<I64Attr>:$id);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "($id^)? attr-dict-with-keyword `:` type($result)";
  let hasVerifier = 1;
}

def Terra_FetchOp : Terra_Op<"fetch"> {
  let summary = "a value the host program reads";
  let description = [{
    Marks a materialization (`.item()`, `print`, `.numpy()`, ...). In a trace
    it annotates its operand's producer as a fetch point; in a `terra.graph`
    it publishes the value on the fetch channel `(id, dynamic instance)`.
  }];
  let arguments = (ins OptionalAttr<I64Attr>:$id, AnyRankedTensor:$value);
  let assemblyFormat = "($id^)? $value attr-dict-with-keyword `:` type($value)";
  let hasVerifier = 1;
}

def Terra_StateOp : Terra_Op<"state"> {
  let summary = "persistent state: a parameter, gradient, optimizer slot or buffer";
  let description = [{
    Reads the persistent tensor named `name`. Persistent state is shared
    with the host in place, never fed per iteration.
  }];
  let arguments = (ins StrAttr:$name);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$name attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Terra_LoopBeginOp : Terra_Op<"loop_begin", [HasParent<"TraceOp">]> {
  let summary = "the trace enters a program loop";
  let description = [{
    Opens a loop in a trace. The loop identity is this op's location: the
    frames of the loop construct, with the offset of its `FOR_ITER` or
    backward jump. Each iteration starts with `terra.loop_iter`; the loop is
    closed by `terra.loop_end`. A loop entered and left with no iteration
    is a zero-trip loop.
  }];
  let assemblyFormat = "attr-dict";
}

def Terra_LoopIterOp : Terra_Op<"loop_iter", [HasParent<"TraceOp">]> {
  let summary = "a new iteration of the innermost open loop begins";
  let assemblyFormat = "attr-dict";
}

def Terra_LoopEndOp : Terra_Op<"loop_end", [HasParent<"TraceOp">]> {
  let summary = "the innermost open loop is left";
  let assemblyFormat = "attr-dict";
}

//===----------------------------------------------------------------------===//
// Stage 2: the merged TraceGraph
//===----------------------------------------------------------------------===//

def Terra_NodeKind : I32EnumAttr<"NodeKind", "TraceGraph node kind", [
    I32EnumAttrCase<"Start", 0, "start">,
    I32EnumAttrCase<"End", 1, "end">,
    I32EnumAttrCase<"Op", 2, "op">,
    I32EnumAttrCase<"Feed", 3, "feed">,
    I32EnumAttrCase<"State", 4, "state">,
    I32EnumAttrCase<"Loop", 5, "loop">]> {
  let cppNamespace = "::terra";
}

def Terra_TraceGraphOp : Terra_Op<"trace_graph", [
    Symbol, IsolatedFromAbove, SingleBlock, NoTerminator,
    DeclareOpInterfaceMethods<RegionKindInterface>]> {
  let summary = "the merged TraceGraph of several traces";
  let description = [{
    The TraceGraph (spec section 2) in textual form: a graph region of
    `terra.node` and `terra.loop_node` ops. Edges (`succ`) are execution
    order, not data flow; each level (the top level and every loop body) has
    its own `start` and `end` node. Data flow is kept per input slot as the
    set of producers seen on different paths: at run time the slot takes the
    value of whichever of them ran last (path-aware provenance).
  }];
  let arguments = (ins SymbolNameAttr:$sym_name, I64Attr:$num_traces);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = "$sym_name `traces` $num_traces attr-dict-with-keyword $body";
  let hasRegionVerifier = 1;
}

def Terra_NodeOp : Terra_Op<"node"> {
  let summary = "one TraceGraph node";
  let description = [{
    A node of the TraceGraph. `kind` is `start`, `end`, `op` (a DL op with
    `name` and `args`), `feed`, or `state` (a named persistent tensor,
    outside the execution order). `sources` lists, per input slot, the
    producers `node:result[:age]` seen for it, separated by `|`; `age` is
    how many executions back the value was produced (0 if omitted).
    `fetch` gives the fetch-point id of each result (-1 when not fetched).

    ```mlir
    terra.node 5 op "aten.op3"(3:0 | 4:0, 2:1 | 6:0) -> (tensor<4xf32>)
        succ [7] fetch [0]
    ```
  }];
  let arguments = (ins I64Attr:$id, Terra_NodeKind:$kind,
                       OptionalAttr<StrAttr>:$name,
                       OptionalAttr<DictionaryAttr>:$args,
                       TypeArrayAttr:$result_types,
                       ArrayAttr:$sources, DenseI64ArrayAttr:$succ,
                       DenseI64ArrayAttr:$fetch_ids);
  let hasCustomAssemblyFormat = 1;
  let hasVerifier = 1;
}

def Terra_LoopNodeOp : Terra_Op<"loop_node", [
    SingleBlock, NoTerminator,
    DeclareOpInterfaceMethods<RegionKindInterface>]> {
  let summary = "a loop node whose body is a TraceGraph level of its own";
  let description = [{
    Groups the ops one program loop ran; its body graph is merged from the
    loop's iterations separately. `trips` lists the distinct trip counts
    seen; when it holds a single count the loop is unrolled.
  }];
  let arguments = (ins I64Attr:$id, DenseI64ArrayAttr:$trips,
                       DenseI64ArrayAttr:$succ);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = "$id `trips` $trips `succ` $succ attr-dict-with-keyword $body";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Stage 3: the generated graph
//===----------------------------------------------------------------------===//

def Terra_GraphOp : Terra_Op<"graph", [Symbol, IsolatedFromAbove, SingleBlock,
                                       NoTerminator]> {
  let summary = "the single symbolic graph generated from a TraceGraph";
  let description = [{
    The merged, function-like result of case assignment: DL ops, the
    communication ops and `scf.index_switch` / `scf.while` control flow. It
    is never split at feed or fetch points. `unrolled_loops` lists
    `[loop id, trip count]` for each loop that was unrolled: the runtime
    validates that the program takes exactly that many iterations.
  }];
  let arguments = (ins SymbolNameAttr:$sym_name,
                       OptionalAttr<TypedArrayAttrBase<DenseI64ArrayAttr,
                           "[loop, trips] pairs">>:$unrolled_loops);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = "$sym_name attr-dict-with-keyword $body";
  let hasVerifier = 1;
}

def Terra_CaseSelectOp : Terra_Op<"case_select"> {
  let summary = "the branch index the host reports at a divergence";
  let description = [{
    Blocks until the host reports which of the `cases` successors of
    divergence `id` it took, and returns that index to drive an
    `scf.index_switch`.
  }];
  let arguments = (ins I64Attr:$id, I64Attr:$cases);
  let results = (outs Index:$index);
  let assemblyFormat = "$id `cases` $cases attr-dict";
  let hasVerifier = 1;
}

def Terra_LoopCondOp : Terra_Op<"loop_cond"> {
  let summary = "continue or exit, as the host reports it for a loop";
  let description = [{
    Blocks until the host reports whether loop `id` starts another iteration
    (true) or is left (false). Drives the `scf.condition` of an `scf.while`.
  }];
  let arguments = (ins I64Attr:$id);
  let results = (outs I1:$cond);
  let assemblyFormat = "$id attr-dict";
  let hasVerifier = 1;
}

def Terra_UndefOp : Terra_Op<"undef", [Pure]> {
  let summary = "a value on a path the runtime validator never accepts";
  let description = [{
    Stands for a value that is not defined on some path of the generated
    graph, e.g. a switch result on a case that does not produce it. The
    validator rejects every iteration that would read it, so its contents
    never matter.
  }];
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "attr-dict `:` type($result)";
}

#endif // TERRA_OPS_TD
