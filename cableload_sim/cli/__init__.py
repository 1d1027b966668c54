"""The ``cableload`` command (``main``), its speed benchmarks (``bench``) and the generated
reference pages (``reference_docs``).

The top layer of the project: it may import everything, and nothing but ``__main__`` imports
it. Heavy modules are imported inside each command, so ``cableload --help`` is instant.
"""

from cableload_sim.cli.main import build_parser, main

__all__ = ["build_parser", "main"]
