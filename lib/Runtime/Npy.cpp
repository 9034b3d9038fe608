//===- Npy.cpp - Reading and writing NumPy .npy files ---------------------===//
#include "terra/Runtime/Npy.h"

#include <cstring>
#include <fstream>
#include <sstream>

using namespace terra::rt;

static bool npyDType(const std::string &descr, DType &d) {
  static const std::pair<const char *, DType> table[] = {
      {"<f4", DType::F32}, {"<f8", DType::F64}, {"<f2", DType::F16},
      {"<i8", DType::I64}, {"<i4", DType::I32}, {"<i2", DType::I16},
      {"|i1", DType::I8},  {"|b1", DType::I1},  {"|u1", DType::U8}};
  for (auto &[name, dt] : table)
    if (descr == name) {
      d = dt;
      return true;
    }
  return false;
}

static const char *npyDescr(DType d) {
  switch (d) {
  case DType::F32: return "<f4";
  case DType::F64: return "<f8";
  case DType::F16: return "<f2";
  case DType::I64: return "<i8";
  case DType::I32: return "<i4";
  case DType::I16: return "<i2";
  case DType::I8: return "|i1";
  case DType::I1: return "|b1";
  case DType::U8:
    return "|u1";
  case DType::BF16: return nullptr;
  }
  return nullptr;
}

bool terra::rt::readNpy(const std::string &path, Tensor &out,
                        std::string &error) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    error = path + ": cannot open";
    return false;
  }
  char magic[8];
  if (!in.read(magic, 8) || std::memcmp(magic, "\x93NUMPY", 6) != 0) {
    error = path + ": not a .npy file";
    return false;
  }
  uint32_t headerLen = 0;
  if (magic[6] == 1) {
    uint16_t len;
    in.read(reinterpret_cast<char *>(&len), 2);
    headerLen = len;
  } else {
    in.read(reinterpret_cast<char *>(&headerLen), 4);
  }
  std::string header(headerLen, '\0');
  if (!in.read(header.data(), headerLen)) {
    error = path + ": truncated header";
    return false;
  }
  auto field = [&](const std::string &key) -> std::string {
    size_t k = header.find("'" + key + "'");
    if (k == std::string::npos)
      return "";
    size_t colon = header.find(':', k);
    return header.substr(colon + 1);
  };
  std::string descr = field("descr");
  size_t q1 = descr.find('\''), q2 = descr.find('\'', q1 + 1);
  DType dtype;
  if (q1 == std::string::npos || !npyDType(descr.substr(q1 + 1, q2 - q1 - 1), dtype)) {
    error = path + ": unsupported dtype in header: " + header;
    return false;
  }
  if (field("fortran_order").find("True") < field("fortran_order").find(',')) {
    error = path + ": Fortran-ordered arrays are not supported";
    return false;
  }
  std::string shape = field("shape");
  size_t open = shape.find('('), close = shape.find(')');
  std::vector<int64_t> sizes;
  std::stringstream ss(shape.substr(open + 1, close - open - 1));
  std::string item;
  while (std::getline(ss, item, ','))
    if (item.find_first_of("0123456789") != std::string::npos)
      sizes.push_back(std::stoll(item));
  out = Tensor::empty(dtype, sizes);
  size_t bytes = out.numel() * dtypeSize(dtype);
  if (!in.read(static_cast<char *>(out.data), bytes)) {
    error = path + ": truncated data";
    return false;
  }
  return true;
}

bool terra::rt::writeNpy(const std::string &path, const Tensor &t,
                         std::string &error) {
  const char *descr = npyDescr(t.dtype);
  if (!descr) {
    error = std::string("cannot write dtype ") + dtypeName(t.dtype) + " as .npy";
    return false;
  }
  Tensor c = t.isContiguous() ? t : t.contiguousCopy();
  std::string shape = "(";
  for (int64_t s : c.sizes)
    shape += std::to_string(s) + ",";
  shape += ")";
  std::string header = std::string("{'descr': '") + descr +
                       "', 'fortran_order': False, 'shape': " + shape + ", }";
  size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  std::ofstream o(path, std::ios::binary);
  if (!o) {
    error = path + ": cannot write";
    return false;
  }
  o.write("\x93NUMPY\x01\x00", 8);
  uint16_t len = header.size();
  o.write(reinterpret_cast<const char *>(&len), 2);
  o.write(header.data(), header.size());
  o.write(static_cast<const char *>(c.data), c.numel() * dtypeSize(c.dtype));
  return bool(o);
}
