"""A whole configuration: ``Config``, built from a parsed TOML document or read from a file."""

from __future__ import annotations

import dataclasses
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from cableload_sim import checks
from cableload_sim.errors import ConfigError
from cableload_sim.params.air import AeroParams, WindParams, _aero, _wind
from cableload_sim.params.ball import BallParams, _ball
from cableload_sim.params.battery import BatteryParams, _battery
from cableload_sim.params.control import (
    ControllerParams,
    SimulationParams,
    _check_rates,
    _controller,
    _simulation,
)
from cableload_sim.params.ground import GroundParams, _ground
from cableload_sim.params.mismatch import MismatchParams, _mismatch
from cableload_sim.params.overrides import build_with_overrides
from cableload_sim.params.sensing import (
    ImuParams,
    LinkParams,
    SensingParams,
    _check_imu,
    _check_sensing_rate,
    _imu,
    _link,
    _sensing,
)
from cableload_sim.params.system import SystemParams, _cable, _formation, _load, _quadrotor
from cableload_sim.params.teacher import TeacherParams, _teacher


@dataclass(frozen=True)
class Config:
    """Everything one configuration file holds."""

    system: SystemParams
    controller: ControllerParams = field(default_factory=ControllerParams)
    simulation: SimulationParams = field(default_factory=SimulationParams)
    mismatch: MismatchParams = field(default_factory=MismatchParams)
    teacher: TeacherParams = field(default_factory=TeacherParams)
    link: LinkParams = field(default_factory=LinkParams)
    sensing: SensingParams = field(default_factory=SensingParams)
    imu: ImuParams = field(default_factory=ImuParams)
    aero: AeroParams = field(default_factory=AeroParams)
    wind: WindParams = field(default_factory=WindParams)
    ball: BallParams = field(default_factory=BallParams)
    battery: BatteryParams = field(default_factory=BatteryParams)
    ground: GroundParams = field(default_factory=lambda: GroundParams())

    def with_uavs(self, n: int) -> Config:
        return dataclasses.replace(self, system=self.system.with_uavs(n))

    def to_dict(self) -> dict:
        """JSON-serializable form (the resolved configuration written beside results)."""
        return dataclasses.asdict(self)


def config_from_dict(data: dict, source: str = "config") -> Config:
    """Build a ``Config`` from a parsed TOML document; ``source`` names it in errors."""
    checks.table(
        source,
        data,
        {
            "gravity",
            "load",
            "quadrotor",
            "cable",
            "formation",
            "controller",
            "simulation",
            "mismatch",
            "teacher",
            "link",
            "sensing",
            "imu",
            "aero",
            "wind",
            "ball",
            "battery",
            "ground",
        },
    )
    load = _load(f"{source}:load", data.get("load", {}), None)
    n = len(load.attachments)
    quad = _quadrotor(f"{source}:quadrotor", data.get("quadrotor", {}))
    cable = _cable(f"{source}:cable", data.get("cable", {}))
    system = SystemParams(
        load=load,
        quadrotors=(quad,) * n,
        cables=(cable,) * n,
        gravity=checks.positive(f"{source}:gravity", data.get("gravity", 9.81)),
        formation=_formation(f"{source}:formation", data.get("formation", {})),
    )
    mismatch = _mismatch(f"{source}:mismatch", data.get("mismatch", {}))
    mismatch.apply(system)  # validates lengths against n now, not at first use
    controller = _controller(f"{source}:controller", data.get("controller", {}))
    simulation = _simulation(f"{source}:simulation", data.get("simulation", {}))
    _check_rates(source, controller, simulation)
    sensing = _sensing(f"{source}:sensing", data.get("sensing", {}))
    _check_sensing_rate(source, sensing, simulation)
    imu = _imu(f"{source}:imu", data.get("imu", {}))
    _check_imu(source, imu, sensing, simulation, controller)
    return Config(
        system=system,
        controller=controller,
        simulation=simulation,
        mismatch=mismatch,
        teacher=_teacher(f"{source}:teacher", data.get("teacher", {})),
        link=_link(f"{source}:link", data.get("link", {})),
        sensing=sensing,
        imu=imu,
        aero=_aero(f"{source}:aero", data.get("aero", {})),
        wind=_wind(f"{source}:wind", data.get("wind", {})),
        ball=_ball(f"{source}:ball", data.get("ball", {}), load, simulation),
        battery=_battery(f"{source}:battery", data.get("battery", {})),
        ground=_ground(f"{source}:ground", data.get("ground", {}), system, simulation),
    )


