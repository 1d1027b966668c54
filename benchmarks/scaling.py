"""How the cost grows: the teacher's plan time with the number of quadrotors (with its fit),
and the simulator's throughput with the number of quadrotors and with the batch size.

    .venv/bin/python benchmarks/scaling.py [--uavs 2,3,4,5,6] [--batches 1,2,4,...,128]
        [--sim-uavs 2,3,4,5,6] [--duration 10] [--out docs/scaling.png] [--json out.json]

The teacher flies eight-medium in closed loop for ``--duration`` seconds per number of
quadrotors (``cableload bench teacher``; the first plan, a cold solve, apart). Its cost is
fitted two ways: a power of n, and a power of the state's size nx = 13 + 14 n, which is what
the Riccati sweep's dense n x n products scale with. The simulator steps n quadrotors and the
load with their onboard controllers at 1 ms on one core, and a batch of systems of three over
all cores (``cableload bench sim``). Writes a two-panel plot and prints a Markdown table.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from backends.session import bench_teacher
from cableload_sim.cli.bench import bench_sim

STATE_BASE, STATE_PER_CABLE = 13, 14
"""The teacher model's state size: 13 for the load, 14 per cable (``planners.teacher_model``)."""


def power_fit(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """(c, k) of the least-squares fit ``y = c x^k`` in logarithms."""
    k, log_c = np.polyfit(np.log(x), np.log(y), 1)
    return float(np.exp(log_c)), float(k)


def measure(teacher_uavs, sim_uavs, batches, duration: float) -> dict:
    teacher = bench_teacher(teacher_uavs, duration, "eight-medium", None, [])
    rows = {int(n): row for n, row in teacher.items()}
    n = np.array(sorted(rows), dtype=float)
    median = np.array([rows[int(k)]["solve_ms_median"] for k in n])
    sim = {m: bench_sim(steps=100_000, batch=2, uavs=m)["steps_per_s"] for m in sim_uavs}
    batch = {b: bench_sim(steps=max(100_000, 2000 * b), batch=b)["batch_steps_per_s"] for b in batches}
    return {
        "teacher": {int(k): rows[int(k)] for k in n},
        "teacher_fit_n": power_fit(n, median),
        "teacher_fit_nx": power_fit(STATE_BASE + STATE_PER_CABLE * n, median),
        "sim_steps_per_s": sim,
        "batch_steps_per_s": batch,
    }


def markdown(result: dict) -> str:
    c_n, k_n = result["teacher_fit_n"]
    c_x, k_x = result["teacher_fit_nx"]
    lines = [
        "| n | teacher median / p99 (ms) | simulator, one core (steps/s) |",
        "|---|---|---|",
    ]
    sim = result["sim_steps_per_s"]
    for n in sorted(set(result["teacher"]) | set(sim)):
        row = result["teacher"].get(n)
        teacher = f"{row['solve_ms_median']:.2f} / {row['solve_ms_p99']:.2f}" if row else ""
        steps = f"{sim[n] / 1e6:.2f} M" if n in sim else ""
        lines.append(f"| {n} | {teacher} | {steps} |")
    lines += [
        "",
        f"Teacher fit: {c_n:.3g} n^{k_n:.2f} ms, or {c_x:.3g} nx^{k_x:.2f} ms with nx = 13 + 14 n.",
        "",
        "| batch (systems of 3) | steps/s, all cores | per system |",
        "|---|---|---|",
    ]
    for b, rate in sorted(result["batch_steps_per_s"].items()):
        lines.append(f"| {b} | {rate / 1e6:.2f} M | {rate / b / 1e3:.0f} k |")
    return "\n".join(lines) + "\n"


def plot(result: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    teacher = result["teacher"]
    n = np.array(sorted(teacher), dtype=float)
    median = [teacher[int(k)]["solve_ms_median"] for k in n]
    p99 = [teacher[int(k)]["solve_ms_p99"] for k in n]
    left.loglog(n, median, "o-", label="teacher, median")
    left.loglog(n, p99, "s--", label="teacher, p99")
    c, k = result["teacher_fit_n"]
    grid = np.linspace(n.min(), n.max(), 50)
    left.loglog(grid, c * grid**k, ":", label=f"fit {c:.2g} n^{k:.2f}")
    sim = result["sim_steps_per_s"]
    twin = left.twinx()
    twin.plot(sorted(sim), [sim[m] / 1e6 for m in sorted(sim)], "^-", color="tab:purple", label="simulator")
    twin.set_ylabel("simulator, one core (M steps/s)")
    ticks = sorted(set(n.astype(int)) | set(sim))
    left.set_xticks(ticks, [str(t) for t in ticks])
    left.minorticks_off()
    left.set_xlabel("quadrotors n")
    left.set_ylabel("teacher plan (ms)")
    left.legend(loc="upper left", fontsize=8)
    twin.legend(loc="lower right", fontsize=8)
    batch = result["batch_steps_per_s"]
    b = sorted(batch)
    right.semilogx(b, [batch[k] / 1e6 for k in b], "o-", base=2)
    right.set_xticks(b, [str(k) for k in b])
    right.minorticks_off()
    right.set_ylim(bottom=0.0)
    right.set_xlabel("systems stepped together (3 quadrotors each)")
    right.set_ylabel("M steps/s, all cores")
    right.set_title("simulator throughput with the batch size")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _ints(text: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v]
    except ValueError:
        raise SystemExit(f"expected a comma-separated list of integers, got {text!r}") from None
    if not values or min(values) < 1:
        raise SystemExit(f"expected positive integers, got {text!r}")
    return values


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--uavs", default="2,3,4,5,6", help="teacher: numbers of quadrotors")
    parser.add_argument("--sim-uavs", default="2,3,4,5,6", help="simulator: numbers of quadrotors")
    parser.add_argument("--batches", default="1,2,4,8,16,32,64,128")
    parser.add_argument("--duration", type=float, default=10.0, help="teacher: closed-loop seconds")
    parser.add_argument("--out", default="docs/scaling.png", help="the plot (PNG)")
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    result = measure(_ints(args.uavs), _ints(args.sim_uavs), _ints(args.batches), args.duration)
    print(markdown(result))
    plot(result, Path(args.out))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1, default=float))
    return 0


if __name__ == "__main__":
    sys.exit(main())
