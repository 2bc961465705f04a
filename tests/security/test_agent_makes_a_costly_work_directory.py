"""A Terminal-Bench answer does the task, then leaves a work directory that costs the engine
more to copy than its size says. The issue's own (a chain of 1,000 nested directories holding
70,000 empty files: 207 MB of tar headers and no data) ran the copy into grading past the
Docker client's 60 s, which was "no verdict". Here, each past one bound and light enough to
make within the task's 60 s beside others: 200 nested directories, 51,000 empty files in one
directory, and 20,000 files whose paths are about 1,000 bytes long (40 MB of headers). Each is
counted on the host as the engine streams the archive: the answer's judged 0, naming the
bound. The two trees of tens of thousands of files take a minute to make and copy: they run in
the full battery (DEEPGYM_FULL_BATTERY=1, scripts/reliability.py); every bound is tested in CI
with small limits in tests/scoring/test_workdir_archive.py."""

import os

from repo_attacks import RIGHT_COUNT, attack_tests

TAGS = ('repository', 'disk', 'two-phase')
_RIGHT = RIGHT_COUNT.format(log="/app/server.log") + "\n"
_DEEP = ("import os\nfor i in range(200):\n    os.mkdir('d'); os.chdir('d')\n"
         "open('deep', 'w').close()\n")
_MANY = ("import os\nos.mkdir('many'); os.chdir('many')\n"
         "for i in range(51000): open(str(i), 'w').close()\n",
         "import os\nfor i in range(4):\n    os.mkdir('x' * 240); os.chdir('x' * 240)\n"
         "for i in range(20000): open('%05d' % i, 'w').close()\n")
FULL = os.environ.get("DEEPGYM_FULL_BATTERY") == "1"
SCRIPTS = [_RIGHT + "cd /app && python3 -c \"\n" + body + "\"\n"
           for body in (_DEEP, *(_MANY if FULL else ()))]


test_alone, test_in_batch = attack_tests("terminal", SCRIPTS, 'policy_sandbox_failure')
