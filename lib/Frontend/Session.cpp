//===- Session.cpp - The compiler state behind one terra.function ---------===//
//
// Trace text in, merged TraceGraph and compiled graphs out. Every stage runs
// in-process: parsing, TypedTraceGraph merging, case assignment, lowering
// to linalg, the CPU pipeline and the JIT.
//
//===----------------------------------------------------------------------===//
#include "terra/Frontend/Session.h"

#include "terra/CaseAssignment/CaseAssignment.h"
#include "terra/Dialect/TerraOps.h"
#include "terra/Merge/TypedTraceGraph.h"
#include "terra/Passes.h"
#include "terra/Translate/TerraToDot.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Target/LLVMIR/Dialect/All.h"
#include "llvm/Support/raw_ostream.h"

#include <mutex>

using namespace mlir;

namespace terra {

struct Session::Impl {
  DialectRegistry registry;
  std::unique_ptr<MLIRContext> ctx;
  std::unique_ptr<TypedTraceGraph> graph;
  /// Parsed trace modules stay alive: the graph's keys refer to their
  /// attributes (interned in the context) and locations.
  std::vector<OwningOpRef<ModuleOp>> traces;
  /// One caller at a time uses the context (its multithreading is off) and
  /// the graph: the front end compiles on a background thread with the GIL
  /// released, while its own thread may add a trace or describe a key.
  std::recursive_mutex lock;

  Impl() {
    registerAllDialects(registry);
    registerAllExtensions(registry);
    // gpu-module-to-binary translates the kernels to LLVM IR in this
    // context: a GPU compile must not depend on a CPU graph's JIT having
    // registered the translations first.
    registerAllGPUToLLVMIRTranslations(registry);
    registry.insert<TerraDialect>();
    ctx = std::make_unique<MLIRContext>(registry);
    ctx->loadAllAvailableDialects();
    // Worker threads would only slow down the small modules of one step.
    ctx->disableMultithreading();
    graph = std::make_unique<TypedTraceGraph>(ctx.get());
  }

