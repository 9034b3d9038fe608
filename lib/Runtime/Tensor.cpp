//===- Tensor.cpp - Host tensors ------------------------------------------===//
#include "terra/Runtime/Tensor.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>

using namespace terra::rt;

size_t terra::rt::dtypeSize(DType d) {
  switch (d) {
  case DType::F64:
  case DType::I64:
    return 8;
  case DType::F32:
  case DType::I32:
    return 4;
  case DType::F16:
  case DType::BF16:
  case DType::I16:
    return 2;
  case DType::I8:
  case DType::I1:
  case DType::U8:
    return 1;
  }
  return 0;
}

static const char *const kNames[] = {"f32", "f64", "f16", "bf16", "i64",
                                     "i32", "i16", "i8",  "i1",   "ui8"};

const char *terra::rt::dtypeName(DType d) { return kNames[int(d)]; }

bool terra::rt::parseDType(const std::string &name, DType &d) {
  for (int i = 0; i < int(std::size(kNames)); ++i)
    if (name == kNames[i]) {
      d = DType(i);
      return true;
    }
  return false;
}

std::vector<int64_t>
terra::rt::contiguousStrides(const std::vector<int64_t> &sizes) {
  std::vector<int64_t> strides(sizes.size());
  int64_t s = 1;
  for (size_t i = sizes.size(); i-- > 0;) {
    strides[i] = s;
    s *= sizes[i];
  }
  return strides;
}

int64_t Tensor::numel() const {
  int64_t n = 1;
  for (int64_t s : sizes)
    n *= s;
  return n;
}

bool Tensor::isContiguous() const {
  // Row-major wherever it matters: a dim of size 1 may have any stride, an
  // empty tensor any strides. (No allocation: every state tensor is checked
  // at the start of every run.)
  if (numel() == 0)
    return true;
  int64_t want = 1;
  for (size_t i = sizes.size(); i-- > 0;) {
    if (sizes[i] != 1 && strides[i] != want)
      return false;
    want *= sizes[i];
  }
  return true;
}

Tensor Tensor::empty(DType dtype, std::vector<int64_t> sizes) {
  Tensor t;
  t.dtype = dtype;
  t.strides = contiguousStrides(sizes);
  t.sizes = std::move(sizes);
  size_t bytes = std::max<int64_t>(t.numel(), 1) * dtypeSize(dtype);
  void *p = std::calloc(1, bytes);
  t.owner = std::shared_ptr<void>(p, std::free);
  t.data = p;
  return t;
}

Tensor Tensor::contiguousCopy() const {
  Tensor out = empty(dtype, sizes);
  size_t es = dtypeSize(dtype);
  int64_t n = numel();
  auto *dst = static_cast<char *>(out.data);
  const auto *src = static_cast<const char *>(data);
  if (isContiguous()) {
    std::memcpy(dst, src, n * es);
    return out;
  }
  std::vector<int64_t> idx(sizes.size(), 0);
  for (int64_t i = 0; i < n; ++i) {
    int64_t off = 0;
    for (size_t d = 0; d < sizes.size(); ++d)
      off += idx[d] * strides[d];
    std::memcpy(dst + i * es, src + off * es, es);
    for (size_t d = sizes.size(); d-- > 0;) {
      if (++idx[d] < sizes[d])
        break;
      idx[d] = 0;
    }
  }
  return out;
}

std::string terra::rt::formatTensor(const Tensor &t, int64_t limit) {
  std::string out = dtypeName(t.dtype);
  out += " [";
  for (size_t i = 0; i < t.sizes.size(); ++i)
    out += (i ? ", " : "") + std::to_string(t.sizes[i]);
  out += "]";
  Tensor c = t.isContiguous() ? t : t.contiguousCopy();
  int64_t n = c.numel(), shown = limit < 0 || n < limit ? n : limit;
  char buf[32];
  for (int64_t i = 0; i < shown; ++i) {
    switch (c.dtype) {
    case DType::F32:
      std::snprintf(buf, sizeof buf, "%g", static_cast<float *>(c.data)[i]);
      break;
    case DType::F64:
      std::snprintf(buf, sizeof buf, "%g", static_cast<double *>(c.data)[i]);
      break;
    case DType::I64:
      std::snprintf(buf, sizeof buf, "%lld",
                    static_cast<long long>(static_cast<int64_t *>(c.data)[i]));
      break;
    case DType::I32:
      std::snprintf(buf, sizeof buf, "%d", static_cast<int32_t *>(c.data)[i]);
      break;
    case DType::I1:
    case DType::I8:
      std::snprintf(buf, sizeof buf, "%d",
                    int(static_cast<int8_t *>(c.data)[i]));
      break;
    case DType::U8:
      std::snprintf(buf, sizeof buf, "%d",
                    int(static_cast<uint8_t *>(c.data)[i]));
      break;
    default:
      std::snprintf(buf, sizeof buf, "?");
      break;
    }
    out += (i ? " " : " : ");
    out += buf;
  }
  if (shown < n)
    out += " ... (" + std::to_string(n) + " elements)";
  return out;
}
