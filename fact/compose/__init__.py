"""Stage 3, compose: verified kernels replace their subgraphs in the module, as custom ops behind
a guard that falls back to the original ops for any call the kernel was not verified for."""

from fact.compose.artifact import ArtifactError, Loaded, load
from fact.compose.report import ItemReport, Report
from fact.compose.rewrite import Dispatch, KernelCall, Operand
from fact.compose.specialized import Specialized
from fact.compose.synthesize import Synthesis, synthesize

__all__ = ["ArtifactError", "Dispatch", "ItemReport", "KernelCall", "Loaded", "Operand", "Report", "Specialized",
           "Synthesis", "load", "synthesize"]
