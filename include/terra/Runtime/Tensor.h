//===- Tensor.h - Host tensors exchanged with a graph run -------*- C++ -*-===//
#ifndef TERRA_RUNTIME_TENSOR_H
#define TERRA_RUNTIME_TENSOR_H

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace terra::rt {

/// Element types of tensors crossing the host/graph boundary. Names match
/// the MLIR element types used in runtime entry point names.
enum class DType : uint8_t {
  F32,
  F64,
  F16,
  BF16,
  I64,
  I32,
  I16,
  I8,
  I1,
  U8, // torch.uint8 (cuDNN's batch-norm reserve, image data)
};

size_t dtypeSize(DType dtype);
const char *dtypeName(DType dtype);
/// Parses "f32", "i64", ...; returns false for an unknown name.
bool parseDType(const std::string &name, DType &dtype);

/// A strided view of host memory. No copy is made when a tensor crosses
/// the boundary: `owner` keeps the memory alive for as long as any side
/// holds the tensor.
struct Tensor {
  void *data = nullptr;
  DType dtype = DType::F32;
  std::vector<int64_t> sizes;
  std::vector<int64_t> strides; ///< In elements.
  std::shared_ptr<void> owner;

  int64_t numel() const;
  /// Whether the elements lie in row-major order (strides of size-1 dims
  /// and of empty tensors do not matter).
  bool isContiguous() const;
  /// A new contiguous tensor with its own storage.
  static Tensor empty(DType dtype, std::vector<int64_t> sizes);
  /// A contiguous copy of this tensor.
  Tensor contiguousCopy() const;
};

/// "f32 [2, 4] : 0.76 0.81 ...": dtype, sizes and the first `limit` values
/// (all when negative), for the tools that print fetched values.
std::string formatTensor(const Tensor &t, int64_t limit = -1);

/// Row-major strides for `sizes`.
std::vector<int64_t> contiguousStrides(const std::vector<int64_t> &sizes);

} // namespace terra::rt

#endif // TERRA_RUNTIME_TENSOR_H
