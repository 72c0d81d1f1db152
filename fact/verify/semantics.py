"""Whether a match means what the module computes.

The reference is the module itself: the fx nodes a match covers are re-run in float64, with the
module's own parameters and buffers, on fresh random values for every tensor that flows into
them. The kernel's reading of those nodes (its spec: GEMM operands, epilogue chain and constants,
attention scale and mask) is computed in float64 on the same values, and the two must agree. A
match that disagrees is refused, on the CPU, before anything is built: this closes every way the
matcher can misread a module, not only the ones a test has seen.

    agreements = check_matches(captured, matches, example_inputs)
    refused = [a for a in agreements if not a.agrees]
"""

from __future__ import annotations

import copy
import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from fact.core.enums import DType
from fact.patterns.types import Match

# float64 on both sides: a right reading agrees to ~1e-15; a fp32 cast inside the module, ~1e-7.
TOLERANCE = 1e-6
DEFAULT_SEEDS = (0, 1)
# The range of the fresh values, per draw. A GEMM can shrink its inputs (weights of 1/sqrt(K)), so a
# clamp bound or an activation's tail is reached only from a wide range as well; attention keeps a
# narrow one, for a finite mask fill (finfo(float16).min) stands for -inf only far below the scores.
GEMM_SPREADS = (3.0, 30.0)
ATTENTION_SPREADS = (3.0,)
# Above this many flops (the matches at the module's own shapes) the batch dimension is reduced.
FULL_SHAPE_FLOPS = 4e9


@dataclass(frozen=True)
class Agreement:
    """The verdict on one match: its reading agrees with the module, or the reason it is refused."""

    match_id: str
    agrees: bool
    rel_err: float
    reason: str | None = None
    shapes: str = ""  # the input shapes the check ran at


class _Unreadable(Exception):
    """The subgraph cannot be re-run in float64 here (the reason is the message)."""


def check_matches(captured: Any, matches: Sequence[Match], example_inputs: Sequence[Any],
                  *, seeds: Sequence[int] = DEFAULT_SEEDS, module: Any = None) -> list[Agreement]:
    """Check every match against the module's own float64 computation.

    Args:
        captured: the fact.capture.CapturedGraph the matches were read from.
        matches: the matches to check.
        example_inputs: the inputs the graph was captured with (only shapes and dtypes are used).
        seeds: one fresh draw of the subgraph's inputs per seed.
        module: the original module; an ATen-level graph specialised to its batch size is then
            re-captured at a reduced batch, and each match checked through its counterpart there.

    Returns:
        One Agreement per match, in order.
    """
    if not matches:
        return []
    import torch

    try:
        gm = _float64_copy(captured.graph_module)
    except Exception as exc:  # e.g. parametrized weights that cannot be copied
        reason = (f"could not copy the module to re-run it in float64 ({type(exc).__name__}); "
                  "nothing is built from a reading that cannot be checked")
        return [Agreement(m.id, False, math.inf, reason) for m in matches]
    device = _device(gm, example_inputs)
    flops = sum(m.flops for m in matches)
    if flops <= FULL_SHAPE_FLOPS:
        shapes = [_full(example_inputs, device)]
    else:  # cut the batch of every input, or the rows of the first; the model's own shape last (a graph
        # from torch.compile is specialised to it), where float64 at that size is quick: on a GPU
        shapes = [_reduced(example_inputs, device), _reduced(example_inputs, device, first_only=True)]
        if flops <= 8 * FULL_SHAPE_FLOPS or torch.device(device).type == "cuda":
            shapes.append(_full(example_inputs, device))
    shapes = [_keep_buffers(captured, example_inputs, attempt, device) for attempt in shapes]
    needed = {n for m in matches for n in _needs(gm, m)}
    recorded, error = None, ""
    for attempt in shapes:
        try:
            recorded = _record(gm, attempt, keep=needed)
            used = attempt
            break
        except Exception as exc:  # the module's own errors at a reduced shape
            error = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    if recorded is None and module is not None and captured.level == "aten":
        return _check_recaptured(module, matches, example_inputs, seeds, error)
    if recorded is None:
        reason = (f"could not re-run the module in float64 at a checkable size ({error}); "
                  "nothing is built from a reading that cannot be checked")
        return [Agreement(m.id, False, math.inf, reason) for m in matches]
    shape_text = ", ".join("x".join(map(str, t.shape)) for t in used if hasattr(t, "shape"))
    out = []
    for m in matches:
        try:
            _same_dtype(captured, m)
            with torch.no_grad():
                spreads = ATTENTION_SPREADS if m.attention is not None else GEMM_SPREADS
                err = max(_disagreement(gm, m, recorded, seed, spread, captured.buffers)
                          for seed in seeds for spread in spreads)
        except _Unreadable as exc:
            out.append(Agreement(m.id, False, math.inf, str(exc), shape_text))
            continue
        except Exception as exc:  # the reading cannot even be evaluated: it is not what the module does
            out.append(Agreement(m.id, False, math.inf, f"the kernel's reading ({_reading(m)}) could not be evaluated "
                                 f"({type(exc).__name__}: {str(exc).splitlines()[0][:200]}): refused", shape_text))
            continue
        if err <= TOLERANCE:
            out.append(Agreement(m.id, True, err, None, shape_text))
        else:
            out.append(Agreement(m.id, False, err, (
                f"the kernel's reading ({_reading(m)}) differs from the module's own float64 output "
                f"(relative error {err:.3g} > {TOLERANCE:g}): refused"), shape_text))
    return out


