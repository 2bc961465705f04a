"""A request's limits (``deepgym_clock``): counted in the solution's own CPU time, so that a
neighbour that starves the solution of CPU does not time out a right answer, while answers
that wait, or that make themselves wait, are still ended."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

JUDGE = Path(__file__).parents[2] / "deepgym_ray" / "judge"
sys.path.insert(0, str(JUDGE))
from deepgym_clock import WALL_FACTOR, CpuClock, Deadline  # noqa: E402 - stdlib-only judge file

CASE_TIMEOUT = 0.1

# Two neighbours on the driver's chosen ``core``, in a scheduling group of high weight; the
# kernel ends each after its CPU seconds, even if the driver were starved.
NEIGHBOURS = '''
def bounded():
    os.sched_setaffinity(0, {core})
    resource.setrlimit(resource.RLIMIT_CPU, (60, 60))


spinners = []
for _ in range(2):
    spinners.append(subprocess.Popen([sys.executable, "-c", "while True: pass"],
                                     start_new_session=True, preexec_fn=bounded))
    with open(f"/proc/{spinners[-1].pid}/autogroup", "w") as f:
        f.write("-18")
time.sleep(0.2)  # the spinners hold the core
'''

# The verifier's side, in its own process: one call to the solution while the neighbours run.
DRIVER = '''
import json, os, resource, signal, subprocess, sys, time
sys.path.insert(0, {judge!r})
import deepgym_spawn
deepgym_spawn.configure(solution_dir={folder!r}, case_timeout={limit!r})
from deepgym_proxy import load_solution

# Loaded under a generous limit: starting an interpreter on a machine kept busy can take more
# than WALL_FACTOR times the tight limit of the call under test, which is set only then.
sol = load_solution({path!r}, timeout=30)
sol.ready()
sol._conn.timeout = {limit!r}
group = sol._conn.proc.pid  # the solution's session and process group
# The solution shares one core with neighbours of a much higher weight (autogroup nice -18):
# the scheduler's fairness, not the luck of a given kernel, keeps it waiting for that core
# (about 1/55 of it). Everything else, pytest and this driver included, keeps the other cores,
# so a test that starves its solution never starves the suite.
core = max(os.sched_getaffinity(0))
os.sched_setaffinity(group, {{core}})

{neighbours}
# The run's time left (it caps each request's wall-clock time); set only now, so that however
# slow the set-up was under load, the call sees all of it.
{run_timer}
started = time.monotonic()
try:
    outcome = ["returned", sol.{call}]
except Exception as exc:
    outcome = [type(exc).__name__, str(exc)]
finally:
    seconds = time.monotonic() - started
    for proc in spinners:
        proc.kill()
        proc.wait()


def left_in(group):  # live (not zombie) processes of the solution's process group
    count = 0
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{{entry}}/stat", "rb") as f:
                data = f.read()
        except OSError:
            continue
        fields = data[data.rindex(b")") + 2:].split()
        count += fields[0] != b"Z" and int(fields[2]) == group
    return count


clean = deepgym_spawn.shutdown_all()
give_up = time.monotonic() + 10  # a killed process is gone once it has run its exit
while left_in(group) and time.monotonic() < give_up:
    time.sleep(0.05)
import deepgym_clock
print(json.dumps(outcome + [seconds, clean, left_in(group), deepgym_clock.STARVED]))
'''

# The run's time as a bare interval timer gives it, or as the runner's RunTimer counts it.
RUN_TIMERS = {
    "interval": "signal.signal(signal.SIGALRM, signal.SIG_IGN)\n"
                "signal.setitimer(signal.ITIMER_REAL, {run_time!r})",
    "run": "import deepgym_clock\n"
           "class RunOut(Exception):\n    pass\n"
           "def expired(reason):\n    raise RunOut(reason)\n"
           "deepgym_clock.RunTimer({run_time!r}, 300.0, expired).start()",
}

# Burns ``seconds`` of its own CPU time however long that takes in wall time.
SOLUTION = '''
import os, time


def ready():
    return True


def work(seconds):
    start = time.process_time()
    while time.process_time() - start < seconds:
        pass
    return seconds


def nap():
    time.sleep(3600)


def niced_work(seconds):
    os.nice(19)  # behind everything else on the machine: its own doing
    return work(seconds)


def yield_behind_own_spinners():
    # Ready to run all the time, yet hardly running: its own children take the CPU.
    for _ in range(4):
        if os.fork() == 0:
            while True:
                pass
    while True:
        os.sched_yield()
'''


def call_while_starved(tmp_path: Path, call: str, run_time: float = 120.0,
                       timer: str = "interval", notes: list | None = None
                       ) -> tuple[str, str, float]:
    """Run ``sol.<call>`` in a verifier process while neighbours of a far higher weight share
    the solution's one core (the other cores stay free, and the kernel ends each neighbour
    after its CPU budget even if this process were starved); returns (outcome, value or
    message, wall seconds of the call), and puts the clock's starvation notes in ``notes``."""
    if os.geteuid() != 0:
        pytest.skip("starving neighbours need root to raise their scheduling group's weight")
    path = tmp_path / "solution.py"
    path.write_text(SOLUTION)
    script = DRIVER.format(judge=str(JUDGE), folder=str(tmp_path), limit=CASE_TIMEOUT,
                           path=str(path), call=call, neighbours=NEIGHBOURS,
                           run_timer=RUN_TIMERS[timer].format(run_time=run_time))
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    outcome, value, seconds, clean, left, starved = json.loads(
        done.stdout.strip().splitlines()[-1])
    assert clean and left == 0, (clean, left)  # the solution and all it started are gone
    if notes is not None:
        notes.extend(starved)
    return outcome, str(value), seconds


