"""The student against the teacher (the student issue's tracking table).

    .venv/bin/python benchmarks/evaluate_student.py [--policy DIR] [--duration 60]
        [--cases eight-medium,eight-2.0,...] [--json out.json]

Each case runs ``cableload evaluate`` (teacher and student from the same start, same duration)
and the table gives both RMSEs, their ratio, the smallest quadrotor distance, the derivative
consistency (paper Table 3) and the student's inference time per quadrotor plan. ``eight-medium``
is the training trajectory; the others are the unseen eights of the paper's Table 2 sizes.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

CASES = {
    "eight-medium": ["--trajectories", "eight-medium"],
    "eight-2.0": ["--trajectories", "eight", "-o", "ax=2.0", "-o", "ay=2.0", "-o", "w=0.5"],
    "eight-2.5": ["--trajectories", "eight", "-o", "ax=2.5", "-o", "ay=2.5", "-o", "w=0.5"],
    "eight-3.0": ["--trajectories", "eight", "-o", "ax=3.0", "-o", "ay=3.0", "-o", "w=0.5"],
    "eight-3.5": ["--trajectories", "eight", "-o", "ax=3.5", "-o", "ay=3.5", "-o", "w=0.5"],
}


def evaluate(case: str, duration: float, policy: str | None) -> dict:
    command = [
        str(Path(sys.executable).with_name("cableload")),
        "evaluate",
        *CASES[case],
        "--duration",
        str(duration),
        "--json",
    ]
    if policy:
        command += ["--policy", policy]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed:\n{done.stderr[-2000:]}")
    row = json.loads(done.stdout)["trajectories"][0]
    return {"case": case, **row}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--duration", type=float, default=60.0)
    parser.add_argument("--cases", default=",".join(CASES))
    parser.add_argument("--policy", default=None)
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    rows = []
    print(
        "| case | teacher pos (m) / att (deg) | student pos / att | ratio pos / att | "
        "student min dist (m) | deriv MAE teacher / student (m/s) | infer (ms) | status |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for case in args.cases.split(","):
        row = evaluate(case, args.duration, args.policy)
        rows.append(row)
        t, s = row["teacher"], row["student"]
        print(
            f"| {case} | {t['rmse_position_m']:.4f} / {t['rmse_orientation_deg']:.2f} | "
            f"{s['rmse_position_m']:.4f} / {s['rmse_orientation_deg']:.2f} | "
            f"{s['rmse_position_m'] / t['rmse_position_m']:.2f} / "
            f"{s['rmse_orientation_deg'] / t['rmse_orientation_deg']:.2f} | "
            f"{s['min_uav_distance_m']:.2f} | {t['deriv_mae_mps']:.4f} / "
            f"{s['deriv_mae_mps']:.4f} | {s.get('infer_ms_median', float('nan')):.2f} | "
            f"{s['status']} |",
            flush=True,
        )
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1, default=float))


if __name__ == "__main__":
    main()
