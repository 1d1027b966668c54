"""The conditions a reproduction runs under: ``paper`` (the paper's setting, as far as its text
lets it be inferred) or ``ideal`` (the default configuration: exact states, no link).

The paper flew its simulations in Gazebo with the Agilicious stack: motion capture for every body,
each quadrotor's onboard estimator, and the plans sent from a laptop over Wi-Fi. It gives no noise
figures, rates or delays for them, so the ``paper`` conditions take each from what such a setup
has; ``ASSUMPTIONS`` says where each value comes from, and the results page lists them.
"""

from __future__ import annotations

from dataclasses import dataclass

from cableload_sim.errors import UsageError


@dataclass(frozen=True)
class Assumption:
    """One setting of the paper's conditions and why it has that value."""

    setting: str
    """``table.key=value``, as ``--set`` takes it."""
    why: str


ASSUMPTIONS: tuple[Assumption, ...] = (
    Assumption(
        "sensing.enabled=true",
        "motion capture of the load and of every quadrotor (100 Hz, 5 ms latency, sub-millimetre "
        "noise and per-flight biases; the [sensing] defaults): the paper's planners read the "
        "motion-capture poses (its Section 6.1.2)",
    ),
    Assumption(
        "imu.enabled=true",
        "each quadrotor flies on its onboard estimate (IMU fused with its motion-capture pose), as "
        "the Agilicious stack does, not on the true state",
    ),
    Assumption(
        "link.enabled=true",
        "the plans reach the quadrotors over Wi-Fi from the laptop the planners ran on (its Section 4.5)",
    ),
    Assumption(
        "link.drop_fraction=0.0",
        "no plan lost in the nominal runs: the paper's Table 10 adds 20 % dropped plans as a "
        "perturbation, so its other runs lost none",
    ),
    Assumption(
        "link.delay_min_s=0.005",
        "a Wi-Fi hop on a quiet network: 5-15 ms (the paper gives no figure; its Table 10 "
        "perturbation delays up to 30 ms)",
    ),
    Assumption("link.delay_max_s=0.015", "as above"),
)
"""The ``paper`` conditions, each with its reason. The quadrotors' 20 N thrust, the load's
1.4 kg and the 1 m cables are the default configuration's already (the paper's values)."""

CONDITIONS: dict[str, tuple[str, ...]] = {
    "paper": tuple(a.setting for a in ASSUMPTIONS),
    "ideal": (),
}
"""The overrides of each named condition on the default configuration."""


def condition_overrides(name: str) -> tuple[str, ...]:
    """The ``--set`` overrides of the conditions ``name``, or ``UsageError``."""
    if name not in CONDITIONS:
        raise UsageError(f"conditions: expected one of {', '.join(CONDITIONS)}, got {name!r}")
    return CONDITIONS[name]
