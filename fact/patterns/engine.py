"""Matching the pattern table against a captured graph."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from fact.core.enums import DType, Layout, Precision
from fact.core.specs import ProblemShape, TensorSpec
from fact.patterns import table
from fact.patterns.attention import AttentionFound, match_sdpa, match_softmax
from fact.patterns.ops import _KEYWORD_OPERANDS, GEMM_OPS, LAYOUT_OPS, Op, op_of
from fact.patterns.spelled import spelled_activation
from fact.patterns.types import Group, Match, Rejection

_PASS_THROUGH = frozenset({"dropout", "identity"})


@dataclass
class MatchResult:
    matches: list[Match] = field(default_factory=list)
    rejections: list[Rejection] = field(default_factory=list)
    groups: list[Group] = field(default_factory=list)


def precision_for(dtype: DType, policy: str = "auto") -> Precision:
    """What arithmetic the original computation uses (auto) or the caller allows."""
    if dtype is DType.BF16:
        return Precision.BF16
    if dtype is DType.F16:
        return Precision.FP16
    if policy != "auto":
        return Precision(policy)
    try:
        import torch

        return Precision.TF32 if torch.backends.cuda.matmul.allow_tf32 else Precision.EXACT
    except ImportError:
        return Precision.EXACT


@dataclass(frozen=True)
class GemmReading:
    """A GEMM anchor read off a node: problem, operand layouts, dtype, and where each operand comes
    from (role -> reference, see Match.operands)."""

    problem: ProblemShape
    layouts: tuple[Layout, Layout]
    dtype: DType
    operands: tuple[tuple[str, str], ...]

    @property
    def bias(self) -> bool:
        return any(role == "bias" for role, _ in self.operands)

    @property
    def residual(self) -> bool:
        return any(role == "residual" for role, _ in self.operands)


def _spec(n: Any) -> TensorSpec | None:
    return n.meta.get("fact_spec") if hasattr(n, "meta") else None


def _batched_layout(spec: TensorSpec) -> Layout | None:
    """The layout of a [..., M, K] operand as the kernel receives it: flattened to one batch mode the
    way composition flattens it (`reshape`), which copies into a row-major tensor when the leading
    dims share no single stride (heads split out of a fused projection)."""
    if len(spec.shape) <= 3:
        return spec.matrix_layout()
    import torch

    flat = torch.empty_strided(spec.shape, spec.strides, device="meta").reshape(-1, *spec.shape[-2:])
    return TensorSpec(tuple(flat.shape), spec.dtype, tuple(flat.stride())).matrix_layout()


def _layout_2d(spec: TensorSpec, flatten: bool) -> Layout | None:
    if flatten and len(spec.shape) > 2:
        return Layout.ROW if spec.is_contiguous else None
    return spec.matrix_layout()


def _param_dtype(op: Op, root: Any) -> str | None:
    """The dtype of an nn.Linear's weight, for the operand dtype check."""
    if op.node.op != "call_module":
        return None
    weight = getattr(root.get_submodule(op.node.target), "weight", None)
    return None if weight is None else str(weight.dtype).removeprefix("torch.")


