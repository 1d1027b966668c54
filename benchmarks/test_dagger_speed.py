"""DAgger: the shipped generalist's training config (``learners/configs/generalist.toml``:
eight rounds of eight 15 s episodes for three quadrotors, the teacher labelling, six epochs a
round) trained from scratch on this machine's cores, twice with the same seed: the wall time of
the first (target at most 2 minutes on two cores) and the same result both times (every weight of
the chosen policy and every round's validation score equal).
"""

from __future__ import annotations

import json
from pathlib import Path

import torch

from learners.config import load_train_config
from learners.dagger import train
from learners.export import load_checkpoint

TIMINGS = ("collect_s", "train_s", "eval_wall_s", "wall_s")
"""What the training summary records of the clock: left out of the comparison."""
CONFIG = Path(__file__).resolve().parents[1] / "learners" / "configs" / "generalist.toml"


def test_generalist_training_time(benchmark, tmp_path):
    config = load_train_config(CONFIG)
    runs = []

    def train_once():
        out = tmp_path / f"run{len(runs)}"
        runs.append(out)
        train(config, out, progress=False)

    benchmark.pedantic(train_once, rounds=1, iterations=1)
    train_once()  # again, untimed: the same result
    benchmark.extra_info["rounds"] = config.dagger.rounds
    benchmark.extra_info["episodes_per_round"] = config.dagger.episodes_per_round
    first, second = (_without_times(json.loads((run / "summary.json").read_text())) for run in runs)
    assert first == second
    a, b = (load_checkpoint(run / "policy" / "student.pt")[0].state_dict() for run in runs)
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def _without_times(value):
    if isinstance(value, dict):
        return {k: _without_times(v) for k, v in value.items() if k not in TIMINGS}
    if isinstance(value, list):
        return [_without_times(v) for v in value]
    return value
