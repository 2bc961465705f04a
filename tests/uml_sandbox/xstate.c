/* Preloaded into the User-Mode Linux kernel (see machine.py): its processes' vector registers
 * kept whole on a host whose XSAVE area is larger than the kernel knows.
 *
 * Debian's 6.1 kernel reads and writes each of its processes' registers through ptrace's
 * NT_X86_XSTATE regset with a buffer of 832 bytes (x87, SSE, AVX). A host with AVX-512 or AMX
 * has a larger area: it truncates the read and refuses the write, and the machine's first
 * process dies of SIGSEGV. Here both calls go to the host at its own size: the part the kernel
 * knows is copied to and from its buffer, the rest (the AVX-512 registers) is kept beside
 * that buffer, which is one per thread of the machine, and put back with it.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <elf.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/uio.h>

#define SLOTS 8192 /* threads the machine ever had, at most (more: the rest starts afresh) */
#define LARGEST (64 * 1024)

typedef long (*ptrace_fn)(int, pid_t, void *, void *);

static struct { void *buffer; unsigned char *rest; } slots[SLOTS];
static size_t host_size; /* the host's XSAVE regset, in bytes (0: not asked yet) */
static unsigned char scratch[LARGEST];

static ptrace_fn real_ptrace(void) {
    static ptrace_fn real;
    if (!real) real = (ptrace_fn)dlsym(RTLD_NEXT, "ptrace");
    return real;
}

static unsigned char **rest_of(void *buffer) {
    size_t i = ((uintptr_t)buffer >> 4) % SLOTS;
    for (size_t n = 0; n < SLOTS; n++, i = (i + 1) % SLOTS) {
        if (slots[i].buffer == buffer) return &slots[i].rest;
        if (!slots[i].buffer) {
            slots[i].buffer = buffer;
            return &slots[i].rest;
        }
    }
    return NULL;
}

/* The whole regset of `pid` into scratch; its size, or -1. */
static long read_whole(pid_t pid) {
    struct iovec whole = {scratch, LARGEST};
    if (real_ptrace()(PTRACE_GETREGSET, pid, (void *)NT_X86_XSTATE, &whole) < 0) return -1;
    host_size = whole.iov_len;
    return 0;
}

static long xstate(enum __ptrace_request request, pid_t pid, struct iovec *given) {
    if (!host_size && read_whole(pid) < 0) return -1;
    size_t known = given->iov_len;
    if (known >= host_size)
        return real_ptrace()(request, pid, (void *)NT_X86_XSTATE, given);
    unsigned char **rest = rest_of(given->iov_base);
    if (request == PTRACE_GETREGSET) {
        if (read_whole(pid) < 0) return -1;
        memcpy(given->iov_base, scratch, known);
        if (rest && (*rest || (*rest = malloc(host_size - known))))
            memcpy(*rest, scratch + known, host_size - known);
        return 0;
    }
    /* A write: what the kernel knows, then the thread's own rest (for a thread not read
     * before, what the process holds now). */
    if (!(rest && *rest) && read_whole(pid) < 0) return -1;
    memcpy(scratch, given->iov_base, known);
    if (rest && *rest) memcpy(scratch + known, *rest, host_size - known);
    struct iovec whole = {scratch, host_size};
    return real_ptrace()(PTRACE_SETREGSET, pid, (void *)NT_X86_XSTATE, &whole);
}

long ptrace(enum __ptrace_request request, ...) {
    va_list args;
    va_start(args, request);
    pid_t pid = va_arg(args, pid_t);
    void *addr = va_arg(args, void *);
    void *data = va_arg(args, void *);
    va_end(args);
    if ((request == PTRACE_GETREGSET || request == PTRACE_SETREGSET)
        && (uintptr_t)addr == NT_X86_XSTATE)
        return xstate(request, pid, data);
    return real_ptrace()(request, pid, addr, data);
}
