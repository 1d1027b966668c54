"""Backends: where planners fly. Found by name; optional dependencies load only when used."""

from __future__ import annotations

import importlib

_REGISTRY = {
    "embedded": "backends.embedded:EmbeddedBackend",
}


def register(name: str, entry_point: str) -> None:
    """Make ``make_backend(name)`` load ``module:Class`` on first use."""
    _REGISTRY[name] = entry_point


def backend_names() -> list[str]:
    return sorted(_REGISTRY)


def make_backend(name: str, *args, **kwargs):
    """Instantiate the backend registered as ``name``."""
    if name not in _REGISTRY:
        raise ValueError(f"unknown backend {name!r}; expected one of {backend_names()}")
    module, cls = _REGISTRY[name].split(":")
    return getattr(importlib.import_module(module), cls)(*args, **kwargs)
