"""The benchmark record's comparison (benchmarks/compare.py): what counts as a regression."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("bench_compare", ROOT / "benchmarks" / "compare.py")
compare = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(compare)


def _stats(best: float, median: float | None = None) -> dict:
    return {"min": best, "median": best if median is None else median}


def test_a_best_time_over_the_threshold_is_a_suspect_and_a_noisy_median_is_not():
    baseline = {"sim": _stats(1.0), "teacher": _stats(3.0), "student": _stats(0.5)}
    current = {
        "sim": _stats(1.21),  # 21 % slower at its best: a suspect
        "teacher": _stats(3.5, median=9.0),  # 17 %: within; its median's swing does not count
        "student": _stats(0.4),  # faster
        "new": _stats(2.0),  # no baseline yet: never a regression
    }
    assert compare.regressions(current, baseline, 0.2) == ["sim"]
    assert compare.regressions(current, baseline, 0.1) == ["sim", "teacher"]
    shown = compare.table(current, baseline)
    assert "1.21" in shown and "new" in shown


def test_the_stored_baseline_has_every_benchmark_of_the_suite():
    """The baseline in the repo is a pytest-benchmark report with a best time for each
    benchmark function of benchmarks/."""
    stored = compare.stats_of(json.loads((ROOT / "benchmarks/baselines/python.json").read_text()))
    functions = {name.split("[")[0] for name in stored}
    for path in (ROOT / "benchmarks").glob("test_*.py"):
        for line in path.read_text().splitlines():
            if line.startswith("def test_"):
                assert line[4:].split("(")[0] in functions, (path.name, line)
    assert all(stats["min"] > 0.0 for stats in stored.values())


def test_a_bad_threshold_is_refused(capsys):
    with pytest.raises(SystemExit):
        compare.main(["--threshold", "-1"])
    assert "--threshold: expected a fraction above 0" in capsys.readouterr().err
