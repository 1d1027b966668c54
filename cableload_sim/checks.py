"""The one family of value checks, the table builder and the bounded file reader.

Every file the project reads as configuration (the system config, the training config, the
reference distribution) and every option of a reference is checked here, so a bad value always
reads the same: the path of the value, what was expected, what was given.

A ``Check`` converts one value or raises the error it was made with (``ConfigError`` unless
told otherwise) and says in words what it accepts (``Check.expects``), which the generated
configuration reference prints beside each key. ``build`` makes a frozen dataclass from a TOML
table with one check per key; ``read_toml`` reads a file no larger than a bound, as UTF-8
text, and parses it.
"""

from __future__ import annotations

import dataclasses
import math
import tomllib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from cableload_sim.errors import ConfigError, UsageError

T = TypeVar("T")

_REAL = (int, float, np.integer, np.floating)
_WHOLE = (int, np.integer)
_LIST = (list, tuple, np.ndarray)


@dataclass(frozen=True)
class Check:
    """A rule for one value: ``check(path, value)`` returns the value converted (a float, an
    int, a tuple) or raises ``error`` naming ``path``; ``expects`` says what it accepts."""

    expects: str
    convert: Callable[[str, Any, type[UsageError]], Any]
    error: type[UsageError] = ConfigError
    plural: str = ""
    """Several such values in words ("positive numbers"), for a list of them."""

    def __call__(self, path: str, value: Any) -> Any:
        return self.convert(path, value, self.error)

    def raising(self, error: type[UsageError]) -> Check:
        """The same rule raising ``error`` instead."""
        return Check(self.expects, self.convert, error, self.plural)


def _fail(error: type[UsageError], path: str, expects: str, value: Any) -> UsageError:
    kind = f" ({type(value).__name__})" if isinstance(value, (str, bool)) else ""
    return error(f"{path}: expected {expects}, got {value!r}{kind}")


def _bound_text(low: float | None, high: float | None, low_open: bool, high_open: bool) -> str:
    parts = []
    if low is not None:
        parts.append(f"{'>' if low_open else '>='} {low:g}")
    if high is not None:
        parts.append(f"{'<' if high_open else '<='} {high:g}")
    return " and ".join(parts)


def number(
    low: float | None = None,
    high: float | None = None,
    *,
    low_open: bool = False,
    high_open: bool = False,
    unit: str = "",
    name: str = "",
) -> Check:
    """A finite real number (an int is taken as a float) within the bounds given; ``name``
    words it (default: "a number" and the bounds)."""
    bounds = _bound_text(low, high, low_open, high_open)
    expects = (name or ("a number" + (f" {bounds}" if bounds else ""))) + (f" ({unit})" if unit else "")

    def convert(path: str, value: Any, error: type[UsageError]) -> Any:
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, _REAL):
            raise _fail(error, path, expects, value)
        value = float(value)
        if not math.isfinite(value):
            raise _fail(error, path, expects, value)
        if low is not None and (value < low or (low_open and value == low)):
            raise _fail(error, path, expects, value)
        if high is not None and (value > high or (high_open and value == high)):
            raise _fail(error, path, expects, value)
        return value

    return Check(expects, convert)


finite = dataclasses.replace(number(name="a finite number"), plural="numbers")
positive = dataclasses.replace(
    number(0.0, low_open=True, name="a positive number"), plural="positive numbers"
)
non_negative = dataclasses.replace(number(0.0, name="a non-negative number"), plural="non-negative numbers")


duration = number(0.0, low_open=True, name="a positive number of seconds")
"""A length of time (s): positive, finite."""


def fraction(high_open: bool = False) -> Check:
    """A number from 0 to 1 (below 1 with ``high_open``)."""
    return number(
        0.0,
        1.0,
        high_open=high_open,
        name="a fraction from 0 to below 1" if high_open else "a fraction from 0 to 1",
    )


