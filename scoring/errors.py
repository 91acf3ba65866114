"""The command's own failures: each is one line on stderr and a non-zero exit, never a traceback."""


class ScoringError(Exception):
    """Bad input to the command (a file, a column, a model, an output folder)."""


class JobFailed(Exception):
    """The job failed (not a row: a row's own fault is that row's error): one line naming the
    cause and where, never the engine's internals (Ray's exception names, pids, actor ids)."""
