//===- Npy.h - NumPy .npy files for tools and tests -------------*- C++ -*-===//
#ifndef TERRA_RUNTIME_NPY_H
#define TERRA_RUNTIME_NPY_H

#include "terra/Runtime/Tensor.h"

namespace terra::rt {
bool readNpy(const std::string &path, Tensor &out, std::string &error);
bool writeNpy(const std::string &path, const Tensor &t, std::string &error);
} // namespace terra::rt

#endif // TERRA_RUNTIME_NPY_H
