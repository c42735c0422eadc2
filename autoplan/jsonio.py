"""JSON files in and out: clear errors on read, atomic writes (never a half-written file).

Every artifact autoplan writes (profiles, plans, calibration, checkpoint markers, measurements)
goes through :func:`write_json_atomic` / :func:`write_text_atomic`: a temporary file in the same
directory, flushed to disk, then renamed over the target. A reader sees the old file or the new
one, never a mix; an interrupt (Ctrl-C, SIGTERM) or a crash during the write leaves the old file
as it was and removes the temporary one.

Loaders read numbers through :func:`as_int` / :func:`as_float`, which refuse what a JSON file can
hold but a cost model cannot use: booleans, strings, NaN and infinities, negative or absurdly
large values.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from pathlib import Path
from typing import Any

from autoplan.errors import InputError

MAX_INT = 2 ** 62
"""largest integer any artifact field may hold (bytes, counts): far above any real figure, and
small enough that sums of a few of them stay exact in Python and finite as floats"""
MAX_FLOAT = 1e30
"""largest float any artifact field may hold (seconds, rates, FLOPs): sums and products of a few
stay finite"""


def read_json(path: str | os.PathLike, what: str) -> dict[str, Any]:
    """Read a JSON object from ``path``; ``what`` names the file kind in error messages."""
    p = Path(path)
    if not p.is_file():
        raise InputError(f"{what} file not found: {p}")
    try:
        data = json.loads(p.read_bytes())
    except (ValueError, UnicodeDecodeError) as e:   # JSONDecodeError is a ValueError; so is a 5000-digit int
        raise InputError(f"{what} file {p} is not valid JSON: {str(e).splitlines()[0][:200]}") from None
    except RecursionError:
        raise InputError(f"{what} file {p} is not valid JSON: nested too deeply") from None
    except OSError as e:
        raise InputError(f"cannot read {what} file {p}: {e.strerror or e}") from None
    if not isinstance(data, dict):
        raise InputError(f"{what} file {p} must hold a JSON object, not {type(data).__name__}")
    return data


def _refuse_after_interrupt() -> None:
    """Raise :class:`~autoplan.errors.Interrupted` if this process was interrupted earlier: a library
    may have swallowed the interrupt (a bare ``except:``) and let the command run on, and an
    interrupted command must not replace its output file."""
    from autoplan.errors import Interrupted
    from autoplan.processes import interrupt_received
    signum = interrupt_received()
    if signum is not None:
        raise Interrupted(signum)


def write_json_atomic(path: str | os.PathLike, data: Any) -> None:
    """Write ``data`` as JSON to ``path`` via a temporary file and rename, so a reader never
    sees a half-written file and a failure leaves any earlier file untouched."""
    write_text_atomic(path, json.dumps(data, indent=2, sort_keys=False) + "\n")


def refuse_directory(path: str | os.PathLike, *, option: str = "", what: str = "the file",
                     example: str = "out.json") -> None:
    """InputError in one line where ``path``, given as a file to write, names a directory: a command that
    measures for minutes checks it first; :func:`write_text_atomic` checks it for every writer."""
    p = Path(path)
    if p.is_dir():
        raise InputError(f"{option + ' ' if option else ''}{p} is a directory; give {what} to write, e.g. {p / example}")


def write_text_atomic(path: str | os.PathLike, text: str | bytes) -> None:
    """Write ``text`` (str as UTF-8, or bytes) to ``path``: a temporary file ``.NAME.XXXX`` beside
    it, flushed and synced, then renamed over ``path``. On any exception or interrupt (including one
    received earlier and swallowed by a library) the temporary file is removed and ``path`` keeps its
    old content (or stays absent)."""
    p = Path(path)
    refuse_directory(p)
    p.parent.mkdir(parents=True, exist_ok=True)
    data = text.encode() if isinstance(text, str) else text
    fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", suffix=".tmp", dir=str(p.parent))
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())      # the bytes are on disk before the name points at them
        os.chmod(tmp, 0o644)          # mkstemp makes 0600; an artifact is meant to be shared
        _refuse_after_interrupt()
        os.replace(tmp, p)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def check_schema(data: dict[str, Any], kind: str, version: int, source: str) -> None:
    """Check the ``kind`` and ``schema_version`` fields of a loaded artifact."""
    got_kind = data.get("kind")
    if got_kind != kind:
        raise InputError(f"{source}: expected a {kind} file, found kind={short_repr(got_kind)}")
    got = data.get("schema_version")
    if got != version or isinstance(got, bool):
        raise InputError(f"{source}: unsupported schema_version {short_repr(got)} (this autoplan reads {version})")


def require(data: dict[str, Any], key: str, source: str, typ: type | tuple[type, ...] = object) -> Any:
    """``data[key]``, or an InputError naming the file and key."""
    if not isinstance(data, dict):
        raise InputError(f"{source} must be a JSON object, not {type(data).__name__}")
    if key not in data:
        raise InputError(f"{source}: missing field {key!r}")
    val = data[key]
    if typ is not object and (not isinstance(val, typ) or (isinstance(val, bool) and typ in (int, float))):
        raise InputError(f"{source}: field {key!r} has the wrong type ({type(val).__name__})")
    return val


def short_repr(value: Any, limit: int = 40) -> str:
    """``repr(value)`` cut to ``limit`` characters (a fuzzed file can hold megabytes, or an int
    too long for ``repr``)."""
    try:
        text = repr(value)
    except ValueError:                 # an int with more digits than Python converts
        text = f"<{type(value).__name__} too large to show>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def as_int(value: Any, what: str, *, minimum: int = 0, maximum: int = MAX_INT) -> int:
    """``value`` as an int in ``[minimum, maximum]``, else InputError naming ``what``.

    Accepts a JSON integer or an integral float (``8e9``); refuses booleans, strings, NaN/inf."""
    if isinstance(value, float) and math.isfinite(value) and value.is_integer() and abs(value) <= MAX_INT:
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise InputError(f"{what} must be an integer, got {short_repr(value)}")
    if not minimum <= value <= maximum:
        raise InputError(f"{what} must be between {minimum} and {maximum}, got {short_repr(value)}")
    return value


def as_float(value: Any, what: str, *, minimum: float = 0.0, maximum: float = MAX_FLOAT,
             positive: bool = False) -> float:
    """``value`` as a finite float in ``[minimum, maximum]`` (``> 0`` too when ``positive``), else
    InputError naming ``what``. Refuses booleans, strings, NaN and infinities."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InputError(f"{what} must be a number, got {short_repr(value)}")
    try:
        out = float(value)
    except OverflowError:
        raise InputError(f"{what} is too large: {short_repr(value)}") from None
    if not math.isfinite(out):
        raise InputError(f"{what} must be a finite number, got {short_repr(value)}")
    if not minimum <= out <= maximum or (positive and out <= 0):
        bound = f"> 0 and <= {maximum:g}" if positive else f"between {minimum:g} and {maximum:g}"
        raise InputError(f"{what} must be {bound}, got {short_repr(value)}")
    return out


def as_str(value: Any, what: str) -> str:
    """``value`` if it is a string, else InputError naming ``what``."""
    if not isinstance(value, str):
        raise InputError(f"{what} must be a string, got {short_repr(value)}")
    return value


def as_choice(value: Any, what: str, choices: tuple[str, ...]) -> str:
    """``value`` if it is one of ``choices`` (strings), else InputError naming ``what`` and listing them."""
    value = as_str(value, what)
    if value not in choices:
        raise InputError(f"{what} must be one of {'|'.join(choices)}, got {short_repr(value)}")
    return value


def as_dict(value: Any, what: str) -> dict:
    if not isinstance(value, dict):
        raise InputError(f"{what} must be a JSON object, got {type(value).__name__}")
    return value


def as_list(value: Any, what: str) -> list:
    if not isinstance(value, list):
        raise InputError(f"{what} must be a list, got {type(value).__name__}")
    return value
