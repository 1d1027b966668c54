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


def shipped_config_name(name: str | Path) -> str | None:
    """The shipped configuration ``name`` names (``paper``, ``paper-conditions.toml``, ...), or
    None. A file of that name comes first wherever a name is read (``resolve_config``)."""
    stem = str(name).removesuffix(".toml")
    return stem if stem in SHIPPED_CONFIGS else None


def resolve_config(name: str | Path, folder: Path | None = None) -> str | Path:
    """What a configuration named ``name`` in ``folder`` is: the file ``folder / name`` when
    there is one (``folder`` None: the working folder), else a shipped configuration's name,
    else that file's path (whose reading then says it is missing)."""
    path = Path(name) if folder is None or Path(name).is_absolute() else folder / name
    if path.is_file():
        return path
    shipped = shipped_config_name(name)
    return shipped if shipped is not None else path


def _merged(base: dict, changes: dict) -> dict:
    """``base`` with ``changes`` laid over it, table by table (an array is replaced whole)."""
    out = dict(base)
    for key, value in changes.items():
        both_tables = isinstance(value, dict) and isinstance(out.get(key), dict)
        out[key] = _merged(out[key], value) if both_tables else value
    return out


def _missing(what: str, path: Path) -> ConfigError:
    return ConfigError(
        f"{what}: the file {str(path)!r} does not exist; expected a TOML file or one of the "
        f"shipped configurations ({', '.join(SHIPPED_CONFIGS)})"
    )


def read_config_document(
    path: str | Path | None, _chain: tuple[str, ...] = (), _shipped_only: bool = False
) -> tuple[dict, str]:
    """The parsed TOML document of a configuration and the name its errors use: a file, or a
    shipped configuration by name (``None``: the paper's); a file of the name comes first. A
    document with ``extends = "NAME"`` (a file relative to it, or a shipped configuration) is
    that one with its own tables laid over it."""
    found = "paper" if path is None else (path if _shipped_only else resolve_config(path))
    if isinstance(found, str) or _shipped_only:
        shipped = shipped_config_name(found)
        if shipped is None:
            raise ConfigError(f"config {str(found)!r}: expected one of the shipped configurations")
        source = identity = f"{shipped}.toml"
        data = tomllib.loads(resources.files("cableload_sim.configs").joinpath(source).read_text())
        folder = None
    else:
        if not found.exists():
            raise _missing(f"config {str(path)!r}", found)
        source, identity = str(found), str(found.resolve())
        data = checks.read_toml(found, "config file")
        folder = found.parent
    base = data.pop("extends", None)
    if base is None:
        return data, source
    if not isinstance(base, str) or not base:
        raise ConfigError(f"{source}:extends: expected the name or path of a configuration, got {base!r}")
    if identity in _chain:
        raise ConfigError(
            f"{source}:extends: {base!r} leads back to {source} (a configuration extends itself)"
        )
    if folder is None:  # a shipped configuration extends shipped ones only
        base_data, base_source = read_config_document(base, (*_chain, identity), _shipped_only=True)
    else:
        target = resolve_config(base, folder)
        if isinstance(target, Path) and not target.exists():
            raise _missing(f"{source}:extends: {base!r}", target)
        base_data, base_source = read_config_document(target, (*_chain, identity))
    return _merged(base_data, data), f"{source} (extending {base_source})"


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
