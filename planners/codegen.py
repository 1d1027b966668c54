"""Compile CasADi functions to C with the machine's gcc, cached on disk by content hash.

The generated source is hashed together with the compiler command, so a cached library is
reused only for exactly the same functions; a new model, weight layout or option builds anew.
Libraries are written to a temporary name and renamed, so concurrent processes never load a
half-written file. The cache lives in ``$CABLELOAD_CACHE`` (default ``~/.cache/cableload``).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import casadi as ca

COMPILER = os.environ.get("CC", "gcc")
FLAGS = ("-O3", "-march=native", "-fPIC", "-shared")


def cache_dir() -> Path:
    root = Path(os.environ.get("CABLELOAD_CACHE", Path.home() / ".cache" / "cableload"))
    path = root / "casadi"
    path.mkdir(parents=True, exist_ok=True)
    return path


def compile_functions(name: str, functions: list[ca.Function]) -> dict[str, ca.Function]:
    """Compiled versions of ``functions`` (by name), built once and cached."""
    if shutil.which(COMPILER) is None:
        raise RuntimeError(f"C compiler {COMPILER!r} not found; the teacher needs one (set CC)")
    with tempfile.TemporaryDirectory() as tmp:
        generator = ca.CodeGenerator(f"{name}.c", {"with_header": False})
        for fun in functions:
            generator.add(fun)
        generator.generate(tmp + os.sep)
        source = Path(tmp, f"{name}.c").read_bytes()
        digest = hashlib.sha256(source + " ".join((COMPILER,) + FLAGS).encode()).hexdigest()[:16]
        library = cache_dir() / f"{name}_{digest}.so"
        if not library.exists():
            partial = library.with_suffix(f".{os.getpid()}.tmp")
            command = [COMPILER, *FLAGS, str(Path(tmp, f"{name}.c")), "-o", str(partial), "-lm"]
            result = subprocess.run(command, capture_output=True, text=True)
            if result.returncode != 0:
                raise RuntimeError(f"compiling {name} failed:\n{result.stderr[-2000:]}")
            os.replace(partial, library)
    return {fun.name(): ca.external(fun.name(), str(library)) for fun in functions}
