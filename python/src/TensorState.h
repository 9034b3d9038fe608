//===- TensorState.h - state tensors read from C++ -------------*- C++ -*-===//
#ifndef TERRA_PYTHON_TENSORSTATE_H
#define TERRA_PYTHON_TENSORSTATE_H

#include <pybind11/pybind11.h>

namespace terra {
/// Adds `tensor_specs`, `pointer_index`, `bump_versions`, `commit_plan`
/// and `dense_cpu_real` to the `_terra_dispatch` module (TensorState.cpp).
void bindTensorState(pybind11::module_ &m);
} // namespace terra

#endif // TERRA_PYTHON_TENSORSTATE_H
