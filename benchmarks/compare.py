"""The benchmark record: run the benchmarks and compare each one's best time with the baseline
stored for this machine kind; a regression must show in two runs to count.

    python benchmarks/compare.py [--baseline benchmarks/baselines/python.json] [--threshold 0.2]
    python benchmarks/compare.py --save   # replace the baseline with this run

The best time of a benchmark's rounds (pytest-benchmark's ``min``) is compared: on a shared
two-core VM the median of the same code swings by up to 2x between runs, the best time by a few
percent, and a slower implementation raises both. A benchmark whose best time is more than
``threshold`` above the baseline's is run again; it fails the record only if it is above it again.
Prints a table: each benchmark's median and best time, the baseline's best and the ratio.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_BASELINE = ROOT / "benchmarks" / "baselines" / "python.json"
RUNS = ROOT / "runs" / "bench"


def run_benchmarks(out: Path, select: list[str] | None = None) -> dict[str, dict]:
    """Run the benchmarks (those named in ``select``, or all) into the JSON report ``out``;
    returns name -> stats."""
    out.parent.mkdir(parents=True, exist_ok=True)
    command = [
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        "benchmarks",
        "--benchmark-enable",
        "--benchmark-only",
        f"--benchmark-json={out}",
    ]
    if select:  # by function: -k takes no brackets, so every parameter of each is run again
        command += ["-k", " or ".join(sorted({name.split("[")[0] for name in select}))]
    done = subprocess.run(command, cwd=ROOT)
    if done.returncode != 0:
        raise SystemExit(f"the benchmarks failed (pytest exit {done.returncode})")
    return stats_of(json.loads(out.read_text()))


def stats_of(report: dict) -> dict[str, dict]:
    return {bench["name"]: bench["stats"] for bench in report["benchmarks"]}


def regressions(current: dict[str, dict], baseline: dict[str, dict], threshold: float) -> list[str]:
    """Benchmarks whose best time exceeds the baseline's by more than ``threshold``."""
    return sorted(
        name
        for name, stats in current.items()
        if name in baseline and stats["min"] > (1.0 + threshold) * baseline[name]["min"]
    )


def table(current: dict[str, dict], baseline: dict[str, dict]) -> str:
    lines = [f"{'benchmark':60} {'median':>10} {'best':>10} {'baseline':>10} {'ratio':>6}"]
    for name in sorted(current):
        stats = current[name]
        base = baseline.get(name, {}).get("min")
        ratio = f"{stats['min'] / base:6.2f}" if base else "   new"
        shown = f"{base * 1e3:10.3f}" if base else f"{'':10}"
        lines.append(f"{name:60} {stats['median'] * 1e3:10.3f} {stats['min'] * 1e3:10.3f} {shown} {ratio}")
    return "\n".join(lines) + "\n(times in ms; ratio: best time over the baseline's)"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", type=Path, default=DEFAULT_BASELINE)
    parser.add_argument("--threshold", type=float, default=0.2, help="allowed slowdown (0.2: 20 %%)")
    parser.add_argument("--save", action="store_true", help="write this run as the baseline")
    args = parser.parse_args(argv)
    if not 0.0 < args.threshold < 10.0:
        parser.error(f"--threshold: expected a fraction above 0, got {args.threshold}")
    first = run_benchmarks(RUNS / "latest.json")
    if args.save:
        args.baseline.parent.mkdir(parents=True, exist_ok=True)
        args.baseline.write_text((RUNS / "latest.json").read_text())
        print(f"baseline written: {args.baseline}")
        return 0
    if not args.baseline.is_file():
        raise SystemExit(f"no baseline {args.baseline}; write one with --save (make bench-baseline)")
    baseline = stats_of(json.loads(args.baseline.read_text()))
    suspects = regressions(first, baseline, args.threshold)
    confirmed = suspects
    if suspects:
        print(f"slower than the baseline, run again: {', '.join(suspects)}")
        again = run_benchmarks(RUNS / "again.json", suspects)
        confirmed = [name for name in regressions(again, baseline, args.threshold) if name in suspects]
        first.update({name: again[name] for name in again})
    print(table(first, baseline))
    if confirmed:
        print(f"regressed by more than {args.threshold:.0%} twice: {', '.join(confirmed)}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
