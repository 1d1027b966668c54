"""Docs that cannot rot: the generated references are current, every path the docs name
exists, every ``cableload`` command they show parses (and the quick start's embedded ones run,
shortened), and no file of the project speaks of numbered work periods or issues."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from cableload_sim.cli import reference_docs

ROOT = Path(__file__).resolve().parents[1]
DOCS = [
    ROOT / "README.md",
    ROOT / "CONTRIBUTING.md",
    *sorted((ROOT / "docs").glob("*.md")),
    *sorted(ROOT.glob("*/README.md")),
]
PROJECT_FILES = [
    p
    for p in ROOT.rglob("*")
    if p.is_file()
    and p.suffix in (".py", ".md", ".toml", ".cfg", ".launch", ".cff", ".txt")
    and not any(
        part.startswith(".") or part in ("runs", "build", "msgs") or part.endswith(".egg-info")
        for part in p.relative_to(ROOT).parts
    )
]


def bash_blocks(text: str) -> list[str]:
    return re.findall(r"```bash\n(.*?)```", text, flags=re.S)


def commands(text: str) -> list[str]:
    """The ``cableload`` command lines of a page's bash blocks (continuations joined, comments
    and a trailing ``&`` removed)."""
    out = []
    for block in bash_blocks(text):
        for line in block.replace("\\\n", " ").splitlines():
            for part in line.split(" #")[0].split("&&"):
                part = part.strip().rstrip("&").strip()
                if part.startswith("cableload "):
                    out.append(part)
    return out


@pytest.mark.parametrize("page", list(reference_docs.PAGES))
def test_the_generated_references_are_current(page):
    assert (ROOT / page).read_text() == reference_docs.PAGES[page](), (
        f"{page} is out of date: run `python -m cableload_sim.cli.reference_docs`"
    )


def test_every_configuration_key_of_the_paper_config_is_documented():
    from cableload_sim.params import read_toml

    text = (ROOT / "docs/configuration.md").read_text()
    data = read_toml(ROOT / "cableload_sim/configs/paper.toml", "config")

    def keys(table: dict, prefix: str):
        for key, value in table.items():
            if isinstance(value, dict):
                yield from keys(value, f"{prefix}{key}.")
            else:
                yield prefix, key

    for prefix, key in keys(data, ""):
        heading = f"## `[{prefix[:-1]}]`" if prefix else "# Configuration reference"
        section = text.split(heading, 1)[1].split("\n## ", 1)[0] if prefix else text
        assert f"`{key}`" in section, (prefix, key)


PATH = re.compile(
    r"`((?:cableload_sim|planners|learners|backends|hw|tests|benchmarks|docs|ros)"
    r"/[A-Za-z0-9_./-]*)`"
)
LINK = re.compile(r"\]\(([^)#:]+)(?:#[^)]*)?\)")


@pytest.mark.parametrize("page", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_path_the_docs_name_exists(page):
    text = page.read_text()
    missing = []
    for match in PATH.finditer(text):
        path = match.group(1).rstrip(".")
        if any(c in path for c in "*{<") or path.startswith("ros/msgs"):
            continue
        if not (ROOT / path).exists():
            missing.append(path)
    for match in LINK.finditer(text):
        if not (page.parent / match.group(1)).exists():
            missing.append(match.group(1))
    assert not missing, missing


@pytest.mark.parametrize("page", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_command_the_docs_show_parses(page):
    from cableload_sim.cli import build_parser

    parser = build_parser()
    for line in commands(page.read_text()):
        argv = [a for a in shlex.split(line)[1:] if "$" not in a]
        if any(a in ("|", "[", "]") or a.startswith("[") or "..." in a for a in argv):
            continue  # a synopsis, not a command
        try:
            parser.parse_args(argv)
        except SystemExit as err:
            if err.code:  # --help exits 0
                pytest.fail(f"{page.name}: `{line}` does not parse (exit {err.code})")


def shortened(line: str, tmp: Path) -> list[str]:
    """A quick-start command made short: a second or two of flight, outputs in ``tmp``."""
    argv = shlex.split(line)[1:]
    out = []
    skip = False
    for k, arg in enumerate(argv):
        if skip:
            skip = False
            continue
        if arg == "--duration":
            out += ["--duration", "1"]
            skip = True
        elif arg in ("--log", "--out", "--video") and k + 1 < len(argv):
            out += [arg, str(tmp / Path(argv[k + 1]).name)]
            skip = True
        else:
            out.append(arg)
    if out[0] in ("simulate", "evaluate") and "--duration" not in out:
        out += ["--duration", "1"]
    return out


QUICK = ("simulate", "trajectories", "evaluate", "metrics", "plot")


@pytest.mark.slow
def test_the_quick_start_runs(tmp_path):
    """The README's quick start on the embedded simulator, each command shortened to a second
    of flight (training and the ROS commands are exercised by their own tests)."""
    lines = [
        line
        for line in commands((ROOT / "README.md").read_text())
        if line.split()[1] in QUICK and "--backend" not in line
    ]
    assert len(lines) >= 8, lines
    for line in lines:
        argv = shortened(line, tmp_path)
        done = subprocess.run(
            [sys.executable, "-m", "cableload_sim.cli", *argv],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode in (0, 1), (line, done.stderr[-2000:])
        assert "Traceback" not in done.stderr, (line, done.stderr[-2000:])


NUMBERED = re.compile(r"\b(sessions?[ -]\d+|issues? #?\d+|work periods? \d+)", re.I)


def test_no_file_speaks_of_numbered_work_periods_or_issues():
    found = [
        f"{p.relative_to(ROOT)}: {m.group(0)}"
        for p in PROJECT_FILES
        if p.name != "CHANGELOG.md" and p.name != "test_docs.py"
        for m in NUMBERED.finditer(p.read_text(errors="replace"))
    ]
    assert not found, found[:20]