def _same_reading(a: Match, b: Match) -> bool:
    """Whether two matches of the same anchor read it the same way (shapes aside)."""
    keys = ("pattern", "nodes", "output", "epilogue", "epilogue_args", "operands")
    if any(getattr(a, k) != getattr(b, k) for k in keys if k != "pattern"):
        return False
    if (a.attention is None) != (b.attention is None):
        return False
    if a.attention is None or b.attention is None:
        return True
    return (a.attention.mask, a.attention.scale) == (b.attention.mask, b.attention.scale)


def _check_recaptured(module: Any, matches: Sequence[Match], example_inputs: Sequence[Any],
                      seeds: Sequence[int], error: str) -> list[Agreement]:
    import torch

    from fact.capture import capture
    from fact.patterns import match_graph

    small = [torch.empty(tuple(t.shape), dtype=x.dtype) if isinstance(x, torch.Tensor) else x
             for t, x in zip(_reduced(example_inputs, "cpu"), example_inputs, strict=True)]
    try:
        again = capture(module, small, level="aten")
        first = matches[0]
        policy = first.precision.value if first.dtype is DType.F32 else "auto"
        counterparts = {m.anchor: m for m in match_graph(again, precision=policy).matches}
    except Exception as exc:
        reason = (f"could not re-run the module in float64 at a checkable size ({error}; re-capture at a "
                  f"reduced batch failed: {type(exc).__name__})")
        return [Agreement(m.id, False, math.inf, reason) for m in matches]
    out = []
    for m in matches:
        twin = counterparts.get(m.anchor)
        if twin is None or not _same_reading(m, twin):
            out.append(Agreement(m.id, False, math.inf, "the module reads differently at a reduced batch, where "
                                 "it can be checked: refused"))
            continue
        [verdict] = check_matches(again, [twin], small, seeds=seeds)
        out.append(verdict)
    return out


def evaluate_subgraph(gm: Any, match: Match, env: dict[Any, Any]) -> Any:
    """Run the nodes `match` covers, in graph order, given values for every node that feeds them."""
    nodes = _nodes(gm, match)
    values = dict(env)
    for n in nodes:
        args, kwargs = _resolve(n.args, values), _resolve(dict(n.kwargs), values)
        if n.op == "call_module":
            values[n] = gm.get_submodule(n.target)(*args, **kwargs)
        elif n.op == "call_method":
            values[n] = _viewing(n.target, args, kwargs, functools.partial(getattr(args[0], n.target), *args[1:], **kwargs))
        elif n.op == "call_function":
            values[n] = _viewing(n.target, args, kwargs, functools.partial(n.target, *args, **kwargs))
        else:
            raise _Unreadable(f"node {n.name} ({n.op}) cannot be part of a kernel")
    return values[_node(gm, match.output)]


