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


def flat_settings(value: Any, prefix: str = "") -> dict[str, Any]:
    """A configuration (a TOML document, or ``Config.to_dict``) as ``table.key: value``; an
    array of tables is named once (``[*]``) when its entries are all alike, else per entry."""
    if isinstance(value, dict):
        return {
            k: v for key, item in value.items() for k, v in flat_settings(item, f"{prefix}{key}.").items()
        }
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, dict) for v in value):
        stem = prefix.rstrip(".")
        if all(v == value[0] for v in value):
            return flat_settings(value[0], f"{stem}[*].")
        return {k: v for i, item in enumerate(value) for k, v in flat_settings(item, f"{stem}[{i}].").items()}
    return {prefix.rstrip("."): list(value) if isinstance(value, tuple) else value}


def condition_settings(name: str) -> list[str]:
    """What the conditions ``name`` change in the paper's setup, as ``table.key=value``."""
    from cableload_sim.params import read_config_document

    base = flat_settings(read_config_document(None)[0])
    mine = flat_settings(read_config_document(condition_config(name))[0])
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
