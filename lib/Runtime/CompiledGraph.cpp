//===- CompiledGraph.cpp - JIT compilation with an on-disk object cache ---===//
//
// The module is translated to LLVM IR, split and compiled into object files
// on several threads (ParallelCompile.cpp) and linked by ORC's LLJIT. A
// module already compiled in an earlier process is not compiled again: its
// object files are stored under the cache directory, keyed by a hash of the
// module, and loaded directly.
//
//===----------------------------------------------------------------------===//
#include "CompileInternal.h"

#include "mlir/ExecutionEngine/ExecutionEngine.h"
#include "mlir/ExecutionEngine/OptUtils.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Target/LLVMIR/Dialect/All.h"
#include "mlir/Target/LLVMIR/Export.h"
#ifdef TERRA_ENABLE_CUDA
#include "terra/Runtime/Cuda.h"
#endif

#include "llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h"
#include "llvm/ExecutionEngine/JITLink/JITLink.h"
#include "llvm/ExecutionEngine/Orc/LLJIT.h"
#include "llvm/ExecutionEngine/Orc/ObjectLinkingLayer.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/TargetParser/Host.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/xxhash.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <thread>
#include <cstring>
#include <fstream>
#include <mutex>
#include <unistd.h>

// Built with ThreadSanitizer (the `tsan` preset): JIT-compiled graphs are
// instrumented too, see instrumentForThreadSanitizer.
#if defined(__SANITIZE_THREAD__)
#define TERRA_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define TERRA_TSAN 1
#endif
#endif
#ifdef TERRA_TSAN
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Transforms/Instrumentation/ThreadSanitizer.h"
#endif

using namespace terra::rt;
using namespace mlir;

#ifdef TERRA_TSAN
/// Instruments a graph's LLVM module for ThreadSanitizer. Without it TSan
/// sees none of the graph's loads and stores, only those of the runtime
/// around it: a race between the graph computing on a buffer and the host
/// touching the same memory (a feed, a fetched buffer) would go unreported.
/// The instrumented code calls __tsan_* from the process (libtsan), and the
/// `setjmp`/`longjmp` used for cancellation are intercepted by TSan, which
/// unwinds its shadow stack over the instrumented graph frames.
static void instrumentForThreadSanitizer(llvm::Module &m) {
  for (llvm::Function &f : m)
    if (!f.isDeclaration())
      f.addFnAttr(llvm::Attribute::SanitizeThread);
  llvm::LoopAnalysisManager lam;
  llvm::FunctionAnalysisManager fam;
  llvm::CGSCCAnalysisManager cgam;
  llvm::ModuleAnalysisManager mam;
  llvm::PassBuilder pb;
  pb.registerModuleAnalyses(mam);
  pb.registerCGSCCAnalyses(cgam);
  pb.registerFunctionAnalyses(fam);
  pb.registerLoopAnalyses(lam);
  pb.crossRegisterProxies(lam, fam, cgam, mam);
  llvm::ModulePassManager mpm;
  mpm.addPass(llvm::ModuleThreadSanitizerPass());
  mpm.addPass(
      llvm::createModuleToFunctionPassAdaptor(llvm::ThreadSanitizerPass()));
  mpm.run(m, mam);
}
#endif

struct CompiledGraph::ObjectJit {
  std::unique_ptr<llvm::orc::LLJIT> jit;
  /// The module's destructors (GPU graphs: unload the kernel image), run
  /// before the JIT goes.
  std::vector<void (*)()> destructors;
  ~ObjectJit() {
    for (auto it = destructors.rbegin(); it != destructors.rend(); ++it)
      (*it)();
  }
};

CompiledGraph::~CompiledGraph() = default;