def _viewing(target: Any, args: Any, kwargs: Any, run: Any) -> Any:
    """`run()`, except that a view the float64 re-run cannot take is taken by reshape: the same values.
    The module's own run could take it, for there an op laid its output out as its input (an attention
    following its query's layout) and the captured graph has no copy before the view; float64 runs
    another kernel, which lays it out contiguously."""
    import torch

    try:
        return run()
    except RuntimeError as exc:
        is_view = target in ("view", torch.Tensor.view, torch.ops.aten.view.default)
        if not is_view or "view size is not compatible" not in str(exc):
            raise
        shape = kwargs.get("size", args[1] if len(args) == 2 and isinstance(args[1], (list, tuple)) else args[1:])
        return args[0].reshape(*shape)


def _resolve(a: Any, values: dict[Any, Any]) -> Any:
    """An fx argument with every node in it replaced by its value. (A module-level function: a
    nested recursive one is a reference cycle that would hold every value until the garbage
    collector runs, gigabytes for a large module checked at its own shape.)"""
    if isinstance(a, (list, tuple)):
        return type(a)(_resolve(x, values) for x in a)
    if isinstance(a, slice):
        return slice(_resolve(a.start, values), _resolve(a.stop, values), _resolve(a.step, values))
    if isinstance(a, dict):
        return {k: _resolve(v, values) for k, v in a.items()}
    return values[a] if hasattr(a, "op") else a


def spec_output(gm: Any, match: Match, value: Any) -> Any:
    """What the kernel's reading of `match` computes, in float64, from the values of its operands.

    Args:
        gm: the float64 GraphModule (parameters are read from it).
        match: the match, with its operand roles.
        value: a function from an operand reference to its tensor.
    """
    import torch

    if match.attention is not None:
        return _attention_output(match, value)
    from fact.realize.choose import steps_of
    from fact.verify.check import apply_steps

    roles = dict(match.operands)
    if "a" not in roles or not ({"b", "w"} & set(roles)):
        raise _Unreadable("the match does not say where its GEMM operands come from")
    a = value(roles["a"])
    b = value(roles["b"]) if "b" in roles else value(roles["w"]).transpose(-2, -1)
    product = torch.matmul(a, b)
    bias = value(roles["bias"]) if "bias" in roles else None
    residual = value(roles["residual"]) if "residual" in roles else None
    # the kernel reads a bias as one row of N and a residual as a tensor of the output's shape: a
    # broadcast that PyTorch's add would accept is not what it computes
    n = product.shape[-1]
    if bias is not None and (bias.numel() != n or bias.shape[-1:] != (n,)):
        raise _Unreadable(f"a bias of shape {tuple(bias.shape)} is not one row of N={n}")
    if residual is not None and residual.shape != product.shape:
        raise _Unreadable(f"a residual of shape {tuple(residual.shape)} is not the output's {tuple(product.shape)}")
    return apply_steps(product, steps_of(match), None if bias is None else bias.reshape(n), residual)


def _attention_output(match: Match, value: Any) -> Any:
    import torch

    shape = match.attention
    assert shape is not None
    roles = dict(match.operands)
    if not {"q", "k", "v"} <= set(roles):
        raise _Unreadable("the match does not say where q, k and v come from")
    q, k, v = (value(roles[r]) for r in ("q", "k", "v"))
    if not q.shape[:-2] == k.shape[:-2] == v.shape[:-2]:  # what PyTorch broadcasts, a fused kernel does not
        raise _Unreadable(f"k {tuple(k.shape)} and v {tuple(v.shape)} broadcast over q {tuple(q.shape)}")
    scale = shape.scale if shape.scale is not None else q.shape[-1] ** -0.5
    scores = torch.matmul(q, k.transpose(-2, -1)) * scale
    if shape.mask == "causal":
        sq, sk = scores.shape[-2:]
        scores = scores.masked_fill(torch.ones(sq, sk, dtype=torch.bool, device=scores.device).triu(1),
                                    float("-inf"))
    elif shape.mask == "additive":
        if "mask" not in roles:
            raise _Unreadable("an additive mask whose tensor the match does not name")
        scores = scores + value(roles["mask"])
    return torch.matmul(torch.softmax(scores, dim=-1), v)


