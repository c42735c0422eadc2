"""JSON files in and out: clear errors on read, atomic writes (never a half-written file)."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from autoplan.errors import InputError


def read_json(path: str | os.PathLike, what: str) -> dict[str, Any]:
    """Read a JSON object from ``path``; ``what`` names the file kind in error messages."""
    p = Path(path)
    if not p.is_file():
        raise InputError(f"{what} file not found: {p}")
    try:
        data = json.loads(p.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise InputError(f"{what} file {p} is not valid JSON: {e}") from None
    if not isinstance(data, dict):
        raise InputError(f"{what} file {p} must hold a JSON object, not {type(data).__name__}")
    return data


def write_json_atomic(path: str | os.PathLike, data: Any) -> None:
    """Write ``data`` as JSON to ``path`` via a temporary file and rename, so a reader never
    sees a half-written file and a failure leaves any earlier file untouched."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(data, indent=2, sort_keys=False) + "\n"
    fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", dir=str(p.parent))
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.chmod(tmp, 0o644)          # mkstemp makes 0600; an artifact is meant to be shared
        os.replace(tmp, p)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def check_schema(data: dict[str, Any], kind: str, version: int, source: str) -> None:
    """Check the ``kind`` and ``schema_version`` fields of a loaded artifact."""
    got_kind = data.get("kind")
    if got_kind != kind:
        raise InputError(f"{source}: expected a {kind} file, found kind={got_kind!r}")
    got = data.get("schema_version")
    if got != version:
        raise InputError(f"{source}: unsupported schema_version {got!r} (this autoplan reads {version})")


def require(data: dict[str, Any], key: str, source: str, typ: type | tuple[type, ...] = object) -> Any:
    """``data[key]``, or an InputError naming the file and key."""
    if key not in data:
        raise InputError(f"{source}: missing field {key!r}")
    val = data[key]
    if typ is not object and not isinstance(val, typ):
        raise InputError(f"{source}: field {key!r} has the wrong type ({type(val).__name__})")
    return val
