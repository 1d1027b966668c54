"""The compiled-code cache: verified before loading, keyed by compiler and CPU, usable without a
compiler, never left with a build's temporary files.

Each case runs the compile in a fresh process: a tampered library that got loaded would crash
the process that loads it (SIGBUS), so the test process never loads one.
"""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

BUILD = textwrap.dedent("""
    import sys
    import casadi as ca
    from planners.codegen import compile_functions
    x = ca.SX.sym("x")
    power = int(sys.argv[1]) if len(sys.argv) > 1 else 2
    f = compile_functions("square", [ca.Function("square", [x], [x ** power])])["square"]
    print(float(f(3.0)))
""")


def run_build(cache: Path, cc: str | None = None, power: int = 2, timeout=120):
    env = {**os.environ, "CABLELOAD_CACHE": str(cache)}
    if cc is not None:
        env["CC"] = cc
    return subprocess.run(
        [sys.executable, "-c", BUILD, str(power)], capture_output=True, text=True, env=env, timeout=timeout
    )


def libraries(cache: Path) -> list[Path]:
    return sorted((cache / "casadi").glob("square_*.so"))


def leftovers(cache: Path) -> list[Path]:
    return sorted((cache / "casadi").glob(".*"))


def fake_compiler(folder: Path, version: str, sleep: float = 0.0) -> Path:
    """A compiler wrapper with its own version line (gcc underneath)."""
    path = folder / f"cc-{version}"
    path.write_text(
        textwrap.dedent(f"""\
        #!/bin/sh
        if [ "$1" = "--version" ]; then echo "fakecc {version}"; exit 0; fi
        if [ "$1" = "-dumpmachine" ]; then exec gcc -dumpmachine; fi
        sleep {sleep}
        exec gcc "$@"
        """)
    )
    path.chmod(0o755)
    return path


def test_built_once_then_reused(tmp_path):
    first = run_build(tmp_path)
    assert first.returncode == 0, first.stderr
    assert float(first.stdout) == 9.0
    (library,) = libraries(tmp_path)
    record = json.loads(library.with_suffix(".json").read_text())
    assert record["cpu"] and record["compiler"] and len(record["sha256"]) == 64
    built_at = library.stat().st_mtime_ns
    again = run_build(tmp_path)
    assert again.returncode == 0 and float(again.stdout) == 9.0
    assert libraries(tmp_path) == [library] and library.stat().st_mtime_ns == built_at
    assert leftovers(tmp_path) == []
    assert stat.S_IMODE((tmp_path / "casadi").stat().st_mode) & 0o077 == 0