def _same_dtype(captured: Any, match: Match) -> None:
    """The kernel writes its output in the match's dtype: a float64 re-run cannot see a step that
    promotes it (bf16 + an fp32 residual), the captured dtypes can."""
    spec = captured.spec(_node(captured.graph_module, match.output))
    if spec is not None and spec.dtype is not match.dtype:
        raise _Unreadable(f"the module's output {match.output} is {spec.dtype.value}, the kernel would write "
                          f"{match.dtype.value}: refused")


def _disagreement(gm: Any, match: Match, recorded: dict[Any, Any], seed: int, spread: float = 3.0,
                  buffers: Any = ()) -> float:
    import torch

    gen = torch.Generator().manual_seed(seed)  # drawn on the CPU, so every device sees the same values
    env = {}
    for n in _inputs_of(gm, match):
        if n not in recorded:
            raise _Unreadable(f"node {n.name} feeding the match has no recorded value")
        env[n] = recorded[n] if n.name in buffers else _fresh(recorded[n], n, gen, spread)
    got = evaluate_subgraph(gm, match, env)

    def value(ref: str) -> Any:
        if ref.startswith("param:"):
            return gm.get_parameter(ref.removeprefix("param:"))
        node = _node(gm, ref)
        return env[node] if node in env else recorded[node]

    want = spec_output(gm, match, value)
    if not isinstance(got, torch.Tensor):
        raise _Unreadable("the subgraph does not produce a tensor")
    if want.shape != got.shape:
        if match.attention is not None and want.dim() == 4 and got.dim() == 3 and got.numel() == want.numel():
            want = want.transpose(1, 2).reshape(got.shape)  # the usual head merge [B, H, S, D] -> [B, S, H*D]
        else:
            raise _Unreadable(f"the reading produces {tuple(want.shape)}, the module {tuple(got.shape)}")
    got, want = got.double(), want.double()
    if torch.isnan(want).any() or torch.isnan(got).any():
        same = torch.equal(torch.isnan(want), torch.isnan(got))
        if not same:
            return math.inf
        got, want = torch.nan_to_num(got), torch.nan_to_num(want)
    scale = float(want.norm())
    if scale == 0.0:
        raise _Unreadable("the module's output is zero on random inputs: this check cannot tell readings apart")
    return float((got - want).norm()) / scale


def _fresh(recorded: Any, node: Any, gen: Any, spread: float = 3.0) -> Any:
    """A fresh random tensor in place of a floating value flowing into the subgraph; the module's own
    parameters and buffers (get_attr; as graph inputs, `_disagreement` keeps them) and every
    non-floating value are kept."""
    import torch

    if node.op == "get_attr" or not isinstance(recorded, torch.Tensor) or not recorded.is_floating_point():
        return recorded
    values = (torch.rand(recorded.shape, generator=gen, dtype=torch.float64) * 2.0 - 1.0) * spread
    # in the layout of the value replaced: an op's output layout can follow its input's (SDPA on the CPU),
    # and a later view of it (the head merge) holds only in that layout
    return torch.empty_like(recorded, dtype=torch.float64).copy_(values)


def _record(gm: Any, inputs: Sequence[Any], keep: set[Any] | None = None) -> dict[Any, Any]:
    """Run `gm` on `inputs`; the value of every node in `keep` (default all). Values not kept are
    freed as the run goes: a large module at its own shape holds only what the checks read."""
    import torch

    recorder = _recorder()(gm)
    recorder.keep, recorder.values = keep, {}
    with torch.no_grad():
        recorder.run(*inputs)
    return recorder.values


