//===- HostRng.h - binding of the host's random-number kernels --*- C++ -*-===//
#ifndef TERRA_PYTHON_HOSTRNG_H
#define TERRA_PYTHON_HOSTRNG_H

#include <pybind11/pybind11.h>

namespace terra {
/// Adds `rng_bernoulli` to the `_terra_native` module (HostRng.cpp).
void bindHostRng(pybind11::module_ &m);
} // namespace terra

#endif // TERRA_PYTHON_HOSTRNG_H
