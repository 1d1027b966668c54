"""What this machine has left: memory and disk, for refusing requests that cannot fit."""

from __future__ import annotations

import shutil
from pathlib import Path


def available_memory() -> float | None:
    """Bytes of memory a new allocation may take (Linux: MemAvailable), None if unknown."""
    try:
        with open("/proc/meminfo") as file:
            for line in file:
                if line.startswith("MemAvailable:"):
                    return float(line.split()[1]) * 1024.0
    except OSError:
        pass
    return None


def free_disk(folder) -> float | None:
    """Bytes free for an unprivileged user in ``folder``'s file system, None if unknown."""
    try:
        return float(shutil.disk_usage(Path(folder)).free)
    except OSError:
        return None


def gigabytes(size: float) -> str:
    """``size`` (bytes) for a message: '1.4 GB', '3.2e+05 GB'."""
    return f"{size / 1e9:.3g} GB"
