"""Skip or fail a test that needs something outside Python (a Debian package, a compiler, ROS).

On a developer's machine a missing requirement skips the test with its reason, which should
name what to install. In CI (the environment variable ``CI`` set and not "", "0", "false",
"no" or "off") it fails instead: there a skipped check is a check that never ran.

    from requirements import require

    require(shutil.which("g++") is not None, "needs g++: sudo apt-get install g++")

Works inside tests and fixtures, and at module level (the whole module is skipped, or fails
to collect in CI).
"""

from __future__ import annotations

import os

import pytest

_FALSE = ("", "0", "false", "no", "off")


def in_ci() -> bool:
    """Whether the environment variable ``CI`` asks for every requirement to be present."""
    return os.environ.get("CI", "").strip().lower() not in _FALSE


def require(condition: object, reason: str) -> None:
    """Nothing when ``condition`` holds; otherwise skip with ``reason``, or fail in CI."""
    if condition:
        return
    if in_ci():
        pytest.fail(
            f"{reason} (CI={os.environ.get('CI')!r}: a missing requirement fails in CI instead of skipping)",
            pytrace=False,
        )
    pytest.skip(reason, allow_module_level=True)
