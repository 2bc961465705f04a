"""Moving archives in and out of a task container, each move bounded in time.

The Docker SDK's own archive download has no timeout once its body starts (it turns the
socket's timeout off), and its upload waits for the engine's whole unpacking under the client's
one fixed timeout. A tree an answer made can take the engine minutes to pack or unpack (a
work directory of 70,000 empty files 1,000 directories deep ran past the client's 60 s), so
every move here has a deadline: the client's timeout for what is ours, or, for data an answer
made, :func:`transfer_timeout` for the size admitted. Overrunning an answer's deadline raises
:class:`TransferTimedOut`, which the caller judges as the answer's (it is a
ProviderTimeoutError, no verdict, where a caller does not).

Example:
    with open_archive(api, cid, "/app", timeout=90.0, where="deepgym-task-1") as body:
        entries = read_tree(body)      # None in place of body: /app is missing
"""

from __future__ import annotations

import builtins
import io
import tarfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from deepgym_ray.exceptions import ProviderTimeoutError, SandboxError
from deepgym_ray.sandboxes.docker.engine_errors import engine_error

__all__ = ["ArchiveTooLarge", "TransferTimedOut", "open_archive", "put_archive", "read_file",
           "timed_out", "transfer_timeout"]

# The engine's worst pace moving a tree in or out (unpacking is the slower: measured here at
# 0.5 to 1 ms per entry and 5 us per path component, under a load of 10 to 19 on 2 cores),
# with a margin of 10: a right answer's copy does not run out of time on a loaded machine,
# and a tree at the bounds of scoring.workdir_archive.TreeLimits gets minutes.
SECONDS_PER_ENTRY = 0.01
SECONDS_PER_COMPONENT = 50e-6
BYTES_PER_SECOND = 10 << 20
# What the engine answers (HTTP 500) when the path runs through a file or a loop of links:
# nothing there to read, as a missing path (404) is. Who can write the container's tree (an
# answer's program, after it ran) must not turn "no such file" into the engine's failure.
_NOTHING_THERE = ("not a directory", "too many links", "too many levels of symbolic links")


class ArchiveTooLarge(Exception):
    """A file copied out of a container was larger than allowed."""


class TransferTimedOut(ProviderTimeoutError):
    """A move of data an answer made ran past the time allowed for its size."""


def transfer_timeout(base: float, *, entries: int = 0, components: int = 0,
                     data_bytes: int = 0) -> float:
    """The time allowed to move a tree of ``entries`` entries, ``components`` path components
    in all and ``data_bytes`` of file data: ``base`` (the client's timeout) plus the engine's
    worst pace for that size."""
    return (base + entries * SECONDS_PER_ENTRY + components * SECONDS_PER_COMPONENT
            + data_bytes / BYTES_PER_SECOND)


def put_archive(api: Any, cid: str, directory: str, data: bytes, timeout: float | None,
                where: str) -> None:
    """Unpack the tar archive ``data`` into ``directory`` of container ``cid``, within
    ``timeout`` (an answer's budget: TransferTimedOut past it) or else the client's timeout."""
    try:
        done = api._put(api._url("/containers/{0}/archive", cid), params={"path": directory},
                        data=data, timeout=timeout or api.timeout)
        api._raise_for_status(done)
    except Exception as exc:  # noqa: BLE001 - SDK and transport errors
        raise _error(api, exc, f"{directory} in {where}", timeout) from exc
    if done.status_code != 200:
        raise SandboxError(f"the engine refused the files for {directory} in {where}")


@contextmanager
def open_archive(api: Any, cid: str, path: str, timeout: float | None,
                 where: str) -> Iterator[io.RawIOBase | None]:
    """The engine's tar archive of ``path`` in container ``cid`` (its last component the
    archive's top entry) as a file read while it streams; None when there is nothing there to
    read (see _NOTHING_THERE). The whole download is bounded by ``timeout`` (an answer's
    budget: TransferTimedOut past it) or else the client's timeout (ProviderTimeoutError).
    Closed on leaving: the engine stops making the rest."""
    budget = timeout or api.timeout
    try:
        response = api._get(api._url("/containers/{0}/archive", cid), params={"path": path},
                             stream=True, timeout=budget,
                             headers={"Accept-Encoding": "identity"})
    except Exception as exc:  # noqa: BLE001 - SDK and transport errors
        raise _error(api, exc, f"{path} in {where}", timeout) from exc
    try:
        if response.status_code == 404 or (response.status_code == 500 and any(
                why in response.text for why in _NOTHING_THERE)):
            yield None
            return
        try:
            api._raise_for_status(response)
        except Exception as exc:  # noqa: BLE001 - SDK and transport errors
            raise engine_error(exc) from exc
        yield _Download(response.raw, time.monotonic() + budget,
                        lambda exc: _error(api, exc, f"{path} in {where}", timeout))
    finally:
        response.close()


def read_file(api: Any, cid: str, path: str, limit: int, where: str) -> bytes | None:
    """The bytes of the regular file ``path`` in container ``cid``: None when it is missing
    or not a regular file (a link, a directory, a fifo: nothing is followed);
    ArchiveTooLarge past ``limit`` bytes."""
    with open_archive(api, cid, path, None, where) as body:
        if body is None:
            return None
        try:
            with tarfile.open(fileobj=body, mode="r|") as archive:
                member = archive.next()
                if member is None or not member.isfile():
                    return None
                if member.size > limit:
                    raise ArchiveTooLarge(f"{path} in {where} holds more than {limit} bytes")
                return archive.extractfile(member).read()
        except tarfile.TarError as exc:
            raise engine_error(exc) from exc


def timed_out(exc: BaseException) -> bool:
    """Whether a transport error is a timeout (requests wraps urllib3's, which wraps the
    socket's, in its own types and arguments)."""
    import requests.exceptions
    import urllib3.exceptions

    kinds = (builtins.TimeoutError, requests.exceptions.Timeout, urllib3.exceptions.TimeoutError)
    seen, todo = set(), [exc]
    while todo and len(seen) < 20:
        error = todo.pop()
        if error is None or id(error) in seen:
            continue
        seen.add(id(error))
        if isinstance(error, kinds):
            return True
        todo += [error.__cause__, error.__context__, getattr(error, "reason", None),
                 *(a for a in getattr(error, "args", ()) if isinstance(a, BaseException))]
    return False


def _error(api: Any, exc: BaseException, what: str, timeout: float | None) -> SandboxError:
    """The SandboxError for a failed move of ``what``: TransferTimedOut when it ran out of an
    answer's ``timeout``."""
    if isinstance(exc, SandboxError):
        return exc
    if timed_out(exc):
        if timeout is not None:
            return TransferTimedOut(f"moving {what} took longer than {timeout:.0f}s, the time "
                                    "allowed for its size")
        return ProviderTimeoutError(f"the Docker engine did not move {what} in "
                                    f"{api.timeout:g}s: {exc}")
    return engine_error(exc)


class _Download(io.RawIOBase):
    """A download's body as a file to read, raising ``error(exc)`` for a transport failure
    and once its deadline has passed (each read is bounded by the socket's timeout, the whole
    by the deadline)."""

    def __init__(self, raw: Any, deadline: float, error: Any) -> None:
        self._raw, self._deadline, self._error = raw, deadline, error

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        if time.monotonic() > self._deadline:
            raise self._error(builtins.TimeoutError("the download's time ran out"))
        try:
            return self._raw.readinto(buffer)
        except Exception as exc:  # noqa: BLE001 - transport errors, named by the owner
            raise self._error(exc) from exc