@pytest.mark.slow
def test_a_right_answer_starved_past_its_wall_clock_bound_is_not_timed_out(tmp_path):
    work = 0.5 * CASE_TIMEOUT
    outcome, value, seconds = call_while_starved(tmp_path, f"work({work})")
    assert (outcome, value) == ("returned", str(work)), value
    # The neighbours kept it waiting past the bound a wall clock alone would have applied.
    assert seconds > WALL_FACTOR * CASE_TIMEOUT, seconds


@pytest.mark.slow
def test_the_waits_of_a_starved_answer_are_left_out_of_the_run_time(tmp_path):
    # A third of the run's time is the call's WALL_FACTOR bound, as in the test above.
    run_time, work = 3.0, 0.5 * CASE_TIMEOUT
    outcome, value, seconds = call_while_starved(tmp_path, f"work({work})", run_time, "run")
    assert (outcome, value) == ("returned", str(work)), value
    # The run's limit passed in wall time while the verifier waited for the answer: only the
    # answer's waits for a CPU, told to the run's timer by the request, kept the run going.
    assert seconds > run_time, seconds


@pytest.mark.slow
def test_an_answer_that_sleeps_is_still_ended_by_the_wall_clock_bound(tmp_path):
    outcome, value, seconds = call_while_starved(tmp_path, "nap()")
    assert outcome == "TimeoutError" and "waits for a CPU not counted" in value, value


@pytest.mark.slow
def test_an_answer_that_makes_itself_wait_is_ended_by_the_run_time_left(tmp_path):
    run_time = 12.0
    outcome, value, _seconds = call_while_starved(tmp_path, "yield_behind_own_spinners()",
                                                  run_time=run_time)
    # Ended by one of the two wall-clock bounds (which one first depends on how much of its
    # time the scheduler counts as waiting), and either bound is well short of the run's own
    # end. The bound is checked, not the call's duration: the verifier here is starved too, so
    # how long it takes to notice and clean up is the load's, not the judge's.
    bound = re.search(r"within ([0-9.]+)s of wall-clock time", value)
    assert outcome == "TimeoutError" and bound, value
    assert float(bound.group(1)) <= run_time / 3, value


# A request's bound on all its wall-clock time (a third of the run's time left) is a verdict,
# but the clock notes when the machine's load, not the answer, kept it waiting: the host then
# runs it again (tests/scoring/test_starved_runs.py). An answer that made itself wait gets no
# such note: another try would only cost the host a run.
STARVED_RUN_TIME = 1.5  # a bound of 0.5 s in all; the call needs about 2.5 s at 1/55 of a core


