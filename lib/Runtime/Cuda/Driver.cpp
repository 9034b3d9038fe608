//===- Driver.cpp - Loading the CUDA driver and reporting errors ----------===//
#include "Driver.h"

#include "terra/Runtime/Cuda.h"

#include <dlfcn.h>

#include <atomic>
#include <cstdio>
#include <mutex>

#ifndef TERRA_CUDA_TOOLKIT_DIR
#define TERRA_CUDA_TOOLKIT_DIR ""
#endif

using namespace terra::cuda;
using namespace terra::cuda::detail;

namespace {

std::atomic<int> defaultDevice{0};
std::atomic<ErrorHandler> errorHandler{nullptr};
thread_local std::string lastError;

void printError(const char *message) {
  std::fprintf(stderr, "terra-cuda: %s\n", message);
}

/// Loads libcuda.so.1, resolves every function, initializes the driver and
/// retains the selected device's primary context. Returns "" on success.
std::string load(Driver &d) {
  void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char *err = dlerror();
    return std::string("no CUDA driver (cannot load libcuda.so.1: ") +
           (err ? err : "unknown error") + ")";
  }
#define TERRA_CUDA_RESOLVE(NAME, SYMBOL)                                       \
  d.NAME = reinterpret_cast<decltype(d.NAME)>(dlsym(lib, SYMBOL));             \
  if (!d.NAME)                                                                 \
    return "the CUDA driver lacks " SYMBOL " (driver too old?)";
  TERRA_CUDA_DRIVER_FUNCTIONS(TERRA_CUDA_RESOLVE)
#undef TERRA_CUDA_RESOLVE
  auto describe = [&](CUresult r) {
    const char *s = nullptr;
    d.cuGetErrorString(r, &s);
    return std::string(s ? s : "unknown error") + " (CUresult " +
           std::to_string(int(r)) + ")";
  };
  if (CUresult r = d.cuInit(0); r != CUDA_SUCCESS)
    return "cuInit failed: " + describe(r);
  int count = 0;
  if (CUresult r = d.cuDeviceGetCount(&count); r != CUDA_SUCCESS)
    return "cuDeviceGetCount failed: " + describe(r);
  if (count == 0)
    return "no CUDA device";
  int ordinal = defaultDevice.load();
  if (ordinal < 0 || ordinal >= count)
    return "CUDA device " + std::to_string(ordinal) + " does not exist (" +
           std::to_string(count) + " present)";
  if (CUresult r = d.cuDeviceGet(&d.device, ordinal); r != CUDA_SUCCESS)
    return "cuDeviceGet failed: " + describe(r);
  if (CUresult r = d.cuDevicePrimaryCtxRetain(&d.context, d.device);
      r != CUDA_SUCCESS)
    return "cuDevicePrimaryCtxRetain failed: " + describe(r);
  return "";
}

} // namespace

const Driver *terra::cuda::detail::driver(std::string *why) {
  static Driver d;
  static std::string error;
  static std::once_flag once;
  std::call_once(once, [] { error = load(d); });
  if (!error.empty()) {
    if (why)
      *why = error;
    return nullptr;
  }
  return &d;
}

void terra::cuda::detail::setDefaultDevice(int device) {
  defaultDevice = device;
}

void terra::cuda::detail::reportError(const std::string &message) {
  lastError = message;
  ErrorHandler h = errorHandler.load();
  (h ? h : printError)(message.c_str());
}

bool terra::cuda::detail::check(const Driver &d, CUresult result,
                                const char *what) {
  if (result == CUDA_SUCCESS)
    return true;
  const char *s = nullptr;
  d.cuGetErrorString(result, &s);
  reportError(std::string(what) + ": " + (s ? s : "unknown error") +
              " (CUresult " + std::to_string(int(result)) + ")");
  return false;
}

ScopedContext::ScopedContext(const Driver &d) : d(d) {
  d.cuCtxPushCurrent(d.context);
}

ScopedContext::~ScopedContext() {
  CUcontext popped;
  d.cuCtxPopCurrent(&popped);
}

const Driver *terra::cuda::detail::driverFor(const char *entry) {
  std::string why;
  const Driver *d = driver(&why);
  if (!d)
    reportError(std::string(entry) + ": " + why);
  return d;
}

bool terra::cuda::available(std::string *why) { return driver(why) != nullptr; }

std::string terra::cuda::takeLastError() {
  std::string e = std::move(lastError);
  lastError.clear();
  return e;
}

void terra::cuda::setErrorHandler(ErrorHandler handler) {
  errorHandler = handler;
}

void *
terra::cuda::detail::openLibrary(std::initializer_list<const char *> sonames,
                                 const char *fallback, const char *what,
                                 std::string &error) {
  std::string tried;
  auto attempt = [&](const std::string &name) -> void * {
    if (void *lib = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL))
      return lib;
    const char *err = dlerror();
    tried += std::string(tried.empty() ? "" : "; ") + (err ? err : name);
    return nullptr;
  };
  for (const char *name : sonames)
    if (void *lib = attempt(name))
      return lib;
  if (void *lib =
          attempt(std::string(TERRA_CUDA_TOOLKIT_DIR) + "/lib64/" + fallback))
    return lib;
  error = std::string("cannot load ") + what + " (" + tried + ")";
  return nullptr;
}
