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


def _single_user(n: Any) -> Any | None:
    users = list(n.users)
    return users[0] if len(users) == 1 else None


def _spec(n: Any) -> Any:
    return n.meta.get("fact_spec") if hasattr(n, "meta") else None


def _is_causal_mask(mask: Any, root: Any) -> tuple[bool, list[Any]]:
    """A boolean mask `tril(...)[..., :T, :T] == 0` built from a lower-triangular buffer."""
    import torch

    nodes: list[Any] = []
    stack = [mask]
    buffers: list[Any] = []
    while stack:
        n = stack.pop()
        if not hasattr(n, "op") or n in nodes:
            continue
        nodes.append(n)
        if n.op == "get_attr":
            buffers.append(n)
            continue
        op = op_of(n, root)
        if op is None or op.kind not in _MASK_OPS:
            return False, []
        stack.extend(n.all_input_nodes)
    for b in buffers:
        try:
            value = root.get_buffer(b.target) if hasattr(root, "get_buffer") else getattr(root, b.target)
        except AttributeError:
            value = None
        if value is None:
            try:
                obj = root
                for part in str(b.target).split("."):
                    obj = getattr(obj, part)
                value = obj
            except AttributeError:
                return False, []
        if not isinstance(value, torch.Tensor) or value.dim() < 2:
            return False, []
        square = value.reshape(-1, value.shape[-2], value.shape[-1])[0]
        if square.shape[0] != square.shape[1] or not torch.equal(square != 0, torch.tril(torch.ones_like(square, dtype=torch.bool))):
            return False, []
    return bool(buffers), [n for n in nodes if n.op != "get_attr"]


def _head_merge(n: Any, root: Any, nodes: list[Any]) -> Any:
    """Follow transpose/contiguous/view after the output (the head merge) while single-use."""
    out = n
    while True:
        user = _single_user(out)
        if user is None:
            return out
        op = op_of(user, root)
        if op is None or op.kind not in ("transpose", "permute", "contiguous", "view", "reshape"):
            return out
        nodes.append(user)
        out = user


def _shape_of(q: Any, k: Any, mask: str, scale: float | None) -> AttentionShape | None:
    qs, ks = _spec(q), _spec(k)
    if qs is None or ks is None or len(qs.shape) < 3:
        return None
    *lead, sq, d = qs.shape
    sk = ks.shape[-2] if len(ks.shape) >= 2 else sq
    batch, heads = (lead[0], lead[1]) if len(lead) >= 2 else (1, lead[0])
    return AttentionShape(batch=batch, heads=heads, seq_q=sq, seq_k=sk, head_dim=d, mask=mask, scale=scale)


def match_sdpa(op: Op, root: Any) -> AttentionFound:
    q, k = op.tensors[0], op.tensors[1]
    mask = "causal" if op.attrs.get("is_causal") else ("additive" if op.attrs.get("has_mask") else "none")
    nodes = [op.node]
    output = _head_merge(op.node, root, nodes)
    scale = op.attrs.get("scale")
    return AttentionFound(op.node, output, nodes, _shape_of(q, k, mask, scale), q, ["scaled_dot_product_attention"])


def match_softmax(op: Op, root: Any) -> AttentionFound | None:
    """Walk back from a last-dim softmax to q.k^T and forward to .v."""
    dim = op.attrs.get("dim", -1)
    spec = _spec(op.node)
    if spec is None or dim not in (-1, len(spec.shape) - 1):
        return None
    nodes: list[Any] = [op.node]
    notes: list[str] = []
    mask, scale = "none", 1.0
    cur = op.tensors[0] if op.tensors else None
    qk = None
    while cur is not None:
        cop = op_of(cur, root)
        if cop is None or len(cur.users) != 1:
            return None
        if cop.kind in _MATMULS:
            qk = cop
            break
        if cop.kind == "masked_fill" and cop.tensors:
            causal, mask_nodes = _is_causal_mask(cop.tensors[1], root) if len(cop.tensors) > 1 else (False, [])
            if not causal:
                notes.append("masked_fill with a mask that is not a causal tril buffer")
                return None
            mask = "causal"
            nodes += [cur, *mask_nodes]
            cur = cop.tensors[0]
        elif cop.kind == "add" and len(cop.tensors) == 2:
            mask = "additive"
            nodes.append(cur)
            cur = cop.tensors[0]
        elif cop.kind in ("mul", "div") and len(cop.tensors) == 1 and cop.scalars:
            scale *= cop.scalars[0] if cop.kind == "mul" else 1.0 / cop.scalars[0]
            nodes.append(cur)
            cur = cop.tensors[0]
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
    if kop is not None and kop.kind in ("transpose", "permute") and len(kt.users) == 1:
        nodes.append(kt)
        k = kop.tensors[0]
    else:
        notes.append("k operand is not an explicit transpose")
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
    output = _head_merge(pv, root, nodes)
    return AttentionFound(op.node, output, nodes, _shape_of(q, k, mask, scale), q, notes)
