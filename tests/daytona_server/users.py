"""A sandbox's own unprivileged user, as in Daytona's default images (user ``daytona``).

There the sandbox's user is ``daytona`` (home ``/home/daytona``), its commands run as that
user, and it may use ``sudo`` without a password. Here such a user gets a uid of its own (one
this machine's user database does not know) and, inside the sandbox's mount namespace only,
its own ``/etc/passwd``, ``group`` and ``shadow`` (the host's, plus the user) and
``/etc/sudoers`` (Debian's defaults, plus a rule for the user), bind-mounted over the host's:
the host's /etc is never changed. ``sudo`` is the real one (Debian's ``sudo`` package, as
installed on this machine); ``sudo="nopasswd"`` lets the user become root without a password,
``"password"`` asks for one (so ``sudo -n`` fails), None gives it no rule at all.

Example:
    user = SandboxUser.make("daytona", sudo="nopasswd")
    binds = user.etc_binds(Path("/tmp/box1.etc"))   # [(file, "/etc/passwd"), ...]
"""

from __future__ import annotations

import os
import pwd
import secrets
import shutil
from dataclasses import dataclass
from pathlib import Path

SUDO_MODES = (None, "nopasswd", "password")
_FIRST_UID = 2000
# Debian's /etc/sudoers defaults (bookworm); the host's /etc/sudoers.d is not included.
_SUDOERS = """Defaults env_reset
Defaults mail_badpass
Defaults secure_path="/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
Defaults use_pty
root ALL=(ALL:ALL) ALL
"""
_RULES = {"nopasswd": "{name} ALL=(ALL:ALL) NOPASSWD: ALL\n",
          "password": "{name} ALL=(ALL:ALL) ALL\n", None: ""}


def sudo_missing() -> str | None:
    """Why a user's ``sudo`` cannot be the real one here, or None when it can."""
    if shutil.which("sudo") is None:
        return "sudo is not installed (Debian's sudo package; .ci/run installs it)"
    if not (os.stat(shutil.which("sudo")).st_mode & 0o4000):
        return "sudo is not setuid root"
    return None


def _free_uid() -> int:
    """A uid that no user of this machine has and no process runs as, drawn at random (each
    sandbox user its own: tests look for a user's processes, and servers run side by side,
    in other test processes too), below the uids the providers give runs (from 2**20)."""
    while True:
        uid = _FIRST_UID + secrets.randbelow((1 << 20) - _FIRST_UID)
        try:
            pwd.getpwuid(uid)
        except KeyError:
            if not _runs_as(uid):
                return uid


def _runs_as(uid: int) -> bool:
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/status") as f:
                if any(line.startswith("Uid:") and str(uid) in line.split() for line in f):
                    return True
        except OSError:
            continue
    return False


@dataclass(frozen=True)
class SandboxUser:
    """The sandbox's user: its name, uid (its group has the same id), home and sudo rule."""

    name: str
    uid: int
    sudo: str | None = None

    @classmethod
    def make(cls, name: str, sudo: str | None = None) -> SandboxUser:
        if sudo not in SUDO_MODES:
            raise ValueError(f"sudo must be one of {SUDO_MODES}, not {sudo!r}")
        return cls(name=name, uid=_free_uid(), sudo=sudo)

    @property
    def home(self) -> str:
        return f"/home/{self.name}"

    def etc_binds(self, where: Path) -> list[tuple[str, str]]:
        """Write the sandbox's user database and sudoers into ``where`` (a root-only directory
        of this machine); returns (file, /etc path) pairs to bind-mount inside the sandbox."""
        where.mkdir(mode=0o711, exist_ok=True)
        name, uid = self.name, self.uid
        # pam_unix's account check (sudo's) needs a shadow entry; '!' is a locked password,
        # as useradd leaves it.
        extra = {"passwd": f"{name}:x:{uid}:{uid}::{self.home}:/bin/bash\n",
                 "group": f"{name}:x:{uid}:\n",
                 "shadow": f"{name}:!:19000:0:99999:7:::\n"}
        binds = []
        for base, line in extra.items():
            host = Path("/etc") / base
            text = host.read_text() if base != "shadow" else "root:*:19000:0:99999:7:::\n"
            target = where / base
            target.write_text(text + line)
            target.chmod(0o640 if base == "shadow" else 0o644)
            binds.append((str(target), str(host)))
        sudoers = where / "sudoers"
        sudoers.write_text(_SUDOERS + _RULES[self.sudo].format(name=name))
        sudoers.chmod(0o440)  # sudo refuses a sudoers file anyone but root may write
        binds.append((str(sudoers), "/etc/sudoers"))
        return binds
