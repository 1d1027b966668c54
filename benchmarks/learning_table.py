"""What learning pays: the teacher, the formations, the student and its bare prior side by side
on references no training or tuning saw, as medians over draws of the generalists' distribution
and per named case, with the ratios that say who beats whom.

    .venv/bin/python benchmarks/learning_table.py [--uavs 3] [--seed 5150001] [--count 20]
        [--duration 20] [--named] [--planners teacher,formation-follow,...]
        [--json out.json] [--markdown out.md]

``student`` and ``student-prior`` fly the shipped generalist for the number of quadrotors (or
``student@DIR``, ``student-prior@DIR``). The draws come from ``learners/configs/generalist.toml``
with ``--seed``: choose one that no training, validation or tuning used (training uses the
config's own seeds, validation 1000003, the teacher's and the prior's tuning 4242). ``--named``
adds Zandvoort (20 m, constant at 1.0 m/s, zero-sideslip at 1.0 and 1.5 m/s) and the paper's
eights (Table 2: 2.0-3.5 m, and eight-medium).

The summary gives, per planner, the median position (mm) and orientation (deg) RMSE over the
draws (a run that did not complete ranks last), and the ratios the learning bar is judged by:
the teacher and the student against the best formation planner (the smaller median of
formation-follow and formation-wrench, per measure), the student against its bare prior and
against the teacher; and the smallest distance between two quadrotors anywhere.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
from compare_planners import CASES, compare, heldout_cases

from cableload_sim.params import load_config

DISTRIBUTION = Path(__file__).resolve().parents[1] / "learners" / "configs" / "generalist.toml"
NAMED = [
    "zandvoort",
    "zandvoort-zss",
    "zandvoort-zss-1.5",
    "eight-2.0",
    "eight-2.5",
    "eight-3.0",
    "eight-3.5",
    "eight-medium",
]
FORMATIONS = ("formation-follow", "formation-wrench")
DEFAULT_PLANNERS = "teacher,formation-follow,formation-wrench,student,student-prior"


def with_policy(name: str, n: int) -> str:
    """``student`` and ``student-prior`` with the shipped generalist of ``n`` quadrotors."""
    if name in ("student", "student-prior"):
        from learners.export import GENERALIST_POLICIES

        return f"{name}@{GENERALIST_POLICIES[n]}"
    return name


def summary(rows: list[dict], planners: list[str]) -> dict:
    """Medians over the draws per planner, the ratios, the smallest distance."""
    out: dict = {}
    for name in planners:
        mine = [r for r in rows if r["planner"] == name and r["case"].startswith("heldout-")]
        if not mine:
            continue
        # a run that did not complete (diverged, stopped by a safety rule) ranks last: its
        # RMSE covers only what it flew, which may be nothing (a stop at the start)
        done = np.array([r["status"] == "completed" for r in mine])
        pos = np.where(done, [r["rmse_position_m"] * 1e3 for r in mine], np.inf)
        att = np.where(done, [r["rmse_orientation_deg"] for r in mine], np.inf)
        out[name] = {
            "position_mm": float(np.median(pos)),
            "orientation_deg": float(np.median(att)),
            "min_distance_m": float(min(r["min_uav_distance_m"] for r in rows if r["planner"] == name)),
            "not_completed": int((~done).sum()),
        }
    best = {
        key: min(out[f][key] for f in out if f.split("@")[0] in FORMATIONS)
        for key in ("position_mm", "orientation_deg")
        if any(f.split("@")[0] in FORMATIONS for f in out)
    }
    kinds = {name.split("@")[0]: name for name in out}
    ratios = {}
    for who in ("teacher", "student"):
        if who in kinds and best:
            ratios[f"{who} / best formation"] = [out[kinds[who]][k] / best[k] for k in best]
    if "student" in kinds and "student-prior" in kinds:
        ratios["student / its prior"] = [
            out[kinds["student"]][k] / out[kinds["student-prior"]][k]
            for k in ("position_mm", "orientation_deg")
        ]
    if "student" in kinds and "teacher" in kinds:
        ratios["student / teacher"] = [
            out[kinds["student"]][k] / out[kinds["teacher"]][k] for k in ("position_mm", "orientation_deg")
        ]
    return {"medians": out, "best_formation": best, "ratios": ratios}


def markdown(rows: list[dict], planners: list[str], result: dict, n: int, seed: int, count: int) -> str:
    lines = [
        f"{n} quadrotors; {count} draws of the generalists' distribution with seed {seed}",
        "",
        "| planner | median pos (mm) | median orient (deg) | min distance (m) | not completed |",
        "|---|---|---|---|---|",
    ]
    for name, m in result["medians"].items():
        lines.append(
            f"| {name.split('@')[0]} | {m['position_mm']:.2f} | {m['orientation_deg']:.3f} | "
            f"{m['min_distance_m']:.3f} | {m['not_completed']} |"
        )
    lines += ["", "| ratio (pos, orient) | |", "|---|---|"]
    for name, (a, b) in result["ratios"].items():
        lines.append(f"| {name} | {a:.2f}, {b:.2f} |")
    named = sorted({r["case"] for r in rows if not r["case"].startswith("heldout-")}, key=NAMED.index)
    if named:
        lines += ["", "| case | " + " | ".join(p.split("@")[0] for p in planners) + " |"]
        lines.append("|---|" + "---|" * len(planners))
        for case in named:
            cells = []
            for p in planners:
                r = next((r for r in rows if r["case"] == case and r["planner"] == p), None)
                if r is None or "rmse_position_m" not in r:
                    cells.append(r["status"] if r else "")
                else:
                    cells.append(f"{r['rmse_position_m'] * 1e3:.2f} / {r['rmse_orientation_deg']:.2f}")
            lines.append(f"| {case} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--uavs", type=int, default=3)
    parser.add_argument("--seed", type=int, default=5150001)
    parser.add_argument("--count", type=int, default=20)
    parser.add_argument("--duration", type=float, default=20.0)
    parser.add_argument("--named", action="store_true", help="also Zandvoort and the paper's eights")
    parser.add_argument("--planners", default=DEFAULT_PLANNERS)
    parser.add_argument("--json", default=None)
    parser.add_argument("--markdown", default=None)
    args = parser.parse_args(argv)
    if args.count < 1:
        raise SystemExit(f"--count: expected at least 1 draw, got {args.count}")
    planners = [with_policy(p, args.uavs) for p in args.planners.split(",") if p]
    config = load_config(uavs=args.uavs)
    extra = heldout_cases(f"{DISTRIBUTION}:{args.seed}:{args.count}", config, args.duration)
    cases = [c for c in (NAMED if args.named else []) if c in CASES] + list(extra)
    rows = compare(planners, cases, args.duration, uavs=args.uavs, extra=extra)
    result = summary(rows, planners)
    text = markdown(rows, planners, result, args.uavs, args.seed, args.count)
    print(text)
    if args.markdown:
        Path(args.markdown).write_text(text)
    if args.json:
        Path(args.json).write_text(json.dumps({"rows": rows, **result}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
