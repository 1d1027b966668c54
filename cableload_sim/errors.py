"""The project's error types: what the command line reports in one line, and with which status.

A ``CableloadError`` is an expected failure with a message that names the offending value or
file and what was expected; the command line prints it without a traceback. Anything else
(``ValueError`` raised deep in numerical code, an ``AssertionError``) is a bug and keeps its
traceback, so a numerical defect is never reported as the user's mistake. An ``OSError`` that
reaches the command line (a full disk, a folder that cannot be written) is reported in one line
naming the file, with exit status 1.
"""

from __future__ import annotations


class CableloadError(Exception):
    """An expected run-time failure (exit status 1)."""

    exit_status = 1


class UsageError(CableloadError, ValueError):
    """A bad option, config value or argument given by the user (exit status 2)."""

    exit_status = 2


class FileContentError(CableloadError, ValueError):
    """A file that exists but is not what it must be: corrupted, truncated, of another format,
    or refused because loading it could run code (exit status 1)."""


class InputMissingError(CableloadError, FileNotFoundError):
    """An input file or folder the user named does not exist (exit status 2)."""

    exit_status = 2


class OutputExistsError(CableloadError, FileExistsError):
    """An output the user named exists already and may not be replaced (exit status 2)."""

    exit_status = 2


class ResourceError(CableloadError):
    """A request larger than this machine can serve (memory, disk, time); the message says how
    much it would need (exit status 1)."""


class ConfigError(UsageError):
    """A configuration value is missing, unknown, of the wrong type or out of range (exit
    status 2)."""
