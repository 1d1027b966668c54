"""Packaging: the project builds from a clean copy without a warning from the build backend."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
IGNORED = shutil.ignore_patterns(
    ".venv",
    ".git",
    "build",
    "runs",
    "*.egg-info",
    "__pycache__",
    ".pytest_cache",
    ".ruff_cache",
    ".benchmarks",
    "*.pyc",
)


def test_wheel_builds_from_a_clean_copy_without_warnings(tmp_path):
    source = tmp_path / "cableload"
    shutil.copytree(REPO, source, ignore=IGNORED)
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-v",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            "-w",
            str(tmp_path / "dist"),
            str(source),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    log = out.stdout + out.stderr
    assert out.returncode == 0, log[-3000:]
    warnings = [line for line in log.splitlines() if "Warning" in line or "WARNING" in line]
    assert not warnings, "\n".join(warnings[:10])
    (wheel,) = (tmp_path / "dist").glob("cableload-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for expected in (
        "cableload_sim/io/runlog/reader.py",
        "cableload_sim/configs/paper.toml",
        "cableload_sim/msgs/agiros_msgs/Reference.msg",
        "learners/policies/paper-eight-medium/policy.json",
        "backends/session.py",
    ):
        assert expected in names, expected
    assert not any(name.startswith(("tests/", "benchmarks/")) for name in names)
