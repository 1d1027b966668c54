"""The paper's values as data: its eleven tables (``paper_table``, ``paper_tables``) and the times
and rates its text states outside them (``paper_timings``).

Each table is one TOML file in the ``paper`` folder beside this module (``table_01.toml`` to
``table_11.toml``, transcribed by hand, format in ``README.md``); ``timings.toml`` holds the
times, each with the sentence it is quoted from. A row carries the fields that say which case it
is (``case``: the paper's row label, ``planner``, ``policy``, ``trajectory``, sizes ...) and one
value per column of the table, in the units of ``PaperTable.units``. Where the paper prints a
mark instead of a number (Table 6's ✗), the value is a ``Mark``.

A file that lacks a required key or holds a value of the wrong kind raises ``ConfigError``
naming the file and key; an unknown table number, or a row asked for that the table does not
hold, raises ``UsageError``.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass, field
from importlib import resources
from typing import Any, TypeAlias

from cableload_sim import checks
from cableload_sim.errors import ConfigError, UsageError

TABLES = range(1, 12)
"""The numbers of the paper's tables."""

TIMINGS_FILE = "timings.toml"
"""The file of the times and rates the text states outside the tables."""


class Mark(enum.Enum):
    """An entry the paper prints instead of a number."""

    STOPPED = "stopped"
    """Table 6's ✗: the inter-agent distance fell below 0.4 m and the experiment was stopped."""


RowValue: TypeAlias = str | int | float | bool | tuple[float, ...] | Mark
"""One entry of a row: a field naming the case (text, number, true or false), or a value of a
column (a number, a list of numbers such as a pose's [x, y, z], or a ``Mark``)."""

RELATIONS = ("=", "<", "<=", "~")
"""How the text gives a number: as it is, as an upper bound (strict or not), or approximately."""


@dataclass(frozen=True)
class PaperValue:
    """One number the paper states in its text, with the sentence it comes from."""

    name: str
    """The key naming it in its file (``teacher_planning_time``)."""
    value: int | float
    """The number as printed, in ``unit``."""
    unit: str
    section: str
    """Where the paper states it: a section number ("6.7"), "Abstract" or a table."""
    sentence: str
    """The paper's sentence, quoted."""
    relation: str = "="
    """One of ``RELATIONS``: "<" for "under two hours", "~" for "approximately" ..."""
    note: str = ""
    """What the sentence alone does not say (another place stating it, a disagreement)."""


@dataclass(frozen=True)
class PaperTable:
    """One table of the paper, one row per case and measured quantity as in its file."""

    number: int
    caption: str
    """The paper's caption, verbatim."""
    units: dict[str, str]
    """The unit of each column and of each numeric field of the rows ("m", "deg", "min")."""
    columns: tuple[str, ...]
    """The names of the measured values every row holds."""
    rows: tuple[dict[str, RowValue], ...]
    printed_rows: int
    """How many body rows the paper prints (a table printed with a pair of columns per policy
    has one row here per printed row and policy)."""
    decimals: int
    """The decimals the paper prints its values with."""
    note: str = ""
    """What the table alone does not say, and how its layout was read."""
    stated: dict[str, PaperValue] = field(default_factory=dict)
    """Numbers the text states about this table (means, the conditions of its rows)."""

    def select(self, **fields: RowValue) -> tuple[dict[str, RowValue], ...]:
        """The rows whose entries equal all of ``fields`` (``planner="student"``)."""
        return tuple(row for row in self.rows if all(row.get(k) == v for k, v in fields.items()))

    def row(self, **fields: RowValue) -> dict[str, RowValue]:
        """The one row whose entries equal all of ``fields``, or ``UsageError``."""
        found = self.select(**fields)
        if len(found) != 1:
            raise UsageError(
                f"paper table {self.number}: {len(found)} rows match {fields!r}; expected exactly one"
            )
        return found[0]


def paper_table(number: int) -> PaperTable:
    """Table ``number`` (1 to 11) of the paper, read from its file."""
    number = int(checks.integer(TABLES.start, TABLES.stop - 1).raising(UsageError)("paper table", number))
    name = f"table_{number:02d}.toml"
    return _table(name, _read(name), number)


def paper_tables() -> dict[int, PaperTable]:
    """All of the paper's tables, by number."""
    return {number: paper_table(number) for number in TABLES}


def paper_timings() -> dict[str, PaperValue]:
    """The times and rates the paper's text states outside its tables, by name."""
    data = _read(TIMINGS_FILE)
    return {key: _value(f"{TIMINGS_FILE}.{key}", key, value) for key, value in data.items()}


# ---------------------------------------------------------------------------------------------
# Reading and checking the files


_TABLE_REQUIRED = ("table", "caption", "printed_rows", "decimals", "units", "columns", "rows")
_TABLE_OPTIONAL = ("note", "stated")
_VALUE_REQUIRED = ("value", "unit", "section", "sentence")
_VALUE_OPTIONAL = ("relation", "note")

_TEXT = checks.text()
_COLUMNS = checks.sequence(checks.text())
_NUMBERS = checks.sequence(checks.finite)


