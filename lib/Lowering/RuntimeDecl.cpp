//===- RuntimeDecl.cpp - Declarations of external functions ---------------===//
#include "RuntimeDecl.h"

using namespace mlir;

func::FuncOp terra::declareFunction(ModuleOp module, SymbolTable *symbols,
                                    StringRef name, FunctionType type,
                                    bool cInterface) {
  func::FuncOp f = symbols ? symbols->lookup<func::FuncOp>(name)
                           : module.lookupSymbol<func::FuncOp>(name);
  if (f)
    return f;
  OpBuilder b = OpBuilder::atBlockBegin(module.getBody());
  f = func::FuncOp::create(b, module.getLoc(), name, type);
  f.setPrivate();
  if (cInterface)
    f->setAttr("llvm.emit_c_interface", b.getUnitAttr());
  if (symbols)
    symbols->insert(f);
  return f;
}
