"""The local sandbox's syscall filter, modelled on Docker's default seccomp profile.

Docker's default profile lets a container without extra capabilities make none of the calls
below; the local sandbox had no filter at all, so a solution could, for instance, leave keys
in its uid's kernel keyring that outlived its run and that a later run read from /proc/keys.
:func:`sandbox_filter` builds the filter once per host process with libseccomp (through the
``pyseccomp`` binding) and compiles it to a BPF program. The local provider installs it in the
runner fork server (so every runner, the verifier's process, inherits it), in every command it
execs, and, with bubblewrap's ``--seccomp``, in the solution zygote (so every solution process
it forks inherits it); a solution started by bwrap from a runner inherits the runner's.

What is filtered, and how (every call answers EPERM, as in Docker, unless said otherwise):

- kernel keyrings: ``add_key``, ``keyctl``, ``request_key``;
- ``io_uring_setup``/``_enter``/``_register``; ``userfaultfd``; ``bpf``; ``perf_event_open``;
- other processes' memory: ``ptrace``, ``process_vm_readv``/``_writev``, ``kcmp``,
  ``pidfd_getfd``, ``process_madvise``;
- the kernel and the machine: module loading, ``kexec_*``, ``reboot``, ``acct``, ``swapon``/
  ``swapoff``, ``quotactl``, ``syslog``, ``settimeofday``/``clock_settime``, ``iopl``/``ioperm``,
  ``vhangup``, ``lookup_dcookie``, ``fanotify_init``, ``open_by_handle_at``, ``setns``, the
  NUMA policy calls, and the obsolete ``uselib``, ``ustat``, ``sysfs``, ``_sysctl``, ...;
- sockets of the kernel's crypto API (``AF_ALG``) and host-guest sockets (``AF_VSOCK``);
- new user namespaces: ``clone`` and ``unshare`` with ``CLONE_NEWUSER`` (only where the
  provider runs as root: unprivileged bubblewrap needs one itself); ``clone3`` answers ENOSYS,
  as in Docker, since its flags cannot be seen by a filter and the C library then falls back
  to ``clone``.

Unlike Docker's, the filter allows by default and denies the list, because the runner and the
zygote must still make the other namespaces and mounts that confine solutions (bubblewrap's
set-up, the zygote's network and IPC namespaces per child). A solution process has no
capability left (its own uid in the first user namespace, or bubblewrap's dropped set), so
the mount and namespace calls Docker also denies fail for it anyway; the filter takes away
the one way to get capabilities back, a user namespace. Calls of another architecture (32-bit
``int 0x80``, x32) kill the process: the list is in native numbers only.

Example:
    bpf = sandbox_filter(block_userns=True)  # None where libseccomp is missing (see missing)
"""

from __future__ import annotations

import errno
import os
import subprocess
import sys
from functools import lru_cache

DENIED = (
    "add_key", "keyctl", "request_key",
    "io_uring_setup", "io_uring_enter", "io_uring_register",
    "userfaultfd", "bpf", "perf_event_open",
    "ptrace", "process_vm_readv", "process_vm_writev", "kcmp", "pidfd_getfd",
    "process_madvise",
    "init_module", "finit_module", "delete_module", "create_module", "query_module",
    "get_kernel_syms", "kexec_load", "kexec_file_load", "reboot",
    "acct", "swapon", "swapoff", "quotactl", "quotactl_fd", "syslog", "vhangup",
    "settimeofday", "clock_settime", "iopl", "ioperm", "lookup_dcookie", "fanotify_init",
    "open_by_handle_at", "setns", "mbind", "set_mempolicy", "get_mempolicy", "migrate_pages",
    "move_pages", "set_mempolicy_home_node", "uselib", "ustat", "sysfs", "_sysctl",
    "nfsservctl",
)
CLONE_NEWUSER = 0x10000000
DENIED_SOCKETS = (38, 40)  # AF_ALG, AF_VSOCK

# Why the filter is missing here, when it is (for the provider's warning); set by sandbox_filter.
missing: dict[bool, str] = {}


def wanted() -> bool:
    """Whether the filter is asked for: ``DEEPGYM_SECCOMP=0`` turns it off (for comparisons)."""
    return os.environ.get("DEEPGYM_SECCOMP", "1") != "0"


