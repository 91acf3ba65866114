"""The command's own failures: each is one line on stderr and a non-zero exit, never a traceback."""


class ScoringError(Exception):
    """Bad input to the command (a file, a column, a model, an output folder)."""
