//===- CudaRuntimeTest.cpp - The CUDA runtime with and without a GPU ------===//
//
// NoDriver: on a machine without a driver or device (CI), every entry point
// fails with a clear message and a null handle, never a crash. Layout: the
// cuBLAS entry points refuse descriptors cuBLAS cannot address, before
// touching a device. Device: the same entry points on a real GPU (skipped,
// with the reason, when there is none).
//
//===----------------------------------------------------------------------===//
#include "terra/Runtime/Cuda.h"
#include "terra/Runtime/CudaEntryPoints.h"

#include "mlir/ExecutionEngine/CRunnerUtils.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <set>
#include <string>
#include <vector>

namespace {

/// A row-major matrix descriptor over `data`.
StridedMemRefType<float, 2> matrix(float *data, int64_t rows, int64_t cols) {
  StridedMemRefType<float, 2> m;
  m.basePtr = m.data = data;
  m.offset = 0;
  m.sizes[0] = rows;
  m.sizes[1] = cols;
  m.strides[0] = cols;
  m.strides[1] = 1;
  return m;
}

/// The row-major-indexed view of a column-major `rows x cols` buffer (what
/// `x.t()` of a contiguous `cols x rows` x is).
StridedMemRefType<float, 2> columnMajor(float *data, int64_t rows,
                                        int64_t cols) {
  StridedMemRefType<float, 2> m = matrix(data, rows, cols);
  m.strides[0] = 1;
  m.strides[1] = rows;
  return m;
}

bool contains(const std::string &s, const std::string &part) {
  return s.find(part) != std::string::npos;
}

class NoDriver : public ::testing::Test {
protected:
  void SetUp() override {
    std::string why;
    if (terra::cuda::available(&why))
      GTEST_SKIP() << "a CUDA driver and device are present; the no-driver "
                      "behaviour cannot be observed here";
    terra::cuda::takeLastError();
  }
};

TEST_F(NoDriver, AvailableSaysWhy) {
  std::string why;
  EXPECT_FALSE(terra::cuda::available(&why));
  EXPECT_FALSE(why.empty());
  // A repeated query gives the same answer (the load happens once).
  std::string again;
  EXPECT_FALSE(terra::cuda::available(&again));
  EXPECT_EQ(why, again);
}

TEST_F(NoDriver, ModuleEntryPointsFailCleanly) {
  const char ptx[] = ".version 8.0\n.target sm_80\n.address_size 64\n";
  EXPECT_EQ(mgpuModuleLoadJIT(const_cast<char *>(ptx), 3), nullptr);
  std::string e = terra::cuda::takeLastError();
  EXPECT_TRUE(contains(e, "mgpuModuleLoadJIT: ")) << e;
  std::string why;
  terra::cuda::available(&why);
  EXPECT_TRUE(contains(e, why)) << e;

  EXPECT_EQ(mgpuModuleLoad(const_cast<char *>(ptx), sizeof(ptx)), nullptr);
  EXPECT_TRUE(contains(terra::cuda::takeLastError(), "mgpuModuleLoad: "));

  // What the generated host code does next with the null module.
  EXPECT_EQ(mgpuModuleGetFunction(nullptr, "k"), nullptr);
  EXPECT_TRUE(contains(terra::cuda::takeLastError(), "mgpuModuleGetFunction"));
  void *stream = mgpuStreamCreate();
  EXPECT_EQ(stream, nullptr);
  EXPECT_TRUE(contains(terra::cuda::takeLastError(), "mgpuStreamCreate"));
  mgpuLaunchKernel(nullptr, 1, 1, 1, 32, 1, 1, 0, stream, nullptr, nullptr, 0);
  EXPECT_TRUE(contains(terra::cuda::takeLastError(), "mgpuLaunchKernel"));
  mgpuStreamSynchronize(stream);
  EXPECT_TRUE(contains(terra::cuda::takeLastError(), "mgpuStreamSynchronize"));
  mgpuStreamDestroy(stream); // Null: nothing to do, nothing to report.
  mgpuModuleUnload(nullptr);
  EXPECT_EQ(terra::cuda::takeLastError(), "");
  EXPECT_EQ(mgpuEventCreate(), nullptr);
  EXPECT_TRUE(contains(terra::cuda::takeLastError(), "mgpuEventCreate"));
}

TEST_F(NoDriver, MemoryEntryPointsFailCleanly) {
  EXPECT_EQ(mgpuMemAlloc(1024, nullptr, /*isHostShared=*/true), nullptr);
  EXPECT_TRUE(contains(terra::cuda::takeLastError(), "mgpuMemAlloc"));
  EXPECT_EQ(terra::cuda::allocManaged(64), nullptr);
  EXPECT_TRUE(contains(terra::cuda::takeLastError(), "allocManaged"));
  mgpuMemFree(nullptr, nullptr);
  terra::cuda::freeManaged(nullptr);
  EXPECT_EQ(terra::cuda::takeLastError(), "");
  EXPECT_EQ(terra::cuda::allocDevice(64), nullptr);
  EXPECT_TRUE(contains(terra::cuda::takeLastError(), "allocDevice"));
  float host[4] = {1, 2, 3, 4};
  EXPECT_FALSE(terra::cuda::copyToDevice(host, host, sizeof host));
  EXPECT_TRUE(contains(terra::cuda::takeLastError(), "copyToDevice"));
  EXPECT_FALSE(terra::cuda::copyToHost(host, host, sizeof host));
  EXPECT_TRUE(contains(terra::cuda::takeLastError(), "copyToHost"));
  terra::cuda::freeDevice(nullptr);
  EXPECT_EQ(terra::cuda::takeLastError(), "");
  int32_t *flagHost = nullptr;
  void *flagDevice = nullptr;
  EXPECT_FALSE(terra::cuda::runCheckFlag(&flagHost, &flagDevice));
  EXPECT_TRUE(contains(terra::cuda::takeLastError(), "runCheckFlag"));
}

std::vector<std::string> handled;
void recordError(const char *message) { handled.push_back(message); }

TEST_F(NoDriver, ErrorHandlerSeesEveryError) {
  handled.clear();
  terra::cuda::setErrorHandler(recordError);
  mgpuStreamCreate();
  mgpuMemAlloc(16, nullptr, false);
  terra::cuda::setErrorHandler(nullptr);
  ASSERT_EQ(handled.size(), 2u);
  EXPECT_TRUE(contains(handled[0], "mgpuStreamCreate"));
  EXPECT_TRUE(contains(handled[1], "mgpuMemAlloc"));
}

TEST_F(NoDriver, RunStreamFailsCleanly) {
  EXPECT_FALSE(terra::cuda::beginRunStream());
  EXPECT_TRUE(contains(terra::cuda::takeLastError(), "beginRunStream: "));
  // No stream bound: waiting for it is a no-op, and so is ending it.
  EXPECT_TRUE(terra::cuda::syncRunStream());
  terra::cuda::endRunStream();
  EXPECT_EQ(terra::cuda::takeLastError(), "");
}

TEST_F(NoDriver, CublasCallFailsCleanly) {
  std::vector<float> a(4 * 8, 1.f), b(8 * 3, 1.f), c(4 * 3, 0.f);
  auto ma = matrix(a.data(), 4, 8), mb = matrix(b.data(), 8, 3),
       mc = matrix(c.data(), 4, 3);
  _mlir_ciface_terra_cuda_matmul_f32(&ma, &mb, &mc, 1);
  std::string e = terra::cuda::takeLastError();
  EXPECT_TRUE(contains(e, "terra_cuda_matmul_f32: ")) << e;
  EXPECT_EQ(c, std::vector<float>(4 * 3, 0.f)); // Untouched.
}

/// A dense NCHW descriptor over `data`.
template <typename T>
StridedMemRefType<T, 4> nchw(T *data, int64_t n, int64_t c, int64_t h,
                             int64_t w) {
  StridedMemRefType<T, 4> d;
  d.basePtr = d.data = data;
  d.offset = 0;
  d.sizes[0] = n, d.sizes[1] = c, d.sizes[2] = h, d.sizes[3] = w;
  d.strides[0] = c * h * w, d.strides[1] = h * w, d.strides[2] = w;
  d.strides[3] = 1;
  return d;
}

TEST_F(NoDriver, CudnnCallFailsCleanly) {
  std::vector<float> x(2 * 4 * 6 * 6, 1.f), w(8 * 4 * 3 * 3, 1.f),
      y(2 * 8 * 6 * 6, 0.f);
  auto mx = nchw(x.data(), 2, 4, 6, 6), mw = nchw(w.data(), 8, 4, 3, 3),
       my = nchw(y.data(), 2, 8, 6, 6);
  StridedMemRefType<float, 1> none{nullptr, nullptr, 0, {0}, {1}};
  _mlir_ciface_terra_cuda_conv2d_f32(&mx, &mw, &none, &my, 1, 1, 1, 1, 1, 1, 1,
                                     1, 1, 1);
  std::string e = terra::cuda::takeLastError();
  EXPECT_TRUE(contains(e, "terra_cuda_conv2d_f32: ")) << e;
  EXPECT_EQ(y, std::vector<float>(y.size(), 0.f)); // Untouched.
}

TEST(CudaLayout, RejectsOperandsCuBLASCannotAddress) {
  terra::cuda::takeLastError();
  std::vector<float> a(8 * 8, 1.f), b(8 * 8, 1.f), c(8 * 8, 0.f);
  auto ma = matrix(a.data(), 8, 8), mb = matrix(b.data(), 8, 8),
       mc = matrix(c.data(), 8, 8);
  // A column stride of 2 (every other column): no leading dimension.
  ma.strides[1] = 2;
  ma.sizes[1] = 4;
  mb.sizes[0] = 4;
  _mlir_ciface_terra_cuda_matmul_f32(&ma, &mb, &mc, 1);
  EXPECT_TRUE(contains(terra::cuda::takeLastError(), "not a row-major"));
  // Rows closer than a row apart (a broadcast).
  ma = matrix(a.data(), 8, 8);
  ma.strides[0] = 0;
  mb = matrix(b.data(), 8, 8);
  _mlir_ciface_terra_cuda_matmul_f32(&ma, &mb, &mc, 1);
  EXPECT_TRUE(contains(terra::cuda::takeLastError(), "not a row-major"));

  // A column-major operand (a transposed view) is addressable: without a
  // device what fails is the missing driver, not the layout (with one, the
  // host memory here must not reach cuBLAS: Device.* test this case). A
  // column-major output is not addressable.
  ma = columnMajor(a.data(), 8, 8);
  mb = matrix(b.data(), 8, 8);
  mc = matrix(c.data(), 8, 8);
  std::string why;
  if (!terra::cuda::available(&why)) {
    _mlir_ciface_terra_cuda_matmul_f32(&ma, &mb, &mc, 1);
    std::string e = terra::cuda::takeLastError();
    EXPECT_FALSE(e.empty());
    EXPECT_FALSE(contains(e, "not a row-major")) << e;
  }
  mc = columnMajor(c.data(), 8, 8);
  _mlir_ciface_terra_cuda_matmul_f32(&mb, &mb, &mc, 1);
  EXPECT_TRUE(
      contains(terra::cuda::takeLastError(), "output is not row-major"));

  StridedMemRefType<double, 3> x{};
  StridedMemRefType<double, 3> y{};
  StridedMemRefType<double, 3> z{};
  std::vector<double> buf(64, 0.0);
  for (auto *m : {&x, &y, &z}) {
    m->basePtr = m->data = buf.data();
    m->sizes[0] = 2, m->sizes[1] = 2, m->sizes[2] = 2;
    m->strides[0] = 4, m->strides[1] = 2, m->strides[2] = 1;
  }
  y.sizes[0] = 3; // Batch sizes differ.
  _mlir_ciface_terra_cuda_batch_matmul_f64(&x, &y, &z, 0);
  EXPECT_TRUE(contains(terra::cuda::takeLastError(), "batch sizes differ"));
}

TEST(CudaEntryPoints, CoverWhatGpuToLLVMEmits) {
  std::set<std::string> names;
  for (auto [name, address] : terra::cuda::entryPoints()) {
    EXPECT_NE(address, nullptr) << name;
    names.insert(name);
  }
  for (const char *n : {"mgpuModuleLoad",
                        "mgpuModuleLoadJIT",
                        "mgpuModuleUnload",
                        "mgpuModuleGetFunction",
                        "mgpuLaunchKernel",
                        "mgpuStreamCreate",
                        "mgpuStreamDestroy",
                        "mgpuStreamSynchronize",
                        "mgpuStreamWaitEvent",
                        "mgpuEventCreate",
                        "mgpuEventDestroy",
                        "mgpuEventSynchronize",
                        "mgpuEventRecord",
                        "mgpuMemAlloc",
                        "mgpuMemFree",
                        "mgpuMemcpy",
                        "mgpuMemset32",
                        "mgpuMemset16",
                        "mgpuSetDefaultDevice",
                        "_mlir_ciface_terra_cuda_matmul_f32",
                        "_mlir_ciface_terra_cuda_matmul_f64",
                        "_mlir_ciface_terra_cuda_batch_matmul_f32",
                        "_mlir_ciface_terra_cuda_batch_matmul_f64"})
    EXPECT_TRUE(names.count(n)) << n;
}

//===----------------------------------------------------------------------===//
// On a GPU.
//===----------------------------------------------------------------------===//

class Device : public ::testing::Test {
protected:
  void SetUp() override {
    std::string why;
    if (!terra::cuda::available(&why))
      GTEST_SKIP() << "no usable CUDA device: " << why;
    terra::cuda::takeLastError();
  }
  void TearDown() override { EXPECT_EQ(terra::cuda::takeLastError(), ""); }
};

/// x[i] += 1 for i < n (checked with ptxas -arch=sm_80).
const char kAddOnePTX[] = R"(
.version 8.0
.target sm_80
.address_size 64
.visible .entry add_one(.param .u64 p_x, .param .u32 p_n)
{
  .reg .pred %p<2>;
  .reg .b32 %r<6>;
  .reg .f32 %f<3>;
  .reg .b64 %rd<5>;
  ld.param.u64 %rd1, [p_x];
  ld.param.u32 %r1, [p_n];
  mov.u32 %r2, %ctaid.x;
  mov.u32 %r3, %ntid.x;
  mov.u32 %r4, %tid.x;
  mad.lo.s32 %r5, %r2, %r3, %r4;
  setp.ge.u32 %p1, %r5, %r1;
  @%p1 bra DONE;
  cvta.to.global.u64 %rd2, %rd1;
  mul.wide.u32 %rd3, %r5, 4;
  add.s64 %rd4, %rd2, %rd3;
  ld.global.f32 %f1, [%rd4];
  add.f32 %f2, %f1, 0f3F800000;
  st.global.f32 [%rd4], %f2;
DONE:
  ret;
}
)";

