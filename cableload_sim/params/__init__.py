"""Parameters of the physical system, the onboard controller and the simulation, from TOML.

Each physical thing is one frozen dataclass whose fields carry their unit in the docstring.
Derived quantities (total mass, inertia of a box, allocation matrix, maximum thrust) are
methods, never stored defaults, so overriding a mass can never leave a stale value behind.

A configuration file has these tables, each optional except ``[load]``:

```toml
gravity = 9.81
[load]            # LoadParams; `attachments` (n x 3) or `uavs` + `attachment_radius`
[quadrotor]       # QuadrotorParams, the same for every quadrotor
[quadrotor.rotor] # RotorParams
[cable]           # CableParams, the same for every cable
[formation]       # FormationParams
[controller]      # ControllerParams
[simulation]      # SimulationParams
[mismatch]        # MismatchParams: what the simulator does differently from the config
[teacher]         # TeacherParams
[link]            # LinkParams: plans lost or late between planner and quadrotor
[sensing]         # SensingParams: motion capture and the filters the planners observe through
[imu]             # ImuParams: each quadrotor's IMU and the state estimate its controller flies on
[aero]            # AeroParams: drag on the load and the quadrotors, rotor drag
[wind]            # WindParams: steady wind and Dryden turbulence
[ball]            # BallParams: a ball sloshing free inside the load's box
[battery]         # BatteryParams: each quadrotor's battery, its sag limiting the rotors
[ground]          # GroundParams: contact with the plane z = 0, how cables snap taut
```

One module per part: ``system`` (load, quadrotors, rotors, cables, formation), ``mismatch``,
``control`` (controller and simulation), ``sensing`` (link, motion capture, IMU), ``teacher``,
``air`` (aero and wind), ``ball``, ``battery``, ``ground``; ``config`` puts them together and
``overrides`` applies ``--set``. Each part's table is validated next to its dataclass, with the
checks of ``cableload_sim.checks``. Unknown keys, wrong types and out-of-range values fail
with a ``ConfigError`` naming the key, the value and what was expected. ``load_config()``
without a path gives the paper's setup (``cableload_sim/configs/paper.toml``). Overrides
(``--set table.key=value``) change the parsed document before that same validation.

May import: ``cableload_sim.errors``, ``checks``, ``horizon``. Imported by: every other part
of the project.
"""

from cableload_sim.checks import MAX_CONFIG_BYTES, read_text, read_toml
from cableload_sim.errors import ConfigError
from cableload_sim.params.air import (
    MIN_WIND_SPEED,
    AeroParams,
    WindParams,
)
from cableload_sim.params.ball import (
    MAX_BALL_STEP_PHASE,
    BallParams,
)
from cableload_sim.params.battery import (
    BATTERY_CELL_OCV,
    BatteryParams,
)
from cableload_sim.params.config import (
    PAPER_CONFIG,
    SHIPPED_CONFIGS,
    Config,
    config_from_dict,
    load_config,
    read_config_document,
    resolve_config,
    shipped_config_name,
)
from cableload_sim.params.control import (
    MIN_PHYSICS_DT_S,
    ControllerParams,
    SimulationParams,
)
from cableload_sim.params.ground import (
    MAX_GROUND_STEP_PHASE,
    SNAP_MODELS,
    GroundParams,
)
from cableload_sim.params.mismatch import (
    MAX_COM_PRODUCT_SHARE,
    MismatchParams,
    Scale,
)
from cableload_sim.params.overrides import (
    Override,
    build_with_overrides,
)
from cableload_sim.params.sensing import (
    IMU_PENDING_CAPTURES,
    ImuParams,
    LinkParams,
    SensingParams,
)
from cableload_sim.params.system import (
    MAX_UAVS,
    MIN_ATTACHMENT_SPACING_M,
    CableParams,
    FormationParams,
    LoadParams,
    QuadrotorParams,
    RotorParams,
    SystemParams,
    polygon_attachments,
)
from cableload_sim.params.teacher import (
    TEACHER_PRIORS,
    TeacherParams,
)

__all__ = [
    "AeroParams",
    "BATTERY_CELL_OCV",
    "BallParams",
    "BatteryParams",
    "CableParams",
    "Config",
    "ConfigError",
    "ControllerParams",
    "FormationParams",
    "GroundParams",
    "IMU_PENDING_CAPTURES",
    "ImuParams",
    "LinkParams",
    "LoadParams",
    "MAX_BALL_STEP_PHASE",
    "MAX_COM_PRODUCT_SHARE",
    "MAX_CONFIG_BYTES",
    "MAX_GROUND_STEP_PHASE",
    "MAX_UAVS",
    "MIN_ATTACHMENT_SPACING_M",
    "MIN_PHYSICS_DT_S",
    "MIN_WIND_SPEED",
    "MismatchParams",
    "Override",
    "PAPER_CONFIG",
    "SHIPPED_CONFIGS",
    "QuadrotorParams",
    "RotorParams",
    "SNAP_MODELS",
    "Scale",
    "SensingParams",
    "SimulationParams",
    "SystemParams",
    "TEACHER_PRIORS",
    "TeacherParams",
    "WindParams",
    "build_with_overrides",
    "config_from_dict",
    "load_config",
    "read_config_document",
    "resolve_config",
    "shipped_config_name",
    "polygon_attachments",
    "read_text",
    "read_toml",
]