def _compile(block_userns: bool) -> bytes:
    """The filter as a BPF program, built by libseccomp (ImportError/OSError where it cannot)."""
    import pyseccomp as sc

    flt = sc.SyscallFilter(sc.ALLOW)
    flt.set_attr(sc.Attr.ACT_BADARCH, sc.KILL_PROCESS)
    deny = sc.ERRNO(errno.EPERM)
    for name in DENIED:
        try:
            flt.add_rule(deny, name)
        except (OSError, ValueError, RuntimeError):
            pass  # not a call of this architecture or this libseccomp: nothing to deny
    for family in DENIED_SOCKETS:
        flt.add_rule(deny, "socket", sc.Arg(0, sc.EQ, family))
    if block_userns:
        for name in ("clone", "unshare"):  # the flags are the first argument of both
            flt.add_rule(deny, name, sc.Arg(0, sc.MASKED_EQ, CLONE_NEWUSER, CLONE_NEWUSER))
        flt.add_rule(sc.ERRNO(errno.ENOSYS), "clone3")
    fd = os.memfd_create("deepgym-seccomp", os.MFD_CLOEXEC)
    with open(fd, "w+b") as out:
        flt.export_bpf(out)
        out.flush()
        out.seek(0)
        return out.read()


# Run under the filter: each denied call must answer EPERM, and ordinary work must go on.
# The calls' numbers (this architecture's) come from libseccomp, as arguments.
_PROBE = r"""
import ctypes, os, socket, sys
libc = ctypes.CDLL(None, use_errno=True)
add_key, keyctl, io_uring_setup, ptrace = map(int, sys.argv[2:6])
def denied(number, *args):
    return libc.syscall(number, *args) == -1 and ctypes.get_errno() == 1
assert denied(add_key, b"user", b"deepgym-probe", b"x", 1, -4)
assert denied(keyctl, 0, 0, 0, 0, 0)
assert denied(io_uring_setup, 1, None)
assert denied(ptrace, 0, 0, 0, 0)
if sys.argv[1] == "1":
    assert libc.unshare(0x10000000) == -1 and ctypes.get_errno() == 1
pid = os.fork()
if pid == 0:
    os._exit(7)
assert os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 7
a, b = socket.socketpair()
a.close()
b.close()
print("ok")
"""


def _works(bpf: bytes, block_userns: bool) -> str | None:
    """None when a process under ``bpf`` is denied what it must be and can do the rest;
    otherwise what went wrong."""
    import pyseccomp as sc

    from deepgym_ray.sandboxes.local.deepgym_seccomp import Installer

    arch = sc.system_arch()
    numbers = [str(sc.resolve_syscall(arch, name))
               for name in ("add_key", "keyctl", "io_uring_setup", "ptrace")]
    try:
        done = subprocess.run([sys.executable, "-I", "-S", "-c", _PROBE, str(int(block_userns)),
                               *numbers], capture_output=True, timeout=30,
                              preexec_fn=Installer(bpf))
    except (OSError, subprocess.SubprocessError) as exc:
        return f"cannot run under the filter ({exc})"
    if done.returncode != 0 or done.stdout.strip() != b"ok":
        lines = done.stderr.decode(errors="replace").strip().splitlines() or ["no output"]
        return f"a process under it fails its check ({lines[-1]})"
    return None


@lru_cache(maxsize=2)
def sandbox_filter(block_userns: bool) -> bytes | None:
    """The compiled filter (see the module docstring), or None where it cannot be built or
    does not work here (then ``missing[block_userns]`` says why)."""
    try:
        bpf = _compile(block_userns)
    except ImportError:
        missing[block_userns] = ("the 'pyseccomp' package (libseccomp's binding) is not "
                                 "installed")
        return None
    except (OSError, RuntimeError, ValueError, AttributeError) as exc:
        missing[block_userns] = f"libseccomp cannot build it ({exc}; install libseccomp2)"
        return None
    problem = _works(bpf, block_userns)
    if problem is not None:
        missing[block_userns] = f"the kernel does not apply it: {problem}"
        return None
    missing.pop(block_userns, None)
    return bpf


def filter_fd(bpf: bytes) -> int:
    """A fresh descriptor holding ``bpf`` from its start, for bwrap's ``--seccomp`` (which
    reads it to the end, so each bwrap needs its own); the caller closes it."""
    fd = os.memfd_create("deepgym-seccomp", 0)
    try:
        os.write(fd, bpf)
        os.lseek(fd, 0, os.SEEK_SET)
    except OSError:
        os.close(fd)
        raise
    return fd


__all__ = ["DENIED", "filter_fd", "missing", "sandbox_filter", "wanted"]
