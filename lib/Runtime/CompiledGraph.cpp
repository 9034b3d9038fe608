//===- CompiledGraph.cpp - JIT compilation with an on-disk object cache ---===//
//
// A module already compiled in an earlier process is not compiled again:
// the object file MLIR's ExecutionEngine produced is stored under the cache
// directory, keyed by a hash of the module, and loaded with ORC directly.
//
//===----------------------------------------------------------------------===//
#include "RuntimeInternal.h"

#include "mlir/ExecutionEngine/ExecutionEngine.h"
#include "mlir/ExecutionEngine/OptUtils.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"

#include "llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h"
#include "llvm/ExecutionEngine/Orc/LLJIT.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/TargetParser/Host.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/xxhash.h"

#include <chrono>
#include <cstring>

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
};

CompiledGraph::~CompiledGraph() = default;

static std::string errorString(llvm::Error err) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << err;
  return s;
}

static llvm::orc::SymbolMap symbolMap(llvm::orc::MangleAndInterner &mangle) {
  llvm::orc::SymbolMap map;
  for (auto [name, addr] : terra::rt::detail::runtimeSymbols())
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
  if (auto msgs = module->getAttrOfType<ArrayAttr>("terra.asserts"))
    for (Attribute a : msgs)
      g->asserts.push_back(cast<StringAttr>(a).str());

  registerBuiltinDialectTranslation(*module.getContext());
  registerLLVMDialectTranslation(*module.getContext());

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
    llvm::sys::path::append(objPath, key + ".o");

  std::string packed = "_mlir_" + name;
  if (!cacheDir.empty() && llvm::sys::fs::exists(objPath)) {
    auto buffer = llvm::MemoryBuffer::getFile(objPath);
    auto jit = llvm::orc::LLJITBuilder().create();
    if (buffer && jit) {
      llvm::orc::MangleAndInterner mangle((*jit)->getExecutionSession(),
                                          (*jit)->getDataLayout());
      llvm::Error err = (*jit)->getMainJITDylib().define(
          llvm::orc::absoluteSymbols(symbolMap(mangle)));
      if (!err)
        err = (*jit)->addObjectFile(std::move(*buffer));
      if (!err) {
        auto sym = (*jit)->lookup(packed);
        if (sym) {
          g->objectJit = std::make_unique<ObjectJit>();
          g->objectJit->jit = std::move(*jit);
          g->entry = sym->toPtr<void (*)(void **)>();
          g->cached = true;
        } else {
          llvm::consumeError(sym.takeError());
        }
      } else {
        llvm::consumeError(std::move(err));
      }
    } else if (!jit) {
      llvm::consumeError(jit.takeError());
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
    tmBuilder->setCodeGenOptLevel(llvm::CodeGenOptLevel::Aggressive);
    auto tm = tmBuilder->createTargetMachine();
    if (!tm) {
      error = "cannot create a target machine: " + errorString(tm.takeError());
      return nullptr;
    }
    // `transformer` is a function_ref: the std::function it refers to must
    // outlive ExecutionEngine::create.
    // O2, not O3: measured on the GPT-2 graph, O3 doubled compile time
    // (17.5 s vs 9.8 s; its IR is much larger after unrolling) for no
    // measurable run-time gain, GEMMs and convolutions being library calls.
    std::function<llvm::Error(llvm::Module *)> optimize =
        makeOptimizingTransformer(2, 0, tm->get());
#ifdef TERRA_TSAN
    // Before optimizing: TSan's pass skips accesses wider than 16 bytes,
    // i.e. the AVX loads and stores of vectorized loops.
    optimize = [opt = std::move(optimize)](llvm::Module *m) -> llvm::Error {
      instrumentForThreadSanitizer(*m);
      return opt(m);
    };
#endif
    ExecutionEngineOptions options;
    options.transformer = optimize;
    options.jitCodeGenOptLevel = llvm::CodeGenOptLevel::Aggressive;
    options.enableObjectDump = !cacheDir.empty();
    auto engine = ExecutionEngine::create(module, options);
    if (!engine) {
      error = "JIT compilation failed: " + errorString(engine.takeError());
      return nullptr;
    }
    (*engine)->registerSymbols([](llvm::orc::MangleAndInterner mangle) {
      return symbolMap(mangle);
    });
    auto fn = (*engine)->lookupPacked(name);
    if (!fn) {
      error = "graph function '" + name +
              "' not found: " + errorString(fn.takeError());
      return nullptr;
    }
    g->entry = *fn;
    if (!cacheDir.empty()) {
      // A unique temporary name: threads or processes compiling the same
      // module at once must not write one file together; the rename makes
      // the entry appear whole.
      llvm::sys::fs::create_directories(cacheDir);
      llvm::SmallString<256> tmp;
      llvm::sys::fs::createUniquePath(objPath + ".%%%%%%%%.tmp", tmp,
                                      /*MakeAbsolute=*/false);
      (*engine)->dumpToObjectFile(tmp);
      if (llvm::sys::fs::rename(tmp, objPath))
        llvm::sys::fs::remove(tmp);
    }
    g->engine = std::move(*engine);
  }
  g->seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                             start)
                   .count();
  return g;
}
