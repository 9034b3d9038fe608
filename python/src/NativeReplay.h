//===- NativeReplay.h - binding of the native tape replay -------*- C++ -*-===//
#ifndef TERRA_PYTHON_NATIVEREPLAY_H
#define TERRA_PYTHON_NATIVEREPLAY_H

#include <pybind11/pybind11.h>

namespace terra {
/// Adds `replay_configure` and `replay_plain` to the `_terra_native` module
/// (NativeReplay.cpp).
void bindNativeReplay(pybind11::module_ &m);
} // namespace terra

#endif // TERRA_PYTHON_NATIVEREPLAY_H
