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

# The report of every graph this process compiled, newest last (for inspection and tests), and the
# syntheses themselves (their composed modules count kernel calls and fallbacks).
REPORTS: list[Any] = []
SYNTHESES: list[Any] = []


def fact_backend(gm: Any, example_inputs: list[Any], **options: Any) -> Any:
    """A Dynamo backend: returns a callable running `gm` with fact's verified kernels.

    Args:
        gm: the torch.fx.GraphModule Dynamo captured.
        example_inputs: its example inputs.
        **options: passed to fact.synthesize (e.g. arch, precision), from torch.compile(options=...).
    """
    from fact.compose.synthesize import synthesize
    from fact.core.errors import FactError

    if not _computes_in_training_mode(gm):
        gm.eval()  # Dynamo hands over a module in training mode whatever the user's mode: the ops say which
    options = {**(options.pop("options", None) or {}), **options}  # torch.compile(options={...}) arrives as one
    try:
        synthesis = synthesize(gm, list(example_inputs), benchmark=False, **options)
    except FactError as exc:  # a graph fact cannot read runs as Dynamo captured it
        log.warning("fact backend: %s; the graph runs its original ops", exc)
        return gm.forward
    except Exception as exc:  # never fail the user's compile: the original ops are always right
        log.warning("fact backend: unexpected %s: %s; the graph runs its original ops", type(exc).__name__, exc)
        return gm.forward
    REPORTS.append(synthesis.report)
    SYNTHESES.append(synthesis)
    return synthesis.module.forward


def _computes_in_training_mode(gm: Any) -> bool:
    """Whether a Dynamo graph computes as in training: Dynamo writes the module's mode into each op
    that depends on it (dropout, batch norm) as its `training` argument."""
    import torch
    import torch.nn.functional as F

    # (position of the `training` argument, its default: F.alpha_dropout, F.feature_alpha_dropout and
    # F.rrelu default to False, as fact.patterns.ops reads them)
    flags: dict[Any, tuple[int, bool]] = {
        **{f: (2, True) for f in (F.dropout, F.dropout1d, F.dropout2d, F.dropout3d)},
        **{f: (2, False) for f in (F.alpha_dropout, F.feature_alpha_dropout)}, F.rrelu: (3, False), torch.rrelu: (3, False),
        **{f: (2, True) for f in (torch.dropout, torch.feature_dropout, torch.alpha_dropout,
                                  torch.feature_alpha_dropout)},
        F.batch_norm: (5, False), F.instance_norm: (5, True)}
    for node in gm.graph.nodes:
        if node.op != "call_function" or node.target not in flags:
            continue
        position, default = flags[node.target]
        flag = node.kwargs.get("training", node.kwargs.get("train"))
        if flag is None:
            flag = node.args[position] if len(node.args) > position else default
        if flag is not False:
            return True
    return False
