"""One error type for user mistakes: caught once in cli.main, printed as one line, exit code 2."""


class HctuneError(Exception):
    """A problem the user can fix (bad input, missing file, bad setting). Never a traceback."""

    exit_code = 2

    def __init__(self, message: str, exit_code: int = 2):
        super().__init__(message)
        self.exit_code = exit_code