@functools.cache
def _recorder() -> Any:
    """An fx Interpreter that records node values (into the instance, so nothing outlives the
    call: a class made per call, closing over its values, is a reference cycle that held them until
    the garbage collector ran)."""
    import torch

    class Recorder(torch.fx.Interpreter):
        keep: set[Any] | None
        values: dict[Any, Any]

        def run_node(self, n: Any) -> Any:
            out = super().run_node(n)
            if self.keep is None or n in self.keep:
                self.values[n] = out
            return out

        def call_function(self, target: Any, args: Any, kwargs: Any) -> Any:
            return _viewing(target, args, kwargs, lambda: super(Recorder, self).call_function(target, args, kwargs))

        def call_method(self, target: Any, args: Any, kwargs: Any) -> Any:
            return _viewing(target, args, kwargs, lambda: super(Recorder, self).call_method(target, args, kwargs))

    return Recorder


def _needs(gm: Any, match: Match) -> list[Any]:
    """The nodes whose recorded values checking `match` reads: those feeding it, and its operands."""
    try:
        nodes = _inputs_of(gm, match)
    except _Unreadable:
        return []  # the check of this match says why
    names = {ref for _, ref in match.operands if not ref.startswith("param:")}
    return nodes + [n for n in gm.graph.nodes if n.name in names]


def _float64_copy(gm: Any) -> Any:
    """The graph in float64, its casts to narrower floating types included (a cast is a rounding,
    not part of what the module means, and kept it would meet float64 operands: x.float() @ w), its
    floating parameters redrawn at random (seeded) with the scale of the originals: a reading must
    hold for any weights, not only today's (a zero bias would hide a dropped bias). Buffers (masks,
    running statistics) keep their values. It runs in eval mode (a dropout outside the matches neither
    draws nor drops), unless a ModeGuard pins the graph to the mode it was captured in (fact.capture.modes):
    the graph computes only in that mode, and its submodules keep the flags the matcher read them with."""
    import torch

    from fact.capture.modes import ModeGuard

    copied = copy.deepcopy(gm)
    copied.to(torch.float64)
    if not any(isinstance(m, ModeGuard) for m in copied.modules()):
        copied.eval()
    narrow = {torch.float32, torch.float16, torch.bfloat16}

    def widen(a: Any) -> Any:
        if isinstance(a, torch.dtype):
            return torch.float64 if a in narrow else a
        if isinstance(a, (list, tuple)):
            return type(a)(widen(x) for x in a)
        if isinstance(a, dict):
            return {k: widen(v) for k, v in a.items()}
        return a

    for n in list(copied.graph.nodes):
        if "_assert_tensor_metadata" in str(n.target) and not n.users:
            copied.graph.erase_node(n)  # torch.export pins the dtypes this copy changes
            continue
        if n.op == "call_method" and n.target in ("float", "half", "bfloat16"):
            n.target = "double"
        n.args, n.kwargs = widen(n.args), widen(n.kwargs)
    copied.recompile()
    gen = torch.Generator().manual_seed(4321)
    with torch.no_grad():
        for p in copied.parameters():
            if p.is_floating_point():
                scale = max(float(p.abs().max()) if p.numel() else 0.0, 0.05)
                p.copy_((torch.rand(p.shape, generator=gen, dtype=torch.float64) * 2 - 1) * scale)
    return copied


def _keep_buffers(captured: Any, example_inputs: Sequence[Any], drawn: list[Any], device: Any) -> list[Any]:
    """`drawn` with the inputs that are the module's buffers (a graph from torch.compile takes them as
    inputs) given back their own values, in float64 where floating: drawn at random, a causal mask
    would not be one. Parameters stay drawn, as everywhere in the check."""
    import torch

    out = list(drawn)
    for i in captured.buffer_positions:
        x = example_inputs[i] if i < len(example_inputs) else None
        if isinstance(x, torch.Tensor):
            # a copy always: the re-run may write into it (a step counter), never into the module's own
            out[i] = x.to(device, torch.float64 if x.is_floating_point() else x.dtype, copy=True)
    return out


