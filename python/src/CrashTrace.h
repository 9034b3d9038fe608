//===- CrashTrace.h - native backtraces of fatal signals --------*- C++ -*-===//

#ifndef TERRA_PYTHON_CRASHTRACE_H
#define TERRA_PYTHON_CRASHTRACE_H

namespace terra {
/// Prints the native stack of a thread that gets a fatal signal, then
/// passes the signal to the handler installed before (faulthandler's).
/// Installed at import when TERRA_NATIVE_BACKTRACE is set (not "0"): "1"
/// writes to stderr, any other value is a file the stack is appended to.
void installCrashBacktrace(const char *path);
} // namespace terra

#endif
