//===- terra-run-object.cpp - Run a graph compiled ahead of time ----------===//
//
//   terra-run-object graph.so [--graph step] [--device cpu|cuda]
//                    [--memory device|managed]
//                    [--feed <id>=x.npy]... [--state <index>=s.npy]...
//                    [--case <id>=<index>]... [--loop <id>=<0|1>]...
//                    [--fetch-dir out/] [--repeat N] [--timing]
//
// Loads a shared library holding the host code of a lowered `terra.graph`
// (terra-opt -terra-gpu-pipeline or -terra-cpu-pipeline, terra-translate
// --mlir-to-llvmir, llc, then `c++ -shared`), runs one iteration per repeat
// with the given feeds, state and control decisions, and prints every
// fetched value. The graph's references to the runtime (terra_rt_*,
// buffers; mgpu* and cuBLAS from libTerraCudaRuntime.so) resolve against
// this executable, which needs neither MLIR nor LLVM: this is how graphs
// compiled here run on the GPU machines (docs/gpu.md). With `--device
// cuda`, the graph's buffers are device memory from a caching allocator,
// feeds, state and host-op results are copied in and fetches copied out
// (`--memory managed`: CUDA managed memory, fetched without a copy).
//
//===----------------------------------------------------------------------===//
#include "terra/Runtime/GraphRunner.h"
#include "terra/Runtime/Npy.h"

#ifdef TERRA_ENABLE_CUDA
#include "terra/Runtime/Cuda.h"
#endif

#include <dlfcn.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

using namespace terra::rt;

namespace {

int fail(const std::string &msg) {
  std::fprintf(stderr, "terra-run-object: %s\n", msg.c_str());
  return 1;
}

const char *kUsage =
    "usage: terra-run-object graph.so [--graph NAME] [--device cpu|cuda]\n"
    "         [--memory device|managed]\n"
    "         [--feed ID=file.npy]... [--state INDEX=file.npy]...\n"
    "         [--case ID=INDEX]... [--loop ID=0|1]...\n"
    "         [--fetch-dir DIR] [--repeat N] [--timing]\n";

/// Splits "<int>=<rest>"; false if `s` has no '=' or no integer before it.
bool splitId(const std::string &s, int64_t &id, std::string &rest) {
  size_t eq = s.find('=');
  if (eq == std::string::npos || eq == 0)
    return false;
  char *end = nullptr;
  id = std::strtoll(s.c_str(), &end, 10);
  if (end != s.c_str() + eq)
    return false;
  rest = s.substr(eq + 1);
  return true;
}

#ifdef TERRA_ENABLE_CUDA
/// Errors of the CUDA entry points during a run (the handler runs inside
/// them, so it only records; the run's result is checked afterwards).
std::vector<std::string> &cudaErrors() {
  static std::vector<std::string> errors;
  return errors;
}
void recordCudaError(const char *message) { cudaErrors().push_back(message); }
void *managedAlloc(size_t size, size_t) {
  return terra::cuda::allocManaged(size);
}
void *deviceAlloc(size_t size, size_t) {
  return terra::cuda::allocDevice(size);
}
#endif

} // namespace

int main(int argc, char **argv) {
  std::string library, graphName = "step", device = "cpu", fetchDir,
                       memoryKind = "device";
  std::vector<std::pair<int64_t, std::string>> feedFiles, stateFiles;
  std::vector<std::tuple<bool, int64_t, int64_t>> decisions;
  int repeat = 1;
  bool timing = false;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&](std::string &out) {
      if (i + 1 >= argc)
        return false;
      out = argv[++i];
      return true;
    };
    std::string v;
    int64_t id = 0;
    std::string rest;
    if (arg == "--help" || arg == "-h") {
      std::printf("%s", kUsage);
      return 0;
    }
    if (arg == "--timing") {
      timing = true;
    } else if (arg == "--graph" || arg == "--device" || arg == "--memory" ||
               arg == "--fetch-dir" || arg == "--repeat" || arg == "--feed" ||
               arg == "--state" || arg == "--case" || arg == "--loop") {
      if (!value(v))
        return fail(arg + " needs a value\n" + kUsage);
      if (arg == "--graph") {
        graphName = v;
      } else if (arg == "--device") {
        device = v;
      } else if (arg == "--memory") {
        memoryKind = v;
      } else if (arg == "--fetch-dir") {
        fetchDir = v;
      } else if (arg == "--repeat") {
        repeat = std::atoi(v.c_str());
        if (repeat < 1)
          return fail("--repeat expects a positive count, got '" + v + "'");
      } else if (!splitId(v, id, rest)) {
        return fail(arg + " expects <integer>=<value>, got '" + v + "'");
      } else if (arg == "--feed") {
        feedFiles.push_back({id, rest});
      } else if (arg == "--state") {
        stateFiles.push_back({id, rest});
      } else {
        char *end = nullptr;
        int64_t n = std::strtoll(rest.c_str(), &end, 10);
        if (rest.empty() || *end)
          return fail(arg + " expects <id>=<integer>, got '" + v + "'");
        decisions.push_back({arg == "--case", id, n});
      }
    } else if (!arg.empty() && arg[0] == '-') {
      return fail("unknown option '" + arg + "'\n" + kUsage);
    } else if (library.empty()) {
      library = arg;
    } else {
      return fail("one graph library expected, got '" + library + "' and '" +
                  arg + "'");
    }
  }
  if (library.empty())
    return fail(std::string("no graph library given\n") + kUsage);
  if (device != "cpu" && device != "cuda")
    return fail("--device expects cpu or cuda, got '" + device + "'");
  if (memoryKind != "device" && memoryKind != "managed")
    return fail("--memory expects device or managed, got '" + memoryKind + "'");

  RunState::BufferMemory memory;