def read_gemm(op: Op, root: Any = None) -> GemmReading | str:
    """The GEMM a node computes, or the reason it cannot be served.

    Args:
        op: the node in the canonical vocabulary (a GEMM_OPS kind).
        root: the GraphModule owning the node (to read a module's weight dtype).
    """
    specs = [_spec(t) for t in op.tensors]
    out = _spec(op.node)
    if out is None or any(s is None for s in specs):
        known = {d.value for d in DType}
        bad = next((b for t in (op.node, *op.tensors) if (b := t.meta.get("fact_dtype")) and b not in known), None)
        return f"unsupported dtype {bad}" if bad else "no shape information"
    for t in (op.node, *op.tensors):
        bad = t.meta.get("fact_dtype")
        if bad is not None and DType(bad) not in table.SUPPORTED_DTYPES:
            return f"unsupported dtype {DType(bad).name.lower()}: fact's kernels cover float32, bfloat16 and float16"
    dtypes = {s.dtype.torch_name for s in specs if s is not None}
    weight_dtype = _param_dtype(op, root) if root is not None else None
    if weight_dtype is not None:
        dtypes.add(weight_dtype)
    if len(dtypes) > 1:
        return (f"operands of different dtypes ({', '.join(sorted(dtypes))}): PyTorch itself rejects this "
                "GEMM; give inputs of the module's dtype")
    if any(s is not None and s.numel == 0 for s in (out, *specs)):
        return "an empty operand or output (a zero extent): nothing for a kernel to compute, it stays in PyTorch"
    kind = op.kind
    known = set(_KEYWORD_OPERANDS.get(kind, ()))
    if any(hasattr(v, "op") for name, v in op.node.kwargs.items() if name not in known):
        return "an operand passed by a keyword fact does not read (out=, ...)"
    refs = [t.name for t in op.tensors]
    if kind == "linear":
        x = specs[0]
        assert x is not None
        layout_b = Layout.COL  # an nn.Linear's own weight: [N, K] row-major is B = W^T column-major
        if "weight_shape" in op.attrs:
            n, k = op.attrs["weight_shape"]
            target = op.node.target
            operands = [("a", refs[0]), ("w", f"param:{target}.weight")]
            if op.attrs["has_bias"]:
                operands.append(("bias", f"param:{target}.bias"))
        else:
            w = specs[1] if len(specs) > 1 else None
            if w is None or len(w.shape) != 2:
                return "linear without a 2-D weight operand"
            n, k = w.shape
            stored = w.matrix_layout()  # a transposed view (tied weights) makes B row-major
            if stored is None:
                return "the weight is neither row- nor column-major"
            layout_b = Layout.COL if stored is Layout.ROW else Layout.ROW
            operands = list(zip(("a", "w", "bias"), refs, strict=False))
        m = x.numel // max(k, 1)
        a = _layout_2d(x, flatten=True)
        if a is None:
            return (f"the activation operand {tuple(x.shape)} (strides {tuple(x.strides)}) is not one [M, K] matrix: its "
                    "leading dimensions do not fold into one stride (a transposed batch, as MultiheadAttention's "
                    "batch_first makes, would need a copy)")
        return GemmReading(ProblemShape(m, n, k), (a, layout_b), x.dtype, tuple(operands))
    if len(specs) < 2:
        return f"{kind} with fewer than two tensor operands"
    if kind in ("mm", "addmm"):
        a_spec, b_spec = specs[-2], specs[-1]
        assert a_spec is not None and b_spec is not None
        (m, k), (_, n) = a_spec.shape, b_spec.shape
        la, lb = a_spec.matrix_layout(), b_spec.matrix_layout()
        if la is None or lb is None:
            return "an operand is neither row- nor column-major"
        if kind == "addmm" and (op.attrs.get("beta", 1) != 1 or op.attrs.get("alpha", 1) != 1):
            return "addmm with alpha or beta other than 1: no pattern reads scaled addmm"
        operands = [("a", refs[-2]), ("b", refs[-1])]
        if kind == "addmm":
            role = _added_role(specs[0], (m, n))
            if role is None:
                return _unread_add(kind, specs[0], (m, n))
            operands.append((role, refs[0]))
        return GemmReading(ProblemShape(m, n, k), (la, lb), a_spec.dtype, tuple(operands))
    if kind in ("bmm", "baddbmm", "matmul"):
        a_spec, b_spec = specs[-2], specs[-1]
        assert a_spec is not None and b_spec is not None
        ra, rb = len(a_spec.shape), len(b_spec.shape)
        if ra < 2 or rb < 2:
            return "matrix-vector product (rank-1 operand): no GEMM pattern"
        if rb == 2:  # N-D x 2-D: flatten the leading dims into M
            k, n = b_spec.shape
            m = a_spec.numel // k
            la, lb = _layout_2d(a_spec, flatten=True), b_spec.matrix_layout()
            if la is None or lb is None:
                return "an operand is neither row- nor column-major"
            return GemmReading(ProblemShape(m, n, k), (la, lb), a_spec.dtype, (("a", refs[-2]), ("b", refs[-1])))
        if a_spec.shape[:-2] != b_spec.shape[:-2]:
            return f"broadcast batched matmul {a_spec.shape} x {b_spec.shape}: no batched pattern"
        *lead, m, k = a_spec.shape
        n = b_spec.shape[-1]
        batch = 1
        for d in lead:
            batch *= d
        la, lb = _batched_layout(a_spec), _batched_layout(b_spec)
        if la is None or lb is None:
            return "an operand is neither row- nor column-major"
        if kind == "baddbmm" and (op.attrs.get("beta", 1) != 1 or op.attrs.get("alpha", 1) != 1):
            return "baddbmm with alpha or beta other than 1: no pattern reads scaled baddbmm"
        operands = [("a", refs[-2]), ("b", refs[-1])]
        if kind == "baddbmm":
            role = _added_role(specs[0], (*lead, m, n))
            if role is None:
                return _unread_add(kind, specs[0], (*lead, m, n))
            operands.append((role, refs[0]))
        return GemmReading(ProblemShape(m, n, k, batch), (la, lb), a_spec.dtype, tuple(operands))
    return f"no GEMM reading for {kind}"


