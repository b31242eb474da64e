"""One exception type for errors a user can fix.

The CLI prints a `SieveError` as one line (`error: ...`) and exits non-zero; anything else is a bug
and keeps its traceback.
"""


class SieveError(Exception):
    """A user-facing error: the message names what is wrong and, where possible, how to fix it."""