/// Global constructors and destructors run neither in a plain LLJIT over
/// object files (no ORC runtime) nor at all unless named: GPU graphs load
/// their kernel image in one (`<module>_kernel_load`, made by the
/// translation of `gpu.binary`). Each becomes an external function
/// `terra.ctor.<i>` / `terra.dtor.<i>` (in priority order) that the loader
/// calls after linking and before unloading; the global arrays go.
static void exposeStructors(llvm::Module &m) {
  for (auto [array, prefix] : {std::pair<const char *, const char *>{
                                   "llvm.global_ctors", "terra.ctor."},
                               {"llvm.global_dtors", "terra.dtor."}}) {
    llvm::GlobalVariable *gv = m.getGlobalVariable(array);
    if (!gv)
      continue;
    std::vector<std::pair<uint64_t, llvm::Function *>> entries;
    if (auto *init =
            llvm::dyn_cast_or_null<llvm::ConstantArray>(gv->getInitializer()))
      for (llvm::Value *op : init->operands()) {
        auto *entry = llvm::cast<llvm::ConstantStruct>(op);
        auto *prio = llvm::cast<llvm::ConstantInt>(entry->getOperand(0));
        if (auto *f = llvm::dyn_cast<llvm::Function>(entry->getOperand(1)))
          entries.push_back({prio->getZExtValue(), f});
      }
    std::stable_sort(entries.begin(), entries.end(),
                     [](auto &a, auto &b) { return a.first < b.first; });
    gv->eraseFromParent();
    for (auto [i, entry] : llvm::enumerate(entries)) {
      entry.second->setName(prefix + std::to_string(i));
      entry.second->setLinkage(llvm::GlobalValue::ExternalLinkage);
      entry.second->setVisibility(llvm::GlobalValue::DefaultVisibility);
    }
  }
}

/// The functions `<prefix>0`, `<prefix>1`, ... that exposeStructors made.
static std::vector<void (*)()> structors(llvm::orc::LLJIT &jit,
                                         const std::string &prefix) {
  std::vector<void (*)()> out;
  for (;;) {
    auto sym = jit.lookup(prefix + std::to_string(out.size()));
    if (!sym) {
      llvm::consumeError(sym.takeError());
      return out;
    }
    out.push_back(sym->toPtr<void (*)()>());
  }
}

static std::string errorString(llvm::Error err) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << err;
  return s;
}

static llvm::orc::SymbolMap symbolMap(llvm::orc::MangleAndInterner &mangle) {
  llvm::orc::SymbolMap map;
  std::vector<std::pair<const char *, void *>> syms =
      terra::rt::detail::runtimeSymbols();
  terra::rt::detail::appendLibrarySymbols(syms);
#ifdef TERRA_ENABLE_CUDA
  // GPU graphs: MLIR's mgpu* ABI and the cuBLAS library calls.
  for (auto entry : terra::cuda::entryPoints())
    syms.push_back(entry);
#endif
  for (auto [name, addr] : syms)
    map[mangle(name)] = {llvm::orc::ExecutorAddr::fromPtr(addr),
                         llvm::JITSymbolFlags::Exported};
#ifdef TERRA_TSAN
  // LLVM's TSan pass calls __tsan_mem* for memory intrinsics; GCC's libtsan
  // has no such entry points, but intercepts (and checks) the libc ones.
  for (auto [name, addr] :
       {std::pair<const char *, void *>{"__tsan_memcpy", (void *)&memcpy},
        {"__tsan_memmove", (void *)&memmove},
        {"__tsan_memset", (void *)&memset}})
    map[mangle(name)] = {llvm::orc::ExecutorAddr::fromPtr(addr),
                         llvm::JITSymbolFlags::Exported};
#endif
  return map;
}

