"""What the synthesis loop is asked to realize: a GEMM and the elementwise tail the pattern
table cannot serve, read off the captured graph as a frozen, picklable value."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from typing import Any

from fact.core.enums import DType, Layout, Precision
from fact.core.specs import ProblemShape
from fact.patterns.engine import precision_for, read_gemm, unaligned_extents
from fact.patterns.ops import ACTIVATIONS, LAYOUT_OPS, op_of
from fact.patterns.types import Match

# The GEMM anchors the sm90 skeleton serves: one [M, K] x [K, N] product with an [N] bias.
SKELETON_ANCHORS = frozenset({"linear"})


@dataclass(frozen=True)
class SynthesisTask:
    """A GEMM anchor plus the elementwise tail after it, with everything the prompt states.

    `subgraph` is the fx text of the replaced nodes; `module_code` the captured forward (both are
    data for the prompt, never instructions); `meaning` what the float64 reference computes.
    """

    anchor: str
    nodes: tuple[str, ...]
    output: str
    tail: tuple[str, ...]  # canonical kinds of the tail ops ("module:Hardswish", "fn:softplus")
    dtype: DType
    precision: Precision
    problem: ProblemShape
    layouts: tuple[Layout, Layout]
    operands: tuple[tuple[str, str], ...]
    has_bias: bool
    subgraph: str
    module_code: str
    meaning: str
    arch: str = "sm90"

    @property
    def id(self) -> str:
        """A name carrying what the kernel computes, unique per problem."""
        tail = "_".join(t.split(":")[-1].lower() for t in self.tail)
        p = self.problem
        return f"{self.arch}_gemm_{self.dtype.value}{'_bias' if self.has_bias else ''}_{tail}_m{p.m}n{p.n}k{p.k}"

    @property
    def key(self) -> str:
        blob = json.dumps({k: v for k, v in asdict(self).items() if k != "module_code"}, sort_keys=True, default=str)
        return hashlib.sha256(blob.encode()).hexdigest()

    def to_match(self) -> Match:
        """The task as a pattern match, for the registry and the report."""
        return Match(pattern="llm_gemm_epilogue", family=_family(), anchor=self.anchor, nodes=self.nodes,
                     output=self.output, dtype=self.dtype, precision=self.precision, realization="llm",
                     problem=self.problem, layouts=self.layouts,
                     epilogue=(*(("bias",) if self.has_bias else ()), *self.tail), operands=self.operands)


def _family() -> Any:
    from fact.core.enums import OpFamily

    return OpFamily.GEMM_EPILOGUE


def _is_unary_elementwise(node: Any, root: Any) -> str | None:
    """The canonical kind of a one-tensor, shape-keeping node the pattern table does not absorb."""
    op = op_of(node, root)
    if op is None or len(op.tensors) != 1 or op.scalars:
        return None
    kind = op.kind
    base = kind.split(":")[-1].lower()
    if kind in LAYOUT_OPS or base in ACTIVATIONS or base in ("gelu", "dropout", "identity"):
        return None
    if base.endswith("_active"):  # a dropout or RReLU drawing at random in training: no kernel verifies
        return None
    spec, src = node.meta.get("fact_spec"), op.tensors[0].meta.get("fact_spec")
    if spec is None or src is None or spec.shape != src.shape:
        return None
    return kind if _at_defaults(node, root) else None


def _at_defaults(node: Any, root: Any) -> bool:
    """Whether the op is its kind's default form, which the kind name alone states: a module with
    no tensors of its own whose settings are its class's defaults, or a call with the tensor alone.
    Anything else (nn.ELU(alpha=3), F.softplus(y, beta=3)) is not a task: the kind would misstate it."""
    if node.op == "call_module":
        module = root.get_submodule(str(node.target))
        if any(True for _ in module.parameters()) or any(True for _ in module.buffers()):
            return False
        try:
            default = type(module)()
        except Exception:  # a class that needs arguments: its settings are not the kind's
            return False
        return module.extra_repr() == default.extra_repr() and vars(module).keys() == vars(default).keys()
    extra = [a for a in node.args[1:]] + [v for k, v in node.kwargs.items() if k != "inplace"]
    return not extra


def find_tasks(captured: Any, arch: str = "sm90", precision_policy: str = "auto") -> list[SynthesisTask]:
    """GEMM anchors whose only user is an elementwise op outside the pattern table."""
    root = captured.graph_module
    tasks = []
    for node in captured.nodes:
        op = op_of(node, root)
        if op is None or op.kind not in SKELETON_ANCHORS or len(node.users) != 1:
            continue
        user = next(iter(node.users))
        tail = _is_unary_elementwise(user, root)
        if tail is None:
            continue
        task = task_for(captured, node.name, (user.name,), arch=arch, precision_policy=precision_policy)
        if isinstance(task, SynthesisTask):
            tasks.append(task)
    return tasks


def task_for(captured: Any, anchor: str, tail_nodes: tuple[str, ...], *, arch: str = "sm90",
             precision_policy: str = "auto") -> SynthesisTask | str:
    """The task for `anchor` followed by `tail_nodes` (in graph order), or why there is none."""
    root = captured.graph_module
    nodes = {n.name: n for n in root.graph.nodes}
    if anchor not in nodes or any(t not in nodes for t in tail_nodes):
        return "unknown node"
    op = op_of(nodes[anchor], root)
    if op is None or op.kind not in SKELETON_ANCHORS:
        return f"{anchor} is not a GEMM anchor the skeleton serves ({sorted(SKELETON_ANCHORS)})"
    gemm = read_gemm(op, root)
    if isinstance(gemm, str):
        return gemm
    if gemm.problem.batch != 1:
        return "batched problems are outside the skeleton"
    if gemm.dtype not in (DType.BF16, DType.F16):
        return f"{gemm.dtype.value}: the sm90 skeleton is for 16-bit operands"
    if gemm.layouts != (Layout.ROW, Layout.COL):
        return "the skeleton takes A row-major and B column-major (a linear layer's weight)"
    prec = precision_for(gemm.dtype, precision_policy)
    odd = unaligned_extents(gemm, prec)
    if odd:
        return f"unaligned ({', '.join(odd)}): the skeleton's kernels are verified on aligned problems only"
    kinds = []
    for t in tail_nodes:
        kind = _is_unary_elementwise(nodes[t], root)
        if kind is None:
            return f"{t} is not a one-tensor elementwise op outside the pattern table"
        kinds.append(kind)
    has_bias = any(role == "bias" for role, _ in gemm.operands)
    lines = [f"{n} = {nodes[n].format_node()}" for n in (anchor, *tail_nodes)]
    body = "sum_k A[m, k] * W[n, k]" + (" + bias[n]" if has_bias else "")
    for k in kinds:
        body = f"{k.split(':')[-1]}({body})"
    meaning = (f"out[m, n] = {body} for m < {gemm.problem.m}, n < {gemm.problem.n}, k < {gemm.problem.k}; "
               "the reference is the captured subgraph itself re-run in float64")
    return SynthesisTask(anchor=anchor, nodes=(anchor, *tail_nodes), output=tail_nodes[-1] if tail_nodes else anchor,
                         tail=tuple(kinds), dtype=gemm.dtype, precision=prec, problem=gemm.problem,
                         layouts=gemm.layouts, operands=gemm.operands, has_bias=has_bias, subgraph="\n".join(lines),
                         module_code=str(root.code).strip(), meaning=meaning, arch=arch)


__all__ = ["SKELETON_ANCHORS", "SynthesisTask", "find_tasks", "task_for"]