TEST_F(Device, LaunchesAKernelOnManagedMemory) {
  void *module = mgpuModuleLoadJIT(const_cast<char *>(kAddOnePTX), 3);
  ASSERT_NE(module, nullptr) << terra::cuda::takeLastError();
  void *fn = mgpuModuleGetFunction(module, "add_one");
  ASSERT_NE(fn, nullptr);
  uint32_t n = 1000;
  auto *x = static_cast<float *>(terra::cuda::allocManaged(n * sizeof(float)));
  ASSERT_NE(x, nullptr);
  for (uint32_t i = 0; i < n; ++i)
    x[i] = float(i);
  void *stream = mgpuStreamCreate();
  void *params[] = {&x, &n};
  mgpuLaunchKernel(fn, (n + 255) / 256, 1, 1, 256, 1, 1, 0, stream, params,
                   nullptr, 2);
  mgpuStreamSynchronize(stream);
  mgpuStreamDestroy(stream);
  for (uint32_t i = 0; i < n; ++i)
    ASSERT_EQ(x[i], float(i) + 1.f) << i;
  terra::cuda::freeManaged(x);
  mgpuModuleUnload(module);
}

TEST_F(Device, KernelsWriteTheRunCheckFlagTheHostReads) {
  // terra-gpu-device-checks: a failed guard inside a kernel stores into
  // the run's check flag (pinned host memory mapped for the device), which
  // the host reads after waiting for the stream. add_one on the flag's
  // word: 0.0f + 1 is 1.0f, whose bits are not 0.
  int32_t *host = nullptr;
  void *device = nullptr;
  ASSERT_TRUE(terra::cuda::runCheckFlag(&host, &device));
  int32_t *again = nullptr;
  void *againDevice = nullptr;
  ASSERT_TRUE(terra::cuda::runCheckFlag(&again, &againDevice));
  EXPECT_EQ(again, host); // one per thread
  EXPECT_EQ(againDevice, device);
  void *module = mgpuModuleLoadJIT(const_cast<char *>(kAddOnePTX), 3);
  ASSERT_NE(module, nullptr) << terra::cuda::takeLastError();
  void *fn = mgpuModuleGetFunction(module, "add_one");
  ASSERT_NE(fn, nullptr);
  *const_cast<volatile int32_t *>(host) = 0;
  uint32_t n = 1;
  void *params[] = {&device, &n};
  ASSERT_TRUE(terra::cuda::beginRunStream());
  void *stream = mgpuStreamCreate();
  mgpuLaunchKernel(fn, 1, 1, 1, 32, 1, 1, 0, stream, params, nullptr, 2);
  mgpuStreamSynchronize(stream);
  mgpuStreamDestroy(stream);
  terra::cuda::endRunStream();
  float value;
  int32_t bits = *const_cast<volatile int32_t *>(host);
  std::memcpy(&value, &bits, sizeof value);
  EXPECT_EQ(value, 1.f);
  mgpuModuleUnload(module);
}

