"""The score a DAgger run chooses its round by, for any policy or prior, on a training config's
held-out validation draws (``dagger.validation_seed``), flown as the run flies them (the
config's system with ``dagger.system_overrides``, ``dagger.eval_s`` seconds, student alone).

    .venv/bin/python benchmarks/validation_score.py --config learners/configs/generalist.toml
        [--set TABLE.KEY=VALUE ...] [--duration S] ENTRY [ENTRY ...]

An ENTRY is a checkpoint (``runs/X/checkpoints/round_003.pt``), a policy directory, or
``prior:formation-tilt`` / ``prior:formation-wrench`` / ``prior:formation-follow``: the student
planning that prior with nothing added (an untrained network whose decoder starts at zero).
Prints each entry's mean position and attitude RMSE and the score (position / 1 cm + attitude
/ 1 deg; lower is better). Networks fly raw, as DAgger's validation flies them (whatever a
policy directory's ``policy.json`` records); ``--hover-calibration`` flies each with its hover
residual subtracted.
"""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

import torch

from cableload_sim.cli.main import _train_config_with
from learners.config import load_train_config
from learners.dagger import _evaluate, make_executor, validation_references, validation_score
from learners.export import load_checkpoint
from learners.network import StudentNet


def network_of(entry: str, config) -> StudentNet:
    if entry.startswith("prior:"):
        return StudentNet(
            dataclasses.replace(config.network, zero_init=True, prior=entry.split(":", 1)[1])
        ).eval()
    path = Path(entry)
    net, _ = load_checkpoint(path / "student.pt" if path.is_dir() else path)
    return net.eval()


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--config", default="learners/configs/generalist.toml")
    parser.add_argument("--set", action="append", default=[])
    parser.add_argument(
        "--duration", type=float, default=None, help="seconds per draw (default: the config's dagger.eval_s)"
    )
    parser.add_argument(
        "--hover-calibration",
        action="store_true",
        help="subtract each network's hover residual, as a flown policy of the "
        "load-yaw frame may (DAgger's validation flies the raw network)",
    )
    parser.add_argument("entries", nargs="+")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    config = load_train_config(args.config)
    if args.set:
        config = _train_config_with(args.config, config, args.set)
    if args.duration:
        config = dataclasses.replace(config, dagger=dataclasses.replace(config.dagger, eval_s=args.duration))
    references = validation_references(config)
    pool = make_executor("local")  # the draws flown on every core
    try:
        for entry in args.entries:
            _score(entry, config, references, args.hover_calibration, pool)
    finally:
        pool.close()


def _score(entry: str, config, references, hover_calibration: bool, pool) -> None:
    """Fly ``entry`` on the validation draws and print its figures and score."""
    row = _evaluate(
        network_of(entry, config), config, references, hover_calibration=hover_calibration, pool=pool
    )
    print(
        f"{entry}: position {row['eval_rmse_position_m']:.4f} m, attitude "
        f"{row['eval_rmse_orientation_deg']:.2f} deg, {row['eval_status']}, "
        f"score {validation_score(row):.2f}",
        flush=True,
    )


if __name__ == "__main__":
    main()
