//===- ParallelCompile.cpp - Compile a graph's LLVM module on threads -----===//
//
// A lowered graph is one entry function ("glue": allocations, runtime calls,
// library calls, scalar code) and one private function per loop nest
// (terra-outline-loops). The module is split into partitions, each
// optimized and compiled to an object file on a thread of its own, in an
// LLVMContext of its own:
//
//  * the loop functions are spread over 2 x `threads` partitions (largest
//    first, onto the partition with the fewest instructions so far) and
//    get the full treatment: IR O2, code generation O3;
//  * the glue partition (the entry function and its wrappers) gets IR O1
//    and code generation O0 (fast instruction selection and register
//    allocation): it is straight-line code, without loops once they are
//    outlined, that runs once per iteration and spends its time in the
//    calls it makes. On ResNet-50 it took half of the code generation
//    time at O3 (2.8 s of 6 s), one tenth at O0, and IR O1 halves its
//    optimization time (1.7 s -> 0.7 s). A module whose loops were not
//    outlined (a glue function with a loop that calls nothing) gets the
//    full treatment instead. Other functions with such loops
//    (`-lower-deallocations`' `dealloc_helper`) go to the loop partitions:
//    in a CUDA graph's host code, where no loop is outlined, the helper
//    alone made the 150k-line entry function of ResNet-50 take O2 and O3
//    (90 s of a 100 s compile, against ~8 s at O1 and O0);
//  * small local functions (the runtime-call wrappers) and constant
//    globals are copied into every partition that uses them, so they still
//    inline and fold; everything else is defined once and referenced by
//    name across partitions.
//
//===----------------------------------------------------------------------===//
#include "CompileInternal.h"

#include "mlir/ExecutionEngine/OptUtils.h"

#include "llvm/Analysis/LoopInfo.h"
#include "llvm/Bitcode/BitcodeReader.h"
#include "llvm/Bitcode/BitcodeWriter.h"
#include "llvm/ExecutionEngine/Orc/CompileUtils.h"
#include "llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h"
#include "llvm/IR/Dominators.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/IntrinsicInst.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/Module.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/Transforms/Utils/Cloning.h"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <thread>

using namespace terra::rt;

namespace {

/// Local functions up to this many instructions are copied into every
/// partition (the runtime-call wrappers), bigger ones defined once.
constexpr unsigned kSharedFunctionSize = 64;

unsigned instructionCount(const llvm::Function &f) {
  return f.getInstructionCount();
}

/// Whether `f` has a loop that makes no calls, i.e. computes: then it is
/// not glue (terra-outline-loops did not run on it).
bool hasComputeLoop(llvm::Function &f) {
  llvm::DominatorTree dt(f);
  llvm::LoopInfo loops(dt);
  for (llvm::Loop *loop : loops.getLoopsInPreorder()) {
    bool calls = false;
    for (llvm::BasicBlock *bb : loop->blocks())
      for (llvm::Instruction &inst : *bb)
        if (auto *call = llvm::dyn_cast<llvm::CallBase>(&inst))
          calls |= !llvm::isa<llvm::IntrinsicInst>(call);
    if (!calls)
      return true;
  }
  return false;
}

/// Defines `_mlir_<name>(void **args)`, the packed entry point the runtime
/// calls, as MLIR's ExecutionEngine would.
void addPackedEntry(llvm::Module &m, llvm::Function &func) {
  llvm::LLVMContext &ctx = m.getContext();
  llvm::IRBuilder<> b(ctx);
  auto *type = llvm::FunctionType::get(b.getVoidTy(), b.getPtrTy(), false);
  auto *packed = llvm::Function::Create(type, llvm::GlobalValue::ExternalLinkage,
                                        "_mlir_" + func.getName(), m);
  b.SetInsertPoint(llvm::BasicBlock::Create(ctx, "entry", packed));
  llvm::Value *argList = packed->arg_begin();
  llvm::SmallVector<llvm::Value *> args;
  for (auto [i, arg] : llvm::enumerate(func.args())) {
    llvm::Value *slot = b.CreateGEP(b.getPtrTy(), argList, b.getInt64(i));
    args.push_back(b.CreateLoad(arg.getType(),
                                b.CreateLoad(b.getPtrTy(), slot)));
  }
  llvm::Value *result = b.CreateCall(&func, args);
  if (!result->getType()->isVoidTy()) {
    llvm::Value *slot =
        b.CreateGEP(b.getPtrTy(), argList, b.getInt64(func.arg_size()));
    b.CreateStore(result, b.CreateLoad(b.getPtrTy(), slot));
  }
  b.CreateRetVoid();
}

/// LLVM's O1 pipeline without vectorization or unrolling, for the glue:
/// straight-line code, whose time goes to the calls it makes. (MLIR's
/// makeOptimizingTransformer, which turns vectorization and unrolling on
/// at every level, took 68 s at O1 on the 300k-instruction entry function
/// of ResNet-50's CUDA graph; this takes 4 s.)
void optimizeGlue(llvm::Module &m, llvm::TargetMachine *tm) {
  llvm::PipelineTuningOptions tuning;
  tuning.LoopUnrolling = false;
  tuning.LoopInterleaving = false;
  tuning.LoopVectorization = false;
  tuning.SLPVectorization = false;
  llvm::PassBuilder pb(tm, tuning);
  llvm::LoopAnalysisManager lam;
  llvm::FunctionAnalysisManager fam;
  llvm::CGSCCAnalysisManager cgam;
  llvm::ModuleAnalysisManager mam;
  pb.registerModuleAnalyses(mam);
  pb.registerCGSCCAnalyses(cgam);
  pb.registerFunctionAnalyses(fam);
  pb.registerLoopAnalyses(lam);
  pb.crossRegisterProxies(lam, fam, cgam, mam);
  pb.buildPerModuleDefaultPipeline(llvm::OptimizationLevel::O1).run(m, mam);
}

struct Partition {
  bool glue = false;
  uint64_t size = 0;
  std::string bitcode;
  std::unique_ptr<llvm::MemoryBuffer> object;
  std::string error;
};

} // namespace

