"""Attention: q.k^T -> scale -> mask -> softmax -> (dropout) -> .v, or scaled_dot_product_attention."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fact.patterns.ops import Op, op_of
from fact.patterns.types import AttentionShape

_MATMULS = frozenset({"matmul", "bmm"})
# Ops a causal mask is built from: views and slices of a tril buffer, compared with 0.
_MASK_OPS = frozenset({"eq", "getitem", "view", "reshape", "to", "float", "bool", "logical_not", "ne",
                       "lt", "tril", "ones", "alias", "expand", "clone", "contiguous", "identity"})


@dataclass
class AttentionFound:
    anchor: Any  # softmax or sdpa node
    output: Any  # the node producing the attention output (after any head merge)
    nodes: list[Any]
    shape: AttentionShape | None
    q: Any
    notes: list[str]
    operands: tuple[tuple[str, str], ...] = ()
    refusal: str | None = None  # why this attention must keep its ops, though its shape was read


def _single_user(n: Any) -> Any | None:
    users = list(n.users)
    return users[0] if len(users) == 1 else None


def _spec(n: Any) -> Any:
    return n.meta.get("fact_spec") if hasattr(n, "meta") else None


def _is_tensor(n: Any) -> bool:
    """Whether an fx node produces a tensor (shape propagation annotated it), not a size or int."""
    return n.op == "get_attr" or "fact_spec" in n.meta or "fact_dtype" in n.meta


# Fills at or below this are -inf for a softmax: exp(-1e4) is below every float type's smallest value.
_NEG_INF_FILL = -1e4


def _is_causal_mask(mask: Any, fill: Any, root: Any, buffers: dict[str, Any],
                    scores_node: Any) -> tuple[bool, list[Any], list[Any]]:
    """Whether `masked_fill(scores, mask, fill)` applies a causal mask: the mask's value, as large as
    the scores' last two dims, is True
    exactly above the diagonal (the future keys) and the fill removes those scores (-inf, or a
    constant so negative that softmax gives it no weight). The mask is *evaluated* (its buffer, its
    comparison, its slicing to the sequence length), so every spelling is judged by what it computes.

    Returns whether it is, the nodes computing the mask, and the buffers it was computed from (a
    composed kernel runs only while they hold the values judged here)."""
    import torch

    if not isinstance(fill, (int, float)) or isinstance(fill, bool) or fill > _NEG_INF_FILL:
        return False, [], []
    evaluated = static_value(mask, root, buffers)
    if evaluated is None:
        return False, [], []
    value, nodes = evaluated
    if not isinstance(value, torch.Tensor) or value.dim() < 2 or value.dtype is not torch.bool:
        return False, [], []
    sq, sk = value.shape[-2:]
    scores = _spec(scores_node)
    if scores is None or tuple(scores.shape[-2:]) != (sq, sk):  # a broadcast row or column is no causal mask
        return False, [], []
    future = torch.ones(sq, sk, dtype=torch.bool, device=value.device).triu(1)
    if not all(torch.equal(m, future) for m in value.reshape(-1, sq, sk)):
        return False, [], []
    sources = [n for n in nodes if n.op in ("get_attr", "placeholder")]
    return True, [n for n in nodes if n not in sources], sources


_MAX_MASK_NODES = 32


def static_value(node: Any, root: Any, buffers: dict[str, Any] | None = None) -> tuple[Any, list[Any]] | None:
    """The value of a node computed from buffers and input sizes alone (a mask sliced to the sequence
    length, a scale of 1/sqrt(k.size(-1))), with the tensor nodes it took; None when it depends on
    anything else (an input's values, an op outside the mask vocabulary). `buffers` holds the values
    of placeholders that are the module's buffers (fact.capture.CapturedGraph.buffers)."""
    import torch

    values: dict[Any, Any] = {}
    tensor_nodes: list[Any] = []

    def value(n: Any, depth: int = 0) -> Any:
        if not hasattr(n, "op"):
            return n
        if n in values:
            return values[n]
        if depth > _MAX_MASK_NODES:
            raise LookupError("mask expression too deep")
        if n.op == "get_attr":
            out: Any = root
            for part in str(n.target).split("."):
                out = getattr(out, part)
        elif n.op == "placeholder" and buffers and n.name in buffers:
            out = buffers[n.name]
        elif _is_size_of(n):
            shape = _spec(n.args[0]).shape if _spec(n.args[0]) is not None else None
            if shape is None:
                raise LookupError("size of an unannotated node")
            out = shape[n.args[1]] if n.op == "call_method" and len(n.args) > 1 else torch.Size(shape)
        elif _is_tensor(n) and n.op in ("call_function", "call_method"):
            op = op_of(n, root)
            if op is None or op.kind not in _MASK_OPS:
                raise LookupError(f"{n.name} is not mask construction")
            out = _call(n, value, depth)
        elif n.op in ("call_function", "call_method") and not _is_tensor(n):
            out = _call(n, value, depth)  # integer arithmetic on sizes, getitem of a size
        else:
            raise LookupError(f"{n.name} depends on the module's inputs")
        if isinstance(out, torch.Tensor):
            tensor_nodes.append(n)
        values[n] = out
        return out

    try:
        with torch.no_grad():
            return value(node), tensor_nodes
    except Exception:
        return None


def _is_size_of(n: Any) -> bool:
    """x.size(), x.size(d) or x.shape of a tensor node."""
    if not n.args or not hasattr(n.args[0], "meta"):
        return False
    if n.op == "call_method":
        return n.target == "size"
    return n.op == "call_function" and n.target is getattr and n.args[1:] == ("shape",)


def _call(n: Any, value: Any, depth: int) -> Any:
    def arg(a: Any) -> Any:
        if isinstance(a, (list, tuple)):
            return type(a)(arg(x) for x in a)
        if isinstance(a, slice):
            return slice(arg(a.start), arg(a.stop), arg(a.step))
        return value(a, depth + 1) if hasattr(a, "op") else a

    args = [arg(a) for a in n.args]
    kwargs = {k: arg(v) for k, v in n.kwargs.items()}
    if n.op == "call_method":
        return getattr(args[0], n.target)(*args[1:], **kwargs)
    return n.target(*args, **kwargs)


def _head_merge(n: Any, root: Any, nodes: list[Any]) -> Any:
    """The node ending the head merge after the attention output `n`, its nodes added to `nodes`: the
    longest single-use run of transpose/permute/contiguous/view/reshape that is the usual merge
    ([B, H, S, D] -> [B, S, H*D], `_is_head_merge`). Another rearrangement (MultiheadAttention's
    permute to [S, B, H, D] and 2-D view) stays in PyTorch after the kernel's [B, H, S, D]: `n` itself."""
    chain, out = [], n
    while (user := _single_user(out)) is not None:
        op = op_of(user, root)
        if op is None or op.kind not in ("transpose", "permute", "contiguous", "view", "reshape"):
            break
        chain.append((op.kind, user))
        out = user
    for end in range(len(chain), 0, -1):
        if _is_head_merge(n, chain[:end]):
            nodes.extend(node for _, node in chain[:end])
            return chain[end - 1][1]
    return n


def _is_head_merge(n: Any, chain: list[tuple[str, Any]]) -> bool:
    """Whether `chain` (kind, node) after `n` [B, H, S, D] swaps H and S, then, past any contiguous, ends in
    one view or reshape to [B, S, H*D]."""
    spec, last = _spec(n), _spec(chain[-1][1])
    if spec is None or last is None or len(spec.shape) != 4 or len(chain) < 2:
        return False
    (first_kind, first), *middle, (last_kind, _) = chain
    b, h, s, d = spec.shape
    return (first_kind in ("transpose", "permute") and _swaps_heads(first_kind, first)
            and all(kind == "contiguous" for kind, _ in middle)
            and last_kind in ("view", "reshape") and tuple(last.shape) == (b, s, h * d))


def _swaps_heads(kind: str, node: Any) -> bool:
    """Whether a transpose or permute of a rank-4 tensor exchanges dims 1 and 2 alone."""
    dims: list[int] = []
    for a in (*node.args[1:], *(node.kwargs[k] for k in ("dim0", "dim1", "dims") if k in node.kwargs)):
        dims.extend(a if isinstance(a, (list, tuple)) else [a])
    if not all(isinstance(x, int) for x in dims):
        return False
    dims = [x % 4 for x in dims]
    return sorted(dims) == [1, 2] if kind == "transpose" else dims == [0, 2, 1, 3]


def _shape_of(q: Any, k: Any, mask: str, scale: float | None) -> AttentionShape | None:
    qs, ks = _spec(q), _spec(k)
    if qs is None or ks is None or len(qs.shape) < 3:
        return None
    *lead, sq, d = qs.shape
    sk = ks.shape[-2] if len(ks.shape) >= 2 else sq
    batch, heads = (lead[0], lead[1]) if len(lead) >= 2 else (1, lead[0])
    return AttentionShape(batch=batch, heads=heads, seq_q=sq, seq_k=sk, head_dim=d, mask=mask, scale=scale)


def layout_refusal(q: Any, k: Any, v: Any) -> str | None:
    """Why q, k, v are not the [B, H, S, D] tensors of one batch and head count the kernels read."""
    specs = [_spec(t) for t in (q, k, v)]
    if any(s is None for s in specs):
        return None  # reported as missing shape information
    if any(len(s.shape) != 4 for s in specs):
        return "attention on tensors of rank other than 4 ([B, H, S, D]) is not served"
    qs, ks, vs = specs
    if ks.shape[:2] != qs.shape[:2] or vs.shape[:2] != qs.shape[:2] or ks.shape != vs.shape:
        return (f"k {ks.shape} and v {vs.shape} do not share q's batch and heads {qs.shape[:2]} "
                "(broadcast, multi-query or grouped attention is not served)")
    return None


def _sdpa_refusal(op: Op, shape: AttentionShape | None) -> str | None:
    node = op.node
    if len(op.tensors) < 3:
        return "scaled_dot_product_attention without q, k and v tensors"
    dropout = node.kwargs.get("dropout_p", node.args[4] if len(node.args) > 4 else 0.0)
    if not isinstance(dropout, (int, float)) or dropout != 0:
        return f"scaled_dot_product_attention with dropout_p={dropout}: the fused kernels have no dropout"
    if node.kwargs.get("enable_gqa", node.args[7] if len(node.args) > 7 else False):
        return "grouped-query attention (enable_gqa=True) is not served"
    scale = node.kwargs.get("scale", node.args[6] if len(node.args) > 6 else None)
    if scale is not None and not isinstance(scale, (int, float)):
        return "a scale computed at run time is not served"
    mask = op.tensors[3] if len(op.tensors) > 3 else node.kwargs.get("attn_mask")
    if mask is not None and hasattr(mask, "meta") and mask.meta.get("fact_dtype") == "bool":
        return "a boolean attn_mask is not served"
    if mask is not None and op.attrs.get("is_causal"):
        return "attn_mask and is_causal together: the fused kernels apply one mask or the other"
    if shape is not None and op.attrs.get("is_causal") and shape.seq_q != shape.seq_k:
        return "causal attention with different query and key lengths is not served"
    return None


def match_sdpa(op: Op, root: Any) -> AttentionFound | None:
    if len(op.tensors) < 3:
        return None
    q, k, v = op.tensors[0], op.tensors[1], op.tensors[2]
    mask = "causal" if op.attrs.get("is_causal") else ("additive" if op.attrs.get("has_mask") else "none")
    nodes = [op.node]
    output = _head_merge(op.node, root, nodes)
    scale = op.node.kwargs.get("scale", op.node.args[6] if len(op.node.args) > 6 else None)
    shape = _shape_of(q, k, mask, scale if isinstance(scale, (int, float)) else None)
    operands = [("q", q.name), ("k", k.name), ("v", v.name)]
    attn_mask = op.node.kwargs.get("attn_mask", op.node.args[3] if len(op.node.args) > 3 else None)
    if hasattr(attn_mask, "name"):
        operands.append(("mask", attn_mask.name))
    return AttentionFound(op.node, output, nodes, shape, q, ["scaled_dot_product_attention"], tuple(operands),
                          _sdpa_refusal(op, shape) or layout_refusal(q, k, v))


def _reaches_matmul(n: Any, root: Any) -> bool:
    """Whether a chain of single-use scale/mask/cast nodes leads back from `n` to a matmul."""
    for _ in range(8):
        op = op_of(n, root)
        if op is None or len(n.users) != 1 or not op.tensors:
            return False
        if op.kind in _MATMULS:
            return True
        n = op.tensors[0]
    return False


def match_softmax(op: Op, root: Any, buffers: dict[str, Any] | None = None) -> AttentionFound | None:
    """Walk back from a last-dim softmax to q.k^T and forward to .v. `buffers`: the values of
    placeholders that are the module's buffers (a causal mask may be one)."""
    dim = op.attrs.get("dim", -1)
    spec = _spec(op.node)
    if spec is None or dim not in (-1, len(spec.shape) - 1):
        return None
    nodes: list[Any] = [op.node]
    notes: list[str] = []
    mask, scale = "none", 1.0
    cur = op.tensors[0] if op.tensors else None
    qk = None
    operands: list[tuple[str, str]] = []
    while cur is not None:
        cop = op_of(cur, root)
        if cop is None or len(cur.users) != 1:
            return None
        if cop.kind in _MATMULS:
            qk = cop
            break
        # walking back from the softmax, `scale` is what multiplies the scores after the node at hand:
        # a mask filled with -1e9 and then scaled by -1 does not mask, and an additive mask scaled with
        # the scores is not the kernel's `scores * scale + mask`
        if cop.kind == "masked_fill" and cop.tensors:
            fill = cur.args[2] if len(cur.args) > 2 else cur.kwargs.get("value")
            if isinstance(fill, (int, float)) and not isinstance(fill, bool):
                fill = fill * scale
            causal, mask_nodes, sources = (_is_causal_mask(cop.tensors[1], fill, root, buffers or {}, cop.tensors[0])
                                           if len(cop.tensors) > 1 and cop.tensors[0] is cur.args[0]
                                           else (False, [], []))
            if not causal or mask != "none":
                notes.append("masked_fill with a mask that is not a causal tril buffer")
                return None
            mask = "causal"
            nodes += [cur, *mask_nodes]
            operands += [("pinned", s.name) for s in sources]
            cur = cop.tensors[0]
        elif (cop.kind == "add" and len(cop.tensors) == 2 and mask == "none" and cop.attrs.get("alpha", 1) == 1
              and scale == 1.0):
            scores, added = cop.tensors if _reaches_matmul(cop.tensors[0], root) else cop.tensors[::-1]
            mask = "additive"
            operands.append(("mask", added.name))
            nodes.append(cur)
            cur = scores
        elif (factor := _scale_factor(cur, cop, root)) is not None:
            scale *= factor
            nodes.append(cur)
            cur = next(t for t in cop.tensors if _is_tensor(t))
        elif cop.kind in ("dropout", "to", "float", "type_as"):
            nodes.append(cur)
            cur = cop.tensors[0] if cop.tensors else None
        else:
            return None
    if qk is None or len(qk.tensors) != 2:
        return None
    nodes.append(qk.node)
    q, kt = qk.tensors
    k = kt
    kop = op_of(kt, root)
    if kop is not None and kop.kind == "transpose" and len(kt.users) == 1 and _swaps_last_two(kt):
        nodes.append(kt)
        k = kop.tensors[0]
        operands[:0] = [("q", q.name), ("k", k.name)]
    else:
        return None  # without k^T spelled out, the head dim and key length cannot be told apart
    # forward: softmax -> (dropout) -> matmul with v
    cur = op.node
    pv = None
    while True:
        user = _single_user(cur)
        if user is None:
            return None
        uop = op_of(user, root)
        if uop is None:
            return None
        if uop.kind in _MATMULS and uop.tensors and uop.tensors[0] is cur:
            pv = user
            break
        if uop.kind in ("dropout", "to", "type_as"):
            nodes.append(user)
            cur = user
            continue
        return None
    nodes.append(pv)
    v = op_of(pv, root).tensors[1]  # type: ignore[union-attr]
    operands.insert(2, ("v", v.name))
    output = _head_merge(pv, root, nodes)
    return AttentionFound(op.node, output, nodes, _shape_of(q, k, mask, scale), q, notes, tuple(operands),
                          layout_refusal(q, k, v))


def _scale_factor(n: Any, op: Op, root: Any) -> float | None:
    """The factor `scores * c`, `c * scores` or `scores / c` applies, for a constant c or one computed
    from sizes (1.0 / math.sqrt(k.size(-1))); None for anything else (c / scores, rounding division)."""
    if op.kind not in ("mul", "div") or op.attrs.get("rounding_mode") is not None or len(n.args) != 2:
        return None
    tensors = [a for a in n.args if hasattr(a, "op") and _is_tensor(a)]
    if len(tensors) != 1 or (op.kind == "div" and n.args[0] is not tensors[0]):
        return None
    other = n.args[1] if n.args[0] is tensors[0] else n.args[0]
    if hasattr(other, "op"):
        evaluated = static_value(other, root)
        other = evaluated[0] if evaluated is not None else None
    if not isinstance(other, (int, float)) or isinstance(other, bool) or other == 0:
        return None
    return float(other) if op.kind == "mul" else 1.0 / float(other)


def _swaps_last_two(n: Any) -> bool:
    """Whether a transpose node exchanges the last two dims (k.transpose(-2, -1), k.mT, aten.t)."""
    spec = n.meta.get("fact_spec")
    rank = len(spec.shape) if spec is not None else None
    dims = [a for a in n.args[1:] if isinstance(a, int)]
    if not dims:
        return rank == 2  # .t() / aten.t
    if rank is None or len(dims) != 2:
        return False
    return sorted(d % rank for d in dims) == [rank - 2, rank - 1]