@pytest.mark.slow
def test_a_right_answer_starved_past_its_bound_in_all_is_noted_as_starved(tmp_path):
    notes: list = []
    outcome, value, _seconds = call_while_starved(tmp_path, f"work({0.5 * CASE_TIMEOUT})",
                                                  STARVED_RUN_TIME, notes=notes)
    assert outcome == "TimeoutError" and "of wall-clock time in all" in value, value
    assert len(notes) == 1 and "waiting for a CPU" in notes[0], notes


@pytest.mark.slow
def test_an_answer_that_lowered_its_own_priority_is_not_noted_as_starved(tmp_path):
    # (Whether its own threads or processes took the CPU is told by their CPU time, which
    # under this much starvation is too small to tell: a note there costs a run, no more.)
    notes: list = []
    outcome, value, _seconds = call_while_starved(tmp_path, "niced_work(0.05)",
                                                  STARVED_RUN_TIME, notes=notes)
    assert outcome == "TimeoutError", value
    assert notes == [], notes


def test_a_reply_waiting_when_the_verifier_looks_late_is_in_time():
    read_end, write_end = os.pipe()
    try:
        os.write(write_end, b"reply")
        deadline = Deadline(None, CASE_TIMEOUT, TimeoutError)
        deadline.started -= 100 * CASE_TIMEOUT  # the verifier was kept from looking
        deadline.wait(read_end)  # returns: the reply is there
        empty = Deadline(None, CASE_TIMEOUT, TimeoutError)
        empty.started -= 100 * CASE_TIMEOUT
        os.read(read_end, 5)
        with pytest.raises(TimeoutError, match="0.1s"):
            empty.wait(read_end)
    finally:
        os.close(read_end)
        os.close(write_end)


def test_a_waiting_reply_past_the_cpu_limit_is_still_a_timeout():
    read_end, write_end = os.pipe()
    clock = CpuClock(os.getpid())
    try:
        deadline = Deadline(clock, CASE_TIMEOUT, TimeoutError)
        start = time.process_time()
        while time.process_time() - start < 2 * CASE_TIMEOUT:
            pass
        os.write(write_end, b"reply")
        deadline.started -= 2 * CASE_TIMEOUT
        with pytest.raises(TimeoutError, match="of CPU time"):
            deadline.wait(read_end)
        assert clock.queued() is not None  # the wait for a CPU is readable here
    finally:
        clock.close()
        os.close(read_end)
        os.close(write_end)


# The same for a script run by ``run_solution``: the driver and the script it starts share one
# core with the neighbours (a child inherits its parent's core), so the script waits for it.
SCRIPT_DRIVER = '''
import json, os, resource, signal, subprocess, sys, time
sys.path.insert(0, {judge!r})
import deepgym_spawn
deepgym_spawn.configure(solution_dir={folder!r}, case_timeout={limit!r})
from deepgym_solution import run_solution

core = max(os.sched_getaffinity(0))
os.sched_setaffinity(0, {{core}})
# The driver feeds the script's stdin and reads its output from that core too: in a session
# of its own at the neighbours' weight, it is never the one kept waiting (a busy machine's
# other processes, pytest's included, weigh far less), so the script's wait for its input
# is short however the kernel shares the core out.
with open("/proc/self/autogroup", "w") as f:
    f.write("-18")

{neighbours}
started = time.monotonic()
try:
    run = run_solution({path!r}, args=["7"], stdin="x")
finally:
    seconds = time.monotonic() - started
    for proc in spinners:
        proc.kill()
        proc.wait()
print(json.dumps([run.exit_code, run.stdout, run.timed_out, seconds]))
'''

SCRIPTS = {
    # Python's start-up and a little work: well under its CPU limit, many times it in wall time.
    "works": "import sys, time\nstart = time.process_time()\n"
             "while time.process_time() - start < 0.05:\n    pass\n"
             "print(sys.argv[1], sys.stdin.read())\n",
    "sleeps": "import time\ntime.sleep(3600)\n",
}