llvm::Expected<std::vector<std::unique_ptr<llvm::MemoryBuffer>>>
detail::compileModuleInParallel(
    std::unique_ptr<llvm::Module> module, llvm::StringRef entry,
    unsigned threads, const llvm::orc::JITTargetMachineBuilder &tmBuilder,
    const std::function<void(llvm::Module &)> &beforeOptimizing) {
  threads = std::max(1u, threads);
  llvm::Module &m = *module;
  llvm::Function *entryFn = m.getFunction(entry);
  if (!entryFn || entryFn->isDeclaration())
    return llvm::createStringError("graph function '" + entry.str() +
                                   "' not found");
  addPackedEntry(m, *entryFn);

  // Ownership: -1 shared (copied where used), 0 glue, 1.. loop partitions.
  // Twice as many loop partitions as threads: sizes only estimate compile
  // times, smaller pieces balance the threads better.
  std::vector<Partition> parts(1 + (threads > 1 ? 2 * threads : 1));
  parts[0].glue = true;
  llvm::DenseMap<const llvm::GlobalValue *, int> owner;
  std::vector<llvm::Function *> loopFns;
  for (llvm::GlobalVariable &gv : m.globals()) {
    if (gv.hasLocalLinkage() && gv.isConstant() && gv.hasInitializer())
      owner[&gv] = -1;
    else if (!gv.isDeclaration())
      owner[&gv] = 0;
  }
  for (llvm::Function &f : m) {
    if (f.isDeclaration())
      continue;
    if (f.hasLocalLinkage() && !f.hasFnAttribute(llvm::Attribute::NoInline) &&
        instructionCount(f) <= kSharedFunctionSize)
      owner[&f] = -1;
    else if (f.hasFnAttribute(llvm::Attribute::NoInline) ||
             (&f != entryFn && hasComputeLoop(f)))
      loopFns.push_back(&f);
    else
      owner[&f] = 0; // the entry, its wrappers and other helpers
  }
  // Largest first onto the lightest partition (LPT scheduling).
  std::stable_sort(loopFns.begin(), loopFns.end(),
                   [](llvm::Function *a, llvm::Function *b) {
                     return instructionCount(*a) > instructionCount(*b);
                   });
  for (llvm::Function *f : loopFns) {
    auto lightest = std::min_element(
        parts.begin() + 1, parts.end(),
        [](const Partition &a, const Partition &b) { return a.size < b.size; });
    lightest->size += instructionCount(*f);
    owner[f] = lightest - parts.begin();
  }
  for (llvm::Function &f : m)
    if (!f.isDeclaration() && owner.lookup(&f) == 0) {
      parts[0].size += instructionCount(f);
      if (hasComputeLoop(f))
        parts[0].glue = false;
    }

  // Symbols defined once but referenced from other partitions become
  // external, under names no other module or library uses.
  for (auto [gv, p] : owner) {
    auto *g = const_cast<llvm::GlobalValue *>(gv);
    if (p < 0 || !g->hasLocalLinkage())
      continue;
    g->setName("__terra_jit." + g->getName());
    g->setLinkage(llvm::GlobalValue::ExternalLinkage);
    g->setVisibility(llvm::GlobalValue::DefaultVisibility);
  }

  for (auto [index, part] : llvm::enumerate(parts)) {
    if (index > 0 && part.size == 0)
      continue;
    llvm::ValueToValueMapTy map;
    std::unique_ptr<llvm::Module> clone =
        llvm::CloneModule(m, map, [&](const llvm::GlobalValue *gv) {
          auto it = owner.find(gv);
          return it != owner.end() &&
                 (it->second < 0 || it->second == (int)index);
        });
    // Declarations of copied locals: CloneModule left them local.
    for (llvm::GlobalValue &gv : clone->global_values())
      if (gv.isDeclaration() && gv.hasLocalLinkage())
        gv.setLinkage(llvm::GlobalValue::ExternalLinkage);
    llvm::raw_string_ostream os(part.bitcode);
    llvm::WriteBitcodeToFile(*clone, os);
  }
  module.reset();

  // Biggest partitions first, one LLVMContext per partition.
  std::vector<size_t> order;
  for (size_t i = 0; i < parts.size(); ++i)
    if (!parts[i].bitcode.empty())
      order.push_back(i);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return parts[a].size > parts[b].size;
  });
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t n; (n = next++) < order.size();) {
      Partition &part = parts[order[n]];
      auto fail = [&](llvm::Error err) {
        llvm::raw_string_ostream os(part.error);
        os << err;
      };
      llvm::LLVMContext ctx;
      auto parsed = llvm::parseBitcodeFile(
          llvm::MemoryBufferRef(part.bitcode, "partition"), ctx);
      if (!parsed) {
        fail(parsed.takeError());
        continue;
      }
      // The object is named after the module, and the JIT names an object's
      // initializer symbol after the object: one name per partition (a
      // TSan build's objects each have a constructor).
      (*parsed)->setModuleIdentifier("terra-partition-" +
                                     std::to_string(order[n]));
      llvm::orc::JITTargetMachineBuilder builder = tmBuilder;
      builder.setCodeGenOptLevel(part.glue ? llvm::CodeGenOptLevel::None
                                           : llvm::CodeGenOptLevel::Aggressive);
      auto tm = builder.createTargetMachine();
      if (!tm) {
        fail(tm.takeError());
        continue;
      }
      if (beforeOptimizing)
        beforeOptimizing(**parsed);
      // O2, not O3: measured on the GPT-2 graph, O3 doubled compile time
      // (its IR is much larger after unrolling) for no measurable run-time
      // gain, GEMMs and convolutions being library calls.
      if (part.glue) {
        optimizeGlue(**parsed, tm->get());
      } else if (llvm::Error err = mlir::makeOptimizingTransformer(
                     2, 0, tm->get())(parsed->get())) {
        fail(std::move(err));
        continue;
      }
      auto object = llvm::orc::SimpleCompiler(**tm)(**parsed);
      if (!object) {
        fail(object.takeError());
        continue;
      }
      part.object = std::move(*object);
    }
  };
  std::vector<std::thread> pool;
  unsigned workers = std::min<size_t>(threads, order.size());
  for (unsigned i = 1; i < workers; ++i)
    pool.emplace_back(work);
  work();
  for (std::thread &t : pool)
    t.join();

  std::vector<std::unique_ptr<llvm::MemoryBuffer>> objects;
  for (size_t i : order) {
    if (!parts[i].error.empty())
      return llvm::createStringError(parts[i].error);
    objects.push_back(std::move(parts[i].object));
  }
  return objects;
}
