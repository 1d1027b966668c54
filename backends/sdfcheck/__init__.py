"""Check an SDF file with the real SDFormat parser (Debian's ``libsdformat-dev``, version 12).

``sdfcheck.cpp`` beside this file loads a file with ``sdf::Root::Load``, prints every parser
error and a JSON summary (worlds, models, links with mass, inertia and pose, joints with parent,
child, type and pose, plugins with their parameters; poses resolved by SDFormat's frame graph).
It is compiled once with ``g++ -std=c++17 $(pkg-config --cflags --libs sdformat12)`` (about 4 s)
into ``$CABLELOAD_CACHE/sdfcheck`` (default ``~/.cache/cableload/sdfcheck``), named by a digest
of its source, the compiler and the SDFormat version. The folder must belong to the user and be
writable by nobody else, since the program built there is run.

    report = check_sdf("multilift.world")
    report.errors          # () when SDFormat accepts the file
    report.summary         # the JSON summary, a dict

May import: ``cableload_sim.errors``. Imported by: the tests of the generated worlds.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import subprocess
import tempfile
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from cableload_sim.errors import CableloadError

PKG_CONFIG_NAME = "sdformat12"
INSTALL_HINT = "sudo apt-get install libsdformat-dev g++ pkg-config"
SOURCE_NAME = "sdfcheck.cpp"


class SdfCheckError(CableloadError):
    """The checker cannot be built or run (missing tools, unusable cache folder, failed build)."""


@dataclass(frozen=True)
class SdfReport:
    """What SDFormat made of one file."""

    path: Path
    errors: tuple[str, ...]
    """Every parser error, one line each; empty when the file is valid."""
    summary: dict
    """The checker's JSON summary (see ``sdfcheck.cpp``)."""

    def worlds(self) -> list[dict]:
        return self.summary.get("worlds", [])

    def model(self, name: str) -> dict:
        """The model called ``name`` in the first world (or at the top of a model file)."""
        models = self.worlds()[0]["models"] if self.worlds() else self.summary.get("models", [])
        for model in models:
            if model["name"] == name:
                return model
        raise KeyError(f"no model {name!r} in {str(self.path)!r}; models: {[m['name'] for m in models]}")


def compiler() -> str:
    return os.environ.get("CXX", "g++")


def missing_requirements() -> str | None:
    """Why the checker cannot be built here, naming what to install; None when it can."""
    missing = [tool for tool in (compiler(), "pkg-config") if shutil.which(tool) is None]
    if "pkg-config" not in missing and _pkg_config("--exists") is None:
        missing.append(f"SDFormat 12 (pkg-config finds no {PKG_CONFIG_NAME})")
    if not missing:
        return None
    return f"the SDFormat check needs {', '.join(missing)}; install with: {INSTALL_HINT}"


def _pkg_config(*args: str) -> str | None:
    try:
        result = subprocess.run(
            ["pkg-config", *args, PKG_CONFIG_NAME], capture_output=True, text=True, timeout=30
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return result.stdout.strip() if result.returncode == 0 else None


def _source() -> str:
    return resources.files(__name__).joinpath(SOURCE_NAME).read_text()


def default_folder() -> Path:
    root = Path(os.environ.get("CABLELOAD_CACHE", Path.home() / ".cache" / "cableload"))
    return root / "sdfcheck"


def _private_folder(folder: Path) -> Path:
    try:
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    except OSError as err:
        raise SdfCheckError(
            f"cannot create the checker folder {str(folder)!r} ({err.strerror}); "
            "set CABLELOAD_CACHE to a folder of your own"
        ) from None
    info = folder.stat()
    if hasattr(os, "getuid") and info.st_uid != os.getuid():
        raise SdfCheckError(
            f"checker folder {str(folder)!r} belongs to user {info.st_uid}, not to "
            f"you ({os.getuid()}); set CABLELOAD_CACHE to a folder of your own"
        )
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise SdfCheckError(
            f"checker folder {str(folder)!r} is writable by others (mode "
            f"{stat.S_IMODE(info.st_mode):o}); chmod go-w it or set CABLELOAD_CACHE"
        )
    return folder


def build_checker(folder: str | Path | None = None) -> Path:
    """The compiled checker, built into ``folder`` (default ``default_folder()``) when missing."""
    reason = missing_requirements()
    if reason is not None:
        raise SdfCheckError(reason)
    cflags = _pkg_config("--cflags", "--libs")
    version = _pkg_config("--modversion")
    if cflags is None or version is None:
        raise SdfCheckError(f"pkg-config cannot describe {PKG_CONFIG_NAME}; install with: {INSTALL_HINT}")
    source = _source()
    command = compiler()
    identity = subprocess.run([command, "--version"], capture_output=True, text=True).stdout
    digest = hashlib.sha256("\0".join([source, identity, version, cflags]).encode()).hexdigest()[:16]
    folder = _private_folder(Path(folder) if folder is not None else default_folder())
    binary = folder / f"sdfcheck-{digest}"
    if binary.is_file() and os.access(binary, os.X_OK):
        return binary
    with tempfile.TemporaryDirectory(prefix=".build-", dir=folder) as work:
        cpp = Path(work) / SOURCE_NAME
        cpp.write_text(source)
        built = Path(work) / "sdfcheck"
        result = subprocess.run(
            [command, "-std=c++17", "-O1", str(cpp), "-o", str(built), *cflags.split()],
            capture_output=True,
            text=True,
        )
        if result.returncode != 0:
            raise SdfCheckError(f"compiling {SOURCE_NAME} with {command!r} failed:\n{result.stderr[-2000:]}")
        os.replace(built, binary)  # atomic: a killed build never leaves a partial binary
    return binary


def check_sdf(path: str | Path, strict: bool = True, checker: str | Path | None = None) -> SdfReport:
    """Load ``path`` with SDFormat; ``strict`` makes parser warnings and unknown elements errors."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"SDF file {str(path)!r} does not exist")
    binary = Path(checker) if checker is not None else build_checker()
    args = [str(binary), *(["--strict"] if strict else []), str(path)]
    result = subprocess.run(args, capture_output=True, text=True, timeout=120)
    if result.returncode not in (0, 1):
        raise SdfCheckError(
            f"{binary.name} failed on {str(path)!r} with exit status "
            f"{result.returncode}: {result.stderr.strip()[-2000:]}"
        )
    try:
        summary = json.loads(result.stdout)
    except json.JSONDecodeError as err:
        raise SdfCheckError(
            f"{binary.name} printed no JSON summary for {str(path)!r} ({err}); "
            f"stderr: {result.stderr.strip()[-2000:]}"
        ) from None
    return SdfReport(path=path, errors=tuple(summary.get("errors", [])), summary=summary)
