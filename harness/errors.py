"""Errors a user can act on. The CLI prints them as one clear message and
exits 2; anything else that escapes is a bug and keeps its traceback."""


class UserError(Exception):
    """Bad input or an unusable setup, explained in words."""


class MatrixError(UserError):
    """A matrix file that cannot be used, with the file and the key at fault."""

    def __init__(self, path, problems: list[str]):
        self.path = str(path)
        self.problems = problems
        super().__init__("\n".join(f"{self.path}: {p}" for p in problems))


class NothingReleasedYet(UserError):
    """A watched matrix whose every range has no release yet (as of the watch's date): nothing to
    run today. A watch says so and exits 0; a scheduler must not alert daily until it comes."""

    def __init__(self, path, ranges: list[str]):
        self.path, self.ranges = str(path), list(ranges)
        super().__init__(f"{self.path}: no release yet in " + ", ".join(self.ranges))


class EnvironmentUnavailable(Exception):
    """An environment could not be obtained; its cells become `unavailable`."""

    def __init__(self, reason: str, log_tail: str = ""):
        super().__init__(reason)
        self.reason = reason
        self.log_tail = log_tail


class EngineUnavailable(UserError):
    """The requested engine cannot be reached (no Docker daemon, say)."""


class CellUnsupported(Exception):
    """The engine cannot give this cell what it needs (GPUs, say): `unsupported`."""


class EnvironmentUnsupported(Exception):
    """The host cannot run this environment at all (a GPU stack without a GPU): `unsupported`."""
