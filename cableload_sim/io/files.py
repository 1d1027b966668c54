"""Writing a file so that a crash at any instant leaves either the old file or the whole new
one: the data goes to a temporary file in the same folder, is flushed and synced, and replaces
the target by a rename. The temporary name ``.tmp-<pid>-<random>-<name>`` says which process
wrote it, so leftovers of a killed writer can be recognized and swept
(``planners.codegen.sweep_stale``)."""

from __future__ import annotations

import os
import uuid
from pathlib import Path


def temporary_name(path: Path) -> Path:
    return path.with_name(f".tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}-{path.name}")


def atomic_write_bytes(path: str | Path, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically (its folder created when missing)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = temporary_name(path)
    try:
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def json_default(value: object) -> object:
    """The JSON form of what ``json`` does not write itself: numpy scalars and arrays."""
    import numpy as np

    if isinstance(value, (np.floating, np.integer, np.bool_)):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    raise TypeError(f"not JSON-serializable: {type(value).__name__}")


def atomic_write_json(path: str | Path, obj: object) -> None:
    """``obj`` as indented JSON, written atomically (numpy values as plain numbers)."""
    import json

    atomic_write_bytes(path, (json.dumps(obj, indent=1, default=json_default) + "\n").encode())