/// With TERRA_PERF_MAP set, every function the JIT links is appended to
/// /tmp/perf-<pid>.map, where `perf report` finds the names of JIT-compiled
/// code (otherwise bare addresses): the outlined loop nests of a graph
/// (merged_loopN) show up by name in a profile of a co-executed step.
namespace {
class PerfMapPlugin : public llvm::orc::ObjectLinkingLayer::Plugin {
public:
  void modifyPassConfig(llvm::orc::MaterializationResponsibility &,
                        llvm::jitlink::LinkGraph &,
                        llvm::jitlink::PassConfiguration &config) override {
    config.PostFixupPasses.push_back([](llvm::jitlink::LinkGraph &g) {
      std::string lines;
      for (llvm::jitlink::Symbol *sym : g.defined_symbols()) {
        llvm::orc::MemProt prot = sym->getBlock().getSection().getMemProt();
        if (!sym->hasName() || !sym->getSize() ||
            (prot & llvm::orc::MemProt::Exec) == llvm::orc::MemProt::None)
          continue;
        lines +=
            llvm::formatv("{0:x-} {1:x-} {2}\n", sym->getAddress().getValue(),
                          sym->getSize(), *sym->getName())
                .str();
      }
      static std::mutex mu;
      std::lock_guard<std::mutex> lock(mu);
      std::ofstream(llvm::formatv("/tmp/perf-{0}.map", ::getpid()).str(),
                    std::ios::app)
          << lines;
      return llvm::Error::success();
    });
  }
  llvm::Error
  notifyFailed(llvm::orc::MaterializationResponsibility &) override {
    return llvm::Error::success();
  }
  llvm::Error notifyRemovingResources(llvm::orc::JITDylib &,
                                      llvm::orc::ResourceKey) override {
    return llvm::Error::success();
  }
  void notifyTransferringResources(llvm::orc::JITDylib &,
                                   llvm::orc::ResourceKey,
                                   llvm::orc::ResourceKey) override {}
};
} // namespace

/// Threads that compile a graph: TERRA_COMPILE_THREADS, or one per core
/// (at most 8).
static unsigned compileThreads() {
  if (const char *env = std::getenv("TERRA_COMPILE_THREADS")) {
    int n = std::atoi(env);
    if (n > 0)
      return n;
  }
  return std::clamp(std::thread::hardware_concurrency(), 1u, 8u);
}

/// A cache entry holds every object of a graph: a magic line, then per
/// object its size (8 bytes, little endian) and its bytes.
static constexpr llvm::StringLiteral kCacheMagic = "terra-objects-1\n";

static void packObjects(
    const std::vector<std::unique_ptr<llvm::MemoryBuffer>> &objects,
    llvm::raw_ostream &os) {
  os << kCacheMagic;
  for (const auto &object : objects) {
    uint64_t size = object->getBufferSize();
    char bytes[8];
    for (int i = 0; i < 8; ++i)
      bytes[i] = char(size >> (8 * i));
    os.write(bytes, 8);
    os << object->getBuffer();
  }
}

static bool
unpackObjects(const llvm::MemoryBuffer &file,
              std::vector<std::unique_ptr<llvm::MemoryBuffer>> &objects) {
  llvm::StringRef data = file.getBuffer();
  if (!data.consume_front(kCacheMagic))
    return false;
  while (!data.empty()) {
    if (data.size() < 8)
      return false;
    uint64_t size = 0;
    for (int i = 0; i < 8; ++i)
      size |= uint64_t(uint8_t(data[i])) << (8 * i);
    data = data.drop_front(8);
    if (data.size() < size)
      return false;
    // One name per object (the JIT names initializer symbols after it).
    objects.push_back(llvm::MemoryBuffer::getMemBufferCopy(
        data.take_front(size),
        "terra-cached-object-" + std::to_string(objects.size())));
    data = data.drop_front(size);
  }
  return !objects.empty();
}

