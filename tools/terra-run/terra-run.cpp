//===- terra-run.cpp - Run one iteration of a terra.graph -----------------===//
//
//   terra-run graph.mlir --feed 1=x.npy --state fc.weight=w.npy
//             --script control.txt [--fetch-dir out/] [--cache-dir dir]
//
// Compiles the module's terra.graph for the CPU, runs one iteration with
// the given feeds, persistent state and control script, and prints every
// fetched value. The script holds one decision per line, in any order
// across points and in order within a point: `case <id> <index>` or
// `loop <id> <0|1>`; `#` starts a comment. Tests and debugging use it.
//
//===----------------------------------------------------------------------===//
#include "terra/Dialect/TerraOps.h"
#include "terra/Passes.h"
#include "terra/Runtime/GraphRunner.h"
#include "terra/Runtime/Npy.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

#include <fstream>
#include <sstream>

using namespace llvm;
using namespace terra::rt;

static cl::opt<std::string> inputFile(cl::Positional, cl::desc("<graph.mlir>"),
                                      cl::Required);
static cl::list<std::string> feeds("feed", cl::desc("<id>=<file.npy>, in order per id"));
static cl::list<std::string> states("state", cl::desc("<name>=<file.npy>"));
static cl::opt<std::string> script("script", cl::desc("Control script (case/loop decisions)"));
static cl::opt<std::string> fetchDir("fetch-dir", cl::desc("Write fetches as <id>_<instance>.npy here"));
static cl::opt<std::string> cacheDir("cache-dir", cl::desc("On-disk object cache"), cl::init(""));
static cl::opt<std::string> graphName("graph", cl::desc("Graph to run (default: the first)"));
static cl::opt<int> repeat("repeat", cl::desc("Run the iteration this many times"), cl::init(1));
static cl::opt<bool> printTiming("timing", cl::desc("Print compile and run times"));
static cl::opt<std::string> pipeline(
    "pipeline",
    cl::desc("cpu (default), or gpu-loops: the GPU pipeline's kernels as "
             "loops on the CPU (terra::buildGPULoopsOnCPUPipeline, tests)"),
    cl::init("cpu"));

static int fail(const Twine &msg) {
  errs() << "terra-run: " << msg << "\n";
  return 1;
}

int main(int argc, char **argv) {
  InitLLVM init(argc, argv);
  cl::ParseCommandLineOptions(argc, argv, "Run one iteration of a terra.graph\n");

  mlir::DialectRegistry registry;
  mlir::registerAllDialects(registry);
  mlir::registerAllExtensions(registry);
  registry.insert<terra::TerraDialect>();
  mlir::MLIRContext ctx(registry);
  ctx.loadAllAvailableDialects();

  SourceMgr sm;
  mlir::SourceMgrDiagnosticHandler handler(sm, &ctx);
  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::parseSourceFile<mlir::ModuleOp>(inputFile, sm, &ctx);
  if (!module)
    return fail("cannot parse " + inputFile);

  std::string name = graphName;
  if (name.empty()) {
    for (auto g : module->getOps<terra::GraphOp>()) {
      name = g.getSymName().str();
      break;
    }
    if (name.empty())
      return fail(inputFile + " has no terra.graph");
  }

  mlir::PassManager pm(&ctx);
  pm.addPass(terra::createTerraMarkStateUpdates());
  pm.addPass(terra::createTerraConvertToLinalg());
  if (pipeline == "cuda" || !terra::buildGraphPipeline(pm, pipeline))
    return fail("unknown --pipeline '" + pipeline + "' (cpu or gpu-loops)");
  if (mlir::failed(pm.run(*module)))
    return fail("lowering failed");

  std::string error;
  auto graph = CompiledGraph::compile(*module, name, cacheDir, error);
  if (!graph)
    return fail(error);
  if (printTiming)
    outs() << "compile " << graph->compileSeconds() << " s"
           << (graph->loadedFromCache() ? " (cached)" : "") << "\n";

  // Inputs.
  std::vector<std::pair<int64_t, Tensor>> feedValues;
  for (const std::string &f : feeds) {
    size_t eq = f.find('=');
    if (eq == std::string::npos)
      return fail("--feed expects <id>=<file.npy>, got '" + f + "'");
    Tensor t;
    if (!readNpy(f.substr(eq + 1), t, error))
      return fail(error);
    feedValues.push_back({std::stoll(f.substr(0, eq)), std::move(t)});
  }
  std::vector<Tensor> stateValues(graph->stateNames().size());
  for (const std::string &s : states) {
    size_t eq = s.find('=');
    if (eq == std::string::npos)
      return fail("--state expects <name>=<file.npy>, got '" + s + "'");
    std::string sname = s.substr(0, eq);
    auto it = std::find(graph->stateNames().begin(), graph->stateNames().end(), sname);
    if (it == graph->stateNames().end())
      return fail("the graph reads no state named '" + sname + "'");
    if (!readNpy(s.substr(eq + 1), stateValues[it - graph->stateNames().begin()], error))
      return fail(error);
  }
  std::vector<std::tuple<bool, int64_t, int64_t>> decisions;
  if (!script.empty()) {
    std::ifstream in(script);
    if (!in)
      return fail("cannot open script " + script);
    std::string line;
    int lineNo = 0;
    while (std::getline(in, line)) {
      ++lineNo;
      line = line.substr(0, line.find('#'));
      std::istringstream ls(line);
      std::string kind;
      int64_t id, value;
      if (!(ls >> kind))
        continue;
      if ((kind != "case" && kind != "loop") || !(ls >> id >> value))
        return fail(script + ":" + Twine(lineNo) +
                    ": expected 'case <id> <index>' or 'loop <id> <0|1>'");
      decisions.push_back({kind == "case", id, value});
    }
  }

  GraphRunner runner(*graph);
  for (int r = 0; r < repeat; ++r) {
    auto run = std::make_shared<RunState>();
    run->states = stateValues;
    for (auto &[id, t] : feedValues)
      run->channels.sendFeed(id, t);
    for (auto [isCase, id, v] : decisions) {
      if (isCase)
        run->channels.sendCase(id, uint32_t(v));
      else
        run->channels.sendLoop(id, v != 0);
    }
    runner.start(run);
    std::shared_ptr<RunState> done = runner.wait();
    if (done->status != RunState::Status::Ok)
      return fail(done->status == RunState::Status::Cancelled
                      ? std::string("run cancelled (a feed, case or loop "
                                    "decision is missing?)")
                      : "run failed: " + done->error);
    if (printTiming)
      outs() << "run " << done->execSeconds << " s\n";
    if (r + 1 < repeat)
      continue;
    // Every published fetch, in point order.
    for (const Channels::Published &f : done->channels.published()) {
      outs() << "fetch " << f.point << " #" << f.instance << " ";
      outs() << formatTensor(f.value) << "\n";
      if (!fetchDir.empty() &&
          !writeNpy(fetchDir + "/" + std::to_string(f.point) + "_" +
                        std::to_string(f.instance) + ".npy",
                    f.value, error))
        return fail(error);
    }
  }
  return 0;
}
