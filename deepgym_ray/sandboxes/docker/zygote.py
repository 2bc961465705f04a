"""The solution zygote inside a container: forks solution processes for the runner (stdlib).

Shipped into the container (as ``deepgym_agent_zygote.py``); the agent forks it once, as root.
It speaks ``deepgym_zyproc``'s protocol on a socket only the verifier uid can reach; each child
runs ``deepgym_zygote._child``, which drops to the request's uid.

Example (what the agent does):
    if os.fork() == 0:
        serve_zygote(listener)
"""

import os
import select
import socket
import sys


def serve_zygote(listener):
    """Fork solution processes for the runner (``deepgym_zyproc``'s protocol): each child runs
    ``deepgym_zygote._child``, which drops to the request's uid. The container is already the
    network and IPC boundary, so the children take no namespaces of their own."""
    import deepgym_zygote

    null = os.open("/dev/null", os.O_RDWR)
    for fd in (0, 1):  # the host's channel is the agent's alone
        os.dup2(null, fd)
    os.close(null)
    deepgym_zygote._own_namespaces = lambda: None
    worker = sys.modules["deepgym_worker"]
    children = {}
    while True:
        ready, _, _ = select.select([listener, *children], [], [])
        for item in ready:
            if item is listener:
                _zygote_accept(deepgym_zygote, worker, listener, children)
            else:
                pid, conn = children.pop(item)
                os.close(item)
                _, status = os.waitpid(pid, 0)
                try:
                    conn.sendall(b"exit %d\n" % os.waitstatus_to_exitcode(status))
                except OSError:
                    pass
                conn.close()


def _zygote_accept(zygote, worker, listener, children):
    try:
        conn, _ = listener.accept()
    except OSError:
        return
    conn.settimeout(5)
    fds = []
    try:
        data, fds, _flags, _addr = socket.recv_fds(conn, 1 << 16, 3)
        import marshal

        request = marshal.loads(data) if len(fds) == 3 else None
        if not isinstance(request, dict):
            raise ValueError("malformed request")
        pid = os.fork()
    except (OSError, ValueError, EOFError, TypeError):  # a failed fork too (the pids limit)
        for fd in fds:
            os.close(fd)
        conn.close()
        return
    if pid == 0:
        from deepgym_agent_cleanup import oom_adjust

        oom_adjust(1000)  # under memory pressure the solution goes first
        zygote._child(worker, request, fds)
    for fd in fds:
        os.close(fd)
    pidfd = os.pidfd_open(pid)
    children[pidfd] = (pid, conn)
    try:
        socket.send_fds(conn, [b"started"], [pidfd])
    except OSError:
        pass
