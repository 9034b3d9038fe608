//===- EntryPoints.cpp - MLIR's mgpu* ABI on the CUDA driver --------------===//
//
// The functions `gpu-to-llvm` and the gpu.binary translation emit calls to
// (MLIR 22: module load/unload in global constructors/destructors, one
// stream per synchronous launch, events and memory ops for async code),
// with the signatures of MLIR's own CudaRuntimeWrappers.cpp, which Debian
// does not ship. Without a driver or device each one reports a clear error
// (terra::cuda::takeLastError, the error handler) and returns a null handle
// or nothing; later calls on a null handle report again instead of
// crashing.
//
// Managed-memory allocation for graph buffers (terra::cuda::allocManaged)
// lives here too.
//
//===----------------------------------------------------------------------===//
#include "Driver.h"

#include "terra/Runtime/CachingAllocator.h"
#include "terra/Runtime/Cuda.h"

#include <cstdint>
#include <cstdlib>
#include <string>

using namespace terra::cuda::detail;

#define TERRA_CUDA_EXPORT extern "C" __attribute__((visibility("default")))

/// The driver with its context current for this scope, or an error.
#define TERRA_CUDA_ENTER(ENTRY, ...)                                           \
  const Driver *d = driverFor(ENTRY);                                          \
  if (!d)                                                                      \
    return __VA_ARGS__;                                                        \
  ScopedContext scope(*d);