std::unique_ptr<CompiledGraph> CompiledGraph::compile(ModuleOp module,
                                                      const std::string &name,
                                                      const std::string &cacheDir,
                                                      std::string &error) {
  static bool initialized = [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
    return true;
  }();
  (void)initialized;
  auto start = std::chrono::steady_clock::now();
  std::unique_ptr<CompiledGraph> g(new CompiledGraph());

  if (auto states = module->getAttrOfType<ArrayAttr>("terra.states"))
    for (Attribute a : states)
      g->states.push_back(cast<StringAttr>(a).str());
  if (auto ops = module->getAttrOfType<ArrayAttr>("terra.host_ops"))
    for (Attribute a : ops) {
      auto dict = cast<DictionaryAttr>(a);
      HostOpInfo info;
      info.name = dict.getAs<StringAttr>("name").str();
      if (Attribute args = dict.get("args")) {
        llvm::raw_string_ostream os(info.args);
        args.print(os);
      }
      g->hostOpInfo.push_back(std::move(info));
    }
  if (auto feeds = module->getAttrOfType<ArrayAttr>("terra.feed_types"))
    for (Attribute a : feeds) {
      auto entry = dyn_cast<ArrayAttr>(a);
      if (!entry || entry.size() != 3)
        continue;
      auto id = dyn_cast<IntegerAttr>(entry[0]);
      auto dtype = dyn_cast<StringAttr>(entry[1]);
      auto sizes = dyn_cast<DenseI64ArrayAttr>(entry[2]);
      DType parsed;
      if (id && dtype && sizes && parseDType(dtype.getValue().str(), parsed))
        g->feeds[id.getInt()] =
            FeedType{parsed, std::vector<int64_t>(sizes.asArrayRef().begin(),
                                                  sizes.asArrayRef().end())};
    }
  if (auto donated = module->getAttrOfType<ArrayAttr>("terra.donated_states"))
    for (Attribute a : donated)
      g->donated.push_back(cast<IntegerAttr>(a).getInt());
  if (auto msgs = module->getAttrOfType<ArrayAttr>("terra.asserts"))
    for (Attribute a : msgs)
      g->asserts.push_back(cast<StringAttr>(a).str());

  {
    // Builtin and LLVM, and for GPU graphs (terra-gpu-pipeline) the
    // `gpu.binary` kernel images, embedded by the offloading translation.
    DialectRegistry registry;
    registerAllGPUToLLVMIRTranslations(registry);
    module.getContext()->appendDialectRegistry(registry);
  }

  std::string text;
  {
    llvm::raw_string_ostream os(text);
    module.print(os, OpPrintingFlags().enableDebugInfo(false));
  }
  // Objects are compiled for the host CPU: it is part of the key.
  text += llvm::sys::getHostCPUName();
#ifdef TERRA_TSAN
  text += "+tsan"; // instrumented objects need libtsan
#endif
  std::string key = llvm::utohexstr(llvm::xxh3_64bits(text)) + "-" + name;
  llvm::SmallString<256> objPath(cacheDir);
  if (!cacheDir.empty())
    llvm::sys::path::append(objPath, key + ".objs");

  std::string packed = "_mlir_" + name;
  // Adds the objects to a fresh LLJIT and looks the entry point up.
  auto load = [&](std::vector<std::unique_ptr<llvm::MemoryBuffer>> objects)
      -> llvm::Error {
    auto jit = llvm::orc::LLJITBuilder().create();
    if (!jit)
      return jit.takeError();
    if (std::getenv("TERRA_PERF_MAP"))
      if (auto *layer = llvm::dyn_cast<llvm::orc::ObjectLinkingLayer>(
              &(*jit)->getObjLinkingLayer()))
        layer->addPlugin(std::make_shared<PerfMapPlugin>());
    llvm::orc::MangleAndInterner mangle((*jit)->getExecutionSession(),
                                        (*jit)->getDataLayout());
    if (llvm::Error err = (*jit)->getMainJITDylib().define(
            llvm::orc::absoluteSymbols(symbolMap(mangle))))
      return err;
    for (auto &object : objects)
      if (llvm::Error err = (*jit)->addObjectFile(std::move(object)))
        return err;
    auto sym = (*jit)->lookup(packed);
    if (!sym)
      return sym.takeError();
    g->objectJit = std::make_unique<ObjectJit>();
    // Constructors now, in order (exposeStructors); destructors at unload.
    for (void (*ctor)() : structors(**jit, "terra.ctor."))
      ctor();
    g->objectJit->destructors = structors(**jit, "terra.dtor.");
    g->objectJit->jit = std::move(*jit);
    g->entry = sym->toPtr<void (*)(void **)>();
    return llvm::Error::success();
  };

  if (!cacheDir.empty() && llvm::sys::fs::exists(objPath)) {
    auto buffer = llvm::MemoryBuffer::getFile(objPath);
    std::vector<std::unique_ptr<llvm::MemoryBuffer>> objects;
    if (buffer && unpackObjects(**buffer, objects)) {
      if (llvm::Error err = load(std::move(objects))) {
        llvm::consumeError(std::move(err));
        g->objectJit.reset();
        g->entry = nullptr;
      } else {
        g->cached = true;
      }
    }
    // A stale or unreadable cache entry is simply recompiled below.
  }

  if (!g->entry) {
    // Optimize for the host CPU: without a target machine LLVM's cost
    // models see no vector units and every loop stays scalar.
    auto tmBuilder = llvm::orc::JITTargetMachineBuilder::detectHost();
    if (!tmBuilder) {
      error = "cannot detect the host CPU: " + errorString(tmBuilder.takeError());
      return nullptr;
    }
    auto tm = tmBuilder->createTargetMachine();
    if (!tm) {
      error = "cannot create a target machine: " + errorString(tm.takeError());
      return nullptr;
    }
    auto t0 = std::chrono::steady_clock::now();
    llvm::LLVMContext llvmContext;
    std::unique_ptr<llvm::Module> llvmModule =
        translateModuleToLLVMIR(module, llvmContext, name);
    if (!llvmModule) {
      error = "JIT compilation failed: cannot translate the module to LLVM IR";
      return nullptr;
    }
    exposeStructors(*llvmModule);
    llvmModule->setDataLayout((*tm)->createDataLayout());
    llvmModule->setTargetTriple((*tm)->getTargetTriple());
    auto t1 = std::chrono::steady_clock::now();
    std::function<void(llvm::Module &)> beforeOptimizing;
#ifdef TERRA_TSAN
    // Before optimizing: TSan's pass skips accesses wider than 16 bytes,
    // i.e. the AVX loads and stores of vectorized loops.
    beforeOptimizing = instrumentForThreadSanitizer;
#endif
    auto objects = detail::compileModuleInParallel(
        std::move(llvmModule), name, compileThreads(), *tmBuilder,
        beforeOptimizing);
    if (!objects) {
      error = "JIT compilation failed: " + errorString(objects.takeError());
      return nullptr;
    }
    auto t2 = std::chrono::steady_clock::now();
    if (!cacheDir.empty()) {
      // A unique temporary name: threads or processes compiling the same
      // module at once must not write one file together; the rename makes
      // the entry appear whole.
      llvm::sys::fs::create_directories(cacheDir);
      llvm::SmallString<256> tmp;
      llvm::sys::fs::createUniquePath(objPath + ".%%%%%%%%.tmp", tmp,
                                      /*MakeAbsolute=*/false);
      std::error_code ec;
      {
        llvm::raw_fd_ostream os(tmp, ec);
        if (!ec)
          packObjects(*objects, os);
      }
      if (ec || llvm::sys::fs::rename(tmp, objPath))
        llvm::sys::fs::remove(tmp);
    }
    size_t count = objects->size();
    if (llvm::Error err = load(std::move(*objects))) {
      error = "JIT linking failed: " + errorString(std::move(err));
      return nullptr;
    }
    if (std::getenv("TERRA_COMPILE_TIMING")) {
      auto s = [](auto a, auto b) {
        return std::chrono::duration<double>(b - a).count();
      };
      llvm::errs() << "terra: compiled '" << name << "': to LLVM IR "
                   << s(t0, t1) << " s, optimize + codegen " << s(t1, t2)
                   << " s (" << count << " objects, " << compileThreads()
                   << " threads), link " << s(t2, std::chrono::steady_clock::now())
                   << " s\n";
    }
  }
  g->seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                             start)
                   .count();
  return g;
}
