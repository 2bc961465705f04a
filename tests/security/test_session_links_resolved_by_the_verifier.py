"""An agent leaves links whose meaning depends on who follows them, or that its own sweep
could not see or remove: ``/proc/self/cwd`` (inside the work directory for the agent, the
verifier's own directory for the verifier), ``/proc/thread-self``, a directory the agent made
unreadable to itself (mode 0o001: the verifier, another user or root, could still pass it), a
work directory made read-only so that no link in it can be removed, a link through a linked
directory. The verifier reads a copy of the work directory that a trusted process made, which
holds no link: none of them reaches the expected output beside the verifier."""

from session_attacks import bash, session_attack_tests

TAGS = ("sessions", "symlinks", "proc", "read-secrets")

test_alone, test_in_batch = session_attack_tests([
    [bash("ln -s /proc/self/cwd/expected.txt answer.txt")],
    [bash("ln -s /proc/thread-self/cwd/expected.txt answer.txt")],
    # The agent cannot list d (mode 0o001 leaves its owner nothing), so its own view of d/x is
    # blind; the verifier, as another user or root, passes d.
    [bash("mkdir d && ln -s /proc/self/cwd/expected.txt d/x && ln -s d/x answer.txt "
          "&& chmod 001 d")],
    [bash("mkdir d && ln -s /deepgym/run/work/expected.txt d/x && ln -s d/x answer.txt "
          "&& chmod 001 d")],
    # A read-only work directory: no link in it can be removed by a sweep run as the agent.
    [bash("ln -s /deepgym/run/work/expected.txt answer.txt && chmod 555 .")],
    [bash("mkdir -p a && ln -s /proc/self/cwd a/up && ln -s a/up/expected.txt answer.txt")],
    [bash("ln -s /proc/self/root/proc/self/cwd/expected.txt answer.txt")],
])
