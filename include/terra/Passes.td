#ifndef TERRA_PASSES_TD
#define TERRA_PASSES_TD

include "mlir/Pass/PassBase.td"

def TerraMergeTraces : Pass<"terra-merge-traces", "mlir::ModuleOp"> {
  let summary = "Merge the terra.trace ops of a module into one TraceGraph";
  let description = [{
    Merges every `terra.trace` of the module, in order, into one
    `terra.trace_graph` (spec sections 2.3 to 2.7). An op joins an existing
    node when its name, args, site and result dtypes/ranks agree and its
    inputs come from the producers the graph routes on the current path
    (path-aware provenance, spec sections 2.2 and 3.5); otherwise the graph
    grows a branch, which merges back into an equal node of the same level
    when that keeps the level acyclic. Each program loop becomes one loop
    node whose body is merged per iteration; its distinct trip counts are
    recorded. `terra.feed` values become feed nodes and `terra.fetch` marks
    fetch points. The traces are removed unless `keep-traces` is set.
  }];
  let options = [
    Option<"graphName", "graph-name", "std::string", "\"merged\"",
           "Symbol name of the resulting terra.trace_graph">,
    Option<"keepTraces", "keep-traces", "bool", "false",
           "Keep the terra.trace ops after merging">,
  ];
  let dependentDialects = ["terra::TerraDialect"];
}

def TerraAssignCases : Pass<"terra-assign-cases", "mlir::ModuleOp"> {
  let summary = "Turn each TraceGraph into one terra.graph with scf control flow";
  let description = [{
    Case assignment (spec section 2.9). Every divergence becomes an
    `scf.index_switch` driven by a `terra.case_select`, with one case per
    successor; the switch ends at the divergence's immediate
    post-dominator, and sub-DAGs shared between cases are duplicated, so
    any DAG works, including ones that are not series-parallel. A loop
    whose trip count was the same in every trace is unrolled and listed in
    the graph's `unrolled_loops` for validation; any other loop becomes an
    `scf.while` driven by a `terra.loop_cond`. Each distinct provenance set
    becomes one variable, so values defined inside a case and used after it
    become switch results and loop-carried values become while operands.
    Feeds and fetches stay ops inside the single graph.
  }];
  let options = [
    Option<"maxDuplication", "max-duplication", "unsigned", "64",
           "Fail when duplication would emit more than this many copies per "
           "TraceGraph node on average">,
  ];
  let dependentDialects = ["terra::TerraDialect", "mlir::scf::SCFDialect",
                           "mlir::arith::ArithDialect",
                           "mlir::tensor::TensorDialect"];
}

