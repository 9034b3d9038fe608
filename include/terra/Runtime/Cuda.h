//===- Cuda.h - The CUDA runtime of compiled graphs -------------*- C++ -*-===//
//
// lib/Runtime/Cuda: the entry points that graphs lowered by
// terra-gpu-pipeline call (MLIR's `mgpu*` ABI, the cuBLAS-backed
// `terra_cuda_*` library calls, managed buffer allocation), implemented on
// the CUDA driver API and cuBLAS loaded with dlopen. The library loads and
// links on machines without a GPU or driver; every entry point then reports
// a clear error instead of crashing (docs/gpu.md).
//
//===----------------------------------------------------------------------===//
#ifndef TERRA_RUNTIME_CUDA_H
#define TERRA_RUNTIME_CUDA_H

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

namespace terra::cuda {

/// True when the driver loads, initializes and has at least one device;
/// otherwise false with the reason in `why` (no driver, no device, ...).
/// Never throws or aborts.
bool available(std::string *why = nullptr);

/// The most recent error an entry point reported on this thread, cleared by
/// the call ("" when there was none).
std::string takeLastError();

/// Called with every error message after it is recorded. The default
/// handler prints "terra-cuda: <message>" to stderr. A graph runner
/// installs one that fails the run.
using ErrorHandler = void (*)(const char *message);
void setErrorHandler(ErrorHandler handler);

/// Buffers for compiled graphs: managed memory (cuMemAllocManaged), so the
/// host side of a graph (feeds, fetches, host callbacks) reads and writes
/// them directly. Returns null, with an error reported, without a device.
void *allocManaged(size_t bytes);
void freeManaged(void *ptr);

/// Device memory for graph buffers (cuMemAlloc), from a caching allocator
/// (CachingAllocator.h; its free lists hold at most TERRA_DEVICE_CACHE_MB,
/// default 4096): the host cannot read it, so feeds, state and host-op
/// results are copied in (copyToDevice) and fetches and host-op arguments
/// copied out (copyToHost), synchronously. Null / false, with an error
/// reported, without a device.
void *allocDevice(size_t bytes);
void freeDevice(void *ptr);
bool copyToDevice(void *dst, const void *src, size_t bytes);
bool copyToHost(void *dst, const void *src, size_t bytes);
/// Device to device (fetches of values the graph does not own, a committed
/// iteration's state written into PyTorch's CUDA tensors).
bool copyOnDevice(void *dst, const void *src, size_t bytes);
/// Waits for all work queued in the context (every stream, PyTorch's too):
/// a fetched buffer PyTorch let go of may still be read by its kernels.
bool synchronize();
/// Returns the cached device blocks to the driver.
void releaseDeviceCache();

/// The check flag of this thread's runs (RunState::BufferMemory::
/// checkFlag): one word of pinned host memory mapped into the device's
/// address space, allocated by the thread's first call and never freed
/// (one per runner thread). The guards inside kernels store into it at
/// `device`; the host reads it at `host` after waiting for the run's stream.
/// False, with an error reported, without a device.
bool runCheckFlag(int32_t **host, void **device);

/// One stream for a whole graph run (RunState::BufferMemory's stream hooks):
/// `beginRunStream` makes a stream of this thread (created once, blocking,
/// so the legacy default stream's copies and PyTorch's default stream order
/// with it) the thread's run stream. While it is set, the `mgpuStreamCreate`
/// / `mgpuStreamSynchronize` / `mgpuStreamDestroy` calls the GPU lowering
/// wraps around each launch use it without waiting, and cuBLAS calls queue
/// on it: kernels and GEMMs of the run run back to back. `syncRunStream`
/// waits for what is queued (before the host reads a result); `endRunStream`
/// waits and unbinds. TERRA_CUDA_SYNC_LAUNCHES=1 keeps a stream per launch,
/// synchronized (debugging). False / no-op, with an error reported, without
/// a device.
bool beginRunStream();
bool syncRunStream();
void endRunStream();

/// Name and address of every entry point a graph lowered by
/// terra-gpu-pipeline may call (mgpu*, _mlir_ciface_terra_cuda_*), for a JIT
/// symbol map.
std::vector<std::pair<const char *, void *>> entryPoints();

} // namespace terra::cuda

#endif // TERRA_RUNTIME_CUDA_H
