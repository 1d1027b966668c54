"""How well the student's network fits the teacher's labels on episodes it did not train on,
and how the fitted network flies.

    .venv/bin/python benchmarks/imitation_fit.py RUN [--config learners/configs/generalist.toml]
        [--learning-rate 3e-3] [--epochs 60] [--floor-scale X] [--hold-out 4] [--scale 1 0.5]
        [--no-flight]

``RUN`` is a training run directory (``cableload train --out RUN``) whose round 0 holds the
teacher-flown episodes. Every ``--hold-out``-th episode is left out; a network of the config's
``[network]`` (with ``error_inputs`` when the samples carry the error columns) is trained from
scratch on the rest, as DAgger trains one (``learners.dagger.train_epochs``: the config's batch
size and horizon nodes, the outputs' floors scaled by ``--floor-scale``, by default the
config's ``training.output_floor_scale``), at one learning rate for every epoch.

Printed after each fifth of the epochs: the training loss and, on the held-out episodes, the
R^2 of the network's residual (its plan less the prior's) against the teacher's, per output
(p, v, a) at nodes 0, 1 and 3 (0, 10 and 57 ms into the plan), averaged over the three axes.
Then the network flies the config's validation draws (as DAgger's validation:
``dagger.validation_seed``, link and motion capture), with its residual as learnt and times
each ``--scale``.
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import sys
from pathlib import Path

import numpy as np
import torch

from learners.config import load_train_config
from learners.dagger import (
    _evaluate,
    data_stats,
    make_executor,
    prior_targets,
    train_epochs,
    validation_references,
)
from learners.network import StudentNet
from learners.store import RunStore
from planners.student import LOAD_FEATURES

OUTPUTS = (("p", 0), ("v", 6), ("a", 9))  # columns of prior_targets' layout (p, w, v, a)
NODES = (0, 1, 3)


def held_out_r2(net: StudentNet, data: dict) -> dict[str, float]:
    """R^2 of the network's residual against the labels', per output and node (axes averaged)."""
    net.eval()
    with torch.no_grad():
        inputs = (torch.as_tensor(data[k]) for k in ("ego", "load", "ref", "prior"))
        out = net.predict(*inputs, with_jerk=False)
    prior = prior_targets(data["prior"])
    predicted = np.concatenate([out[k].numpy() for k in ("p", "w", "v", "a")], axis=-1) - prior
    labels = data["target"] - prior
    scores = {}
    for name, column in OUTPUTS:
        for node in NODES:
            y, fit = labels[:, node, column : column + 3], predicted[:, node, column : column + 3]
            spread = ((y - y.mean(axis=0)) ** 2).sum(axis=0)
            scores[f"{name}{node}"] = float(np.mean(1.0 - ((y - fit) ** 2).sum(axis=0) / spread))
    return scores


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("run", type=Path)
    parser.add_argument("--config", default="learners/configs/generalist.toml")
    parser.add_argument("--learning-rate", type=float, default=3e-3)
    parser.add_argument("--epochs", type=int, default=60)
    parser.add_argument("--floor-scale", type=float, default=None, help="training.output_floor_scale")
    parser.add_argument("--hold-out", type=int, default=4, help="leave out every k-th episode")
    parser.add_argument("--scale", type=float, nargs="+", default=[1.0, 0.5])
    parser.add_argument("--no-flight", action="store_true")
    args = parser.parse_args(argv)
    if args.epochs < 1 or args.hold_out < 2 or not args.learning_rate > 0.0:
        parser.error("expected --epochs >= 1, --hold-out >= 2 and a positive --learning-rate")
    if args.floor_scale is not None and not 0.0 < args.floor_scale <= 1.0:
        parser.error(f"--floor-scale: expected a factor in (0, 1], got {args.floor_scale}")
    torch.set_num_threads(1)
    config = load_train_config(args.config)
    data = RunStore(args.run).read_shards(0)
    episodes = np.unique(data["episode"])
    held = np.isin(data["episode"], episodes[:: args.hold_out])
    train = {k: v[~held] for k, v in data.items()}
    test = {k: v[held] for k, v in data.items()}
    network = dataclasses.replace(config.network, error_inputs=data["load"].shape[-1] > LOAD_FEATURES)
    print(
        f"{len(episodes)} episodes ({held.sum()} samples of {len(episodes[:: args.hold_out])} held out); "
        f"error inputs: {network.error_inputs}",
        flush=True,
    )
    torch.manual_seed(0)
    net = StudentNet(network)
    floor = config.training.output_floor_scale if args.floor_scale is None else args.floor_scale
    net.set_normalization(data_stats(train, network.residual, floor))
    optimizer = torch.optim.Adam(net.parameters(), lr=args.learning_rate)
    generator = torch.Generator().manual_seed(1)
    report = max(1, args.epochs // 5)
    for epoch in range(args.epochs):
        loss = train_epochs(
            net, optimizer, train, 1, config.training.batch_size, generator, nodes=config.training.train_nodes
        )
        if epoch % report == report - 1 or epoch == args.epochs - 1:
            scores = " ".join(f"{k} {v:.2f}" for k, v in held_out_r2(net, test).items())
            print(f"epoch {epoch + 1}: loss {loss:.3f}; held-out R^2 {scores}", flush=True)
    if args.no_flight:
        return
    references = validation_references(config)
    pool = make_executor("local")
    try:
        for scale in args.scale:
            flown = copy.deepcopy(net).eval()
            with torch.no_grad():  # the residual times scale: p, v, a share out_std[0:3]; w its own
                flown.out_std[0:6] *= scale
                flown.out_mean[3:6] *= scale
            row = _evaluate(flown, config, references, pool=pool)
            print(
                f"residual x {scale:g}: validation {row['eval_rmse_position_m'] * 1e3:.2f} mm / "
                f"{row['eval_rmse_orientation_deg']:.3f} deg, {row['eval_status']}",
                flush=True,
            )
    finally:
        pool.close()


if __name__ == "__main__":
    sys.exit(main())