def _added_role(spec: TensorSpec | None, out: tuple[int, ...]) -> str | None:
    """What the tensor addmm/baddbmm adds to the product is to a kernel: a bias (one row of N, broadcast
    over the rows) or a residual (the output's own shape); None for any other broadcast."""
    assert spec is not None
    if tuple(spec.shape) == out:
        return "residual"
    if spec.shape[-1:] == out[-1:] and spec.numel == out[-1]:
        return "bias"
    return None


def _unread_add(kind: str, spec: TensorSpec | None, out: tuple[int, ...]) -> str:
    assert spec is not None
    return (f"{kind} adding a {list(spec.shape)} tensor to a {list(out)} product: an epilogue reads a bias "
            f"of [{out[-1]}] or a residual of the output's shape, not this broadcast")


def contiguous_extents(g: GemmReading) -> tuple[tuple[str, int], ...]:
    """The extent each operand is contiguous along (what vector and TMA alignment apply to):
    A's K if row-major else M, B's N if row-major else K, and the (row-major) output's N."""
    la, lb = g.layouts
    p = g.problem
    return ((("K", p.k) if la is Layout.ROW else ("M", p.m)),
            (("N", p.n) if lb is Layout.ROW else ("K", p.k)), ("N", p.n))


def unaligned_extents(g: GemmReading, precision: Precision) -> list[str]:
    """The operands' contiguous extents that are not whole 16-byte accesses, e.g. 'A along K=2949'."""
    need = table.ALIGNMENT[DType.TF32] if precision is Precision.TF32 else table.ALIGNMENT[g.dtype]
    return [f"{operand} along {name}={extent}"
            for operand, (name, extent) in zip(("A", "B", "the output"), contiguous_extents(g), strict=True)
            if extent % need]


def staging_note(g: GemmReading, precision: Precision) -> str | None:
    """What the kernel's binding does with operands whose contiguous extents are not whole 16-byte
    accesses (it stages them into zero-padded aligned copies in every call), or None."""
    odd = unaligned_extents(g, precision)
    if not odd:
        return None
    return (f"unaligned ({', '.join(odd)}): each call stages the operands into zero-padded aligned copies, "
            "which count in the kernel's time")