PAPER_CONFIG = "paper.toml"

SHIPPED_CONFIGS = {
    "paper": "the paper's setup (the default)",
    "paper-conditions": "the paper's setup as its simulations observed, estimated and commanded it",
}
"""The configurations shipped in ``cableload_sim/configs``, which ``--config`` takes by name."""


def shipped_config_name(path: str | Path) -> str | None:
    """The shipped configuration ``path`` names (``paper``, ``paper-conditions.toml``...), when it
    is not a file of that name."""
    name = str(path).removesuffix(".toml")
    return name if name in SHIPPED_CONFIGS and not Path(path).is_file() else None


def _merged(base: dict, changes: dict) -> dict:
    """``base`` with ``changes`` laid over it, table by table."""
    out = dict(base)
    for key, value in changes.items():
        both_tables = isinstance(value, dict) and isinstance(out.get(key), dict)
        out[key] = _merged(out[key], value) if both_tables else value
    return out


def read_config_document(path: str | Path | None, _chain: tuple[str, ...] = ()) -> tuple[dict, str]:
    """The parsed TOML document of a configuration and the name its errors use: a file, or a
    shipped configuration by name (``None``: the paper's). A document with ``extends = "NAME"``
    (a shipped configuration, or a file relative to it) is that one with its own tables laid
    over it."""
    shipped = "paper" if path is None else shipped_config_name(path)
    if shipped is not None:
        source = identity = f"{shipped}.toml"
        data = tomllib.loads(resources.files("cableload_sim.configs").joinpath(source).read_text())
        folder = None
    else:
        path = Path(str(path))
        if not path.is_file() and "/" not in str(path) and not path.suffix:
            raise ConfigError(
                f"config {str(path)!r}: expected a TOML file or one of the shipped configurations "
                f"({', '.join(SHIPPED_CONFIGS)})"
            )
        source, identity = str(path), str(path.resolve())
        data = checks.read_toml(path, "config file")
        folder = path.parent
    base = data.pop("extends", None)
    if base is None:
        return data, source
    if not isinstance(base, str) or not base:
        raise ConfigError(f"{source}:extends: expected the name or path of a configuration, got {base!r}")
    if shipped_config_name(base) is None and folder is not None and not Path(base).is_absolute():
        base = str(folder / base)
    if identity in _chain:
        raise ConfigError(
            f"{source}:extends: {base!r} leads back to {source} (a configuration extends itself)"
        )
    base_data, _ = read_config_document(base, (*_chain, identity))
    return _merged(base_data, data), source


def load_config(
    path: str | Path | None = None, uavs: int | None = None, overrides: Sequence[str] = ()
) -> Config:
    """Read a TOML configuration: a file, a shipped configuration by name (``SHIPPED_CONFIGS``),
    or the paper's setup when ``path`` is None.

    ``overrides`` (``table.key=value``, as ``--set`` takes them) replace values of the parsed
    document before it is validated as the file is. ``uavs`` replaces the number of
    quadrotors, placing the attachment points on a regular polygon of the configured mean
    radius.
    """
    data, source = read_config_document(path)
    config = build_with_overrides(data, overrides, lambda d: config_from_dict(d, source))
    if uavs is not None:
        config = config.with_uavs(uavs)
    return config
