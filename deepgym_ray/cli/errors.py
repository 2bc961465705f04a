"""How a command ends: the user's mistakes, and the exit codes (see :mod:`deepgym_ray.cli.main`)."""

__all__ = ["EXIT_BAD_INPUT", "EXIT_FAILED", "EXIT_INTERRUPTED", "EXIT_NO_VERDICT", "EXIT_OK",
           "BadInput"]

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT, EXIT_NO_VERDICT, EXIT_INTERRUPTED = 0, 1, 2, 3, 130


class BadInput(Exception):
    """A problem with what the user gave us: reported on one line, exit code 2."""