def run_script_while_starved(tmp_path: Path, script: str, limit: float) -> list:
    if os.geteuid() != 0:
        pytest.skip("starving neighbours need root to raise their scheduling group's weight")
    path = tmp_path / "solution.py"
    path.write_text(SCRIPTS[script])
    driver = SCRIPT_DRIVER.format(judge=str(JUDGE), folder=str(tmp_path), limit=limit,
                                  path=str(path), neighbours=NEIGHBOURS)
    done = subprocess.run([sys.executable, "-c", driver], capture_output=True, text=True,
                          timeout=300, start_new_session=True)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_a_right_script_starved_past_its_limit_in_wall_time_is_not_timed_out(tmp_path):
    limit = 0.5
    code, stdout, timed_out, seconds = run_script_while_starved(tmp_path, "works", limit)
    assert (code, stdout, timed_out) == (0, "7 x\n", False), (code, stdout, timed_out)
    assert seconds > limit, seconds  # a wall-clock limit would have ended it


@pytest.mark.slow
def test_a_script_that_sleeps_is_still_ended(tmp_path):
    code, _stdout, timed_out, _seconds = run_script_while_starved(tmp_path, "sleeps", 0.2)
    assert timed_out and code is None


# The run's own limit (``RunTimer``) in a verifier that shares one core with the neighbours:
# it is starved while it computes, and its waits for that core are not its time.
RUN_DRIVER = '''
import json, os, resource, signal, subprocess, sys, time
sys.path.insert(0, {judge!r})
from deepgym_clock import RunTimer


class RunOut(Exception):
    pass


def expired(reason):
    raise RunOut(reason)


def burn(seconds):
    start = time.process_time()
    while time.process_time() - start < seconds:
        pass


core = max(os.sched_getaffinity(0))
os.sched_setaffinity(0, {{core}})
{neighbours}
timer = RunTimer({limit!r}, {hard!r}, expired)
started = time.monotonic()
try:
    timer.start()
    {work}
    outcome = ["finished", ""]
except RunOut as exc:
    outcome = ["out of time", str(exc)]
finally:
    timer.stop()
    seconds = time.monotonic() - started
    for proc in spinners:
        proc.kill()
        proc.wait()
print(json.dumps(outcome + [seconds]))
'''


def verify_while_starved(work: str, limit: float, hard: float) -> tuple[str, str, float]:
    """Run ``work`` under a RunTimer in a process starved of its one core; returns (outcome,
    the timer's reason, wall seconds)."""
    if os.geteuid() != 0:
        pytest.skip("starving neighbours need root to raise their scheduling group's weight")
    script = RUN_DRIVER.format(judge=str(JUDGE), neighbours=NEIGHBOURS, limit=limit, hard=hard,
                               work=work)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=300, start_new_session=True)
    assert done.returncode == 0, done.stderr[-2000:]
    outcome, reason, seconds = json.loads(done.stdout.strip().splitlines()[-1])
    return outcome, reason, seconds


@pytest.mark.slow
def test_a_verifier_starved_past_the_run_limit_in_wall_time_is_not_out_of_time():
    limit = 0.5
    outcome, reason, seconds = verify_while_starved("burn(0.05)", limit, hard=120.0)
    assert outcome == "finished", reason
    assert seconds > limit, seconds  # a wall-clock limit would have ended it


@pytest.mark.slow
def test_a_verifier_that_sleeps_runs_out_of_the_run_time():
    outcome, reason, _seconds = verify_while_starved("time.sleep(60)", 0.5, hard=120.0)
    assert outcome == "out of time" and "waits for a CPU not counted" in reason, reason


@pytest.mark.slow
def test_however_starved_a_run_ends_at_its_bound_on_all_its_time():
    # Starved of its core, it would take minutes of wall-clock time to use its 2 seconds.
    outcome, reason, _seconds = verify_while_starved("burn(60)", 2.0, hard=6.0)
    assert (outcome, reason) == ("out of time", "6s of wall-clock time in all"), reason


def test_an_alarm_still_pending_when_the_run_timer_stops_is_ignored():
    # The verifier finished just as the run's time ran out: the signal already sent must not
    # end the runner's reporting of the result.
    script = (f"import os, signal, sys, time\nsys.path.insert(0, {str(JUDGE)!r})\n"
              "from deepgym_clock import RunTimer\n"
              "def expired(reason):\n    raise SystemExit('expired: ' + reason)\n"
              "timer = RunTimer(0.05, 1.0, expired)\ntimer.start()\ntimer.stop()\n"
              "time.sleep(0.1)\nos.kill(os.getpid(), signal.SIGALRM)\nprint('reported')\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=60)
    assert (done.returncode, done.stdout) == (0, "reported\n"), done.stderr
