"""The conditions a reproduction runs under: ``paper`` (the paper's setting, as far as its text
lets it be inferred) or ``ideal`` (the default configuration: exact states, no link).

The paper flew its simulations in Gazebo with the Agilicious stack: motion capture for every body,
each quadrotor's onboard estimator, and the plans sent from a laptop over Wi-Fi. It gives no noise
figures, rates or delays for them, so the ``paper`` conditions take each from what such a setup
has. They are a shipped configuration, ``cableload_sim/configs/paper-conditions.toml``, whose
comments say where each value comes from; ``condition_settings`` lists what it changes, for the
results page.
"""

from __future__ import annotations

from typing import Any

from cableload_sim.errors import UsageError

CONDITIONS: dict[str, str] = {
    "paper": "paper-conditions",
    "ideal": "paper",
}
"""The shipped configuration (``cableload_sim/configs``) of each named condition."""


def condition_config(name: str) -> str:
    """The shipped configuration of the conditions ``name``, or ``UsageError``."""
    if name not in CONDITIONS:
        raise UsageError(f"conditions: expected one of {', '.join(CONDITIONS)}, got {name!r}")
    return CONDITIONS[name]


def _flat(data: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in data.items():
        if isinstance(value, dict):
            out.update(_flat(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def condition_settings(name: str) -> list[str]:
    """What the conditions ``name`` change in the paper's setup, as ``table.key=value``."""
    from cableload_sim.params import read_config_document

    base = _flat(read_config_document(None)[0])
    mine = _flat(read_config_document(condition_config(name))[0])
    return [f"{key}={_toml(value)}" for key, value in mine.items() if base.get(key, object()) != value]


def _toml(value: Any) -> str:
    """``value`` as TOML (and ``--set``) writes it."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{k} = {_toml(v)}" for k, v in value.items()) + " }"
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return repr(value)