def _read(file_name: str) -> dict[str, Any]:
    """A file of the ``paper`` folder parsed, through a real path even from a zipped install."""
    source = resources.files("cableload_sim.reproduce").joinpath("paper").joinpath(file_name)
    with resources.as_file(source) as path:
        return checks.read_toml(path, "paper data file")


def _require_keys(path: str, value: Any, required: Sequence[str], optional: Sequence[str]) -> None:
    """``value`` is a table holding every key of ``required`` and no key outside ``optional``."""
    checks.table(path, value, (*required, *optional))
    _no_missing(path, [key for key in required if key not in value], f"the keys {list(required)}")


def _no_missing(path: str, missing: Sequence[str], expects: str) -> None:
    """Raise ``ConfigError`` naming the first of ``missing`` and what was expected, if any."""
    if missing:
        raise ConfigError(f"{path}: missing key {missing[0]!r}; expected {expects}")


def _text(path: str, value: Any) -> str:
    return str(_TEXT(path, value))


def _number(path: str, value: Any) -> int | float:
    """An integer kept whole (a count of rounds), any other finite number as a float."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    return float(checks.finite(path, value))


def _table(name: str, data: dict[str, Any], number: int) -> PaperTable:
    _require_keys(name, data, _TABLE_REQUIRED, _TABLE_OPTIONAL)
    checks.require(
        data["table"] == number, f"{name}.table", f"{number}, the number in its name", data["table"]
    )
    columns = tuple(str(column) for column in _COLUMNS(f"{name}.columns", data["columns"]))
    rows = data["rows"]
    checks.require(
        isinstance(rows, list) and len(rows) > 0, f"{name}.rows", "a non-empty list of tables", rows
    )
    converted = tuple(_row(f"{name}.rows[{k}]", row, columns) for k, row in enumerate(rows))
    stated = data.get("stated", {})
    checks.require(isinstance(stated, dict), f"{name}.stated", "a table of stated values", stated)
    return PaperTable(
        number=number,
        caption=_text(f"{name}.caption", data["caption"]),
        units=_units(f"{name}.units", data["units"], columns, converted),
        columns=columns,
        rows=converted,
        printed_rows=int(checks.integer(1)(f"{name}.printed_rows", data["printed_rows"])),
        decimals=int(checks.integer(0, 6)(f"{name}.decimals", data["decimals"])),
        note=str(checks.text(allow_empty=True)(f"{name}.note", data.get("note", ""))),
        stated={key: _value(f"{name}.stated.{key}", key, value) for key, value in stated.items()},
    )


def _row(path: str, value: Any, columns: tuple[str, ...]) -> dict[str, RowValue]:
    """A row: its ``case``, the fields naming it, and one value per column."""
    checks.require(isinstance(value, dict), path, "a table (a [[rows]] entry)", value)
    missing = [key for key in ("case", *columns) if key not in value]
    _no_missing(path, missing, f"'case' and a value for each column of {list(columns)}")
    return {
        key: _cell(f"{path}.{key}", entry) if key in columns else _field(f"{path}.{key}", entry)
        for key, entry in value.items()
    }


def _cell(path: str, value: Any) -> RowValue:
    """A column's value: a number, a list of numbers, or the name of a ``Mark``."""
    if isinstance(value, str):
        marks = {mark.value: mark for mark in Mark}
        checks.require(value in marks, path, f"a number or one of the marks {sorted(marks)}", value)
        return marks[value]
    if isinstance(value, list):
        return tuple(float(x) for x in _NUMBERS(path, value))
    return _number(path, value)


def _field(path: str, value: Any) -> RowValue:
    """A field naming the case: text, a number, or true or false."""
    checks.require(
        isinstance(value, (str, int, float, bool)), path, "a string, a number, or true or false", value
    )
    if isinstance(value, (str, bool)):
        return value
    return _number(path, value)


def _units(
    path: str, value: Any, columns: tuple[str, ...], rows: tuple[dict[str, RowValue], ...]
) -> dict[str, str]:
    """The units: one for every column, the others for numeric fields the rows hold."""
    fields = {key for row in rows for key in row}
    units = checks.table(path, value, fields)
    missing = [column for column in columns if column not in units]
    _no_missing(path, missing, f"a unit for every column of {list(columns)}")
    return {key: _text(f"{path}.{key}", unit) for key, unit in units.items()}


def _value(path: str, name: str, value: Any) -> PaperValue:
    _require_keys(path, value, _VALUE_REQUIRED, _VALUE_OPTIONAL)
    return PaperValue(
        name=name,
        value=_number(f"{path}.value", value["value"]),
        unit=_text(f"{path}.unit", value["unit"]),
        section=_text(f"{path}.section", value["section"]),
        sentence=_text(f"{path}.sentence", value["sentence"]),
        relation=str(checks.choice(RELATIONS)(f"{path}.relation", value.get("relation", "="))),
        note=str(checks.text(allow_empty=True)(f"{path}.note", value.get("note", ""))),
    )