def _classify_binary(op: Op, current: Any, out: TensorSpec) -> str | None:
    others = [t for t in op.tensors if t is not current]
    if op.kind == "mul":
        return "scale" if not others and len(op.scalars) == 1 else None
    if op.kind == "div":
        # only y / c is a scale: c / y is a reciprocal, and a rounding mode is not a scale
        first = op.node.args[0] if op.node.args else None
        plain = op.attrs.get("rounding_mode") is None
        # y / 0 is inf or nan, not the scale 1 / 0 a kernel could carry
        finite = len(op.scalars) == 1 and op.scalars[0] != 0 and math.isfinite(1.0 / op.scalars[0])
        return "scale" if not others and finite and first is current and plain else None
    if op.kind != "add" or len(others) != 1 or op.attrs.get("alpha", 1) != 1:  # torch.add(x, y, alpha=2)
        return None
    other = _spec(others[0])
    if other is None or other.dtype != out.dtype:  # another dtype promotes the result: not an epilogue
        return None
    if other.shape == out.shape:
        return "residual"
    if other.shape[-1:] == out.shape[-1:] and other.numel == out.shape[-1]:
        return "bias"
    return None


def _fits(steps: list[str], step: str) -> bool:
    if len(steps) >= table.MAX_EPILOGUE_STEPS:
        return False
    group = "activation" if step in table.ACTIVATION_STEPS else step
    used = sum(1 for s in steps if ("activation" if s in table.ACTIVATION_STEPS else s) == group)
    return used < table.EPILOGUE_CAPACITY.get(group, 1)


def _step_args(op: Op, step: str) -> tuple[float | None, float | None]:
    """The constants a step carries into the kernel."""
    if step == "scale":
        s = op.scalars[0]
        return (s if op.kind == "mul" else 1.0 / s, None)
    if step == "leaky_relu":
        return (float(op.attrs.get("negative_slope", 0.01)), None)
    if step == "clamp":
        lo, hi = op.attrs.get("min"), op.attrs.get("max")
        if op.kind == "hardtanh":
            lo = -1.0 if lo is None else lo
            hi = 1.0 if hi is None else hi
        return (None if lo is None else float(lo), None if hi is None else float(hi))
    return (None, None)


def _absorb_spelled(current: Any, root: Any, steps: list[str], args: list[tuple[float | None, float | None]],
                    nodes: list[Any]) -> Any | None:
    """Absorb an activation written out as elementwise ops after `current`; its last node, or None."""
    spelled = spelled_activation(current, root)
    if not spelled or not _fits(steps, spelled[0]):
        return None
    steps.append(spelled[0])
    args.append((None, None))
    nodes += spelled[1]
    return spelled[1][-1]


def _numeric_bounds(op: Op) -> bool:
    return all(isinstance(op.attrs.get(k), (int, float, type(None))) for k in ("min", "max"))


def _epilogue(anchor: Any, root: Any, steps: list[str], args: list[tuple[float | None, float | None]],
              operands: list[tuple[str, str]], covered: set[Any]) -> tuple[list[str], list[Any], Any]:
    """Absorb the elementwise chain after a GEMM; returns (steps, nodes, last node), fills `args`
    with each step's constants and `operands` with the tensors bias and residual steps read. A node
    another match already owns ends the chain."""
    out = _spec(anchor)
    nodes: list[Any] = []
    current = anchor
    while out is not None:
        users = list(current.users)
        if len(users) > 1:
            absorbed = _absorb_spelled(current, root, steps, args, nodes)
            if absorbed is None:
                break
            current = absorbed
            continue
        if not users:
            break
        user = users[0]
        if user in covered:
            break
        op = op_of(user, root)
        user_spec = _spec(user)
        # a step that changes the dtype (a bf16 GEMM plus an fp32 residual is fp32) is not the kernel's:
        # its output has the GEMM's dtype
        if op is None or user_spec is None or user_spec.shape != out.shape or user_spec.dtype != out.dtype:
            break
        if op.kind in _PASS_THROUGH:
            nodes.append(user)
            current = user
            continue
        step: str | None = None
        if op.kind in table.UNARY_EPILOGUE and (op.kind not in ("clamp", "hardtanh") or _numeric_bounds(op)):
            step = table.UNARY_EPILOGUE[op.kind]
        elif op.kind == "gelu":
            step = "gelu_tanh" if op.attrs.get("approximate") == "tanh" else "gelu_erf"
        elif op.kind in ("add", "mul", "div"):
            step = _classify_binary(op, current, out)
            if step == "bias" and "bias" in steps:
                step = None
        if step is None or not _fits(steps, step):
            absorbed = _absorb_spelled(current, root, steps, args, nodes)
            if absorbed is None:
                break
            current = absorbed
            continue
        steps.append(step)
        args.append(_step_args(op, step))
        if step in ("bias", "residual"):
            operands.append((step, next(t for t in op.tensors if t is not current).name))
        nodes.append(user)
        current = user
    return steps, nodes, current