  /// A module holding the merged TraceGraph as `terra.trace_graph`.
  std::pair<OwningOpRef<ModuleOp>, TraceGraphOp> emitTraceGraph() const {
    Location loc = UnknownLoc::get(ctx.get());
    OwningOpRef<ModuleOp> module = ModuleOp::create(loc);
    OpBuilder b(module->getBodyRegion());
    TraceGraphOp op = graph->emit(b, loc, "merged");
    return {std::move(module), op};
  }
};

namespace {
/// Collects every diagnostic emitted while alive, printed with locations.
class DiagnosticCollector {
public:
  explicit DiagnosticCollector(MLIRContext *ctx)
      : handler(ctx, [this](Diagnostic &diag) {
          llvm::raw_string_ostream os(text);
          if (!text.empty())
            os << "\n";
          os << diag.getLocation() << ": " << diag;
          for (Diagnostic &note : diag.getNotes())
            os << "\n  " << note.getLocation() << ": note: " << note;
          return success();
        }) {}
  std::string take(llvm::StringRef fallback) {
    return text.empty() ? fallback.str() : std::move(text);
  }

private:
  std::string text;
  ScopedDiagnosticHandler handler;
};
} // namespace

Session::Session() : impl(std::make_unique<Impl>()) {}
Session::~Session() = default;

const TraceGraph &Session::graph() const { return impl->graph->graph(); }

AddTraceResult Session::addTrace(const std::string &moduleText) {
  std::lock_guard<std::recursive_mutex> guard(impl->lock);
  AddTraceResult result;
  MLIRContext *ctx = impl->ctx.get();
  DiagnosticCollector diags(ctx);
  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(moduleText, ctx);
  if (!module) {
    result.error = diags.take("cannot parse the trace module");
    return result;
  }
  SmallVector<TraceOp> traces(module->getOps<TraceOp>());
  if (traces.size() != 1) {
    result.error = "expected one terra.trace in the module, found " +
                   std::to_string(traces.size());
    return result;
  }
  TraceOp trace = traces.front(); // verified by the parser
  FailureOr<MergeOutcome> outcome = impl->graph->addTrace(trace);
  if (failed(outcome)) {
    result.error = diags.take("cannot merge the trace");
    return result;
  }
  result.changed = outcome->changed;
  result.coverable = outcome->coverable;
  if (!outcome->error.empty())
    result.error = outcome->error;
  // The same interning the merge did: internKey is idempotent.
  TypedTraceGraph &tg = *impl->graph;
  for (Operation &op : trace.getBody().front()) {
    int64_t key = -1;
    if (auto dl = dyn_cast<DLOp>(op))
      key = tg.internKey(TGKind::Op, dl.getNameAttr(), dl.getArgsAttr(),
                         dl.getLoc(), dl.getResultTypes());
    else if (auto feed = dyn_cast<FeedOp>(op))
      key = tg.internKey(TGKind::Feed, nullptr, nullptr, feed.getLoc(),
                         feed.getType());
    else if (auto state = dyn_cast<StateOp>(op))
      key = tg.internKey(TGKind::State, state.getNameAttr(), nullptr,
                         state.getLoc(), {});
    else if (isa<LoopBeginOp>(op))
      key = tg.internKey(TGKind::Loop, nullptr, nullptr, op.getLoc(), {});
    result.keys.push_back(key);
  }
  impl->traces.push_back(std::move(module));
  return result;
}

std::unique_ptr<rt::CompiledGraph>
Session::compile(const CompileOptions &options, std::string &error,
                 CompileStages *stages) {
  std::lock_guard<std::recursive_mutex> guard(impl->lock);
  MLIRContext *ctx = impl->ctx.get();
  DiagnosticCollector diags(ctx);
  Location loc = UnknownLoc::get(ctx);
  OwningOpRef<ModuleOp> module = ModuleOp::create(loc);
  OpBuilder b(module->getBodyRegion());
  bool keep = stages && options.keepStages;
  auto print = [&](std::string &out) {
    llvm::raw_string_ostream os(out);
    module->print(os);
  };
  if (keep)
    stages->traceGraph = traceGraphText();
  CaseAssignmentOptions caOptions;
  caOptions.maxDuplication = options.maxDuplication;
  FailureOr<GraphOp> graph =
      assignCases(*impl->graph, b, loc, "merged", caOptions);
  if (failed(graph)) {
    error = diags.take("case assignment failed");
    return nullptr;
  }
  unrolled.clear();
  if (auto pairs = graph->getUnrolledLoopsAttr())
    for (Attribute a : pairs)
      unrolled.push_back(cast<DenseI64ArrayAttr>(a)[0]);
  if (keep)
    print(stages->graph);

  PassManager pm(ctx);
  pm.addPass(createTerraMarkStateUpdates());
  pm.addPass(createTerraConvertToLinalg());
  if (failed(pm.run(*module))) {
    error = diags.take("conversion to linalg failed");
    return nullptr;
  }
  if (keep)
    print(stages->linalg);
  PassManager lower(ctx);
  GPUPipelineOptions gpu;
  gpu.chip = options.gpuChip;
  if (!buildGraphPipeline(lower, options.device, gpu)) {
    error = "unknown device '" + options.device + "' (cpu or cuda)";
    return nullptr;
  }
  if (failed(lower.run(*module))) {
    error = diags.take(options.device == "cpu" ? "lowering for the CPU failed"
                                               : "lowering for the GPU failed");
    return nullptr;
  }
  if (keep)
    print(stages->lowered);
  std::unique_ptr<rt::CompiledGraph> compiled =
      rt::CompiledGraph::compile(*module, "merged", options.cacheDir, error);
  if (!compiled && error.empty())
    error = diags.take("JIT compilation failed");
  return compiled;
}

std::string Session::traceGraphText() const {
  std::lock_guard<std::recursive_mutex> guard(impl->lock);
  auto [module, op] = impl->emitTraceGraph();
  std::string text;
  llvm::raw_string_ostream os(text);
  module->print(os);
  return text;
}

std::string Session::traceGraphDot() const {
  std::lock_guard<std::recursive_mutex> guard(impl->lock);
  auto [module, op] = impl->emitTraceGraph();
  std::string text;
  llvm::raw_string_ostream os(text);
  printTraceGraphAsDot(op, os);
  return text;
}

std::string Session::describeKey(int64_t key) const {
  std::lock_guard<std::recursive_mutex> guard(impl->lock);
  const TypedTraceGraph::KeyInfo &info = impl->graph->keyInfo(KeyId(key));
  std::string text;
  llvm::raw_string_ostream os(text);
  switch (info.kind) {
  case TGKind::Op:
    os << info.name.getValue();
    if (info.args)
      os << " " << info.args;
    break;
  case TGKind::Feed:
    os << "feed";
    break;
  case TGKind::State:
    os << "state " << info.name.getValue();
    break;
  default:
    os << "loop";
    break;
  }
  if (info.kind != TGKind::State)
    os << " at " << info.loc;
  return text;
}

std::pair<std::string, std::string>
Session::keyNameAndArgs(int64_t key) const {
  std::lock_guard<std::recursive_mutex> guard(impl->lock);
  const TypedTraceGraph::KeyInfo &info = impl->graph->keyInfo(KeyId(key));
  std::pair<std::string, std::string> out;
  if (info.name)
    out.first = info.name.getValue().str();
  if (info.args) {
    llvm::raw_string_ostream os(out.second);
    Attribute(info.args).print(os);
  }
  return out;
}

std::vector<int64_t> Session::nodeShape(int64_t node, unsigned result) const {
  std::lock_guard<std::recursive_mutex> guard(impl->lock);
  llvm::ArrayRef<Type> types = impl->graph->nodeTypes(NodeId(node));
  std::vector<int64_t> shape;
  if (result < types.size())
    if (auto t = dyn_cast<RankedTensorType>(types[result]))
      for (int64_t d : t.getShape())
        shape.push_back(ShapedType::isDynamic(d) ? -1 : d);
  return shape;
}

std::string Session::nodeLocation(int64_t node) const {
  std::lock_guard<std::recursive_mutex> guard(impl->lock);
  std::string text;
  llvm::raw_string_ostream os(text);
  os << impl->graph->nodeLoc(NodeId(node));
  return text;
}

} // namespace terra
