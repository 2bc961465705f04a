"""What the command line reports as the user's mistake."""

__all__ = ["BadInput"]


class BadInput(Exception):
    """A problem with what the user gave us: reported on one line, exit code 2."""
