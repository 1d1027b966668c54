"""Compile CasADi functions to C with the machine's compiler, cached on disk and verified.

A built library is named by two keys: the generated source with the compiler flags and the
CPU it is built for (``-march=native`` code may hold instructions another CPU lacks), and the
compiler's identity (its ``--version`` and target). Beside each library a small JSON record
holds its SHA-256, checked before every load: a truncated, replaced or foreign file is never
loaded (it would crash the process with SIGBUS or run other code) but rebuilt. A machine
without a compiler can still use a library built for the same source and CPU by any compiler.

Builds happen in a private folder inside the cache that is removed afterwards; folders and
temporary files left by a build that was killed are swept by the next build. The cache lives in
``$CABLELOAD_CACHE/casadi`` (default ``~/.cache/cableload/casadi``); it must belong to the user
and be writable by nobody else, since whoever can write there chooses the code the teacher runs:
a folder writable by others is refused.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import re
import shutil
import stat
import subprocess
import uuid
from functools import lru_cache
from pathlib import Path

import casadi as ca

from cableload_sim.errors import CableloadError
from cableload_sim.io.files import atomic_write_bytes

FLAGS = ("-march=native", "-fPIC", "-shared")
OPT_LEVELS = ("-O0", "-O1", "-O2", "-O3")
OPT_ENV = "CABLELOAD_CC_OPT"
"""The optimisation level of the teacher's C (default ``-O3``). Measured for three quadrotors:
-O0 builds in 4 s and plans in 8.8 ms, -O1 35 s / 5.8 ms, -O2 49 s / 5.5 ms, -O3 50 s /
3.7 ms; for nine, -O0 builds in 74 s (most of it CasADi writing the source) against about
300 s at -O3. Flights and benchmarks want -O3, built once and cached; the test suite, which
plans a few hundred times per build, sets -O0 (``make test``)."""


def flags() -> tuple[str, ...]:
    """The compiler flags: the optimisation level of ``CABLELOAD_CC_OPT``, then ``FLAGS``."""
    level = os.environ.get(OPT_ENV, "-O3")
    if level not in OPT_LEVELS:
        raise CodegenError(f"{OPT_ENV}={level!r}: expected one of {', '.join(OPT_LEVELS)}")
    return (level, *FLAGS)


RECORD_FORMAT = 1


class CodegenError(CableloadError):
    """The compiled teacher cannot be built or loaded (no compiler, unusable cache folder,
    failed build)."""


def compiler() -> str:
    return os.environ.get("CC", "gcc")


def cache_root() -> Path:
    return Path(os.environ.get("CABLELOAD_CACHE", Path.home() / ".cache" / "cableload"))


@lru_cache(maxsize=1)
def cpu_identity() -> str:
    """The machine type, CPU model and instruction-set flags (what ``-march=native`` sees)."""
    parts = [platform.machine()]
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        text = ""
    for field in ("vendor_id", "model name", "flags", "Features", "CPU implementer", "CPU part"):
        match = re.search(rf"^{field}\s*:\s*(.*)$", text, re.MULTILINE)
        if match:
            parts.append(f"{field}={' '.join(sorted(match.group(1).split()))}")
    return "; ".join(parts)


@lru_cache(maxsize=4)
def compiler_identity(command: str) -> str | None:
    """The compiler's version line and target, or None when it cannot be run."""
    if shutil.which(command) is None:
        return None
    try:
        version = subprocess.run([command, "--version"], capture_output=True, text=True, timeout=30)
        target = subprocess.run([command, "-dumpmachine"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    if version.returncode != 0:
        return None
    first = version.stdout.strip().splitlines()[0] if version.stdout.strip() else "unknown"
    return f"{first}; target {target.stdout.strip() or 'unknown'}"


def _digest(*parts: str | bytes, length: int = 16) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(part if isinstance(part, bytes) else part.encode())
        h.update(b"\0")
    return h.hexdigest()[:length]


def _file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def cache_dir(create: bool = True) -> Path:
    """The cache folder, checked: owned by this user and writable by nobody else."""
    path = cache_root() / "casadi"
    if create:
        try:
            path.mkdir(parents=True, exist_ok=True, mode=0o700)
        except OSError as err:
            if not path.is_dir():
                raise CodegenError(
                    f"cannot create the compiled-code cache {str(path)!r} "
                    f"({err.strerror}); set CABLELOAD_CACHE to a folder of your "
                    "own"
                ) from None
    if path.is_dir():
        info = path.stat()
        if hasattr(os, "getuid") and info.st_uid != os.getuid():
            raise CodegenError(
                f"compiled-code cache {str(path)!r} belongs to user {info.st_uid}, "
                f"not to you ({os.getuid()}): its code would run as yours; set "
                "CABLELOAD_CACHE to a folder of your own"
            )
        if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            raise CodegenError(
                f"compiled-code cache {str(path)!r} is writable by others "
                f"(mode {stat.S_IMODE(info.st_mode):o}): anyone could replace the "
                f"code it runs; chmod go-w {str(path)!r} or set CABLELOAD_CACHE"
            )
    return path


def _record_path(library: Path) -> Path:
    return library.with_suffix(".json")


def _verified(library: Path, source_key: str) -> bool:
    """Whether ``library`` is exactly the file its record describes, built for this key."""
    try:
        record = json.loads(_record_path(library).read_text())
        return (
            record.get("format") == RECORD_FORMAT
            and record.get("key") == source_key
            and record.get("cpu") == cpu_identity()
            and record.get("sha256") == _file_sha256(library)
        )
    except (OSError, ValueError, AttributeError):
        return False


def _discard(library: Path) -> None:
    for path in (library, _record_path(library)):
        try:
            path.unlink()
        except FileNotFoundError:
            pass
        except OSError:
            return


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def sweep_stale(folder: Path) -> list[Path]:
    """Remove build folders and temporary files of builds whose process no longer runs."""
    removed = []
    for path in folder.glob(".*"):
        match = re.match(r"^\.(?:build|tmp)-(\d+)-", path.name)
        if not match or _pid_alive(int(match.group(1))):
            continue
        if path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)
        removed.append(path)
    return removed


def _build(
    folder: Path, name: str, source: str, library: Path, source_key: str, command: str, identity: str
) -> None:
    sweep_stale(folder)
    work = folder / f".build-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    try:
        work.mkdir(mode=0o700)
        c_file = work / f"{name}.c"
        c_file.write_text(source)
        built = work / library.name
        result = subprocess.run(
            [command, *flags(), str(c_file), "-o", str(built), "-lm"], capture_output=True, text=True
        )
        if result.returncode != 0:
            raise CodegenError(f"compiling {name} with {command!r} failed:\n{result.stderr[-2000:]}")
        record = {
            "format": RECORD_FORMAT,
            "key": source_key,
            "sha256": _file_sha256(built),
            "compiler": identity,
            "flags": list(flags()),
            "cpu": cpu_identity(),
        }
        os.replace(built, library)
        atomic_write_bytes(_record_path(library), json.dumps(record, indent=1).encode())
    except OSError as err:
        raise CodegenError(
            f"cannot build {name} in the compiled-code cache {str(folder)!r} "
            f"({err.strerror or err}); set CABLELOAD_CACHE to a writable folder "
            "of your own"
        ) from None
    finally:
        shutil.rmtree(work, ignore_errors=True)


def compile_functions(name: str, functions: list[ca.Function]) -> dict[str, ca.Function]:
    """Compiled versions of ``functions`` (by name), built once, cached and verified."""
    generator = ca.CodeGenerator(f"{name}.c", {"with_header": False})
    for fun in functions:
        generator.add(fun)
    source = generator.dump()
    source_key = _digest(source, " ".join(flags()), cpu_identity())
    command = compiler()
    identity = compiler_identity(command)
    folder = cache_dir(create=identity is not None)
    if identity is not None:
        candidates = [folder / f"{name}_{source_key}_{_digest(identity, length=8)}.so"]
    else:
        candidates = sorted(folder.glob(f"{name}_{source_key}_*.so")) if folder.is_dir() else []
    library = next((c for c in candidates if _verified(c, source_key)), None)
    if library is None:
        if identity is None:
            raise CodegenError(
                f"C compiler {command!r} not found, and the cache "
                f"{str(folder)!r} holds no verified build of {name} for this CPU; "
                "install gcc or set CC"
            )
        library = candidates[0]
        _discard(library)  # a file under this name that failed verification
        _build(folder, name, source, library, source_key, command, identity)
    return {fun.name(): ca.external(fun.name(), str(library)) for fun in functions}
