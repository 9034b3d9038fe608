//===- Driver.h - The CUDA driver API, loaded at run time -------*- C++ -*-===//
//
// The driver functions the runtime uses, resolved with dlopen/dlsym from
// libcuda.so.1 so that nothing links against the driver: on a machine
// without one, `driver()` returns null and says why. cuda.h supplies the
// types only; each function is looked up under its ABI name (the `_v2`
// names cuda.h's macros select).
//
//===----------------------------------------------------------------------===//
#ifndef TERRA_LIB_RUNTIME_CUDA_DRIVER_H
#define TERRA_LIB_RUNTIME_CUDA_DRIVER_H

#include <cuda.h>

#include <initializer_list>
#include <mutex>
#include <string>

namespace terra::cuda::detail {

#define TERRA_CUDA_DRIVER_FUNCTIONS(X)                                         \
  X(cuInit, "cuInit")                                                          \
  X(cuGetErrorString, "cuGetErrorString")                                      \
  X(cuDeviceGetCount, "cuDeviceGetCount")                                      \
  X(cuDeviceGet, "cuDeviceGet")                                                \
  X(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain")                      \
  X(cuCtxPushCurrent, "cuCtxPushCurrent_v2")                                   \
  X(cuCtxPopCurrent, "cuCtxPopCurrent_v2")                                     \
  X(cuCtxSynchronize, "cuCtxSynchronize")                                      \
  X(cuModuleLoadData, "cuModuleLoadData")                                      \
  X(cuModuleLoadDataEx, "cuModuleLoadDataEx")                                  \
  X(cuModuleUnload, "cuModuleUnload")                                          \
  X(cuModuleGetFunction, "cuModuleGetFunction")                                \
  X(cuLaunchKernel, "cuLaunchKernel")                                          \
  X(cuStreamCreate, "cuStreamCreate")                                          \
  X(cuStreamSynchronize, "cuStreamSynchronize")                                \
  X(cuStreamDestroy, "cuStreamDestroy_v2")                                     \
  X(cuStreamWaitEvent, "cuStreamWaitEvent")                                    \
  X(cuEventCreate, "cuEventCreate")                                            \
  X(cuEventDestroy, "cuEventDestroy_v2")                                       \
  X(cuEventSynchronize, "cuEventSynchronize")                                  \
  X(cuEventRecord, "cuEventRecord")                                            \
  X(cuMemAlloc, "cuMemAlloc_v2")                                               \
  X(cuMemAllocManaged, "cuMemAllocManaged")                                    \
  X(cuMemFree, "cuMemFree_v2")                                                 \
  X(cuMemHostAlloc, "cuMemHostAlloc")                                          \
  X(cuMemHostGetDevicePointer, "cuMemHostGetDevicePointer_v2")                 \
  X(cuMemcpyAsync, "cuMemcpyAsync")                                            \
  X(cuMemcpyHtoD, "cuMemcpyHtoD_v2")                                           \
  X(cuMemcpyDtoH, "cuMemcpyDtoH_v2")                                           \
  X(cuMemcpyDtoD, "cuMemcpyDtoD_v2")                                           \
  X(cuMemsetD32Async, "cuMemsetD32Async")                                      \
  X(cuMemsetD16Async, "cuMemsetD16Async")

/// The resolved driver functions and the context every entry point uses
/// (the primary context of the selected device, shared with the CUDA
/// runtime API and therefore with cuBLAS and PyTorch).
struct Driver {
#define TERRA_CUDA_MEMBER(NAME, SYMBOL) decltype(&::NAME) NAME = nullptr;
  TERRA_CUDA_DRIVER_FUNCTIONS(TERRA_CUDA_MEMBER)
#undef TERRA_CUDA_MEMBER
  CUdevice device = 0;
  CUcontext context = nullptr;
};

/// The driver with a usable context, or null (the reason is in `why`).
/// Loads and initializes once per process; thread-safe.
const Driver *driver(std::string *why = nullptr);

/// Selects the device `driver()` initializes (before its first call).
void setDefaultDevice(int device);

/// Records `message` as this thread's last error and calls the handler.
void reportError(const std::string &message);

/// True on success; otherwise reports "<what>: <driver's message>".
bool check(const Driver &d, CUresult result, const char *what);

/// Makes the driver's context current for the scope (like MLIR's own
/// CUDA runtime wrappers do around every call).
class ScopedContext {
public:
  explicit ScopedContext(const Driver &d);
  ~ScopedContext();

private:
  const Driver &d;
};

/// The driver, or null after reporting
/// "<entry>: <why>" (no driver, no device).
const Driver *driverFor(const char *entry);

/// A CUDA library loaded by dlopen: the first of `sonames` (an already
/// loaded one is found by its soname: PyTorch's process has cuBLAS and
/// cuDNN), else `lib64/<fallback>` of the toolkit this runtime was built
/// against. Null with `error` = "cannot load <what> (<every dlerror>)".
void *openLibrary(std::initializer_list<const char *> sonames,
                  const char *fallback, const char *what, std::string &error);

/// The `Library` that `load` fills (its functions, from openLibrary), loaded
/// once per process; null after reporting "<entry>: <why>" when it cannot
/// be. Thread-safe.
template <typename Library, std::string (*load)(Library &)>
const Library *libraryFor(const char *entry) {
  static Library lib;
  static std::string error;
  static std::once_flag once;
  std::call_once(once, [] { error = load(lib); });
  if (!error.empty()) {
    reportError(std::string(entry) + ": " + error);
    return nullptr;
  }
  return &lib;
}

/// This thread's run stream (terra::cuda::beginRunStream), or null: each
/// launch then has a stream of its own and waits for it.
CUstream runStream();

} // namespace terra::cuda::detail

#endif // TERRA_LIB_RUNTIME_CUDA_DRIVER_H
