//===- Cudnn.cpp - cuDNN convolution entry points for GPU graphs ----------===//
//
// The C-interface functions `terra-library-convolutions{backend=cuda}`
// emits: 2-D convolutions (NCHW, grouped) and their input and weight
// gradients on device memory, computed by cuDNN's convolution API, with the
// ABI of the CPU entry points (include/terra/Runtime/LibraryEntryPoints.h:
// strided memref descriptors, stride, padding before and after, dilation,
// groups, overwrite). libcudnn is loaded with dlopen like cuBLAS: a machine
// without it (or without a GPU) gets a clear error from the call.
//
// cuDNN pads symmetrically: a problem whose padding after the input differs
// from the padding before it fails the run (the compiler keeps such static
// problems as loops; PyTorch's own convolutions are symmetric). The weight
// must be dense NCHW (a filter descriptor has no strides); inputs and
// outputs may have any strides. The algorithm is the first of cuDNN's
// heuristic candidates that runs (`cudnnGet*Algorithm_v7`, what PyTorch
// uses when cudnn.benchmark is off), with the math type it was chosen for
// (TF32 allowed on Ampere and later, as PyTorch's default
// `torch.backends.cudnn.allow_tf32`). The workspace is one growing
// device buffer per thread; calls queue on the run's stream.
//
//===----------------------------------------------------------------------===//
#include "Driver.h"

#include "terra/Runtime/Cuda.h"
#include "terra/Runtime/LibraryEntryPoints.h"

#include "mlir/ExecutionEngine/CRunnerUtils.h"

#include <cudnn.h>
#include <dlfcn.h>

#include <climits>
#include <mutex>
#include <string>
#include <type_traits>

using namespace terra::cuda::detail;