def integer(low: int | None = None, high: int | None = None) -> Check:
    """A whole number (not a bool, not a float) within the bounds given."""
    if low is not None and high is not None:
        expects = f"an integer from {low} to {high}"
    else:
        bounds = _bound_text(low, high, False, False)
        expects = "an integer" + (f" {bounds}" if bounds else "")

    def convert(path: str, value: Any, error: type[UsageError]) -> Any:
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, _WHOLE):
            raise _fail(error, path, expects, value)
        value = int(value)
        if (low is not None and value < low) or (high is not None and value > high):
            raise _fail(error, path, expects, value)
        return value

    return Check(expects, convert)


def _boolean(path: str, value: Any, error: type[UsageError]) -> bool:
    if not isinstance(value, bool):
        raise _fail(error, path, "true or false", value)
    return value


boolean = Check("true or false", _boolean)


def choice(options: Sequence[str]) -> Check:
    """One of ``options`` (strings)."""
    options = tuple(options)
    expects = "one of " + ", ".join(repr(o) for o in options)

    def convert(path: str, value: Any, error: type[UsageError]) -> Any:
        if not isinstance(value, str) or value not in options:
            raise _fail(error, path, expects, value)
        return value

    return Check(expects, convert)


def text(allow_empty: bool = False) -> Check:
    """A string (non-empty unless ``allow_empty``)."""
    expects = "a string" if allow_empty else "a non-empty string"

    def convert(path: str, value: Any, error: type[UsageError]) -> Any:
        if not isinstance(value, str) or (not allow_empty and not value):
            raise _fail(error, path, expects, value)
        return value

    return Check(expects, convert)


def vector(length: int, item: Check = finite) -> Check:
    """A list of exactly ``length`` values, each passing ``item``; a tuple."""
    expects = (
        f"a list of {length} {item.plural}"
        if item.plural
        else f"a list of {length} values, each {item.expects}"
    )

    def convert(path: str, value: Any, error: type[UsageError]) -> Any:
        if not isinstance(value, _LIST) or len(value) != length:
            raise _fail(error, path, expects, value)
        return tuple(item.convert(f"{path}[{k}]", v, error) for k, v in enumerate(value))

    return Check(expects, convert)


def sequence(item: Check = finite, *, min_length: int = 1, max_length: int | None = None) -> Check:
    """A list of ``min_length`` to ``max_length`` values, each passing ``item``; a tuple."""
    if max_length is None:
        size = {0: "a list of", 1: "a non-empty list of"}.get(min_length, f"a list of {min_length} or more")
    else:
        size = f"a list of {min_length} to {max_length}"
    expects = f"{size} {item.plural}" if item.plural else f"{size} values, each {item.expects}"

    def convert(path: str, value: Any, error: type[UsageError]) -> Any:
        if (
            not isinstance(value, _LIST)
            or len(value) < min_length
            or (max_length is not None and len(value) > max_length)
        ):
            raise _fail(error, path, expects, value)
        return tuple(item.convert(f"{path}[{k}]", v, error) for k, v in enumerate(value))

    return Check(expects, convert)


points = dataclasses.replace(sequence(vector(3)), expects="a non-empty list of [x, y, z] points")
"""A non-empty list of [x, y, z] points."""


def interval(item: Check = finite, name: str = "") -> Check:
    """``[low, high]`` with ``low <= high``, each passing ``item``; ``name`` words it."""
    expects = name or f"[low, high] with low <= high, each {item.expects}"

    def convert(path: str, value: Any, error: type[UsageError]) -> Any:
        if not isinstance(value, _LIST):
            raise _fail(error, path, expects, value)
        pair = vector(2, item).convert(path, value, error)
        if pair[0] > pair[1]:
            raise _fail(error, path, expects, value)
        return pair

    return Check(expects, convert)


def optional(check: Check) -> Check:
    """``check``, or None (a TOML file cannot write None: only defaults and code can)."""

    def convert(path: str, value: Any, error: type[UsageError]) -> Any:
        return None if value is None else check.convert(path, value, error)

    return Check(f"{check.expects}, or none", convert)


