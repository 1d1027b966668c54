"""The run log of a 60 s flight of three quadrotors: its size on disk (target at most 15 MB)
and the time to fly and write it. The formation planner flies it (the size depends on the
topics and their rates, not on the planner: every planner sends 21-node plans at 10 Hz); the
bag's metrics must equal the flight's own.
"""

from __future__ import annotations

import json

from cableload_sim.cli.main import main
from cableload_sim.io.runlog.reader import metrics_from_bag

DURATION_S = 60.0
LIMIT_MB = 15.0


def test_runlog_of_a_minute_of_flight(benchmark, tmp_path, capsys):
    path = tmp_path / "run.bag"
    argv = ["simulate", "--planner", "formation", "--trajectory", "eight-medium", "--duration"]
    argv += [str(DURATION_S), "--json", "--log", str(path), "--overwrite"]

    def fly():
        assert main(argv) == 0

    benchmark.pedantic(fly, rounds=2, iterations=1)
    live = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    size_mb = path.stat().st_size / 1e6
    benchmark.extra_info["size_mb"] = size_mb
    benchmark.extra_info["mb_per_minute"] = size_mb * 60.0 / DURATION_S
    print(f"run log of {DURATION_S:g} s, three quadrotors: {size_mb:.1f} MB")
    assert size_mb <= LIMIT_MB, size_mb
    logged = metrics_from_bag(path)
    for key in ("rmse_position_m", "rmse_orientation_deg"):
        assert abs(logged[key] - live[key]) <= 1e-6 * abs(live[key]), (key, logged, live)
