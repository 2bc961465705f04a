"""Keys left in the kernel's keyrings, read by a later run (issue 32, point 4): a writer run
adds keys that every uid may see into its uid's keyrings and a named session keyring; a later
run with no algorithm cheats only if it finds them (in /proc/keys, by joining the named
keyring, or by request_key). Docker's default seccomp profile denies the keyring calls, and so
does the local sandbox's filter; /proc/keys is masked in both."""

from harness import Attack

# x86-64 numbers: add_key, request_key, keyctl; keyctl's operations; special keyring ids.
KEYS = r'''
import ctypes
ADD_KEY, REQUEST_KEY, KEYCTL = 248, 249, 250
JOIN_SESSION_KEYRING, SETPERM, READ = 1, 5, 11
SESSION, USER, USER_SESSION = -3, -4, -5
EVERYONE = 0x3f3f3f3f  # possessor, user, group and other: every permission
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
'''

WRITER = KEYS + r'''
def _plant():
    ring = libc.syscall(KEYCTL, JOIN_SESSION_KEYRING, b"@MARK@-ring")
    if ring > 0:
        libc.syscall(KEYCTL, SETPERM, ring, EVERYONE)
    for n, keyring in enumerate((USER, USER_SESSION, SESSION)):
        key = libc.syscall(ADD_KEY, b"user", b"@MARK@-%d" % n, b"@CLAIM@", 42, keyring)
        if key > 0:
            libc.syscall(KEYCTL, SETPERM, key, EVERYONE)
_plant()
def answer():
    _plant()
    return None
'''

READER = KEYS + r'''
def _found():
    for name in ("/proc/keys", "/proc/key-users"):
        try:
            with open(name) as f:
                if "@MARK@" in f.read():
                    return True
        except OSError:
            pass
    for n in range(3):
        if libc.syscall(REQUEST_KEY, b"user", b"@MARK@-%d" % n, None, 0) > 0:
            return True
    # Joining a named keyring that does not exist makes an empty one: only the writer's has keys.
    ring = libc.syscall(KEYCTL, JOIN_SESSION_KEYRING, b"@MARK@-ring")
    if ring > 0:
        buf = ctypes.create_string_buffer(64)
        if libc.syscall(KEYCTL, READ, ring, buf, 64) > 0:
            return True
    return False
def answer():
    return "@CLAIM@" if _found() else None
'''

ATTACK = Attack(
    name="keyring_across_runs",
    tags=("outliving", "concurrency"),
    tries="to leave keys in the kernel's keyrings (its uid's, a named session keyring, every "
          "permission for every uid) that a later run finds in /proc/keys, by joining the "
          "keyring or with request_key (that run cheats only when it does)",
    solution=WRITER,
    follow_up=READER,
)


def test_alone(battery):
    battery.alone(ATTACK)


def test_in_batch(pool_battery):
    pool_battery.in_batch(ATTACK)