def one_or_each(item: Check) -> Check:
    """One value passing ``item`` (for every quadrotor, say), or a non-empty list of them (one
    each); a list is checked item by item, so its error names the index."""
    each = sequence(item)
    expects = f"{item.expects}, or {each.expects}"

    def convert(path: str, value: Any, error: type[UsageError]) -> Any:
        if isinstance(value, _LIST):
            if len(value) == 0:
                raise _fail(error, path, expects, value)
            return each.convert(path, value, error)
        if isinstance(value, _REAL) and not isinstance(value, (bool, np.bool_)):
            return item.convert(path, value, error)  # its own bound, e.g. "a positive number"
        raise _fail(error, path, expects, value)

    return Check(expects, convert)


# ---------------------------------------------------------------------------------------------
# Tables


def table(
    path: str, value: Any, allowed: Sequence[str] | set[str], error: type[UsageError] = ConfigError
) -> dict[str, Any]:
    """``value`` if it is a table whose keys are all ``allowed``."""
    if not isinstance(value, dict):
        raise error(f"{path}: expected a table, got {value!r}")
    unknown = sorted(set(value) - set(allowed))
    if unknown:
        raise error(f"{path}: unknown key {unknown[0]!r}; expected one of {sorted(allowed)}")
    return value


FIELD_CHECKS: dict[type, Mapping[str, Callable[[str, Any], Any]]] = {}
"""The checks ``build`` last used for each dataclass: what the generated configuration
reference prints beside each key (``cableload_sim.cli.reference_docs``)."""


def build(
    cls: type[T],
    path: str,
    value: Any,
    checks: Mapping[str, Callable[[str, Any], Any]],
    nested: Mapping[str, Callable[[str, Any], Any]] | None = None,
) -> T:
    """Dataclass ``cls`` from the table ``value``: each key checked by ``checks[key]`` (or
    built by ``nested[key]``), the defaults for the keys it lacks."""
    nested = nested or {}
    FIELD_CHECKS[cls] = checks
    table(path, value, set(checks) | set(nested))
    kwargs: dict[str, Any] = {}
    for name, check in checks.items():
        if name in value:
            kwargs[name] = check(f"{path}.{name}", value[name])
    for name, builder in nested.items():
        if name in value:
            kwargs[name] = builder(f"{path}.{name}", value[name])
    return cls(**kwargs)


def require(
    condition: bool, path: str, expects: str, value: Any, error: type[UsageError] = ConfigError
) -> None:
    """A rule between values: raise ``error`` (``path: expected ..., got ...``) unless
    ``condition``."""
    if not condition:
        raise error(f"{path}: expected {expects}, got {value!r}")


# ---------------------------------------------------------------------------------------------
# Files


MAX_CONFIG_BYTES = 1 << 20
"""Largest configuration file read (bytes); a TOML configuration is a few kB."""


def read_text(
    path: Path | str,
    what: str,
    max_bytes: int = MAX_CONFIG_BYTES,
    error: type[UsageError] = ConfigError,
    expected: str = "a TOML file",
) -> str:
    """The text of a file, or ``error`` naming it: missing, a folder or a device, larger than
    ``max_bytes``, unreadable or not UTF-8 text. Reads at most ``max_bytes + 1`` bytes."""
    path = Path(path)
    if not path.exists():
        raise error(f"{what} {str(path)!r} does not exist")
    if not path.is_file():
        raise error(f"{what} {str(path)!r} is not a regular file")
    try:
        with path.open("rb") as file:
            data = file.read(max_bytes + 1)
    except OSError as err:
        raise error(f"{what} {str(path)!r}: cannot be read ({err.strerror})") from None
    if len(data) > max_bytes:
        raise error(
            f"{what} {str(path)!r} is larger than {max_bytes} bytes; expected "
            f"{expected} of {_size(max_bytes)} at most"
        )
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise error(
            f"{what} {str(path)!r} is not UTF-8 text (byte {err.start}); expected {expected}"
        ) from None


def _size(n: int) -> str:
    return f"{n >> 20} MB" if n >= 1 << 20 else f"{n >> 10} kB"


def read_toml(path: Path | str, what: str, error: type[UsageError] = ConfigError) -> dict[str, Any]:
    """A TOML file parsed, or ``error`` naming it (see ``read_text``)."""
    text_ = read_text(path, what, error=error)
    try:
        return tomllib.loads(text_)
    except tomllib.TOMLDecodeError as err:
        raise error(f"{path}: not valid TOML: {err}") from err
