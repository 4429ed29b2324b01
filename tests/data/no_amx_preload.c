// LD_PRELOAD shim used by make_golden.py on CPUs with Intel AMX.
//
// llama.cpp (as built by llama-cpp-python 0.3.7) repacks Q4_0/Q4_1 weights
// for its AMX kernels whenever the CPU has AMX, and those kernels give wrong
// logits for multi-token batches (off by ~10 against a float64 reference;
// upstream: ggml-org/llama.cpp PR #16315). ggml only enables AMX after the
// kernel grants tile-data permission through
// syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, ...), so refusing that one
// request makes llama.cpp fall back to its AVX2/AVX512 kernels. Every other
// syscall passes through unchanged.
//
// Build: cc -O2 -shared -fPIC no_amx_preload.c -o no_amx_preload.so -ldl
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <sys/syscall.h>

#define ARCH_REQ_XCOMP_PERM 0x1023

long syscall(long number, ...) {
  va_list ap;
  va_start(ap, number);
  long a[6];
  for (int i = 0; i < 6; ++i) a[i] = va_arg(ap, long);
  va_end(ap);
  if (number == SYS_arch_prctl && a[0] == ARCH_REQ_XCOMP_PERM) {
    errno = EPERM;
    return -1;
  }
  static long (*real_syscall)(long, ...);
  if (!real_syscall) real_syscall = (long (*)(long, ...))dlsym(RTLD_NEXT, "syscall");
  return real_syscall(number, a[0], a[1], a[2], a[3], a[4], a[5]);
}
