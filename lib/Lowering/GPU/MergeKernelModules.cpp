//===- MergeKernelModules.cpp - The terra-gpu-merge-modules pass ----------===//
//
// Every kernel of a graph goes into one gpu.module, so that the kernels are
// compiled (and linked with libdevice) as one LLVM module and loaded by one
// cuModuleLoadData (see the pass description in Passes.td).
//
//===----------------------------------------------------------------------===//
#include "terra/Passes.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/OperationSupport.h"
#include "mlir/IR/SymbolTable.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringMap.h"

namespace terra {
#define GEN_PASS_DEF_TERRAGPUMERGEMODULES
#include "terra/Passes.h.inc"
} // namespace terra

using namespace mlir;

namespace {

/// A module's attributes other than its name: modules merge only when these
/// agree (same targets, same offloading handler).
DictionaryAttr mergeKey(gpu::GPUModuleOp module) {
  NamedAttrList attrs(module->getAttrDictionary());
  attrs.erase(SymbolTable::getSymbolAttrName());
  return attrs.getDictionary(module.getContext());
}

/// Keeps one of each set of kernels that are identical but for their names
/// and grid-size hints (most of a training step's kernels are fills and
/// copies: DCGAN's 913 are 319 distinct ones). Returns each erased
/// kernel's name -> the kept one's. The kept kernel's `known_grid_size`
/// stays only when every launch it stands for had the same.
llvm::DenseMap<StringAttr, StringAttr> dedupeKernels(gpu::GPUModuleOp module) {
  llvm::DenseMap<StringAttr, StringAttr> same;
  llvm::StringMap<gpu::GPUFuncOp> seen;
  StringAttr placeholder = StringAttr::get(module.getContext(), "kernel");
  for (gpu::GPUFuncOp f :
       llvm::make_early_inc_range(module.getOps<gpu::GPUFuncOp>())) {
    if (!f.isKernel())
      continue;
    StringAttr name = f.getNameAttr(), gridName = f.getKnownGridSizeAttrName();
    Attribute grid = f->getAttr(gridName);
    // The printed kernel without its name and grid hint is the key: equal
    // text is equal code (symbols it uses are the merged module's).
    f->removeAttr(gridName);
    f.setName(placeholder);
    std::string key;
    llvm::raw_string_ostream os(key);
    f->print(os, OpPrintingFlags().printGenericOpForm().useLocalScope());
    f.setName(name);
    auto [it, fresh] = seen.try_emplace(key, f);
    if (fresh) {
      if (grid)
        f->setAttr(gridName, grid);
      continue;
    }
    gpu::GPUFuncOp kept = it->second;
    if (kept->getAttr(gridName) != grid)
      kept->removeAttr(gridName);
    same[name] = kept.getNameAttr();
    f.erase();
  }
  return same;
}

struct TerraGPUMergeModulesPass
    : public terra::impl::TerraGPUMergeModulesBase<TerraGPUMergeModulesPass> {
  using TerraGPUMergeModulesBase::TerraGPUMergeModulesBase;

  void runOnOperation() override {
    ModuleOp top = getOperation();
    SmallVector<gpu::GPUModuleOp> modules(top.getOps<gpu::GPUModuleOp>());
    if (modules.empty())
      return;
    DictionaryAttr key = mergeKey(modules.front());
    for (gpu::GPUModuleOp m : modules)
      if (mergeKey(m) != key)
        return; // different targets: each keeps its module

    MLIRContext *ctx = &getContext();
    SymbolTable topSymbols(top);
    OpBuilder b(modules.front());
    auto merged = gpu::GPUModuleOp::create(b, modules.front().getLoc(),
                                           targetName.getValue());
    merged->setAttrs(modules.front()->getAttrDictionary());
    merged.setName(targetName.getValue());
    topSymbols.insert(merged); // renamed if the name is taken
    SymbolTable mergedSymbols(merged);

    // (module, symbol) -> the symbol's name in the merged module.
    llvm::DenseMap<std::pair<StringAttr, StringAttr>, StringAttr> renamed;
    for (gpu::GPUModuleOp m : modules) {
      StringAttr moduleName = m.getNameAttr();
      SmallVector<Operation *> ops;
      for (Operation &op : m.getBody()->without_terminator())
        ops.push_back(&op);
      size_t kernels = llvm::count_if(ops, [](Operation *op) {
        auto f = dyn_cast<gpu::GPUFuncOp>(op);
        return f && f.isKernel();
      });
      // First every renaming, inside `m` (where the uses are), then the
      // moves: a symbol used before its definition is renamed everywhere.
      SymbolTable moduleSymbols(m);
      auto freeName = [&](StringRef base) {
        for (unsigned i = 0;; ++i) {
          auto candidate = StringAttr::get(ctx, base + "_" + Twine(i));
          if (!mergedSymbols.lookup(candidate) &&
              !moduleSymbols.lookup(candidate))
            return candidate;
        }
      };
      SmallVector<Operation *> moves;
      for (Operation *op : ops) {
        auto symbol = dyn_cast<SymbolOpInterface>(op);
        if (!symbol) {
          moves.push_back(op);
          continue;
        }
        StringAttr name = symbol.getNameAttr(), want = name;
        auto f = dyn_cast<gpu::GPUFuncOp>(op);
        if (f && f.isKernel()) {
          // The outliner names each kernel's module uniquely; its kernel
          // takes that name (kernels of one module keep theirs after it).
          want = kernels == 1 ? moduleName
                              : StringAttr::get(ctx, moduleName.getValue() +
                                                         "_" + name.getValue());
          if (mergedSymbols.lookup(want))
            want = freeName(want.getValue());
          renamed[{moduleName, name}] = want;
        } else if (Operation *existing = mergedSymbols.lookup(name)) {
          // A helper or global the outliner copied into several modules:
          // kept once when identical, else renamed.
          if (OperationEquivalence::isEquivalentTo(
                  existing, op, OperationEquivalence::IgnoreLocations)) {
            op->erase();
            continue;
          }
          want = freeName(name.getValue());
        }
        if (want != name) {
          if (failed(SymbolTable::replaceAllSymbolUses(op, want, m)))
            return signalPassFailure();
          symbol.setName(want);
        }
        moves.push_back(op);
      }
      for (Operation *op : moves) {
        op->moveBefore(merged.getBody(), merged.getBody()->end());
        if (isa<SymbolOpInterface>(op))
          mergedSymbols.insert(op);
      }
    }

    llvm::DenseMap<StringAttr, StringAttr> same = dedupeKernels(merged);
    StringAttr mergedName = merged.getNameAttr();
    WalkResult walk = top.walk([&](gpu::LaunchFuncOp launch) {
      SymbolRefAttr kernel = launch.getKernel();
      auto it =
          renamed.find({kernel.getRootReference(), kernel.getLeafReference()});
      if (it == renamed.end()) {
        launch.emitOpError("launches a kernel that was not merged: ") << kernel;
        return WalkResult::interrupt();
      }
      StringAttr target = same.lookup(it->second);
      if (!target)
        target = it->second;
      launch.setKernelAttr(
          SymbolRefAttr::get(mergedName, {FlatSymbolRefAttr::get(target)}));
      return WalkResult::advance();
    });
    if (walk.wasInterrupted())
      return signalPassFailure();
    for (gpu::GPUModuleOp m : modules)
      m.erase();
    numMerged += modules.size();
    numDeduplicated += same.size();
  }
};
} // namespace
