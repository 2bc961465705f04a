"""Write to /dev/shm, /tmp, /var/tmp and the host's home outside its own directory."""

from harness import Attack

DROPS = ("/dev/shm/@MARK@-shm", "/tmp/@MARK@-tmp", "/var/tmp/@MARK@-vartmp",
         "/root/@MARK@-home", "/run/@MARK@-run")

WRITE = r'''
PATHS = @DROPS@
def _drop():
    for path in PATHS:
        try:
            with open(path, "w") as f:
                f.write("hostile")
        except OSError:
            pass
_drop()
def answer():
    _drop()
    return None
'''.replace("@DROPS@", repr(list(DROPS)))

# A later run cheats only if one of those files persisted where it can see it.
FIND_DROPS = r'''
import os
PATHS = @DROPS@
def answer():
    return "@CLAIM@" if any(os.path.exists(p) for p in PATHS) else None
'''.replace("@DROPS@", repr(list(DROPS)))

ATTACK = Attack(
    name="write_shm_and_tmp",
    tags=("disk", "outliving"),
    tries="to leave files on the host outside its directory: /dev/shm, /tmp, /var/tmp, "
          "/root, /run (the host check looks for each; a later run cheats if it finds one)",
    solution=WRITE,
    drops=DROPS,
    follow_up=FIND_DROPS,
)


def test_alone(battery):
    battery.alone(ATTACK)


def test_in_batch(pool_battery):
    pool_battery.in_batch(ATTACK)
