//===- LoopHook.h - binding of the loop-counting trace hook -----*- C++ -*-===//
#ifndef TERRA_PYTHON_LOOPHOOK_H
#define TERRA_PYTHON_LOOPHOOK_H

#include <pybind11/pybind11.h>

namespace terra {
/// Adds `LoopHook` to the `_terra_native` module (LoopHook.cpp).
void bindLoopHook(pybind11::module_ &m);
} // namespace terra

#endif // TERRA_PYTHON_LOOPHOOK_H