def match_graph(captured: Any, *, arch: str = "sm90", precision: str = "auto") -> MatchResult:
    """Match the pattern table against every node of a captured graph.

    Args:
        captured: a fact.capture.CapturedGraph.
        arch: the target architecture ("sm80" or "sm90"): decides large-K and SM counts.
        precision: "auto" (what PyTorch would do) or an explicit Precision value for fp32.
    """
    root = captured.graph_module
    graph_nodes = list(root.graph.nodes)
    order = {n: i for i, n in enumerate(graph_nodes)}
    result = MatchResult()
    covered: set[Any] = set()
    views = {n: op_of(n, root) for n in graph_nodes}

    # 1. Attention first: it owns the two matmuls around its softmax.
    for n in graph_nodes:
        op = views[n]
        if op is None or op.kind not in table.ATTENTION_RULE.anchors or n in covered:
            continue
        found: AttentionFound | None = (match_sdpa(op, root) if op.kind == "sdpa"
                                        else match_softmax(op, root, getattr(captured, "buffers", None)))
        if found is None:
            continue
        _add_attention(found, result, covered, order)

    # 2. GEMM anchors, each with as long an epilogue chain as one kernel holds.
    for n in graph_nodes:
        op = views[n]
        if op is None or op.kind not in GEMM_OPS or n in covered:
            continue
        gemm = read_gemm(op, root)
        if isinstance(gemm, str):
            result.rejections.append(Rejection(n.name, op.kind, gemm, pattern="gemm"))
            covered.add(n)
            continue
        prec = precision_for(gemm.dtype, precision)
        if gemm.problem.flops < table.MIN_GEMM_FLOPS:
            reason = f"too small ({gemm.problem}): launch overhead dominates, eager is as fast"
            result.rejections.append(Rejection(n.name, op.kind, reason, pattern="gemm"))
            covered.add(n)
            continue
        initial = (["bias"] if gemm.bias else []) + (["residual"] if gemm.residual else [])
        step_args: list[tuple[float | None, float | None]] = [(None, None)] * len(initial)
        operands = list(gemm.operands)
        steps, ep_nodes, last = _epilogue(n, root, initial, step_args, operands, covered)
        rule = next(r for r in table.GEMM_RULES if op.kind in r.anchors and r.when(gemm.problem, tuple(steps), arch))
        nodes = sorted([n, *ep_nodes], key=order.__getitem__)
        covered.update(nodes)
        staging = staging_note(gemm, prec)
        notes = [staging] if staging else []
        if any(s in table.ACTIVATION_STEPS for s in steps) and any(x in ep_nodes and len(x.users) > 1 for x in ep_nodes):
            notes.append("activation written out as elementwise ops, recognised by evaluation")
        result.matches.append(Match(
            pattern=rule.name, family=rule.family, anchor=n.name, nodes=tuple(x.name for x in nodes),
            output=last.name, dtype=gemm.dtype, precision=prec, realization=rule.realization,
            problem=gemm.problem, layouts=gemm.layouts, epilogue=tuple(steps), notes=tuple(notes),
            epilogue_args=tuple(step_args), operands=tuple(operands),
        ))

    _group_mlps(result, root)
    from fact.capture.trace import opaque_modules

    opaque = {name for name, _ in opaque_modules(root)} if captured.level == "module" else set()
    _reject_uncovered(graph_nodes, views, covered, result, opaque)
    position = {x.name: i for i, x in enumerate(graph_nodes)}
    result.matches.sort(key=lambda m: position[m.anchor])
    return result