namespace {
CUmodule loadModule(const char *entry, const void *data, bool jit,
                    int optLevel) {
  TERRA_CUDA_ENTER(entry, nullptr)
  if (!data) {
    reportError(std::string(entry) + ": no module image");
    return nullptr;
  }
  CUmodule module = nullptr;
  if (!jit) {
    if (!check(*d, d->cuModuleLoadData(&module, data), entry))
      return nullptr;
    return module;
  }
  // PTX: the driver compiles it for the device; keep its log for errors.
  char log[8192] = {0};
  CUjit_option options[] = {CU_JIT_OPTIMIZATION_LEVEL, CU_JIT_ERROR_LOG_BUFFER,
                            CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
  void *values[] = {reinterpret_cast<void *>(intptr_t(optLevel)), log,
                    reinterpret_cast<void *>(uintptr_t(sizeof(log)))};
  CUresult r = d->cuModuleLoadDataEx(&module, data, 3, options, values);
  if (r != CUDA_SUCCESS) {
    check(*d, r, (std::string(entry) + " (PTX JIT log: " + log + ")").c_str());
    return nullptr;
  }
  return module;
}
} // namespace

TERRA_CUDA_EXPORT void *mgpuModuleLoad(void *data, size_t /*size*/) {
  return loadModule("mgpuModuleLoad", data, /*jit=*/false, 0);
}

TERRA_CUDA_EXPORT void *mgpuModuleLoadJIT(void *data, int optLevel) {
  // CU_JIT_OPTIMIZATION_LEVEL accepts 0..4.
  optLevel = optLevel < 0 ? 0 : optLevel > 4 ? 4 : optLevel;
  return loadModule("mgpuModuleLoadJIT", data, /*jit=*/true, optLevel);
}

TERRA_CUDA_EXPORT void mgpuModuleUnload(void *module) {
  if (!module)
    return; // The load failed and was reported then.
  TERRA_CUDA_ENTER("mgpuModuleUnload")
  check(*d, d->cuModuleUnload(static_cast<CUmodule>(module)),
        "mgpuModuleUnload");
}

TERRA_CUDA_EXPORT void *mgpuModuleGetFunction(void *module, const char *name) {
  TERRA_CUDA_ENTER("mgpuModuleGetFunction", nullptr)
  if (!module) {
    reportError(std::string("mgpuModuleGetFunction: kernel '") +
                (name ? name : "?") + "' is in a module that failed to load");
    return nullptr;
  }
  CUfunction f = nullptr;
  if (!check(*d,
             d->cuModuleGetFunction(&f, static_cast<CUmodule>(module), name),
             "mgpuModuleGetFunction"))
    return nullptr;
  return f;
}

TERRA_CUDA_EXPORT void mgpuLaunchKernel(void *function, intptr_t gridX,
                                        intptr_t gridY, intptr_t gridZ,
                                        intptr_t blockX, intptr_t blockY,
                                        intptr_t blockZ, int32_t smem,
                                        void *stream, void **params,
                                        void **extra, size_t /*paramsCount*/) {
  TERRA_CUDA_ENTER("mgpuLaunchKernel")
  if (!function) {
    reportError("mgpuLaunchKernel: no kernel (its module or function failed "
                "to load); the launch is skipped");
    return;
  }
  if (gridX <= 0 || gridY <= 0 || gridZ <= 0)
    return; // An empty iteration space: nothing to run.
  check(*d,
        d->cuLaunchKernel(static_cast<CUfunction>(function), gridX, gridY,
                          gridZ, blockX, blockY, blockZ, smem,
                          static_cast<CUstream>(stream), params, extra),
        "mgpuLaunchKernel");
}

TERRA_CUDA_EXPORT void *mgpuStreamCreate() {
  if (CUstream s = runStream())
    return s; // The run's stream: launches queue without waiting.
  TERRA_CUDA_ENTER("mgpuStreamCreate", nullptr)
  CUstream s = nullptr;
  if (!check(*d, d->cuStreamCreate(&s, CU_STREAM_NON_BLOCKING),
             "mgpuStreamCreate"))
    return nullptr;
  return s;
}

TERRA_CUDA_EXPORT void mgpuStreamDestroy(void *stream) {
  if (!stream || stream == runStream())
    return;
  TERRA_CUDA_ENTER("mgpuStreamDestroy")
  check(*d, d->cuStreamDestroy(static_cast<CUstream>(stream)),
        "mgpuStreamDestroy");
}

TERRA_CUDA_EXPORT void mgpuStreamSynchronize(void *stream) {
  if (stream && stream == runStream())
    return; // Waited for when the host reads a result (syncRunStream).
  TERRA_CUDA_ENTER("mgpuStreamSynchronize")
  check(*d, d->cuStreamSynchronize(static_cast<CUstream>(stream)),
        "mgpuStreamSynchronize");
}

TERRA_CUDA_EXPORT void mgpuStreamWaitEvent(void *stream, void *event) {
  TERRA_CUDA_ENTER("mgpuStreamWaitEvent")
  if (!event) {
    reportError("mgpuStreamWaitEvent: no event");
    return;
  }
  check(*d,
        d->cuStreamWaitEvent(static_cast<CUstream>(stream),
                             static_cast<CUevent>(event), 0),
        "mgpuStreamWaitEvent");
}

TERRA_CUDA_EXPORT void *mgpuEventCreate() {
  TERRA_CUDA_ENTER("mgpuEventCreate", nullptr)
  CUevent e = nullptr;
  if (!check(*d, d->cuEventCreate(&e, CU_EVENT_DISABLE_TIMING),
             "mgpuEventCreate"))
    return nullptr;
  return e;
}

TERRA_CUDA_EXPORT void mgpuEventDestroy(void *event) {
  if (!event)
    return;
  TERRA_CUDA_ENTER("mgpuEventDestroy")
  check(*d, d->cuEventDestroy(static_cast<CUevent>(event)), "mgpuEventDestroy");
}

TERRA_CUDA_EXPORT void mgpuEventSynchronize(void *event) {
  TERRA_CUDA_ENTER("mgpuEventSynchronize")
  if (!event) {
    reportError("mgpuEventSynchronize: no event");
    return;
  }
  check(*d, d->cuEventSynchronize(static_cast<CUevent>(event)),
        "mgpuEventSynchronize");
}

TERRA_CUDA_EXPORT void mgpuEventRecord(void *event, void *stream) {
  TERRA_CUDA_ENTER("mgpuEventRecord")
  if (!event) {
    reportError("mgpuEventRecord: no event");
    return;
  }
  check(*d,
        d->cuEventRecord(static_cast<CUevent>(event),
                         static_cast<CUstream>(stream)),
        "mgpuEventRecord");
}

TERRA_CUDA_EXPORT void *mgpuMemAlloc(uint64_t bytes, void * /*stream*/,
                                     bool isHostShared) {
  if (bytes == 0)
    return nullptr;
  TERRA_CUDA_ENTER("mgpuMemAlloc", nullptr)
  CUdeviceptr p = 0;
  CUresult r = isHostShared
                   ? d->cuMemAllocManaged(&p, bytes, CU_MEM_ATTACH_GLOBAL)
                   : d->cuMemAlloc(&p, bytes);
  if (!check(*d, r, "mgpuMemAlloc"))
    return nullptr;
  return reinterpret_cast<void *>(p);
}

TERRA_CUDA_EXPORT void mgpuMemFree(void *ptr, void * /*stream*/) {
  if (!ptr)
    return;
  TERRA_CUDA_ENTER("mgpuMemFree")
  check(*d, d->cuMemFree(reinterpret_cast<CUdeviceptr>(ptr)), "mgpuMemFree");
}

TERRA_CUDA_EXPORT void mgpuMemcpy(void *dst, void *src, size_t bytes,
                                  void *stream) {
  TERRA_CUDA_ENTER("mgpuMemcpy")
  check(*d,
        d->cuMemcpyAsync(reinterpret_cast<CUdeviceptr>(dst),
                         reinterpret_cast<CUdeviceptr>(src), bytes,
                         static_cast<CUstream>(stream)),
        "mgpuMemcpy");
}

TERRA_CUDA_EXPORT void mgpuMemset32(void *dst, unsigned int value, size_t count,
                                    void *stream) {
  TERRA_CUDA_ENTER("mgpuMemset32")
  check(*d,
        d->cuMemsetD32Async(reinterpret_cast<CUdeviceptr>(dst), value, count,
                            static_cast<CUstream>(stream)),
        "mgpuMemset32");
}

TERRA_CUDA_EXPORT void mgpuMemset16(void *dst, unsigned short value,
                                    size_t count, void *stream) {
  TERRA_CUDA_ENTER("mgpuMemset16")
  check(*d,
        d->cuMemsetD16Async(reinterpret_cast<CUdeviceptr>(dst), value, count,
                            static_cast<CUstream>(stream)),
        "mgpuMemset16");
}

TERRA_CUDA_EXPORT void mgpuSetDefaultDevice(int32_t device) {
  setDefaultDevice(device);
}

void *terra::cuda::allocManaged(size_t bytes) {
  TERRA_CUDA_ENTER("allocManaged", nullptr)
  CUdeviceptr p = 0;
  if (!check(*d,
             d->cuMemAllocManaged(&p, bytes ? bytes : 1, CU_MEM_ATTACH_GLOBAL),
             "allocManaged"))
    return nullptr;
  return reinterpret_cast<void *>(p);
}

void terra::cuda::freeManaged(void *ptr) {
  if (!ptr)
    return;
  TERRA_CUDA_ENTER("freeManaged")
  check(*d, d->cuMemFree(reinterpret_cast<CUdeviceptr>(ptr)), "freeManaged");
}

namespace {
void *rawDeviceAlloc(size_t bytes) {
  TERRA_CUDA_ENTER("allocDevice", nullptr)
  CUdeviceptr p = 0;
  if (!check(*d, d->cuMemAlloc(&p, bytes), "allocDevice"))
    return nullptr;
  return reinterpret_cast<void *>(p);
}

void rawDeviceFree(void *ptr) {
  TERRA_CUDA_ENTER("freeDevice")
  check(*d, d->cuMemFree(reinterpret_cast<CUdeviceptr>(ptr)), "freeDevice");
}

terra::rt::CachingAllocator &deviceCache() {
  static terra::rt::CachingAllocator *cache = [] {
    size_t mb = 4096;
    if (const char *v = std::getenv("TERRA_DEVICE_CACHE_MB"))
      mb = std::strtoull(v, nullptr, 10);
    // Never destroyed: blocks may be freed by fetched tensors released at
    // exit, after static destructors ran.
    return new terra::rt::CachingAllocator(rawDeviceAlloc, rawDeviceFree,
                                           mb << 20);
  }();
  return *cache;
}
} // namespace

void *terra::cuda::allocDevice(size_t bytes) {
  return deviceCache().allocate(bytes ? bytes : 1);
}

void terra::cuda::freeDevice(void *ptr) {
  if (!deviceCache().deallocate(ptr))
    reportError("freeDevice: not a block of allocDevice");
}

bool terra::cuda::copyToDevice(void *dst, const void *src, size_t bytes) {
  if (bytes == 0)
    return true;
  TERRA_CUDA_ENTER("copyToDevice", false)
  return check(*d,
               d->cuMemcpyHtoD(reinterpret_cast<CUdeviceptr>(dst), src, bytes),
               "copyToDevice");
}

bool terra::cuda::copyToHost(void *dst, const void *src, size_t bytes) {
  if (bytes == 0)
    return true;
  TERRA_CUDA_ENTER("copyToHost", false)
  return check(*d,
               d->cuMemcpyDtoH(dst, reinterpret_cast<CUdeviceptr>(src), bytes),
               "copyToHost");
}

bool terra::cuda::copyOnDevice(void *dst, const void *src, size_t bytes) {
  if (bytes == 0)
    return true;
  TERRA_CUDA_ENTER("copyOnDevice", false)
  return check(*d,
               d->cuMemcpyDtoD(reinterpret_cast<CUdeviceptr>(dst),
                               reinterpret_cast<CUdeviceptr>(src), bytes),
               "copyOnDevice");
}

namespace {
thread_local CUstream tlsRunStream = nullptr;
/// The stream this thread's runs use, created by its first run. Never
/// destroyed (destroying it at thread or process exit could race the
/// driver's own teardown): one per runner thread, i.e. per compiled graph,
/// a handful per process (regenerations are capped).
thread_local CUstream tlsOwnStream = nullptr;
} // namespace

CUstream terra::cuda::detail::runStream() { return tlsRunStream; }

bool terra::cuda::beginRunStream() {
  static const bool syncLaunches = [] {
    const char *v = std::getenv("TERRA_CUDA_SYNC_LAUNCHES");
    return v && *v && std::string(v) != "0";
  }();
  if (syncLaunches)
    return true;
  if (!tlsOwnStream) {
    TERRA_CUDA_ENTER("beginRunStream", false)
    // Blocking (not CU_STREAM_NON_BLOCKING): the synchronous copies in and
    // out of device memory (legacy default stream) and PyTorch's default
    // stream are ordered with it.
    if (!check(*d, d->cuStreamCreate(&tlsOwnStream, CU_STREAM_DEFAULT),
               "beginRunStream"))
      return false;
  }
  tlsRunStream = tlsOwnStream;
  return true;
}

bool terra::cuda::syncRunStream() {
  if (!tlsRunStream)
    return true;
  TERRA_CUDA_ENTER("syncRunStream", false)
  return check(*d, d->cuStreamSynchronize(tlsRunStream), "syncRunStream");
}

void terra::cuda::endRunStream() {
  syncRunStream();
  tlsRunStream = nullptr;
}

bool terra::cuda::synchronize() {
  TERRA_CUDA_ENTER("synchronize", false)
  return check(*d, d->cuCtxSynchronize(), "synchronize");
}

void terra::cuda::releaseDeviceCache() { deviceCache().release(); }

bool terra::cuda::runCheckFlag(int32_t **host, void **device) {
  thread_local int32_t *flagHost = nullptr;
  thread_local CUdeviceptr flagDevice = 0;
  if (!flagHost) {
    TERRA_CUDA_ENTER("runCheckFlag", false)
    void *p = nullptr;
    if (!check(*d,
               d->cuMemHostAlloc(&p, sizeof(int32_t),
                                 CU_MEMHOSTALLOC_PORTABLE |
                                     CU_MEMHOSTALLOC_DEVICEMAP),
               "runCheckFlag"))
      return false;
    CUdeviceptr dp = 0;
    if (!check(*d, d->cuMemHostGetDevicePointer(&dp, p, 0), "runCheckFlag"))
      return false; // the pinned word is kept: a retry would leak another
    flagHost = static_cast<int32_t *>(p);
    flagDevice = dp;
  }
  *host = flagHost;
  *device = reinterpret_cast<void *>(flagDevice);
  return true;
}
