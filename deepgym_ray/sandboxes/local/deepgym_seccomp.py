"""Install a compiled seccomp filter in the calling process (stdlib only).

The filter itself is built on the host by libseccomp (see ``seccomp.py`` beside this file);
this module only hands its compiled BPF program to the kernel, as bubblewrap's ``--seccomp``
does. It is stdlib-only because the runner fork server (``deepgym_forkserver.py``) runs on the
base interpreter without site-packages and installs the filter in itself, once, so every
runner it forks inherits it. A filter is inherited across fork and exec and can never be
removed.

Example:
    install(open("/tmp/filter.bpf", "rb").read())
"""

import ctypes
import errno
import os

PR_SET_NO_NEW_PRIVS = 38
PR_SET_SECCOMP = 22
SECCOMP_MODE_FILTER = 2
_INSN = 8  # bytes in one struct sock_filter


class _Program(ctypes.Structure):  # struct sock_fprog
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


class Installer:
    """Everything ``install`` needs, made in advance: the call itself allocates nothing, so a
    just-forked child of a threaded process (``preexec_fn``) can make it safely."""

    def __init__(self, bpf: bytes) -> None:
        if not bpf or len(bpf) % _INSN:
            raise ValueError("not a compiled BPF program")
        self._code = ctypes.create_string_buffer(bytes(bpf), len(bpf))
        self._program = _Program(len(bpf) // _INSN, ctypes.addressof(self._code))
        self._pointer = ctypes.byref(self._program)
        libc = ctypes.CDLL(None, use_errno=True)
        self._prctl = libc.prctl
        self._prctl.restype = ctypes.c_int

    def __call__(self) -> None:
        """Install the filter in the calling process (OSError when the kernel refuses)."""
        if self._prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, self._pointer, 0, 0) == 0:
            return
        if ctypes.get_errno() == errno.EACCES:
            # Without CAP_SYS_ADMIN the kernel wants no_new_privs first (bwrap sets it too).
            if self._prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 and self._prctl(
                    PR_SET_SECCOMP, SECCOMP_MODE_FILTER, self._pointer, 0, 0) == 0:
                return
        code = ctypes.get_errno()
        raise OSError(code, "cannot install the seccomp filter: " + os.strerror(code))


def install(bpf: bytes) -> None:
    """Install the compiled filter ``bpf`` in the calling process."""
    Installer(bpf)()


def read_fd(fd: int) -> bytes:
    """The whole content of ``fd`` from its start (a memfd the host filled), then closed."""
    chunks, offset = [], 0
    try:
        while True:
            chunk = os.pread(fd, 1 << 16, offset)
            if not chunk:
                return b"".join(chunks)
            chunks.append(chunk)
            offset += len(chunk)
    finally:
        os.close(fd)