def _add_attention(found: AttentionFound, result: MatchResult, covered: set[Any], order: dict[Any, int]) -> None:
    anchor = found.anchor
    rule = table.ATTENTION_RULE
    spec = found.q.meta.get("fact_spec") if hasattr(found.q, "meta") else None
    dtype_name = found.q.meta.get("fact_dtype") if hasattr(found.q, "meta") else None
    reason = found.refusal
    if reason is not None:
        pass
    elif found.shape is None or spec is None:
        reason = f"unsupported dtype {dtype_name}" if dtype_name else "no shape information for q"
    elif spec.dtype not in rule.dtypes:
        reason = f"unsupported dtype {spec.dtype.name.lower()} for fused attention"
    elif found.shape.head_dim > rule.max_head_dim or found.shape.head_dim % 8:
        reason = f"head dim {found.shape.head_dim} unsupported (multiples of 8 up to {rule.max_head_dim})"
    if reason is not None:
        result.rejections.append(Rejection(anchor.name, "attention", reason, pattern="attention"))
        covered.update(found.nodes)
        return
    assert spec is not None and found.shape is not None
    nodes = sorted(set(found.nodes), key=order.__getitem__)
    covered.update(nodes)
    epilogue = ["scale", *(["causal_mask"] if found.shape.mask == "causal" else []),
                *(["additive_mask"] if found.shape.mask == "additive" else []), "softmax"]
    result.matches.append(Match(
        pattern=rule.name, family=rule.family, anchor=anchor.name, nodes=tuple(n.name for n in nodes),
        output=found.output.name, dtype=spec.dtype, precision=precision_for(spec.dtype),
        realization=rule.realization, attention=found.shape, epilogue=tuple(epilogue),
        notes=tuple(found.notes), operands=found.operands,
    ))


def _group_mlps(result: MatchResult, root: Any) -> None:
    by_anchor = {m.anchor: m for m in result.matches}
    nodes = {n.name: n for n in root.graph.nodes}
    for m in result.matches:
        if m.attention is not None or not any(s in table.ACTIVATION_STEPS for s in m.epilogue) or "residual" in m.epilogue:
            continue
        cur = nodes[m.output]
        while len(cur.users) == 1:
            user = next(iter(cur.users))
            if user.name in by_anchor and by_anchor[user.name].attention is None:
                result.groups.append(Group(table.MLP_GROUP, (m.id, by_anchor[user.name].id)))
                break
            op = op_of(user, root)
            if op is None or op.kind not in LAYOUT_OPS:
                break
            cur = user


def _reject_uncovered(nodes: list[Any], views: dict[Any, Op | None], covered: set[Any], result: MatchResult,
                      opaque: set[str]) -> None:
    for n in nodes:
        op = views[n]
        if op is None or n in covered or op.kind in LAYOUT_OPS:
            continue
        if not any(key in n.meta for key in ("fact_spec", "fact_specs", "fact_dtype")):
            continue  # sizes and other Python values
        if op.kind in ("eq", "tril", "ones", "arange"):
            continue  # mask construction that no kernel needs to replace
        kind = op.kind.split(":")[-1]
        reason = f"no pattern covers '{kind}': it stays in PyTorch"
        if kind == "dropout_active":
            reason = (f"an active dropout (p={op.attrs.get('p')}, in training) drops values at random, so no "
                      "kernel reads it as the identity: it stays in PyTorch, and a match before it ends there")
        if kind == "rrelu_active":
            reason = (f"an RReLU in training draws its negative slope from [{op.attrs.get('lower')}, "
                      f"{op.attrs.get('upper')}] at random, so no kernel reads it as a leaky_relu: it stays in "
                      "PyTorch, and a match before it ends there")
        if n.op == "call_module" and n.name in opaque:
            reason = (f"{kind} is opaque at module level: its GEMMs keep their PyTorch ops "
                      "(capture at ATen level, level='aten', to see inside)")
        result.rejections.append(Rejection(n.name, kind, reason))