TEST_F(Device, LaunchesOfARunQueueOnOneStreamInOrder) {
  // What the GPU lowering emits around each launch (create, launch, sync,
  // destroy), inside a run: every launch lands on the run's stream and
  // none waits; 50 dependent launches then one wait, and a copy out through
  // the legacy default stream sees them all.
  void *module = mgpuModuleLoadJIT(const_cast<char *>(kAddOnePTX), 3);
  ASSERT_NE(module, nullptr) << terra::cuda::takeLastError();
  void *fn = mgpuModuleGetFunction(module, "add_one");
  ASSERT_NE(fn, nullptr);
  uint32_t n = 4096;
  std::vector<float> in(n, 0.f), out(n, -1.f);
  auto *x = static_cast<float *>(terra::cuda::allocDevice(n * sizeof(float)));
  ASSERT_NE(x, nullptr);
  ASSERT_TRUE(terra::cuda::copyToDevice(x, in.data(), n * sizeof(float)));
  ASSERT_TRUE(terra::cuda::beginRunStream());
  void *first = mgpuStreamCreate();
  for (int r = 0; r < 50; ++r) {
    void *stream = mgpuStreamCreate();
    EXPECT_EQ(stream, first);
    void *params[] = {&x, &n};
    mgpuLaunchKernel(fn, (n + 255) / 256, 1, 1, 256, 1, 1, 0, stream, params,
                     nullptr, 2);
    mgpuStreamSynchronize(stream);
    mgpuStreamDestroy(stream);
  }
  ASSERT_TRUE(terra::cuda::copyToHost(out.data(), x, n * sizeof(float)));
  terra::cuda::endRunStream();
  EXPECT_EQ(terra::cuda::takeLastError(), "");
  for (uint32_t i = 0; i < n; ++i)
    ASSERT_EQ(out[i], 50.f) << i;
  // After the run, launches get streams of their own again.
  void *stream = mgpuStreamCreate();
  EXPECT_NE(stream, first);
  mgpuStreamDestroy(stream);
  terra::cuda::freeDevice(x);
  mgpuModuleUnload(module);
}

