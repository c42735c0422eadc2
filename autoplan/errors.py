"""One error type for everything the user can get wrong.

The library raises :class:`AutoplanError` (or a subclass); only ``autoplan.cli`` turns it into a
single line on stderr and exit code 2.  Anything else that escapes is a bug in autoplan.
"""

from __future__ import annotations


class AutoplanError(Exception):
    """Bad input or an impossible request; the message is one line meant for the user."""


class InputError(AutoplanError):
    """A malformed, missing or mismatched file, spec or option."""


class LayoutError(AutoplanError):
    """A layout that does not divide the world size or the model."""


class InfeasibleError(AutoplanError):
    """No layout fits. ``diagnosis`` says what the smallest layout needs per device."""

    def __init__(self, message: str, *, min_memory_bytes: int | None = None,
                 binding_constraint: str | None = None, smallest_layout=None):
        super().__init__(message)
        self.min_memory_bytes = min_memory_bytes
        self.binding_constraint = binding_constraint
        self.smallest_layout = smallest_layout
        """the layout (autoplan.plan.plan.Layout) that needs the least memory per device"""


class LaunchError(AutoplanError):
    """The launch does not match the plan (world size, layer names)."""


class AutoplanWarning(UserWarning):
    """Something the user can do better, not an error (e.g. a model profile that lacks timings
    measured in groups); ``autoplan.cli`` prints each as one ``warning: ...`` line on stderr."""


class Interrupted(BaseException):
    """Ctrl-C (SIGINT) or SIGTERM arrived: unwind, clean up, exit ``128 + signum``.

    A BaseException, like KeyboardInterrupt, so that ``except Exception`` does not swallow it; unlike
    KeyboardInterrupt, click does not turn it into its own "Aborted!". Raised by the handlers of
    :func:`autoplan.processes.interrupts_raise`."""

    def __init__(self, signum: int):
        super().__init__(f"interrupted by signal {signum}")
        self.signum = signum
