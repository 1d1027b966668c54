"""The ``cableload`` command (``main``), its speed benchmarks (``bench``) and the generated
reference pages (``reference_docs``). Heavy modules are imported inside each command, so
``cableload --help`` is instant.

The top layer of the project. May import: everything. Imported by: its own ``__main__`` only.
"""

from cableload_sim.cli.main import build_parser, main

__all__ = ["build_parser", "main"]