TEST_F(Device, MemsetOnDeviceMemory) {
  auto *p = static_cast<uint32_t *>(mgpuMemAlloc(256 * 4, nullptr, true));
  ASSERT_NE(p, nullptr);
  mgpuMemset32(p, 0x3f800000u, 256, nullptr);
  mgpuStreamSynchronize(nullptr);
  for (int i = 0; i < 256; ++i)
    ASSERT_EQ(p[i], 0x3f800000u);
  mgpuMemFree(p, nullptr);
}

TEST_F(Device, DeviceMemoryRoundTripsAndIsReused) {
  std::vector<float> in(1000), out(1000, 0.0f);
  for (int i = 0; i < 1000; ++i)
    in[i] = i * 0.5f;
  void *p = terra::cuda::allocDevice(in.size() * sizeof(float));
  ASSERT_NE(p, nullptr) << terra::cuda::takeLastError();
  ASSERT_TRUE(terra::cuda::copyToDevice(p, in.data(), 4000));
  // A kernel-free device-side op on it: memset the first 10 elements.
  mgpuMemset32(p, 0x3f800000u, 10, nullptr);
  mgpuStreamSynchronize(nullptr);
  ASSERT_TRUE(terra::cuda::copyToHost(out.data(), p, 4000));
  for (int i = 0; i < 1000; ++i)
    ASSERT_EQ(out[i], i < 10 ? 1.0f : in[i]) << i;
  terra::cuda::freeDevice(p);
  // The block is cached: the same size gets it back.
  void *q = terra::cuda::allocDevice(4000);
  EXPECT_EQ(q, p);
  terra::cuda::freeDevice(q);
  terra::cuda::releaseDeviceCache();
  EXPECT_EQ(terra::cuda::takeLastError(), "");
}