def test_truncated_library_is_rebuilt_not_loaded(tmp_path):
    assert run_build(tmp_path).returncode == 0
    (library,) = libraries(tmp_path)
    data = library.read_bytes()
    library.write_bytes(data[: len(data) // 3])
    result = run_build(tmp_path)
    assert result.returncode == 0, result.stderr  # a load would have died with SIGBUS
    assert float(result.stdout) == 9.0
    assert library.read_bytes() == data or len(library.read_bytes()) > len(data) // 3


def test_foreign_library_under_the_cached_name_is_replaced(tmp_path):
    """Another valid library (x**3) put in place of x**2's is detected by its hash."""
    other = tmp_path / "other"
    assert run_build(other, power=3).returncode == 0
    assert run_build(tmp_path).returncode == 0
    (library,) = libraries(tmp_path)
    (foreign,) = libraries(other)
    library.write_bytes(foreign.read_bytes())
    result = run_build(tmp_path)
    assert result.returncode == 0, result.stderr
    assert float(result.stdout) == 9.0  # 27.0 if the foreign code had been loaded


def test_compiler_version_is_part_of_the_key(tmp_path):
    one = fake_compiler(tmp_path, "1.0")
    two = fake_compiler(tmp_path, "2.0")
    cache = tmp_path / "cache"
    assert run_build(cache, str(one)).returncode == 0
    assert run_build(cache, str(two)).returncode == 0
    built = libraries(cache)
    assert len(built) == 2
    records = {json.loads(p.with_suffix(".json").read_text())["compiler"] for p in built}
    assert any("fakecc 1.0" in r for r in records) and any("fakecc 2.0" in r for r in records)


def test_cpu_is_part_of_the_key(tmp_path):
    """A library recorded for another CPU is not used, even with a matching hash."""
    assert run_build(tmp_path).returncode == 0
    (library,) = libraries(tmp_path)
    record_path = library.with_suffix(".json")
    record = json.loads(record_path.read_text())
    record["cpu"] = "x86_64; flags=sse2"
    record_path.write_text(json.dumps(record))
    before = library.stat().st_mtime_ns
    time.sleep(0.01)
    assert run_build(tmp_path).returncode == 0
    assert library.stat().st_mtime_ns != before
    assert json.loads(record_path.read_text())["cpu"] != "x86_64; flags=sse2"


def test_machine_without_compiler_uses_a_built_cache(tmp_path):
    assert run_build(tmp_path).returncode == 0
    result = run_build(tmp_path, cc="/nonexistent/gcc")
    assert result.returncode == 0, result.stderr
    assert float(result.stdout) == 9.0


def test_no_compiler_and_no_cache_is_a_clear_error(tmp_path):
    result = run_build(tmp_path, cc="/nonexistent/gcc")
    assert result.returncode != 0
    assert "C compiler '/nonexistent/gcc' not found" in result.stderr
    assert "install gcc or set CC" in result.stderr


def test_killed_build_leaves_no_temporary_files(tmp_path):
    slow = fake_compiler(tmp_path, "slow", sleep=30)
    cache = tmp_path / "cache"
    env = {**os.environ, "CABLELOAD_CACHE": str(cache), "CC": str(slow)}
    proc = subprocess.Popen(
        [sys.executable, "-c", BUILD],
        env=env,
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.time() + 60
    while time.time() < deadline and not list((cache / "casadi").glob(".build-*")):
        time.sleep(0.05)
    assert list((cache / "casadi").glob(".build-*")), "the build never started"
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert leftovers(cache)  # what a killed build leaves behind ...
    assert run_build(cache).returncode == 0
    assert leftovers(cache) == []  # ... the next build sweeps
    assert len(libraries(cache)) == 1


def test_cache_writable_by_others_is_refused(tmp_path):
    folder = tmp_path / "casadi"
    folder.mkdir()
    folder.chmod(0o777)
    result = run_build(tmp_path)
    assert result.returncode != 0
    assert "is writable by others" in result.stderr and "CABLELOAD_CACHE" in result.stderr
    assert libraries(tmp_path) == []


def test_cache_that_cannot_be_created_is_a_clear_error(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    result = run_build(blocker / "cache")
    assert result.returncode != 0
    assert "cannot create the compiled-code cache" in result.stderr


@pytest.mark.parametrize("cc", ["/nonexistent/gcc"])
def test_teacher_without_compiler_or_cache_exits_with_one_line(tmp_path, cc):
    env = {**os.environ, "CABLELOAD_CACHE": str(tmp_path), "CC": cc}
    result = subprocess.run(
        [sys.executable, "-m", "cableload_sim.cli", "simulate", "--planner", "teacher", "--duration", "1"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert result.returncode == 1, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "not found" in lines[0], result.stderr


def test_optimisation_level_is_part_of_the_key_and_checked(tmp_path, monkeypatch):
    """``CABLELOAD_CC_OPT`` picks the level (the tests build at -O0, flights at -O3); each
    level has its own library, and a bad value is refused naming it."""
    for level in ("-O0", "-O3"):
        monkeypatch.setenv("CABLELOAD_CC_OPT", level)
        done = run_build(tmp_path)
        assert done.returncode == 0 and done.stdout.strip() == "9.0", done.stderr
    assert len(libraries(tmp_path)) == 2
    levels = sorted(
        json.loads(lib.with_suffix(".json").read_text())["flags"][0] for lib in libraries(tmp_path)
    )
    assert levels == ["-O0", "-O3"]
    monkeypatch.setenv("CABLELOAD_CC_OPT", "-Ofast")
    done = run_build(tmp_path)
    assert done.returncode != 0 and "CABLELOAD_CC_OPT='-Ofast'" in done.stderr
