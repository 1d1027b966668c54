"""The one family of value checks, the table builder and the bounded reader."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from cableload_sim import checks
from cableload_sim.errors import ConfigError, UsageError


@pytest.mark.parametrize(
    "check, good, converted",
    [
        (checks.finite, 3, 3.0),
        (checks.finite, np.float32(1.5), 1.5),
        (checks.positive, np.int64(2), 2.0),
        (checks.non_negative, 0, 0.0),
        (checks.fraction(), 1.0, 1.0),
        (checks.integer(1, 8), np.int32(8), 8),
        (checks.boolean, True, True),
        (checks.choice(("spring", "inelastic")), "spring", "spring"),
        (checks.vector(3, checks.positive), [1, 2.0, np.float64(3)], (1.0, 2.0, 3.0)),
        (checks.vector(2), np.array([0.5, -1.0]), (0.5, -1.0)),
        (checks.points, [[0, 0, 1]], ((0.0, 0.0, 1.0),)),
        (checks.interval(checks.non_negative), [0.3, 1.5], (0.3, 1.5)),
        (checks.one_or_each(checks.positive), 2, 2.0),
        (checks.one_or_each(checks.positive), [1, 2], (1.0, 2.0)),
        (checks.sequence(checks.text(), min_length=0), [], ()),
        (checks.optional(checks.positive), None, None),
        (checks.duration, 0.5, 0.5),
    ],
)
def test_a_good_value_passes_converted(check, good, converted):
    value = check("a.b", good)
    assert value == converted and type(value) is type(converted)


@pytest.mark.parametrize(
    "check, bad, message",
    [
        (checks.finite, math.nan, r"^a\.b: expected a finite number, got nan$"),
        (checks.finite, "1.0", r"^a\.b: expected a finite number, got '1\.0' \(str\)$"),
        (checks.finite, True, r"^a\.b: expected a finite number, got True \(bool\)$"),
        (checks.positive, 0.0, r"^a\.b: expected a positive number, got 0\.0$"),
        (checks.positive, -math.inf, r"expected a positive number, got -inf"),
        (checks.non_negative, -1e-9, r"expected a non-negative number, got -1e-09"),
        (checks.fraction(high_open=True), 1.0, r"expected a fraction from 0 to below 1, got 1\.0"),
        (checks.number(2, 4, unit="m"), 4.5, r"expected a number >= 2 and <= 4 \(m\), got 4\.5"),
        (checks.number(0, low_open=True), 0, r"expected a number > 0, got 0"),
        (checks.integer(1, 8), 9, r"expected an integer from 1 to 8, got 9"),
        (checks.integer(0), 1.0, r"expected an integer >= 0, got 1\.0"),
        (checks.integer(0), np.bool_(True), r"expected an integer >= 0"),
        (checks.boolean, 1, r"expected true or false, got 1"),
        (checks.choice(("a", "b")), "c", r"expected one of 'a', 'b', got 'c' \(str\)"),
        (checks.vector(3), [1, 2], r"^a\.b: expected a list of 3 numbers, got \[1, 2\]$"),
        (checks.vector(3, checks.positive), [1, 2, 0], r"^a\.b\[2\]: expected a positive number"),
        (checks.sequence(), [], r"expected a non-empty list of numbers, got \[\]"),
        (checks.interval(), [2, 1], r"expected \[low, high\] with low <= high.*got \[2, 1\]"),
        (checks.one_or_each(checks.positive), [1, -1], r"^a\.b\[1\]: expected a positive number"),
        (checks.one_or_each(checks.positive), "big", r"expected a positive number, or a non-empty"),
        (checks.text(), "", r"expected a non-empty string, got ''"),
        (checks.duration, 0, r"expected a positive number of seconds, got 0"),
    ],
)
def test_a_bad_value_is_refused_naming_path_expectation_and_value(check, bad, message):
    with pytest.raises(ConfigError, match=message):
        check("a.b", bad)


def test_a_check_raises_the_error_it_is_given():
    with pytest.raises(UsageError) as caught:
        checks.positive.raising(UsageError)("duration", -1.0)
    assert type(caught.value) is UsageError
    assert caught.value.exit_status == 2


def test_every_check_says_what_it_accepts():
    assert checks.vector(3, checks.positive).expects == "a list of 3 positive numbers"
    assert checks.integer(2, 64).expects == "an integer from 2 to 64"
    assert checks.optional(checks.positive).expects == "a positive number, or none"


@dataclasses.dataclass(frozen=True)
class _Part:
    mass: float = 1.0
    count: int = 2


def test_build_checks_every_key_and_keeps_the_defaults():
    fields = {"mass": checks.positive, "count": checks.integer(1)}
    assert checks.build(_Part, "part", {"mass": 3}, fields) == _Part(mass=3.0)
    assert checks.FIELD_CHECKS[_Part] is fields
    with pytest.raises(ConfigError, match=r"^part: unknown key 'colour'; expected one of"):
        checks.build(_Part, "part", {"colour": 1}, fields)
    with pytest.raises(ConfigError, match=r"^part\.count: expected an integer >= 1, got 0$"):
        checks.build(_Part, "part", {"count": 0}, fields)
    with pytest.raises(ConfigError, match=r"^part: expected a table, got 3$"):
        checks.build(_Part, "part", 3, fields)


def test_the_bounded_reader_refuses_what_is_not_a_small_text_file(tmp_path):
    with pytest.raises(ConfigError, match="config 'nowhere.toml' does not exist"):
        checks.read_text("nowhere.toml", "config")
    with pytest.raises(ConfigError, match="is not a regular file"):
        checks.read_text(tmp_path, "config")
    big = tmp_path / "big.toml"
    big.write_bytes(b"#" * 2049)
    with pytest.raises(ConfigError, match="is larger than 2048 bytes; expected a TOML file of 2 kB"):
        checks.read_text(big, "config", max_bytes=2048)
    latin = tmp_path / "latin.toml"
    latin.write_bytes(b"name = '\xe9'")
    with pytest.raises(ConfigError, match=r"is not UTF-8 text \(byte 8\)"):
        checks.read_text(latin, "config")
    bad = tmp_path / "bad.toml"
    bad.write_text("a = ")
    with pytest.raises(ConfigError, match="not valid TOML"):
        checks.read_toml(bad, "config")
    good = tmp_path / "good.toml"
    good.write_text("[load]\nmass = 1.5\n")
    assert checks.read_toml(good, "config") == {"load": {"mass": 1.5}}