/// terra_cuda_matmul_f32 on managed buffers: C (m x n) = A (m x k) * B
/// (k x n), or C += A * B unless `overwrite`, with A and B stored row-major
/// or column-major (a transposed view: CUBLAS_OP_T), checked element by
/// element against a host reference.
void checkMatmul(int64_t m, int64_t k, int64_t n, bool aColumnMajor,
                 bool bColumnMajor, bool overwrite) {
  auto alloc = [](int64_t count) {
    return static_cast<float *>(
        terra::cuda::allocManaged(count * sizeof(float)));
  };
  float *a = alloc(m * k), *b = alloc(k * n), *c = alloc(m * n);
  ASSERT_TRUE(a && b && c);
  for (int64_t i = 0; i < m * k; ++i)
    a[i] = float((i * 7) % 11) - 5.f;
  for (int64_t i = 0; i < k * n; ++i)
    b[i] = float((i * 5) % 13) - 6.f;
  for (int64_t i = 0; i < m * n; ++i)
    c[i] = 1.f;
  auto A = [&](int64_t i, int64_t l) {
    return aColumnMajor ? a[l * m + i] : a[i * k + l];
  };
  auto B = [&](int64_t l, int64_t j) {
    return bColumnMajor ? b[j * k + l] : b[l * n + j];
  };
  auto ma = aColumnMajor ? columnMajor(a, m, k) : matrix(a, m, k);
  auto mb = bColumnMajor ? columnMajor(b, k, n) : matrix(b, k, n);
  auto mc = matrix(c, m, n);
  _mlir_ciface_terra_cuda_matmul_f32(&ma, &mb, &mc, overwrite ? 1 : 0);
  ASSERT_EQ(terra::cuda::takeLastError(), "");
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      float ref = overwrite ? 0.f : 1.f;
      for (int64_t l = 0; l < k; ++l)
        ref += A(i, l) * B(l, j);
      ASSERT_NEAR(c[i * n + j], ref, 1e-3f * (1.f + std::fabs(ref)))
          << i << "," << j;
    }
  terra::cuda::freeManaged(a);
  terra::cuda::freeManaged(b);
  terra::cuda::freeManaged(c);
}

