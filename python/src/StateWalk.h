//===- StateWalk.h - the persistent-state walk, natively --------*- C++ -*-===//
#ifndef TERRA_PYTHON_STATEWALK_H
#define TERRA_PYTHON_STATEWALK_H

#include <pybind11/pybind11.h>

namespace terra {
/// Adds `StateWalk`, `slot_tensors` and `tensor_specs` to the
/// `_terra_native` module (StateWalk.cpp).
void bindStateWalk(pybind11::module_ &m);
} // namespace terra

#endif // TERRA_PYTHON_STATEWALK_H