#ifdef TERRA_ENABLE_CUDA
  // Any failing CUDA entry point fails the command (a GPU graph's kernels
  // not loading or not launching must not leave zeros behind silently).
  terra::cuda::setErrorHandler(recordCudaError);
#endif
  if (device == "cuda") {
#ifdef TERRA_ENABLE_CUDA
    std::string why;
    if (!terra::cuda::available(&why))
      return fail("--device cuda: " + why);
    memory.stageInputs = true;
    memory.checkFlag = terra::cuda::runCheckFlag;
    if (memoryKind == "managed") {
      memory.alloc = managedAlloc;
      memory.free = terra::cuda::freeManaged;
    } else {
      memory.alloc = deviceAlloc;
      memory.free = terra::cuda::freeDevice;
      memory.toDevice = terra::cuda::copyToDevice;
      memory.toHost = terra::cuda::copyToHost;
      // One stream per run: launches queue back to back (managed memory
      // keeps a synchronized stream per launch: its fetches are read in
      // place by the host, without a copy that would wait).
      memory.beginStream = terra::cuda::beginRunStream;
      memory.syncStream = terra::cuda::syncRunStream;
      memory.endStream = terra::cuda::endRunStream;
    }
#else
    return fail("--device cuda: this build has no CUDA runtime "
                "(TERRA_ENABLE_CUDA=OFF)");
#endif
  }

  std::string error;
  std::vector<std::pair<int64_t, Tensor>> feeds;
  for (auto &[id, file] : feedFiles) {
    Tensor t;
    if (!readNpy(file, t, error))
      return fail(error);
    feeds.push_back({id, std::move(t)});
  }
  std::vector<Tensor> states;
  for (auto &[index, file] : stateFiles) {
    if (index < 0)
      return fail("--state index must be >= 0, got " + std::to_string(index));
    if (size_t(index) >= states.size())
      states.resize(index + 1);
    if (!readNpy(file, states[index], error))
      return fail(error);
  }

  // RTLD_NOW: a graph calling an entry point this runtime lacks fails here,
  // by name, instead of in the middle of a run. The graph's kernel images
  // load in its global constructors.
  // A bare file name is a path here, not a library for dlopen to search.
  if (library.find('/') == std::string::npos)
    library = "./" + library;
  void *handle = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle)
    return fail(std::string("cannot load the graph: ") + dlerror());
  auto graph = reinterpret_cast<void (*)()>(dlsym(handle, graphName.c_str()));
  if (!graph)
    return fail("'" + library + "' has no graph function '" + graphName +
                "' (see --graph)");
  // The messages of the graph's runtime checks (-terra-lower-graph emits
  // them as NUL-terminated strings, an empty one last).
  std::vector<std::string> checkMessages;
  if (auto *blob =
          static_cast<const char *>(dlsym(handle, "terra_check_messages")))
    for (const char *m = blob; *m; m += std::strlen(m) + 1)
      checkMessages.push_back(m);
#ifdef TERRA_ENABLE_CUDA
  if (!cudaErrors().empty())
    return fail(
        "loading the graph's kernels failed: " + cudaErrors().front() +
        (device == "cuda" ? "" : " (a GPU graph runs with --device cuda)"));
#endif

  for (int r = 0; r < repeat; ++r) {
    RunState run;
    run.memory = memory;
    run.states = states;
    for (auto &[id, t] : feeds)
      run.channels.sendFeed(id, t);
    for (auto [isCase, id, v] : decisions) {
      if (isCase)
        run.channels.sendCase(id, uint32_t(v));
      else
        run.channels.sendLoop(id, v != 0);
    }
    // Nothing more will come: a wait for a value not given fails the run
    // instead of blocking.
    run.channels.finishHost();
    auto start = std::chrono::steady_clock::now();
    runGraphFunction(graph, run, checkMessages);
    double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count();
#ifdef TERRA_ENABLE_CUDA
    if (!cudaErrors().empty())
      return fail("run failed in the CUDA runtime: " + cudaErrors().front());
#endif
    if (run.status != RunState::Status::Ok)
      return fail(run.status == RunState::Status::Cancelled
                      ? std::string("run cancelled")
                      : "run failed: " + run.error);
    if (timing)
      std::printf("run %d: %.6f s\n", r, seconds);
    if (r + 1 < repeat)
      continue;
    for (const Channels::Published &f : run.channels.published()) {
      std::printf("fetch %lld #%llu ", static_cast<long long>(f.point),
                  static_cast<unsigned long long>(f.instance));
      std::printf("%s\n", formatTensor(f.value, 16).c_str());
      if (!fetchDir.empty() &&
          !writeNpy(fetchDir + "/" + std::to_string(f.point) + "_" +
                        std::to_string(f.instance) + ".npy",
                    f.value, error))
        return fail(error);
    }
  }
  return 0;
}