TEST_F(Device, CublasMatmulMatchesReference) {
  checkMatmul(37, 53, 29, false, false, /*overwrite=*/false);
}

TEST_F(Device, CublasMatmulOfTransposedViewsMatchesReference) {
  checkMatmul(19, 33, 11, true, true, /*overwrite=*/true);
  checkMatmul(19, 33, 11, false, true, /*overwrite=*/true);
  checkMatmul(19, 33, 11, true, false, /*overwrite=*/false);
}

// cuDNN's convolution, input gradient and weight gradient (f64: exact up to
// summation order) against direct loops: 2 groups, stride 2, padding 1,
// dilation 1, a bias, and accumulation into the gradients' outputs.
TEST_F(Device, CudnnConvolutionsMatchReference) {
  const int64_t n = 2, c = 4, h = 9, w = 7, f = 6, g = 2, k = 3, s = 2, p = 1;
  const int64_t oh = (h + 2 * p - k) / s + 1, ow = (w + 2 * p - k) / s + 1;
  const int64_t cg = c / g, fg = f / g;
  auto alloc = [](int64_t count) {
    return static_cast<double *>(
        terra::cuda::allocManaged(count * sizeof(double)));
  };
  double *x = alloc(n * c * h * w), *wt = alloc(f * cg * k * k), *b = alloc(f),
         *y = alloc(n * f * oh * ow), *dx = alloc(n * c * h * w),
         *dw = alloc(f * cg * k * k);
  ASSERT_TRUE(x && wt && b && y && dx && dw);
  for (int64_t i = 0; i < n * c * h * w; ++i)
    x[i] = double(i % 11) - 5.0, dx[i] = 1.0;
  for (int64_t i = 0; i < f * cg * k * k; ++i)
    wt[i] = double(i % 7) - 3.0, dw[i] = 0.5;
  for (int64_t i = 0; i < f; ++i)
    b[i] = double(i) * 0.25;
  auto mx = nchw(x, n, c, h, w), mw = nchw(wt, f, cg, k, k),
       my = nchw(y, n, f, oh, ow), mdx = nchw(dx, n, c, h, w),
       mdw = nchw(dw, f, cg, k, k);
  StridedMemRefType<double, 1> mb{b, b, 0, {f}, {1}};
  // Forward (overwrite), then the gradients for dy = y (accumulated).
  _mlir_ciface_terra_cuda_conv2d_f64(&mx, &mw, &mb, &my, s, s, p, p, p, p, 1, 1,
                                     g, /*overwrite=*/1);
  ASSERT_EQ(terra::cuda::takeLastError(), "");
  _mlir_ciface_terra_cuda_conv2d_grad_input_f64(&my, &mw, &mdx, s, s, p, p, p,
                                                p, 1, 1, g, /*overwrite=*/0);
  ASSERT_EQ(terra::cuda::takeLastError(), "");
  _mlir_ciface_terra_cuda_conv2d_grad_weight_f64(&mx, &my, &mdw, s, s, p, p, p,
                                                 p, 1, 1, g, /*overwrite=*/0);
  ASSERT_EQ(terra::cuda::takeLastError(), "");
  ASSERT_TRUE(terra::cuda::synchronize());
  // Direct loops: y[b][o][i][j] = bias[o] + sum x[b][ci][i*s-p+u][j*s-p+v]
  // * w[o][ci - group*cg][u][v], and the gradients of that sum.
  std::vector<double> ry(n * f * oh * ow), rdx(n * c * h * w, 1.0),
      rdw(f * cg * k * k, 0.5);
  for (int64_t bi = 0; bi < n; ++bi)
    for (int64_t o = 0; o < f; ++o)
      for (int64_t i = 0; i < oh; ++i)
        for (int64_t j = 0; j < ow; ++j) {
          double acc = b[o];
          for (int64_t ci = 0; ci < cg; ++ci)
            for (int64_t u = 0; u < k; ++u)
              for (int64_t v = 0; v < k; ++v) {
                int64_t r = i * s - p + u, q = j * s - p + v;
                if (r >= 0 && r < h && q >= 0 && q < w)
                  acc += x[((bi * c + (o / fg) * cg + ci) * h + r) * w + q] *
                         wt[((o * cg + ci) * k + u) * k + v];
              }
          ry[((bi * f + o) * oh + i) * ow + j] = acc;
        }
  for (int64_t bi = 0; bi < n; ++bi)
    for (int64_t o = 0; o < f; ++o)
      for (int64_t i = 0; i < oh; ++i)
        for (int64_t j = 0; j < ow; ++j) {
          double gy = ry[((bi * f + o) * oh + i) * ow + j];
          for (int64_t ci = 0; ci < cg; ++ci)
            for (int64_t u = 0; u < k; ++u)
              for (int64_t v = 0; v < k; ++v) {
                int64_t r = i * s - p + u, q = j * s - p + v;
                if (r < 0 || r >= h || q < 0 || q >= w)
                  continue;
                int64_t xi = ((bi * c + (o / fg) * cg + ci) * h + r) * w + q;
                int64_t wi = ((o * cg + ci) * k + u) * k + v;
                rdx[xi] += gy * wt[wi];
                rdw[wi] += gy * x[xi];
              }
        }
  for (int64_t i = 0; i < n * f * oh * ow; ++i)
    ASSERT_NEAR(y[i], ry[i], 1e-9 * (1 + std::fabs(ry[i]))) << "y " << i;
  for (int64_t i = 0; i < n * c * h * w; ++i)
    ASSERT_NEAR(dx[i], rdx[i], 1e-9 * (1 + std::fabs(rdx[i]))) << "dx " << i;
  for (int64_t i = 0; i < f * cg * k * k; ++i)
    ASSERT_NEAR(dw[i], rdw[i], 1e-9 * (1 + std::fabs(rdw[i]))) << "dw " << i;
  for (double *m : {x, wt, b, y, dx, dw})
    terra::cuda::freeManaged(m);
}