def TerraConvertToLinalg : Pass<"terra-convert-to-linalg"> {
  let summary = "Lower generic terra DL ops to linalg, tensor, arith and math";
  let description = [{
    Converts each `terra.op` whose framework op has a lowering into
    linalg/tensor/arith/math on tensors, one pattern family per op family
    (lib/Lowering/TerraToLinalg/, modelled on torch-mlir's TorchToLinalg).
    Every lowering follows the same four steps: check static properties
    (dtypes, ranks, required args), emit runtime shape guards where static
    types cannot prove them, build init tensors from operand shapes, and emit
    the named or generic linalg op. Ops without a lowering are left in place;
    `terra-lower-graph` turns them into host callbacks, so an unsupported op
    never fails a program. The pass counts both kinds (see -mlir-pass-statistics).
  }];
  let dependentDialects = [
    "mlir::linalg::LinalgDialect", "mlir::tensor::TensorDialect",
    "mlir::arith::ArithDialect", "mlir::math::MathDialect",
    "mlir::scf::SCFDialect", "mlir::cf::ControlFlowDialect"];
  let statistics = [
    Statistic<"numLowered", "lowered-ops", "Number of terra.op lowered to linalg">,
    Statistic<"numHostOps", "host-ops", "Number of terra.op left for host callbacks">,
  ];
}

def TerraLowerGraph : Pass<"terra-lower-graph", "mlir::ModuleOp"> {
  let summary = "Turn terra.graph and its communication ops into runtime calls";
  let description = [{
    Rewrites each `terra.graph` into a `func.func` with the C interface and
    its communication ops into calls of the runtime (lib/Runtime/API.cpp):
    `terra.feed` receives a host buffer without copying it (a read-only
    tensor), `terra.fetch` publishes a value, `terra.case_select` and
    `terra.loop_cond` wait for the host's decisions, `terra.state` reads
    persistent state, and every remaining `terra.op` becomes a host callback
    whose name and args are listed in the module's `terra.host_ops`
    attribute. Cancellation is handled inside the runtime calls.

    The runtime checks each received tensor's dtype and rank; its static
    sizes become guards here (`terra_rt_check`, "feed 1: expected shape
    [?, 4]"), since the cast from the unranked memref would take any. The
    guards' messages are the module's `terra.asserts` and, for graphs run
    without the module (compiled ahead of time), the public constant
    `terra_check_messages` (NUL-terminated, an empty one last). A guard
    inside a linalg op's body (an index checked per element) calls
    `terra_rt_check` only when it fails (`scf.if`): a call per element
    cannot be hoisted and cost more than the element's copy.

    Host tensors may be strided views, so feeds and state arrive as fully
    dynamic strided memrefs, on which no two loop dims can be merged: an
    optimizer's update of a 3x3 convolution's weights ran as four nested
    loops whose innermost had 3 iterations. With `contiguous-inputs` (the
    CPU and GPU pipelines) they arrive through the `_contiguous` entry points
    instead, which give the graph a row-major buffer (the host's own memory
    when it is laid out that way, else a copy that lives until the run
    ends), and are typed with the identity layout. The GPU pipeline sets it
    too: cuBLAS then reads fed operands in place.
  }];
  let options = [
    Option<"contiguousInputs", "contiguous-inputs", "bool", "false",
           "Receive feeds and state as row-major buffers (identity layout)">,
  ];
  let dependentDialects = [
    "mlir::func::FuncDialect", "mlir::memref::MemRefDialect",
    "mlir::bufferization::BufferizationDialect", "mlir::arith::ArithDialect",
    "mlir::scf::SCFDialect"];
}

def TerraLibraryCalls : Pass<"terra-library-calls", "mlir::ModuleOp"> {
  let summary = "Replace bufferized GEMMs by runtime library calls";
  let description = [{
    Runs after one-shot bufferization. Each `linalg.matmul` and
    `linalg.batch_matmul` (f32/f64, default indexing maps) on strided
    memrefs becomes a `func.call` of a C-interface entry point of the
    runtime (lib/Runtime/Library.cpp): OpenBLAS `?gemm`. (Convolutions go
    to the library before bufferization: terra-library-convolutions.) The
    ops accumulate into their output like the linalg ops do; a zero
    `linalg.fill` of the output right before the op is folded into the
    call (BLAS beta = 0). Transposed operands (unit stride
    in the leading dim) go to BLAS without a copy, and a transpose of a
    row-major buffer made only for the GEMM (a linear layer's `aten.t` of
    its weight, and of its activations and gradients in backward) becomes
    a `memref.transpose` view that BLAS reads with its transpose flag; the
    transpose kernel and its buffer go away. That needs nothing between the
    transpose and the GEMM that may write the source (the buffer roots and
    per-op writes of lib/Lowering/BufferWrites.h, shared with
    terra-protect-fetches); a weight's transpose hoisted to the top of the
    graph has feeds, checks and other GEMMs in between. Each call carries
    `terra.writes` naming the operand it writes. The runtime keeps a
    direct loop for products too small for a BLAS call to pay
    (docs/passes.md states the rule). Ops with other element types, maps or
    non-strided layouts stay linalg and become loops.

    With `backend=cuda` (the GPU pipeline) the same matching emits calls of
    the cuBLAS-backed entry points of lib/Runtime/Cuda (`terra_cuda_*`)
    instead, for matrix products only: convolutions stay linalg and become
    generated kernels until the cuDNN entry points exist. cuBLAS addresses
    only matrices with a unit stride and a leading dimension, so every
    operand whose type does not prove a contiguous row-major layout (a
    feed without `contiguous-inputs`, a strided view) is first copied into a fresh
    buffer with `linalg.copy`, which becomes a generated kernel; an output
    without an identity layout keeps the op as generated code. A
    transpose of a row-major buffer made only for the GEMM (the backward
    of a linear layer, `q @ k.transpose(-2, -1)`: `linalg.transpose` into a
    fresh buffer, of the two innermost dims) becomes a `memref.transpose`
    view instead, which the runtime passes to cuBLAS as a column-major
    operand (CUBLAS_OP_T): no transpose kernel, no buffer.
  }];
  let options = [
    Option<"backend", "backend", "std::string", "\"cpu\"",
           "Library to call: `cpu` (OpenBLAS, lib/Runtime/Library.cpp) or "
           "`cuda` (cuBLAS, lib/Runtime/Cuda)">,
  ];
  let dependentDialects = [
    "mlir::func::FuncDialect", "mlir::memref::MemRefDialect",
    "mlir::arith::ArithDialect", "mlir::linalg::LinalgDialect"];
  let statistics = [
    Statistic<"numGemm", "gemm-calls", "Matrix products turned into BLAS calls">,
  ];
}

def TerraLibraryConvolutions
    : Pass<"terra-library-convolutions", "mlir::ModuleOp"> {
  let summary = "Replace 2-D convolutions and their gradients by runtime library calls";
  let description = [{
    Runs on tensors, before bufferization (first in the CPU pipeline). Each
    f32/f64 `linalg.conv_2d_nchw_fchw`, `linalg.conv_2d_ngchw_gfchw` and
    convolution-gradient `linalg.generic` tagged `terra.library` by the
    lowering (checked to still have the exact maps and body built from its
    stride and dilation) with static spatial sizes becomes a `func.call` of
    a C-interface entry point of the runtime (lib/Runtime/LibraryConv.cpp:
    oneDNN for f32, im2col + GEMM for f64): `terra_lib_conv2d_*`,
    `terra_lib_conv2d_grad_input_*`, `terra_lib_conv2d_grad_weight_*`.
    Producers that materialize what the library does implicitly are looked
    through: the zero `tensor.pad` of the input becomes the call's padding,
    grad_output spread out with strides into zeros (`tensor.insert_slice`)
    becomes the call's stride, group splits (`tensor.expand_shape`) become
    the group count, and the forward's broadcast bias init becomes its bias
    argument; the copies then die. Inputs are passed with
    `bufferization.to_buffer read_only` (no copy), the output is a fresh
    `memref.alloc` returned through `bufferization.to_tensor restrict
    writable`; a zero-filled init makes the call overwrite, any other init
    is copied into the output and accumulated into. Ops that do not match
    stay linalg and become loops. With `backend=cuda` (the GPU pipeline)
    the calls are `terra_cuda_conv2d*` (lib/Runtime/Cuda/Cudnn.cpp,
    cuDNN), and only problems cuDNN takes as they are become calls: the
    padding after the input equal to the padding before it (or left to the
    run: dynamic sizes) and an output the call overwrites (an init to
    accumulate into would be copied by host code).
  }];
  let options = [
    Option<"backend", "backend", "std::string", "\"cpu\"",
           "Whose entry points to call: cpu (oneDNN) or cuda (cuDNN)">,
  ];
  let dependentDialects = [
    "mlir::func::FuncDialect", "mlir::memref::MemRefDialect",
    "mlir::arith::ArithDialect", "mlir::tensor::TensorDialect",
    "mlir::bufferization::BufferizationDialect"];
  let statistics = [
    Statistic<"numConv", "conv-calls", "Convolutions turned into library calls">,
  ];
}

def TerraApproximateMath : Pass<"terra-approximate-math"> {
  let summary = "Rewrite f32 transcendental math ops into vectorizable polynomials";
  let description = [{
    Applies upstream MLIR's polynomial approximations (Cephes-style range
    reduction plus minimax polynomials, accurate to a few ulp in f32) to the
    f32 `math` ops of the graph: exp, expm1, log, log1p, log2, tanh and erf
    (sin and cos keep libm: the approximation's range reduction loses
    accuracy for large arguments). Subnormal arguments of log/log2 are
    scaled into the normal range first, which the polynomials assume. A libm call is opaque to LLVM's loop vectorizer, so every
    pointwise kernel with one of these (softmax, gelu, sigmoid, tanh,
    log_softmax) would otherwise run one element per call; the expanded
    arithmetic vectorizes with the rest of the fused loop. f64 ops keep
    libm. Special values follow libm: exp overflows to inf and underflows to
    0, log of 0 is -inf and of a negative number NaN, NaN propagates.
  }];
  let dependentDialects = ["mlir::arith::ArithDialect", "mlir::math::MathDialect",
                           "mlir::vector::VectorDialect"];
}

def TerraFuseElementwise : Pass<"terra-fuse-elementwise"> {
  let summary = "Fuse elementwise linalg ops, keeping contractions and convolutions named";
  let description = [{
    Upstream's elementwise fusion, reshape propagation by expansion and
    constant folding (what `linalg-fuse-elementwise-ops` runs), with a
    control that refuses every edge whose producer has other uses or whose
    producer or consumer is a contraction (matmul, batch matmul) or a
    convolution. Upstream's own pass folds operand transposes and result
    reshapes into named matmuls, turning them into `linalg.generic`
    contractions that `terra-library-calls` no longer recognizes; they then
    run as scalar loops instead of BLAS calls. Transposes feeding a matmul
    stay separate copies here (BLAS reads the result).
  }];
  let dependentDialects = ["mlir::affine::AffineDialect", "mlir::linalg::LinalgDialect",
                           "mlir::tensor::TensorDialect"];
}

def TerraCollapseDims : Pass<"terra-collapse-dims"> {
  let summary = "Collapse adjacent loop dims of linalg.generic ops into one";
  let description = [{
    For each `linalg.generic` on tensors (without `linalg.index`) whose
    operands will be buffers with the identity layout, adjacent loop dims
    of the same iterator type that stay adjacent, in order, in every
    indexing map (or appear in none) are collapsed into one loop
    (`linalg::collapseOpIterationDims`; the operands get
    `tensor.collapse_shape`, a view of such buffers). A reduction over an
    image's (h, w) becomes one loop of h*w elements and an elementwise op on
    a 4-d tensor one flat loop, so the loops LLVM vectorizes are long
    instead of a short innermost dim.

    With `on-buffers` (after bufferization, following
    terra-refine-branch-layouts) it does the same for `linalg.generic` ops
    on buffers whose operands all have the identity layout and static
    shapes (`memref.collapse_shape` views): the ops whose tensors it could
    not prove contiguous before bufferization, values chosen by the
    graph's branches above all.
  }];
  let options = [
    Option<"onBuffers", "on-buffers", "bool", "false",
           "Collapse generics on identity-layout buffers instead of tensors">,
  ];
  let dependentDialects = ["mlir::linalg::LinalgDialect",
                           "mlir::tensor::TensorDialect",
                           "mlir::memref::MemRefDialect"];
}

def TerraRefineBranchLayouts : Pass<"terra-refine-branch-layouts"> {
  let summary = "Give scf.if results the identity layout when every branch yields it";
  let description = [{
    One-shot bufferization types a result of `scf.if` with the fully
    dynamic strided layout as soon as its branches' buffer types differ in
    any way, and nested ifs (the merged graph's switches after
    terra-switch-to-if) pass that on outward, even where every branch in
    the end yields an identity-layout buffer cast to the dynamic type. Such
    results, innermost ifs first, get the identity type back: the casts in
    the yields are dropped, the linalg ops that read the result take it
    directly (their cast folding), and any other use reads it through one
    cast to the old type. Loops over those values then collapse and vectorize
    (terra-collapse-dims on-buffers): YOLOv3's optimizer updates of
    convolution weights were four nested loops with an innermost of 3.
  }];
  let dependentDialects = ["mlir::memref::MemRefDialect", "mlir::scf::SCFDialect"];
}

def TerraReassociateReductions : Pass<"terra-reassociate-reductions"> {
  let summary = "Allow float sum reductions to be reassociated so they vectorize";
  let description = [{
    Marks `reassoc` on the accumulating `arith.addf` of every float sum in a
    `linalg.generic` with reduction loops (the add that combines a loaded
    value with the output's block argument and is yielded to that output).
    Without it LLVM must keep the sequential order and runs the reduction
    one element at a time; with it the loop vectorizer keeps one partial
    sum per lane, like PyTorch's own vectorized CPU reductions. Results
    change only by rounding (fp32 tolerance), never for NaN or infinities:
    no other fast-math flag is set.
  }];
  let dependentDialects = ["mlir::arith::ArithDialect", "mlir::linalg::LinalgDialect"];
}

def TerraHoistAboveReceives : Pass<"terra-hoist-above-receives", "mlir::ModuleOp"> {
  let summary = "Run work that does not need a receive before the graph waits for it";
  let description = [{
    After `terra-lower-graph` and fusion, in every block of every function:
    an op the trace put after a receive (a call that waits for the host:
    `terra_rt_feed*`, `terra_rt_case`, `terra_rt_loop`,
    `terra_rt_host_call`, or an op with one in its regions) moves above it
    when none of its operands, nor the values its regions use, comes from
    that receive or after it. The graph then computes it while it would
    otherwise wait for the host (Faster R-CNN: the RPN branch's backward
    pass and its parameters' updates, during the host's NumPy proposal
    filtering, instead of after the RoIs are fed).

    Only computations move: ops without memory effects (linalg on tensors,
    arith, tensor), ops whose only effects are the runtime's guards
    (`terra_rt_check`, also inside a linalg body: it can only fail earlier,
    with the same message), and library calls on tensors
    (`terra_lib_*`/`terra_cuda_*` from `terra-library-convolutions`) whose
    buffers are read-only tensor buffers, globals or fresh allocations used
    by nothing else, with those allocations and their tensor wrappers.
    Fetches, state reads, host-callback staging and receives keep their
    order. A moved op goes to the end of the earliest stretch between
    receives where its operands exist, after the ops already there, in its
    original order among those moved with it: values are fetched as early
    as before, and each op still follows its operands.
  }];
}

def TerraSwitchToIf : Pass<"terra-switch-to-if"> {
  let summary = "Rewrite scf.index_switch on tensors into nested scf.if before bufferization";
  let description = [{
    Works around an upstream one-shot bufferization gap (MLIR 22):
    `scf.index_switch` does not report its results as aliases of the
    buffers its cases yield, so the analysis lets later ops write in place
    into a buffer that a switch result still refers to (a yielded value
    defined before the switch, or one value yielded for two results), and
    the result silently changes. `scf.if` is analysed correctly. Merged
    graphs hit this on every branch that forwards a value computed before
    it (e.g. gradients with and without `zero_grad()`). A switch with N
    cases becomes a chain of `scf.if (index == case_i)` whose last else is
    the default region; regions are moved, not cloned. Switches with no
    tensor results are left alone.
  }];
  let dependentDialects = ["mlir::scf::SCFDialect", "mlir::arith::ArithDialect"];
}

def TerraSplitEmptyTensors : Pass<"terra-split-empty-tensors"> {
  let summary = "Give every use of a tensor.empty its own op before bufferization";
  let description = [{
    CSE merges equal `tensor.empty` ops, so one empty tensor can become the
    destination of several ops (two fills, a fill and a generic). One-shot
    bufferization then gives all of them the empty tensor's buffer and lets
    a later op write into it in place while an earlier result that lives
    in the same buffer is still read, e.g. by a host callback through
    `bufferization.to_buffer` (seen as a wrong loss in DCGAN: a `ones`
    target overwritten before its second use). Cloning the empty op per use
    restores one buffer per destination; allocation is unchanged, since
    every use needed its own buffer anyway. A use in a nested region gets
    its clone there even when it is the only one: CSE also merges a loop
    body's empty tensor with an equal one before the loop, and then every
    trip wrote into the one buffer allocated before the loop, including
    the buffer the previous trip had published with a `terra.fetch` (the
    host's zero-copy view of it changed under it: Fig. 3's loop, seen with
    `TERRA_VERIFY_FETCHES=1`).

    Likewise a `linalg.fill` of an empty tensor (CSE merges the zero
    initializations of GEMM and reduction outputs) that several ops take as
    their destination: each destination after the first in the fill's block
    gets its own `tensor.empty` and fill right before its user (every one,
    when the filled tensor is also read). Bufferization had filled one
    buffer and copied it into a new buffer per destination, a memset and a
    memcpy of every output, and the GEMM's library call then accumulated
    into the copy instead of folding the zero fill (BLAS beta = 0).
  }];
  let dependentDialects = ["mlir::tensor::TensorDialect", "mlir::linalg::LinalgDialect"];
}

def TerraMarkStateUpdates : Pass<"terra-mark-state-updates", "mlir::ModuleOp"> {
  let summary = "Name the state whose memory eager leaves each fetched value in";
  let description = [{
    Runs on the merged graph before `-terra-convert-to-linalg`, while the
    aten ops are still there. A `terra.fetch` of a value that eager PyTorch
    computes into a persistent state's own memory gets the attribute
    `terra.updates_state = "<state name>"`: the result of an in-place op
    (`aten.add_`, `aten.copy_`, `aten._foreach_mul_`, ...; result k of a
    `_foreach_*_` op is its first list's element k) whose mutated operand
    is a `terra.state`, directly or through earlier in-place results,
    identity views (`aten.t` of `aten.t`, `aten.detach`, `aten.alias` of
    the same type) and `scf.index_switch` results that every case not
    leaving them undefined yields alike. When only some cases of a switch
    chosen by a `terra.case_select` yield the state and the others yield
    anything else (Adam's first step makes its moments and step counters
    with `zeros_like`; the later steps' case yields the states), the fetch
    also gets `terra.updates_state_case = array<i64: selection id, cases...>`:
    the value is the state's only in those cases (never the default's,
    which stands for every other index). Ops that swap their operand's
    memory (`set_`, `resize_`, in-place views) and the fused optimizers,
    whose results follow no such rule, are not followed.
    `-terra-lower-graph` carries the attribute to the fetch's runtime call
    as the state's runtime index, for `-terra-commit-in-place`.
  }];
}

def TerraCommitInPlace : Pass<"terra-commit-in-place", "mlir::ModuleOp"> {
  let summary = "Write a committed iteration's new state into the state's own memory";
  let description = [{
    Runs on the CPU pipeline after bufferization and the library calls.
    The host copies each committed value into its state tensor after the
    run (`Run.fetch_into`: a wide MLP step spent 2.1 of 14 ms there,
    YOLOv3 3 of 25 ms). For a fetch that `-terra-mark-state-updates` tied
    to a state, this pass lets the graph compute the value straight into
    the state's memory, as eager's in-place updates do, when the host has
    already validated the whole iteration by the time the graph gets there:
    the value's allocation becomes `scf.if %ready { state } else {
    memref.alloc }`, where `%ready` is the result of
    `terra_rt_commit_ready`, which does not wait: true when the host has
    finished the iteration (everything it will send is sent and validated,
    so it can no longer deviate and the old state is never needed again),
    false before (the graph computes into fresh buffers and the host copies
    them, as without this pass: a graph that waited would move the update
    onto the critical path of a host-bound step), and an unwind when the
    run is cancelled. The fetch becomes `terra_rt_fetch_state_*`, which
    publishes the state's memory without a copy; `fetch_into` then skips
    a copy onto itself. Graph-bound steps (the graph reaches the update
    after the host has finished) gain the copy; host-bound ones are as
    before.

    A fetch qualifies when its buffer is a `memref.alloc` of the state
    memref's type (or one collapsed and expanded back), used by no op
    before the question, and nothing reads the state's old value after the
    first access of the buffer (in program order; a loop counts as a
    whole), except that access itself when it is an elementwise linalg op
    reading the state at the position it writes (`p = p - lr * g`). Each
    value's question goes into the function's entry block right before the
    op holding its buffer's first use (as late as possible: a gradient asks
    during backward, a parameter at the optimizer's update), and only after
    every op that can still fail (a runtime check, a
    host op, a state read), so a run that writes in place cannot fail and
    leave a half-written state. Receives after it never block: the host has
    sent everything. A feed's shape guard (`terra.feed_guard`) does not
    count: the runtime checks each feed against `terra.feed_types` as the
    host sends it and answers false after a mismatch. The runtime keeps the rest sound
    (`terra.donated_states` lists the states): a feed, host op result or
    other state whose memory overlaps a donated state's is given to the
    graph as a copy, so no other buffer of the graph aliases it.

    A value that is the state's only in some cases
    (`terra.updates_state_case`) is written in place when, besides the
    answer, the case selection (`terra_rt_case`, which must be in the entry
    block before the question) picked one of them. An elementwise update
    may read the state through a value of another layout (a branch's
    result has the branches' common, dynamic one): it then reads the
    position it writes only if that value is the state's memory as the
    buffer sees it, which the question also checks at run time (the same
    aligned pointer, offset, sizes and strides).
  }];
  let dependentDialects = ["mlir::scf::SCFDialect",
                           "mlir::memref::MemRefDialect",
                           "mlir::arith::ArithDialect"];
  let statistics = [
    Statistic<"numDonated", "donated-states",
              "Fetched values computed in their state's memory">,
  ];
}

def TerraProtectFetches : Pass<"terra-protect-fetches", "mlir::func::FuncOp"> {
  let summary = "Fetch a copy of any buffer the graph may write after fetching it";
  let description = [{
    Runs right after one-shot bufferization. A fetch publishes the graph's
    buffer without a copy: from then on the host's tensor (or NumPy array,
    or DLPack capsule) views that memory, so the graph must never write it
    again. Bufferization does not know this: it writes in place into any
    buffer whose tensor is dead, and a fetched tensor is dead right after
    its fetch. This pass makes the guarantee by construction. It groups
    buffers into alias classes (views and casts join their sources;
    loop-carried and branch-yielded buffers join what they stand for,
    position by position; an op it does not know joins all its memrefs)
    and, for each `terra_rt_fetch_*` call of a buffer the graph allocated,
    looks for a write into its class that may come later: after the fetch
    in the function, or anywhere in a loop around it (the next trip). A
    write is a memory-effect write, a call's memref argument (except the
    runtime's read-only entry points; of a library call, only the operands
    it lists in its `terra.writes` attribute, which
    `-terra-library-convolutions` sets to its output), or any memref an op
    without effects information takes. Such a fetch gets a fresh buffer, a `memref.copy`
    of the value, and fetches that instead: nothing else uses the copy.
    Fetches of feeds and state are left alone (the runtime copies memory
    the run does not own). A copy costs one pass over the value; the
    benchmark programs' graphs need none.
  }];
  let dependentDialects = ["mlir::memref::MemRefDialect"];
  let statistics = [
    Statistic<"numCopied", "copied-fetches",
              "Fetches that fetch a copy of their buffer">,
  ];
}

def TerraGPUMergeModules : Pass<"terra-gpu-merge-modules", "mlir::ModuleOp"> {
  let summary = "Put every kernel of a graph into one gpu.module";
  let description = [{
    Kernel outlining gives each `gpu.launch` its own `gpu.module`: a
    graph of a few hundred ops has hundreds of modules, and
    `gpu-module-to-binary` then builds an LLVM module, links libdevice and
    runs the NVPTX backend once per module (DCGAN's training step: 913
    modules, 7.7 s of its 10.7 s pipeline), and the run loads each with its
    own `cuModuleLoadData`. This pass moves the contents of every
    (even a single)
    `gpu.module` of the top module into one module, `target-name`, when
    they all have the same attributes (targets), and points each
    `gpu.launch_func` at its kernel there. A module's single kernel takes
    the module's (unique) name; a kernel among several is named
    `<module>_<kernel>`. Other symbols the outliner copied into several
    modules are kept once when identical and renamed otherwise. Kernels
    identical but for their names and `known_grid_size` hints are kept
    once too (DCGAN: 319 of 913; the hint stays only where all agreed),
    and their launches point at the kept one. Modules with differing
    attributes are left as they are.
  }];
  let options = [
    Option<"targetName", "target-name", "std::string", "\"terra_kernels\"",
           "The name of the merged gpu.module">,
  ];
  let dependentDialects = ["mlir::gpu::GPUDialect"];
  let statistics = [
    Statistic<"numMerged", "merged-modules", "gpu.modules merged into one">,
    Statistic<"numDeduplicated", "duplicate-kernels",
              "Kernels identical to another one, erased">,
  ];
}

def TerraGPUDeviceChecks : Pass<"terra-gpu-device-checks", "mlir::ModuleOp"> {
  let summary = "Report the runtime guards inside kernels through a run flag";
  let description = [{
    Runs after `terra-gpu-host-kernels`. A guard inside a linalg op's body
    (an index checked per element, `terra_rt_check` from
    `terra-lower-graph`) ends up inside the op's kernel, where no host
    function can be called (ptxas: "Unresolved extern function
    '_mlir_ciface_terra_rt_check'", BERT's embedding on an H200), and a
    kernel cannot end the run. Each kernel guard becomes a store of its
    message's index plus one into the run's check flag, a
    `memref<1xi32>` the function reads once at its entry
    (`terra_rt_check_flag`: pinned host memory the device writes, or a
    host word for the CPU-run `gpu-loops` kernels), and the ops after the
    guard in its block run only when the guard holds, so an out-of-range
    index is never read. The runtime reads the flag whenever it waits
    for the run's stream (before a fetch or a host-op argument reaches
    the host, and at the end of the run) and fails the run with the
    message, as `terra_rt_check` would have. A kernel (a `gpu.launch`,
    or the block-mapped `scf.parallel` of `terra-linalg-to-gpu
    {kernels=false}`) whose guarded ops hold a `gpu.barrier` is an error:
    skipping the barrier in some threads would hang the block.
  }];
  let dependentDialects = ["mlir::arith::ArithDialect",
                           "mlir::func::FuncDialect",
                           "mlir::memref::MemRefDialect",
                           "mlir::scf::SCFDialect"];
  let statistics = [
    Statistic<"numChecks", "device-checks",
              "Guards inside kernels turned into flag stores">,
  ];
}

def TerraGPUHostScratch : Pass<"terra-gpu-host-scratch", "mlir::ModuleOp"> {
  let summary = "Give the host code's own scratch buffers host memory";
  let description = [{
    A GPU graph's buffers are device memory (`_mlir_memref_to_llvm_alloc`
    is the run's device allocator), which host code cannot touch. After
    kernel outlining the only buffers the host code itself reads and
    writes are scratch arrays: those `-lower-deallocations` creates for
    its `dealloc_helper` (the base pointers and ownership flags of the
    buffers a `bufferization.dealloc` frees), and the shape arrays of
    dynamic `memref.reshape`s (read by the host to build the result's
    descriptor). A host-function `memref.alloc` of static shape whose
    every use is a host `memref.load`/`memref.store`, a `memref.cast`, its
    `memref.dealloc`, a call to a function of this module or a reshape's
    shape operand becomes a `memref.alloca` at the
    function's entry (a fixed stack slot: graph loops reuse it), and its
    dealloc goes away. Any other host access to an allocation is left
    alone, and one with a dynamic size is an error: it would be a host
    write into device memory.
  }];
  let dependentDialects = ["mlir::memref::MemRefDialect"];
  let statistics = [
    Statistic<"numScratch", "scratch-buffers",
              "Host scratch buffers moved to the stack">,
  ];
}

def TerraGPUHostKernels : Pass<"terra-gpu-host-kernels", "mlir::func::FuncOp"> {
  let summary = "Keep host code of a GPU graph off the graph's buffers";
  let description = [{
    Runs after `terra-linalg-to-gpu`, whose kernels hold every linalg op.
    A GPU graph's buffers are device memory, and what else reads or writes
    their elements is host code that would fault (the CUDA co-execution
    runner thread's segfault): a fed scalar (learning rate, momentum) the
    lowering extracts on the host for a kernel, the sequential loops some
    lowerings write by hand (`cumsum`'s scan, in-order scatter-adds), an
    index the host reads to place a slice (`index_add`). An access is an
    op with read or write effects on a buffer other than host memory (a
    `memref.alloca`, a `memref.get_global`, the dealloc helper's scratch
    arrays). Three rewrites, in order:

    1. A host load whose value only kernels use moves into each kernel
       that uses it, with the scalar arithmetic in between (`-lr`), when
       every write to its buffer precedes the load and the buffer is not
       released before the kernel: the kernel reads what the host would
       have read.
    2. An access that neither yields a value the host uses nor sits in
       code that needs the host moves into a single-thread kernel with its
       enclosing `scf.for` / `scf.if` / `scf.while` / `scf.parallel` ops,
       as far out as none of them needs the host (a call, an allocation or
       release, a kernel, host memory, unknown effects). One thread keeps
       a loop's order (repeated indices of a scatter-add add up in eager's
       order); such loops are small next to the graph's kernels.
    3. A load whose value the host does use reads a host copy of its
       buffer instead (`terra_rt_to_host_<dtype>`: the runtime waits for the
       queued work, copies the buffer out and keeps the copy for the run),
       made once before the outermost op around the load that the buffer's
       definition and every write to it precede: one copy serves a loop of
       index reads.

    Any other host access is an error at its location, never a host
    access to device memory. Public functions only: private ones are
    helpers (the dealloc helper) working on host arrays.
  }];
  let dependentDialects = ["mlir::gpu::GPUDialect",
                           "mlir::arith::ArithDialect",
                           "mlir::func::FuncDialect",
                           "mlir::scf::SCFDialect"];
  let options = [
    Option<"kernels", "kernels", "bool", "true",
           "Make gpu.launch ops; false: the block/thread-mapped scf.parallel "
           "loops of terra-linalg-to-gpu{kernels=false} (the gpu-loops "
           "pipeline, which runs them on the CPU)">,
  ];
  let statistics = [
    Statistic<"numKernels", "kernels",
              "Host loops moved into single-thread kernels">,
    Statistic<"numHostCopies", "host-copies",
              "Host reads redirected to a host copy of their buffer">,
  ];
}

def TerraLinalgToGPU : Pass<"terra-linalg-to-gpu", "mlir::func::FuncOp"> {
  let summary = "Turn every bufferized linalg op into a gpu.launch";
  let description = [{
    The generated-code half of the GPU pipeline; runs after one-shot
    bufferization and `terra-library-calls{backend=cuda}`. Each linalg op
    on buffers (and each `memref.copy`, first rewritten to `linalg.copy`)
    becomes its own kernel:

    1. the op is lowered to an `scf.parallel` nest over its parallel
       dimensions, with its reduction dimensions as sequential `scf.for`
       inside (one thread per output element; a sum over a row is one
       thread's loop). An op without parallel dimensions (a full reduction,
       a 0-d fill) gets a one-iteration parallel loop, i.e. a single-thread
       kernel, so no graph buffer is ever touched by host code;
    2. the parallel dimensions are collapsed into one, so the innermost,
       contiguous dimension varies fastest across threads (coalesced
       accesses) and any shape fits in the grid's x dimension;
    3. the loop is tiled by `block-size`: the tile loop maps to blocks
       (`block_x`), the intra-tile loop to threads (`thread_x`), with a
       bounds guard for the last block;
    4. upstream's parallel-loop-to-gpu conversion turns it into a
       `gpu.launch`. A loop that cannot be converted is an error with the
       op's location, never a host loop over device memory.

    Kernels are outlined later by `gpu-kernel-outlining`. Elementwise
    fusion has already happened on tensors, so a fused pointwise chain is
    one kernel.

    A reduction with few outputs (fewer than `split-max-outputs`) over
    many elements each (at least `split-min-elements`; static sizes, one
    output, a body that folds into the output with one combiner that has a
    neutral element: add, mul, max, min, and, or, xor) would leave most of
    the device idle with one thread per output (a full sum: one thread).
    It is split instead into two kernels: S threads per output each fold
    every S-th element (consecutive threads read consecutive elements)
    from the neutral element into a temporary buffer of partials, then one
    thread per output folds its S partials into it, S chosen so that about
    `split-max-outputs` threads run, each folding at least 64 elements.
    This reassociates the reduction, as every parallel reduction does.
    Each thread's fold is unrolled `fold-unroll` times (same order of
    combining): its loads do not depend on the accumulator, so they are in
    flight together instead of one at a time.

    A reduction that is not split (one thread per output element) keeps
    its output elements in registers over the reduction loop (loaded
    once, stored once, the loop unrolled likewise) when its outputs are
    indexed by parallel dimensions only and no input views an output's
    buffer; linalg's own loops would load and store the output element on
    every iteration, each waiting for the previous store.
  }];
  let options = [
    Option<"blockSize", "block-size", "int64_t", "256",
           "Threads per block (the tile size of the collapsed loop)">,
    Option<"splitReductions", "split-reductions", "bool", "true",
           "Split large reductions with few outputs across threads">,
    Option<"splitMinElements", "split-min-elements", "int64_t", "2048",
           "Split reductions of at least this many elements per output">,
    Option<"splitMaxOutputs", "split-max-outputs", "int64_t", "32768",
           "Split reductions with fewer outputs than this; also the number "
           "of threads a split aims at">,
    Option<"foldUnroll", "fold-unroll", "int64_t", "8",
           "Unroll factor of each thread's fold in a split reduction (its "
           "loads then overlap)">,
    Option<"kernels", "kernels", "bool", "true",
           "Convert the mapped loops to gpu.launch (false keeps the "
           "scf.parallel loops, so tests can run them on the CPU)">,
  ];
  let dependentDialects = [
    "mlir::gpu::GPUDialect", "mlir::scf::SCFDialect",
    "mlir::arith::ArithDialect", "mlir::affine::AffineDialect",
    "mlir::memref::MemRefDialect", "mlir::linalg::LinalgDialect"];
  let statistics = [
    Statistic<"numKernels", "kernels", "Number of gpu.launch ops created">,
    Statistic<"numRegisterFolds", "register-folds",
              "Reductions folded in registers, one thread per output">,
    Statistic<"numSerial", "serial-kernels",
              "Kernels of one thread (ops without parallel dimensions)">,
    Statistic<"numSplit", "split-reductions",
              "Reductions split across threads (two kernels each)">,
  ];
}

def TerraSplitDeallocs : Pass<"terra-split-deallocs", "mlir::func::FuncOp"> {
  let summary = "Free each buffer of a retain-free bufferization.dealloc on its own";
  let description = [{
    Runs in the CPU pipelines between `-buffer-deallocation-simplification`
    and `-bufferization-lower-deallocations`. A `bufferization.dealloc`
    frees each of its memrefs whose condition holds, each underlying
    buffer once even when several of them alias. The upstream lowering
    keeps that promise with a generic helper that compares every memref's
    base pointer with every other's at run time: quadratic in the memrefs.
    The last dealloc of a graph lists every buffer still owned at its end
    (YOLOv3's: ~2100, many of them branch results, which the
    simplification cannot tell apart), ~2.2M comparisons right before the
    run ends, on the step's critical path. Our runtime's free
    (`_mlir_memref_to_llvm_free`) releases only buffers the run allocated
    and still holds, and forgets each as it releases it, so freeing one
    buffer twice in a row, with no allocation in between, frees it once.
    This pass therefore replaces a dealloc without retained values by one
    `memref.dealloc` per memref, under `scf.if` on its condition unless
    that is a constant (none where it is false). Deallocs that retain
    values (they also answer which retained values still own their
    buffer) are left to the upstream lowering.
  }];
  let dependentDialects = ["mlir::scf::SCFDialect",
                           "mlir::memref::MemRefDialect"];
}

def TerraOutlineLoops : Pass<"terra-outline-loops", "mlir::ModuleOp"> {
  let summary = "Outline each outermost loop nest of a function into a function of its own";
  let description = [{
    Runs in the CPU pipeline on buffers, after the loops and deallocation
    are in place. A lowered graph is one function that holds every loop
    nest of the step (ResNet-50's is ~80k lines of LLVM IR); LLVM's
    function passes and code generation (register allocation, instruction
    selection, scheduling) grow faster than linearly with a function's
    size, and one function cannot be compiled on several threads. The pass
    moves every outermost `scf.for` / `scf.parallel` holding at least
    `min-ops` operations (by default every one: the function left behind
    is compiled as straight-line glue, without loop optimizations) into a private function
    `<function>_loop<N>` called in its place, marked `noinline` so LLVM
    does not merge it back. Values the nest uses from above become
    arguments, except constants, which are cloned into the new function so
    that trip counts and strides stay known to LLVM (memref types carry
    their static shapes across the call); the loop's results are returned.
  }];
  let options = [
    Option<"minOps", "min-ops", "int64_t", "1",
           "Loop nests with fewer operations stay inline">,
  ];
  let dependentDialects = ["mlir::func::FuncDialect"];
  let statistics = [
    Statistic<"numOutlined", "outlined-loops", "Loop nests outlined">,
  ];
}

#endif // TERRA_PASSES_TD
