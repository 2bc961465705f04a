"""One output stream for a judge run (stdlib; shipped into sandboxes as ``deepgym_remote_stream``).

A provider whose every output stream is a call of its own (Modal's: one call per stream read,
one more for the exit status) reads only the command's stdout. The in-sandbox program, started
with ``--one-stream``, then takes its stderr (and so the runner's) into a pipe of its own, of
which it keeps the last ``STDERR_KEPT`` bytes (only a tail is ever read: however much a
verifier prints, it costs no more memory or disk), and after the run writes that tail and its
report after the end mark on stdout (see ``command.split_one_stream`` for the host's side).

Example (in the sandbox):
    tail = StderrTail()                    # first thing: everything after it is kept
    ...                                    # the run
    tail.finish('deepgym-run {"clean": true}\\n')
"""

import os
import sys
import threading

STDERR_KEPT = 64 << 10


class StderrTail:
    """Our stderr into a pipe whose last ``STDERR_KEPT`` bytes a thread keeps."""

    def __init__(self):
        read, write = os.pipe()
        os.dup2(write, 2)
        os.close(write)
        self.kept = bytearray()
        self.reader = threading.Thread(target=self._read, args=(read,), daemon=True)
        self.reader.start()

    def _read(self, fd):
        while chunk := os.read(fd, 1 << 16):
            self.kept += chunk
            del self.kept[:-STDERR_KEPT]

    def finish(self, report_line):
        """Write what was kept and then ``report_line`` on stdout, once every writer of the
        pipe is gone (a straggler is not waited for long: the run's processes are)."""
        sys.stderr.flush()
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 2)
        os.close(devnull)
        self.reader.join(5)
        kept = bytes(self.kept)
        if kept and not kept.endswith(b"\n"):  # the report starts a line of its own
            kept += b"\n"
        view = memoryview(kept + report_line.encode())
        while view:
            view = view[os.write(1, view):]