TEST_F(Device, CublasBatchMatmulMatchesReference) {
  const int64_t batch = 3, m = 5, k = 7, n = 4;
  auto alloc = [](int64_t count) {
    return static_cast<double *>(
        terra::cuda::allocManaged(count * sizeof(double)));
  };
  double *a = alloc(batch * m * k), *b = alloc(batch * k * n),
         *c = alloc(batch * m * n);
  ASSERT_TRUE(a && b && c);
  for (int64_t i = 0; i < batch * m * k; ++i)
    a[i] = double(i % 9) - 4.0;
  for (int64_t i = 0; i < batch * k * n; ++i)
    b[i] = double(i % 7) - 3.0;
  auto desc = [](double *p, int64_t bt, int64_t r, int64_t cl) {
    StridedMemRefType<double, 3> d;
    d.basePtr = d.data = p;
    d.offset = 0;
    d.sizes[0] = bt, d.sizes[1] = r, d.sizes[2] = cl;
    d.strides[0] = r * cl, d.strides[1] = cl, d.strides[2] = 1;
    return d;
  };
  auto da = desc(a, batch, m, k), db = desc(b, batch, k, n),
       dc = desc(c, batch, m, n);
  _mlir_ciface_terra_cuda_batch_matmul_f64(&da, &db, &dc, /*overwrite=*/1);
  for (int64_t t = 0; t < batch; ++t)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double ref = 0;
        for (int64_t l = 0; l < k; ++l)
          ref += a[t * m * k + i * k + l] * b[t * k * n + l * n + j];
        ASSERT_DOUBLE_EQ(c[t * m * n + i * n + j], ref);
      }
  terra::cuda::freeManaged(a);
  terra::cuda::freeManaged(b);
  terra::cuda::freeManaged(c);
}

} // namespace