def _device(gm: Any, example_inputs: Sequence[Any]) -> Any:
    """Where the float64 re-run happens: the module's device (its parameters and buffers live there)."""
    import torch

    for t in (*gm.parameters(), *gm.buffers(), *[x for x in example_inputs if isinstance(x, torch.Tensor)]):
        return t.device
    return torch.device("cpu")


def _draw(shape: Sequence[int], like: Any, gen: Any, device: Any) -> Any:
    import torch

    if like.is_floating_point():
        out = torch.rand(tuple(shape), generator=gen, dtype=torch.float64) * 2.0 - 1.0
    elif like.dtype is torch.bool:
        out = torch.rand(tuple(shape), generator=gen) < 0.5
    else:
        out = torch.zeros(tuple(shape), dtype=like.dtype)  # indices: zero is valid for every table
    return out.to(device)


def _full(example_inputs: Sequence[Any], device: Any) -> list[Any]:
    import torch

    gen = torch.Generator().manual_seed(1234)
    return [_drawn_within(x, gen, device) for x in example_inputs]


def _drawn_within(x: Any, gen: Any, device: Any) -> Any:
    """`x` with every tensor in it drawn afresh, at its own shape: a dict or list of tensors too (a
    float32 tensor left in one would meet the float64 graph)."""
    import torch
    from torch.utils._pytree import tree_map

    return tree_map(lambda t: _draw(t.shape, t, gen, device) if isinstance(t, torch.Tensor) else t, x)


def _reduced(example_inputs: Sequence[Any], device: Any, first_only: bool = False) -> list[Any]:
    """The inputs with their leading (batch or row) dimension cut to 2 (every input's, or only the
    first's): the model's other extents are kept. Parameters keep their shape: a graph from
    torch.compile takes the module's parameters as inputs."""
    import torch

    gen = torch.Generator().manual_seed(1234)
    out, cut = [], False
    for x in example_inputs:
        if not isinstance(x, torch.Tensor):
            out.append(_drawn_within(x, gen, device))
            continue
        if (x.dim() >= 2 and x.shape[0] > 2 and not isinstance(x, torch.nn.Parameter)
                and not (first_only and cut)):
            out.append(_draw((2, *x.shape[1:]), x, gen, device))
            cut = True
        else:
            out.append(_draw(x.shape, x, gen, device))
    return out


def _node(gm: Any, name: str) -> Any:
    for n in gm.graph.nodes:
        if n.name == name:
            return n
    raise _Unreadable(f"the match names node {name!r}, which the graph does not have")


def _nodes(gm: Any, match: Match) -> list[Any]:
    wanted = set(match.nodes)
    nodes = [n for n in gm.graph.nodes if n.name in wanted]
    if len(nodes) != len(wanted):
        raise _Unreadable("the match names nodes the graph does not have")
    return nodes


def _inputs_of(gm: Any, match: Match) -> list[Any]:
    """The nodes outside the match that feed it, in graph order."""
    inside = set(_nodes(gm, match))
    seen: dict[Any, None] = {}
    for n in inside:
        for a in n.all_input_nodes:
            if a not in inside:
                seen[a] = None
    order = {n: i for i, n in enumerate(gm.graph.nodes)}
    return sorted(seen, key=order.__getitem__)


def _reading(match: Match) -> str:
    if match.attention is not None:
        a = match.attention
        scale = a.scale if a.scale is not None else "1/sqrt(d)"
        return f"attention, scale {scale}, {a.mask} mask"
    parts = []
    for step, args in zip(match.epilogue, match.epilogue_args or [(None, None)] * len(match.epilogue), strict=False):
        shown = [f"{x:g}" for x in args if x is not None]
        parts.append(step + (f"({', '.join(shown)})" if shown else ""))
    return f"{match.pattern} " + " -> ".join(["gemm", *parts])