namespace {

#define TERRA_CUDNN_FUNCTIONS(X)                                               \
  X(cudnnCreate)                                                               \
  X(cudnnSetStream)                                                            \
  X(cudnnGetErrorString)                                                       \
  X(cudnnCreateTensorDescriptor)                                               \
  X(cudnnSetTensor4dDescriptorEx)                                              \
  X(cudnnDestroyTensorDescriptor)                                              \
  X(cudnnCreateFilterDescriptor)                                               \
  X(cudnnSetFilter4dDescriptor)                                                \
  X(cudnnDestroyFilterDescriptor)                                              \
  X(cudnnCreateConvolutionDescriptor)                                          \
  X(cudnnSetConvolution2dDescriptor)                                           \
  X(cudnnSetConvolutionGroupCount)                                             \
  X(cudnnSetConvolutionMathType)                                               \
  X(cudnnDestroyConvolutionDescriptor)                                         \
  X(cudnnGetConvolutionForwardAlgorithm_v7)                                    \
  X(cudnnGetConvolutionForwardWorkspaceSize)                                   \
  X(cudnnConvolutionForward)                                                   \
  X(cudnnAddTensor)                                                            \
  X(cudnnGetConvolutionBackwardDataAlgorithm_v7)                               \
  X(cudnnGetConvolutionBackwardDataWorkspaceSize)                              \
  X(cudnnConvolutionBackwardData)                                              \
  X(cudnnGetConvolutionBackwardFilterAlgorithm_v7)                             \
  X(cudnnGetConvolutionBackwardFilterWorkspaceSize)                            \
  X(cudnnConvolutionBackwardFilter)

struct Cudnn {
#define TERRA_CUDNN_MEMBER(NAME) decltype(&::NAME) NAME = nullptr;
  TERRA_CUDNN_FUNCTIONS(TERRA_CUDNN_MEMBER)
#undef TERRA_CUDNN_MEMBER
};

std::string loadCudnn(Cudnn &c) {
  std::string error;
  void *lib = openLibrary({"libcudnn.so.9", "libcudnn.so"}, "libcudnn.so",
                          "cuDNN", error);
  if (!lib)
    return error;
#define TERRA_CUDNN_RESOLVE(NAME)                                              \
  c.NAME = reinterpret_cast<decltype(c.NAME)>(dlsym(lib, #NAME));              \
  if (!c.NAME)                                                                 \
    return "cuDNN lacks " #NAME;
  TERRA_CUDNN_FUNCTIONS(TERRA_CUDNN_RESOLVE)
#undef TERRA_CUDNN_RESOLVE
  return "";
}

const Cudnn *cudnnFor(const char *entry) {
  return libraryFor<Cudnn, loadCudnn>(entry);
}

/// One handle and one workspace per thread (a graph runs on one runner
/// thread), created in the driver's context.
struct ThreadState {
  cudnnHandle_t handle = nullptr;
  CUdeviceptr workspace = 0;
  size_t workspaceBytes = 0;
};
thread_local ThreadState threadState;

/// The descriptors of one problem, destroyed with it.
struct Descriptors {
  const Cudnn &c;
  cudnnTensorDescriptor_t x = nullptr, y = nullptr, bias = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  explicit Descriptors(const Cudnn &c) : c(c) {}
  ~Descriptors() {
    if (x)
      c.cudnnDestroyTensorDescriptor(x);
    if (y)
      c.cudnnDestroyTensorDescriptor(y);
    if (bias)
      c.cudnnDestroyTensorDescriptor(bias);
    if (w)
      c.cudnnDestroyFilterDescriptor(w);
    if (conv)
      c.cudnnDestroyConvolutionDescriptor(conv);
  }
};

/// The problem of one call: the data tensor x (N, C, H, W), the filter w
/// (F, C/G, KH, KW) and the output-side tensor y (N, F, OH, OW), whichever
/// of them the routine reads or writes.
template <typename T> struct Problem {
  StridedMemRefType<T, 4> *x, *w, *y;
  int64_t sh, sw, plh, plw, prh, prw, dh, dw, groups;
};

bool fitsInt(const int64_t *v, int n) {
  for (int i = 0; i < n; ++i)
    if (v[i] < 0 || v[i] > INT_MAX)
      return false;
  return true;
}

template <typename T> constexpr cudnnDataType_t dataType() {
  return std::is_same_v<T, float> ? CUDNN_DATA_FLOAT : CUDNN_DATA_DOUBLE;
}

/// Sets up the descriptors of `p`, or reports why it is not a problem
/// cuDNN takes.
template <typename T>
bool describe(const char *entry, const Cudnn &c, Problem<T> p, Descriptors &d) {
  auto fail = [&](const std::string &why) {
    reportError(std::string(entry) + ": " + why);
    return false;
  };
  // The padding after the input: given, or derived from the run's sizes.
  if (p.prh < 0)
    p.prh =
        terra::rt::convHighPadding(p.x->sizes[2], p.y->sizes[2], p.w->sizes[2],
                                   p.sh, p.dh, p.plh, -1 - p.prh);
  if (p.prw < 0)
    p.prw =
        terra::rt::convHighPadding(p.x->sizes[3], p.y->sizes[3], p.w->sizes[3],
                                   p.sw, p.dw, p.plw, -1 - p.prw);
  if (p.prh != p.plh || p.prw != p.plw)
    return fail("the padding after the input (" + std::to_string(p.prh) + ", " +
                std::to_string(p.prw) + ") differs from the padding " +
                "before it (" + std::to_string(p.plh) + ", " +
                std::to_string(p.plw) + "): cuDNN pads symmetrically");
  const int64_t params[] = {p.sh, p.sw, p.plh, p.plw, p.dh, p.dw, p.groups};
  if (!fitsInt(p.x->sizes, 4) || !fitsInt(p.x->strides, 4) ||
      !fitsInt(p.y->sizes, 4) || !fitsInt(p.y->strides, 4) ||
      !fitsInt(p.w->sizes, 4) || !fitsInt(params, 7) || p.groups < 1)
    return fail("sizes, strides or parameters out of cuDNN's range");
  int64_t dense[4] = {p.w->sizes[1] * p.w->sizes[2] * p.w->sizes[3],
                      p.w->sizes[2] * p.w->sizes[3], p.w->sizes[3], 1};
  for (int i = 0; i < 4; ++i)
    if (p.w->sizes[i] > 1 && p.w->strides[i] != dense[i])
      return fail("the weight is not dense NCHW (a cuDNN filter has no "
                  "strides; the compiler should have copied it)");
  if (p.x->sizes[1] != p.w->sizes[1] * p.groups ||
      p.y->sizes[1] != p.w->sizes[0] || p.x->sizes[0] != p.y->sizes[0])
    return fail("the channel or batch sizes of the operands do not match");
  auto tensor = [&](cudnnTensorDescriptor_t &t, StridedMemRefType<T, 4> *m) {
    return c.cudnnCreateTensorDescriptor(&t) == CUDNN_STATUS_SUCCESS &&
           c.cudnnSetTensor4dDescriptorEx(
               t, dataType<T>(), int(m->sizes[0]), int(m->sizes[1]),
               int(m->sizes[2]), int(m->sizes[3]), int(m->strides[0]),
               int(m->strides[1]), int(m->strides[2]),
               int(m->strides[3])) == CUDNN_STATUS_SUCCESS;
  };
  bool ok =
      tensor(d.x, p.x) && tensor(d.y, p.y) &&
      c.cudnnCreateFilterDescriptor(&d.w) == CUDNN_STATUS_SUCCESS &&
      c.cudnnSetFilter4dDescriptor(d.w, dataType<T>(), CUDNN_TENSOR_NCHW,
                                   int(p.w->sizes[0]), int(p.w->sizes[1]),
                                   int(p.w->sizes[2]), int(p.w->sizes[3])) ==
          CUDNN_STATUS_SUCCESS &&
      c.cudnnCreateConvolutionDescriptor(&d.conv) == CUDNN_STATUS_SUCCESS &&
      c.cudnnSetConvolution2dDescriptor(
          d.conv, int(p.plh), int(p.plw), int(p.sh), int(p.sw), int(p.dh),
          int(p.dw), CUDNN_CROSS_CORRELATION,
          dataType<T>()) == CUDNN_STATUS_SUCCESS &&
      c.cudnnSetConvolutionGroupCount(d.conv, int(p.groups)) ==
          CUDNN_STATUS_SUCCESS &&
      c.cudnnSetConvolutionMathType(d.conv, CUDNN_DEFAULT_MATH) ==
          CUDNN_STATUS_SUCCESS;
  if (!ok)
    return fail("cuDNN rejects the problem's descriptors (x " +
                std::to_string(p.x->sizes[0]) + "x" +
                std::to_string(p.x->sizes[1]) + "x" +
                std::to_string(p.x->sizes[2]) + "x" +
                std::to_string(p.x->sizes[3]) + ", groups " +
                std::to_string(p.groups) + ")");
  return true;
}

/// The thread's handle, on the run's stream (after the kernels queued
/// before it, without waiting: the host waits when it reads a result;
/// without a run stream, the legacy default stream, synchronized after
/// the call); null after reporting.
ThreadState *threadHandle(const char *entry, const Cudnn &c) {
  ThreadState &s = threadState;
  if (!s.handle) {
    if (cudnnStatus_t st = c.cudnnCreate(&s.handle);
        st != CUDNN_STATUS_SUCCESS) {
      reportError(std::string(entry) +
                  ": cudnnCreate failed: " + c.cudnnGetErrorString(st));
      s.handle = nullptr;
      return nullptr;
    }
  }
  c.cudnnSetStream(s.handle, reinterpret_cast<cudaStream_t>(runStream()));
  return &s;
}

/// Grows the thread's workspace to at least `bytes` (the old one freed once
/// the device is idle).
bool growWorkspace(const char *entry, const Driver &drv, ThreadState &s,
                   size_t bytes) {
  if (bytes <= s.workspaceBytes)
    return true;
  if (s.workspace) {
    if (!check(drv, drv.cuCtxSynchronize(), entry) ||
        !check(drv, drv.cuMemFree(s.workspace), entry))
      return false;
    s.workspace = 0;
    s.workspaceBytes = 0;
  }
  if (!check(drv, drv.cuMemAlloc(&s.workspace, bytes), entry))
    return false;
  s.workspaceBytes = bytes;
  return true;
}

bool succeeded(const char *entry, const Cudnn &c, cudnnStatus_t st,
               const char *what) {
  if (st == CUDNN_STATUS_SUCCESS)
    return true;
  reportError(std::string(entry) + ": " + what + ": " +
              c.cudnnGetErrorString(st));
  return false;
}

/// The number of candidates asked of cuDNN's heuristics (more than any
/// routine has algorithms).
constexpr int kCandidates = 16;

/// The first of the heuristics' `found` candidates that runs (its status
/// is success: some algorithms do not support a data type, f64 say), with
/// the convolution set to the math type it was chosen for (as PyTorch
/// does); null after reporting when none runs.
template <typename Perf>
const Perf *choose(const char *entry, const Cudnn &c, const Descriptors &d,
                   int found, const Perf *perf) {
  for (int i = 0; i < found; ++i) {
    if (perf[i].status != CUDNN_STATUS_SUCCESS)
      continue;
    if (!succeeded(entry, c,
                   c.cudnnSetConvolutionMathType(d.conv, perf[i].mathType),
                   "setting the math type"))
      return nullptr;
    return &perf[i];
  }
  reportError(std::string(entry) + ": cuDNN has no algorithm for the problem" +
              (found > 0 ? std::string(" (") +
                               c.cudnnGetErrorString(perf[0].status) + ")"
                         : std::string()));
  return nullptr;
}

/// One cuDNN routine: asks the heuristics for candidates
/// (`heuristics(count, &found, perfs)`), takes the first that runs, sizes
/// its workspace (`size(algo, &bytes)`), grows the thread's workspace and
/// runs it (`execute(algo, workspace, bytes)`, reported as `what`).
template <typename Perf, typename Heuristics, typename Size, typename Execute>
bool runAlgorithm(const char *entry, const Driver &drv, const Cudnn &c,
                  const Descriptors &d, ThreadState &s, const char *what,
                  Heuristics heuristics, Size size, Execute execute) {
  Perf perfs[kCandidates];
  int found = 0;
  size_t bytes = 0;
  const Perf *perf = nullptr;
  return succeeded(entry, c, heuristics(kCandidates, &found, perfs),
                   "choosing an algorithm") &&
         (perf = choose(entry, c, d, found, perfs)) &&
         succeeded(entry, c, size(perf->algo, &bytes),
                   "sizing the workspace") &&
         growWorkspace(entry, drv, s, bytes) &&
         succeeded(
             entry, c,
             execute(perf->algo, reinterpret_cast<void *>(s.workspace), bytes),
             what);
}

enum class Routine { Forward, GradInput, GradWeight };

/// Runs one routine of `p` (y/dy, x/dx, w/dw as the routine reads and
/// writes them); `bias` (forward only) may have no elements.
template <typename T>
void run(const char *entry, Routine routine, Problem<T> p,
         StridedMemRefType<T, 1> *bias, bool overwrite) {
  const Driver *drv = driverFor(entry);
  if (!drv)
    return;
  const Cudnn *c = cudnnFor(entry);
  if (!c)
    return;
  ScopedContext scope(*drv);
  Descriptors d(*c);
  if (!describe(entry, *c, p, d))
    return;
  ThreadState *s = threadHandle(entry, *c);
  if (!s)
    return;
  cudnnHandle_t h = s->handle;
  T one = 1, beta = overwrite ? T(0) : T(1);
  T *x = p.x->data + p.x->offset, *w = p.w->data + p.w->offset,
    *y = p.y->data + p.y->offset;
  switch (routine) {
  case Routine::Forward:
    if (!runAlgorithm<cudnnConvolutionFwdAlgoPerf_t>(
            entry, *drv, *c, d, *s, "cudnnConvolutionForward",
            [&](int n, int *found, cudnnConvolutionFwdAlgoPerf_t *perfs) {
              return c->cudnnGetConvolutionForwardAlgorithm_v7(
                  h, d.x, d.w, d.conv, d.y, n, found, perfs);
            },
            [&](cudnnConvolutionFwdAlgo_t algo, size_t *bytes) {
              return c->cudnnGetConvolutionForwardWorkspaceSize(
                  h, d.x, d.w, d.conv, d.y, algo, bytes);
            },
            [&](cudnnConvolutionFwdAlgo_t algo, void *ws, size_t bytes) {
              return c->cudnnConvolutionForward(h, &one, d.x, x, d.w, w, d.conv,
                                                algo, ws, bytes, &beta, d.y, y);
            }))
      return;
    if (bias->sizes[0] > 0) {
      if (bias->sizes[0] != p.y->sizes[1]) {
        reportError(std::string(entry) + ": the bias has " +
                    std::to_string(bias->sizes[0]) + " elements for " +
                    std::to_string(p.y->sizes[1]) + " channels");
        return;
      }
      if (!succeeded(entry, *c, c->cudnnCreateTensorDescriptor(&d.bias),
                     "a bias descriptor") ||
          !succeeded(entry, *c,
                     c->cudnnSetTensor4dDescriptorEx(
                         d.bias, dataType<T>(), 1, int(bias->sizes[0]), 1, 1,
                         int(bias->sizes[0] * bias->strides[0]),
                         int(bias->strides[0]), 1, 1),
                     "a bias descriptor") ||
          !succeeded(entry, *c,
                     c->cudnnAddTensor(h, &one, d.bias,
                                       bias->data + bias->offset, &one, d.y, y),
                     "adding the bias"))
        return;
    }
    break;
  case Routine::GradInput: // y holds dy, x receives dx
    if (!runAlgorithm<cudnnConvolutionBwdDataAlgoPerf_t>(
            entry, *drv, *c, d, *s, "cudnnConvolutionBackwardData",
            [&](int n, int *found, cudnnConvolutionBwdDataAlgoPerf_t *perfs) {
              return c->cudnnGetConvolutionBackwardDataAlgorithm_v7(
                  h, d.w, d.y, d.conv, d.x, n, found, perfs);
            },
            [&](cudnnConvolutionBwdDataAlgo_t algo, size_t *bytes) {
              return c->cudnnGetConvolutionBackwardDataWorkspaceSize(
                  h, d.w, d.y, d.conv, d.x, algo, bytes);
            },
            [&](cudnnConvolutionBwdDataAlgo_t algo, void *ws, size_t bytes) {
              return c->cudnnConvolutionBackwardData(h, &one, d.w, w, d.y, y,
                                                     d.conv, algo, ws, bytes,
                                                     &beta, d.x, x);
            }))
      return;
    break;
  case Routine::GradWeight: // y holds dy, w receives dw
    if (!runAlgorithm<cudnnConvolutionBwdFilterAlgoPerf_t>(
            entry, *drv, *c, d, *s, "cudnnConvolutionBackwardFilter",
            [&](int n, int *found, cudnnConvolutionBwdFilterAlgoPerf_t *perfs) {
              return c->cudnnGetConvolutionBackwardFilterAlgorithm_v7(
                  h, d.x, d.y, d.conv, d.w, n, found, perfs);
            },
            [&](cudnnConvolutionBwdFilterAlgo_t algo, size_t *bytes) {
              return c->cudnnGetConvolutionBackwardFilterWorkspaceSize(
                  h, d.x, d.y, d.conv, d.w, algo, bytes);
            },
            [&](cudnnConvolutionBwdFilterAlgo_t algo, void *ws, size_t bytes) {
              return c->cudnnConvolutionBackwardFilter(h, &one, d.x, x, d.y, y,
                                                       d.conv, algo, ws, bytes,
                                                       &beta, d.w, w);
            }))
      return;
    break;
  }
  if (!runStream())
    check(*drv, drv->cuStreamSynchronize(nullptr), entry);
}

} // namespace

#define TERRA_CUDA_EXPORT extern "C" __attribute__((visibility("default")))

#define TERRA_CUDNN_ENTRY_POINTS(SUFFIX, T)                                    \
  TERRA_CUDA_EXPORT void _mlir_ciface_terra_cuda_conv2d_##SUFFIX(              \
      StridedMemRefType<T, 4> *x, StridedMemRefType<T, 4> *w,                  \
      StridedMemRefType<T, 1> *b, StridedMemRefType<T, 4> *y, int64_t sh,      \
      int64_t sw, int64_t plh, int64_t plw, int64_t prh, int64_t prw,          \
      int64_t dh, int64_t dw, int64_t groups, int64_t overwrite) {             \
    run<T>("terra_cuda_conv2d_" #SUFFIX, Routine::Forward,                     \
           {x, w, y, sh, sw, plh, plw, prh, prw, dh, dw, groups}, b,           \
           overwrite != 0);                                                    \
  }                                                                            \
  TERRA_CUDA_EXPORT void _mlir_ciface_terra_cuda_conv2d_grad_input_##SUFFIX(   \
      StridedMemRefType<T, 4> *dy, StridedMemRefType<T, 4> *w,                 \
      StridedMemRefType<T, 4> *dx, int64_t sh, int64_t sw, int64_t plh,        \
      int64_t plw, int64_t prh, int64_t prw, int64_t dh, int64_t dw,           \
      int64_t groups, int64_t overwrite) {                                     \
    run<T>("terra_cuda_conv2d_grad_input_" #SUFFIX, Routine::GradInput,        \
           {dx, w, dy, sh, sw, plh, plw, prh, prw, dh, dw, groups}, nullptr,   \
           overwrite != 0);                                                    \
  }                                                                            \
  TERRA_CUDA_EXPORT void _mlir_ciface_terra_cuda_conv2d_grad_weight_##SUFFIX(  \
      StridedMemRefType<T, 4> *x, StridedMemRefType<T, 4> *dy,                 \
      StridedMemRefType<T, 4> *dweight, int64_t sh, int64_t sw, int64_t plh,   \
      int64_t plw, int64_t prh, int64_t prw, int64_t dh, int64_t dw,           \
      int64_t groups, int64_t overwrite) {                                     \
    run<T>("terra_cuda_conv2d_grad_weight_" #SUFFIX, Routine::GradWeight,      \
           {x, dweight, dy, sh, sw, plh, plw, prh, prw, dh, dw, groups},       \
           nullptr, overwrite != 0);                                           \
  }

TERRA_CUDNN_ENTRY_POINTS(f32, float)
TERRA_CUDNN_ENTRY_POINTS(f64, double)
#undef TERRA_CUDNN_ENTRY_POINTS
