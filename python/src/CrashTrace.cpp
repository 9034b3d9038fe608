//===- CrashTrace.cpp - native backtraces of fatal signals ----------------===//
//
// A fatal signal on a thread Python does not run (the graph runner) leaves
// faulthandler with nothing to show: "<no Python frame>". With
// TERRA_NATIVE_BACKTRACE=1 (or =<file>: appended there) the module prints the
// faulting thread's native stack first (each frame as object+offset, which
// addr2line resolves against the same build; JIT-compiled graph code shows as
// bare addresses outside every object) and then hands the signal to the handler
// it replaced (faulthandler's), so the Python stacks still follow.
//
//===----------------------------------------------------------------------===//

#include "CrashTrace.h"

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <execinfo.h>
#include <fcntl.h>
#include <unistd.h>

namespace {

constexpr int kSignals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
constexpr int kNumSignals = sizeof(kSignals) / sizeof(kSignals[0]);
struct sigaction previous[kNumSignals];
/// Where the stack goes: stderr, or a file (pytest captures fd 2 into a
/// file it never shows when the process dies).
int outFd = STDERR_FILENO;

void writeAll(const char *s) {
  size_t n = std::strlen(s);
  while (n > 0) {
    ssize_t w = ::write(outFd, s, n);
    if (w <= 0)
      return;
    s += w;
    n -= size_t(w);
  }
}

void onFatalSignal(int sig, siginfo_t *info, void *context) {
  char line[256];
  std::snprintf(line, sizeof line,
                "terra: fatal signal %d (%s) at address %p, native stack of "
                "the faulting thread:\n",
                sig, strsignal(sig), info ? info->si_addr : nullptr);
  writeAll(line);
  void *frames[64];
  int n = backtrace(frames, 64);
  for (int i = 0; i < n; ++i) {
    Dl_info where{};
    if (dladdr(frames[i], &where) && where.dli_fname) {
      std::snprintf(
          line, sizeof line, "  #%d %p %s+0x%lx %s\n", i, frames[i],
          where.dli_fname,
          (unsigned long)((char *)frames[i] - (char *)where.dli_fbase),
          where.dli_sname ? where.dli_sname : "");
    } else {
      std::snprintf(line, sizeof line,
                    "  #%d %p (in no loaded object: JIT-compiled code?)\n", i,
                    frames[i]);
    }
    writeAll(line);
  }
  // Hand the signal on: the previous handler (faulthandler prints the
  // Python stacks and re-raises), else the default action.
  for (int i = 0; i < kNumSignals; ++i) {
    if (kSignals[i] != sig)
      continue;
    const struct sigaction &prev = previous[i];
    if (prev.sa_flags & SA_SIGINFO) {
      if (prev.sa_sigaction) {
        prev.sa_sigaction(sig, info, context);
        return;
      }
    } else if (prev.sa_handler != SIG_DFL && prev.sa_handler != SIG_IGN) {
      prev.sa_handler(sig);
      return;
    }
  }
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

} // namespace

void terra::installCrashBacktrace(const char *path) {
  static bool installed = false;
  if (installed)
    return;
  installed = true;
  if (path && *path && std::strcmp(path, "1") != 0) {
    int fd = ::open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd >= 0)
      outFd = fd;
  }
  // backtrace() loads libgcc on first use: not inside the handler.
  void *warm[1];
  backtrace(warm, 1);
  for (int i = 0; i < kNumSignals; ++i) {
    struct sigaction action {};
    action.sa_sigaction = onFatalSignal;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESETHAND;
    sigaction(kSignals[i], &action, &previous[i]);
  }
}
