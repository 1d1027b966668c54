"""Overrides: ``table.key=value`` on the command line, applied to the parsed document before
it is validated."""

from __future__ import annotations

import copy
import re
import tomllib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from cableload_sim.errors import ConfigError

_KEY_PART = re.compile(r"[A-Za-z0-9_-]+")


_BARE_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_./:-]*")


@dataclass(frozen=True)
class Override:
    """One ``table.key=value``: the dotted key's parts and the value parsed as TOML."""

    text: str
    key: tuple[str, ...]
    value: Any

    @classmethod
    def parse(cls, text: str) -> Override:
        """``text`` as ``a.b.c=VALUE``, VALUE in TOML syntax (``0.5``, ``true``, ``[0.5, 0.4]``,
        ``"name"``); a bare word such as ``paper`` is taken as a string."""
        if not isinstance(text, str) or "=" not in text:
            raise ConfigError(
                f"--set {text!r}: expected TABLE.KEY=VALUE, e.g. quadrotor.rotor.time_constant=0.03"
            )
        name, raw = (part.strip() for part in text.split("=", 1))
        key = tuple(name.split("."))
        if not all(_KEY_PART.fullmatch(part) for part in key):
            raise ConfigError(
                f"--set {text!r}: {name!r} is not a dotted key; expected names of "
                "letters, digits, _ and - joined by dots, e.g. load.mass"
            )
        try:
            value = tomllib.loads(f"value = {raw}")["value"]
        except tomllib.TOMLDecodeError as err:
            if not _BARE_WORD.fullmatch(raw):
                raise ConfigError(
                    f"--set {text!r}: {raw!r} is not a TOML value ({err}); expected e.g. 0.5, "
                    'true, [0.5, 0.4, 0.1] or "text"'
                ) from None
            value = raw
        return cls(text, key, value)

    def apply(self, data: dict) -> None:
        """Set the value in the parsed document ``data``, making the tables it lacks."""
        table = data
        for depth, part in enumerate(self.key[:-1]):
            inner = table.setdefault(part, {})
            if not isinstance(inner, dict):
                raise ConfigError(
                    f"--set {self.text!r}: {'.'.join(self.key[: depth + 1])} is a value "
                    f"({inner!r}), not a table"
                )
            table = inner
        table[self.key[-1]] = self.value

    def named_in(self, message: str) -> bool:
        """Whether a validation error ``message`` is about this key."""
        dotted = ".".join(self.key)
        parent = ".".join(self.key[:-1])
        return (
            re.search(rf"[:.]{re.escape(dotted)}\b", message) is not None
            or (f"{parent}: unknown key {self.key[-1]!r}" in message)
            or (not parent and f": unknown key {self.key[-1]!r}" in message)
        )


def build_with_overrides(data: dict, overrides: Sequence[str], build: Callable[[dict], Any]):
    """``build(data)``, then, with ``overrides``, ``build`` of ``data`` with them applied.

    The document alone is built first so that its own errors name the file; an error after
    the overrides is theirs, and names the ones it is about (all of them when it cannot tell).
    """
    result = build(data)
    if not overrides:
        return result
    parsed = [Override.parse(text) for text in overrides]
    changed = copy.deepcopy(data)
    for override in parsed:
        override.apply(changed)
    try:
        return build(changed)
    except ConfigError as err:
        blamed = [o.text for o in parsed if o.named_in(str(err))] or [o.text for o in parsed]
        raise ConfigError(f"--set {', '.join(map(repr, blamed))}: {err}") from None
