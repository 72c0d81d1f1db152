"""fact as a torch.compile backend: `torch.compile(model, backend="fact")`.

Found by name through the `torch_dynamo_backends` entry point (no import of fact needed). Each
graph Dynamo hands over is synthesized like any module: verified kernels where they fit, the
original ops elsewhere. Builds are content-addressed, so compiling the same model again builds
nothing.
"""

from __future__ import annotations

import logging
from typing import Any

log = logging.getLogger(__name__)

# The report of every graph this process compiled, newest last (for inspection and tests).
REPORTS: list[Any] = []


def fact_backend(gm: Any, example_inputs: list[Any], **options: Any) -> Any:
    """A Dynamo backend: returns a callable running `gm` with fact's verified kernels.

    Args:
        gm: the torch.fx.GraphModule Dynamo captured.
        example_inputs: its example inputs.
        **options: passed to fact.synthesize (e.g. arch, precision), from torch.compile(options=...).
    """
    from fact.compose.synthesize import synthesize
    from fact.core.errors import FactError

    try:
        synthesis = synthesize(gm, list(example_inputs), benchmark=False, **options)
    except FactError as exc:  # a graph fact cannot read runs as Dynamo captured it
        log.warning("fact backend: %s; the graph runs its original ops", exc)
        return gm.forward
    except Exception as exc:  # never fail the user's compile: the original ops are always right
        log.warning("fact backend: unexpected %s: %s; the graph runs its original ops", type(exc).__name__, exc)
        return gm.forward
    REPORTS.append(synthesis.report)
    return synthesis.module.forward
