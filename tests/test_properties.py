"""Property tests of the matcher on generated modules (tests/models/generated.py).

For every generated module, each reading the matcher makes is either refused by fact.discover or
equal to what the module computes. The oracle is this file's own: the module's graph run in float64
on fresh inputs at two scales, and the reading computed by hand from its operands (GEMM product with
its operands by role, epilogue steps with their constants, attention scale and mask, bias as one row
of N, residual of the output's shape, one k and v per head); where a match produces the module's
whole output, the module's own eager float64 forward is the reference as well. It does not use
fact.verify.semantics (one test only lowers its size threshold, to reach the reduced-batch path).

Asserted: (1) no planned item disagrees with the module, and discover returns a plan or raises
CaptureError, nothing else; (2) planted misreadings are always refused by discover; (3) the raw
readings of well-formed modules are right, so refusals of them stay rare.

The cases are the same every run, whatever ran before them (hypothesis, derandomized, without the
constants it would take from the project's imported modules). FACT_PROPERTIES=random draws fresh ones
and FACT_PROPERTIES_SCALE=4 runs four times as many, for a search beyond CI's.
"""

from __future__ import annotations

import copy
import dataclasses
import importlib
import importlib.util
import math
import os
import sys
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from unittest import mock

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fact
from fact.capture import CaptureError, capture
from fact.patterns import MatchResult, match_graph
from fact.patterns.registry import PatternRegistry
from fact.patterns.types import Match
from fact.verify import semantics

from .models.generated import Case, attention_cases, gemm_cases

_SCALE = float(os.environ.get("FACT_PROPERTIES_SCALE", "1"))
# 2,000 generated modules a CI run; FACT_PROPERTIES_SCALE=4 runs four times as many
GEMM_EXAMPLES = int(900 * _SCALE)
ATTENTION_EXAMPLES = int(450 * _SCALE)
PLANTED_EXAMPLES = int(450 * _SCALE)
REDUCED_EXAMPLES = int(200 * _SCALE)
QUICK_EXAMPLES = 40
# Readings of well-formed modules that discover may refuse (e.g. an output that is zero on random inputs).
MAX_REFUSAL_RATE = 0.02

SETTINGS = dict(derandomize=os.environ.get("FACT_PROPERTIES") != "random", deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much])
SCALES = (2.0, 30.0)  # the oracle's input ranges: the curved part of every activation, and far beyond it
# Attention scores stay within what a float16 module holds: a finite mask fill (finfo(float16).min)
# stands for -inf only while the scores are far above it.
ATTENTION_SCALES = (2.0, 6.0)
TOL = 1e-6  # relative error of a right reading: float64 on both sides
EAGER_TOL_WITH_CASTS = 2e-2  # ... against an eager forward that casts to 16 bits inside


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    """Small float64 matmuls run much faster on one thread than on two contended ones."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(autouse=True, scope="module")
def no_constants_from_imported_modules():
    """Recent hypothesis mixes into its draws constants read from the source of every project
    module imported so far, so which of fact's modules earlier tests imported changed the cases drawn
    here (after torch.compile(backend=fact) had imported fact.compose, 9 additive-mask attentions
    where 27 were drawn alone). Its pool of them is pinned empty; its own built-in constants stay."""
    from hypothesis.internal.conjecture import providers

    if not hasattr(providers, "_get_local_constants"):  # a hypothesis without the pool
        yield
        return
    providers.CONSTANTS_CACHE.cache.clear()  # what earlier draws cached from the pool
    with mock.patch.object(providers, "_get_local_constants", providers.Constants):
        yield
    providers.CONSTANTS_CACHE.cache.clear()


_DISCOVER = importlib.import_module("fact.discover.discover")  # the stage module, not the function


class _NoExemplars:
    """A knowledge base with nothing in it: retrieval has no part in what a match means."""

    def query(self, *args: Any, **kwargs: Any) -> list[Any]:
        return []

    def snapshot(self) -> Any:
        from fact.knowledge.store import Snapshot

        return Snapshot([], [], [])


class Misread(Exception):
    """The reading cannot mean what the module computes (the message says why)."""


# --- the oracle ----------------------------------------------------------------------------------

def _draw(x: Any, gen: torch.Generator, scale: float) -> Any:
    if not isinstance(x, torch.Tensor):
        return x
    if x.is_floating_point():
        return (torch.rand(x.shape, generator=gen, dtype=torch.float64) * 2 - 1) * scale
    if x.dtype is torch.bool:
        return torch.rand(x.shape, generator=gen) < 0.7
    return torch.zeros(x.shape, dtype=x.dtype)


def _run_graph(gm64: Any, inputs: list[Any]) -> dict[str, Any]:
    """Every node's value (by name) when the float64 graph runs on `inputs`."""
    values: dict[str, Any] = {}

    class Recorder(torch.fx.Interpreter):
        def run_node(self, n: Any) -> Any:
            out = super().run_node(n)
            values[n.name] = out.clone() if isinstance(out, torch.Tensor) else out  # as it was, before any in-place op
            return out

    with torch.no_grad():
        Recorder(gm64).run(*inputs)
    return values


def _f64(t: Any) -> torch.Tensor:
    if not isinstance(t, torch.Tensor):
        raise Misread(f"operand {t!r} is not a tensor")
    return t.double() if t.is_floating_point() else t


def _softplus(y: torch.Tensor) -> torch.Tensor:
    return torch.where(y > 30, y, torch.log1p(torch.exp(torch.clamp(y, max=30))))


def _step(y: torch.Tensor, kind: str, a: float | None, b: float | None) -> torch.Tensor:
    """One epilogue step, written from its definition."""
    if kind == "scale":
        if a is None:
            raise Misread("a scale step without its factor")
        return y * a
    if kind == "relu":
        return torch.where(y > 0, y, torch.zeros_like(y))
    if kind == "leaky_relu":
        slope = 0.01 if a is None else a
        return torch.where(y >= 0, y, slope * y)
    if kind == "clamp":
        if a is None and b is None:
            raise Misread("a clamp step without bounds")
        if a is not None:
            y = torch.maximum(y, torch.full_like(y, a))
        return y if b is None else torch.minimum(y, torch.full_like(y, b))
    if kind == "sigmoid":
        return 1 / (1 + torch.exp(-y))
    if kind == "silu":
        return y / (1 + torch.exp(-y))
    if kind == "tanh":
        return torch.tanh(y)
    if kind == "gelu_erf":
        return 0.5 * y * (1 + torch.erf(y / math.sqrt(2)))
    if kind == "gelu_tanh":
        return 0.5 * y * (1 + torch.tanh(math.sqrt(2 / math.pi) * (y + 0.044715 * y ** 3)))
    if kind == "mish":
        return y * torch.tanh(_softplus(y))
    raise Misread(f"unknown epilogue step {kind!r}")


def _gemm_reading(match: Match, value: Callable[[str], Any]) -> torch.Tensor:
    roles = dict(match.operands)
    if len(roles) != len(match.operands):
        raise Misread(f"a role named twice in {match.operands}")
    if "a" not in roles or ("b" in roles) == ("w" in roles):
        raise Misread(f"GEMM operands {match.operands}")
    a = _f64(value(roles["a"]))
    b = _f64(value(roles["b"])) if "b" in roles else _f64(value(roles["w"])).transpose(-2, -1)
    p = match.problem
    assert p is not None
    if a.shape[-1] != p.k or b.shape[-2:] != (p.k, p.n) or a.numel() != p.m * p.k * (p.batch if b.dim() > 2 else 1):
        raise Misread(f"operands {tuple(a.shape)} x {tuple(b.shape)} are not the problem {p}")
    if b.dim() > 2 and a.shape[:-2] != b.shape[:-2]:  # a batched kernel reads one B per batch
        raise Misread(f"a batched product broadcasting {tuple(a.shape)} x {tuple(b.shape)}")
    y = a @ b
    args = match.epilogue_args or ((None, None),) * len(match.epilogue)
    if len(args) != len(match.epilogue):
        raise Misread("epilogue steps and constants differ in number")
    for kind, (lo, hi) in zip(match.epilogue, args, strict=True):
        if kind == "bias":  # a row vector of N, broadcast over every row (what the kernel reads)
            bias = _f64(value(roles.get("bias", "")))
            if bias.numel() != p.n or bias.shape[-1] != p.n:
                raise Misread(f"a bias of shape {tuple(bias.shape)} for N={p.n}")
            y = y + bias.reshape(p.n)
        elif kind == "residual":  # a tensor of the output's shape
            residual = _f64(value(roles.get("residual", "")))
            if residual.shape != y.shape:
                raise Misread(f"a residual of shape {tuple(residual.shape)} for an output {tuple(y.shape)}")
            y = y + residual
        else:
            y = _step(y, kind, lo, hi)
    return y


def _attention_reading(match: Match, value: Callable[[str], Any]) -> torch.Tensor:
    a = match.attention
    assert a is not None
    roles = dict(match.operands)
    q, k, v = (_f64(value(roles[r])) for r in ("q", "k", "v"))
    if q.shape[-1] != a.head_dim or q.shape[-2] != a.seq_q or k.shape[-2] != a.seq_k:
        raise Misread(f"q {tuple(q.shape)}, k {tuple(k.shape)} are not the attention {a}")
    if not q.shape[:-2] == k.shape[:-2] == v.shape[:-2]:  # a fused kernel reads one k and v per head
        raise Misread(f"k {tuple(k.shape)} and v {tuple(v.shape)} broadcast over q {tuple(q.shape)}")
    scores = (q @ k.transpose(-2, -1)) * (a.scale if a.scale is not None else a.head_dim ** -0.5)
    if a.mask == "causal":
        future = torch.ones(a.seq_q, a.seq_k, dtype=torch.bool).triu(1)
        scores = scores.masked_fill(future, -math.inf)
    elif a.mask == "additive":
        if "mask" not in roles:
            raise Misread("an additive mask without its tensor")
        scores = scores + _f64(value(roles["mask"]))
    elif a.mask != "none":
        raise Misread(f"mask {a.mask!r}")
    weights = torch.exp(scores - scores.amax(-1, keepdim=True))
    return (weights / weights.sum(-1, keepdim=True)) @ v


def reading(match: Match, value: Callable[[str], Any]) -> torch.Tensor:
    """What the match says its output is, in float64, from its operands' values."""
    return _attention_reading(match, value) if match.attention is not None else _gemm_reading(match, value)


def _as_output(want: torch.Tensor, got: Any, match: Match) -> torch.Tensor:
    if not isinstance(got, torch.Tensor):
        raise Misread("the match's output node is not a tensor")
    if want.shape == got.shape:
        return want
    if match.attention is not None and want.dim() == 4 and got.dim() == 3 and want.numel() == got.numel():
        return want.transpose(1, 2).reshape(got.shape)  # the head merge [B, H, S, D] -> [B, S, H*D]
    raise Misread(f"the reading is {tuple(want.shape)}, the module's value {tuple(got.shape)}")


def relative_error(got: torch.Tensor, want: torch.Tensor) -> float:
    got, want = got.double(), want.double()
    if not torch.equal(torch.isnan(got), torch.isnan(want)):
        return math.inf
    inf_got, inf_want = torch.isinf(got), torch.isinf(want)
    if not torch.equal(inf_got, inf_want) or not torch.equal(got[inf_got], want[inf_want]):
        return math.inf
    finite = ~(torch.isnan(want) | inf_want)
    got, want = got[finite], want[finite]
    norm = float(want.norm())
    if norm == 0.0:
        return 0.0 if float(got.norm()) == 0.0 else math.inf
    return float((got - want).norm()) / norm


def _depends_on_inputs(node: Any) -> bool:
    seen, stack = set(), [node]
    while stack:
        n = stack.pop()
        if n.op == "placeholder":
            return True
        if n not in seen:
            seen.add(n)
            stack.extend(n.all_input_nodes)
    return False


def _structure(captured: Any, match: Match) -> str | None:
    """Why the nodes a match covers cannot be replaced by one kernel writing its output, or None."""
    nodes = {n.name: n for n in captured.graph_module.graph.nodes}
    covered = set(match.nodes)
    if match.output not in covered or match.anchor not in covered or not covered <= set(nodes):
        return f"output {match.output} / anchor {match.anchor} outside the nodes {match.nodes}"
    for name in covered - {match.output}:
        outside = [u.name for u in nodes[name].users if u.name not in covered]
        if outside and _depends_on_inputs(nodes[name]):
            return f"{name} is replaced, but {outside} still read it"
    spec = captured.spec(nodes[match.output])
    if spec is not None and spec.dtype is not match.dtype:
        return f"the module's output {match.output} is {spec.dtype.value}; the kernel writes {match.dtype.value}"
    return None


def _widened(gm: Any) -> Any:
    """A float64 copy of the graph in which casts to narrower float types are casts to float64: they
    round, they do not change what the module means."""
    gm64 = copy.deepcopy(gm).double().eval()
    narrow = (torch.float32, torch.float16, torch.bfloat16)

    def widen(a: Any) -> Any:
        if isinstance(a, (list, tuple)):
            return type(a)(widen(x) for x in a)
        if isinstance(a, dict):
            return {k: widen(v) for k, v in a.items()}
        return torch.float64 if isinstance(a, torch.dtype) and a in narrow else a

    for n in list(gm64.graph.nodes):
        if "_assert_tensor_metadata" in str(n.target):  # torch.export's pins of the dtypes widened here
            gm64.graph.erase_node(n)
            continue
        if n.op == "call_method" and n.target in ("float", "half", "bfloat16"):
            n.target = "double"
        n.args, n.kwargs = widen(n.args), widen(n.kwargs)
    gm64.recompile()
    return gm64


class Oracle:
    """The module's graph in float64 and the module itself in float64, run on fresh inputs."""

    def __init__(self, case: Case, captured: Any, module: torch.nn.Module) -> None:
        self.case, self.captured = case, captured
        self.gm64 = _widened(captured.graph_module)
        self.module64 = copy.deepcopy(module).double().eval()
        self.placeholders = [n.name for n in captured.graph_module.graph.nodes if n.op == "placeholder"]
        self.runs = []
        for i, scale in enumerate(ATTENTION_SCALES if case.kind == "attention" else SCALES):
            gen = torch.Generator().manual_seed(100 + i)
            inputs = [_draw(x, gen, scale) for x in case.inputs]
            self.runs.append((inputs, _run_graph(self.gm64, inputs)))
        out = next(n for n in captured.graph_module.graph.nodes if n.op == "output")
        whole = out.args[0]
        self.whole = whole.name if hasattr(whole, "name") else None  # the node the module returns, if one
        # the module's own eager forward rounds at its casts
        self.eager_tol = EAGER_TOL_WITH_CASTS if case.casts else TOL

    def excess(self, match: Match) -> tuple[float, str]:
        """How far the reading is from the module, in tolerances (at most 1: right), and why."""
        why = _structure(self.captured, match)
        if why is not None:
            return math.inf, why
        worst, note = 0.0, ""
        with torch.no_grad():
            for inputs, values in self.runs:
                by_name = dict(zip(self.placeholders, inputs, strict=False))

                def value(ref: str, values: dict[str, Any] = values, by_name: dict[str, Any] = by_name) -> Any:
                    if ref.startswith("param:"):
                        return self.gm64.get_parameter(ref.removeprefix("param:"))
                    if ref in by_name:
                        return by_name[ref]
                    if ref not in values:
                        raise Misread(f"operand {ref!r} names no node")
                    return values[ref]

                try:
                    want = reading(match, value)
                    got = values.get(match.output)
                    err = relative_error(got, _as_output(want, got, match)) / TOL
                    if err > worst:
                        worst, note = err, "against the module's graph"
                    if match.output == self.whole and self.case.well_formed:  # the module's eager forward
                        try:
                            eager = self.module64(*inputs)
                        except RuntimeError:  # a cast inside the module meets a float64 operand
                            continue
                        err = relative_error(eager, _as_output(want, eager, match)) / self.eager_tol
                        if err > worst:
                            worst, note = err, "against the module's eager forward"
                except Misread as exc:
                    return math.inf, str(exc)
        return worst, f"{worst:.3g} tolerances off, {note}"


def _describe(match: Match) -> str:
    if match.attention is not None:
        return f"{match.id} attention mask={match.attention.mask} scale={match.attention.scale}"
    return f"{match.id} {match.problem} {list(zip(match.epilogue, match.epilogue_args, strict=False))} {match.operands}"


def _discover(case: Case, module: torch.nn.Module, registry: PatternRegistry) -> fact.Plan:
    return fact.discover(module, case.inputs, arch="sm90", kb=_NoExemplars(), registry=registry, level=case.level)


def _runs_in_pytorch(case: Case) -> bool:
    gen = torch.Generator().manual_seed(0)
    inputs = [_draw(x, gen, 1.0).to(x.dtype) for x in case.inputs]
    try:
        with torch.no_grad():
            case.module()(*inputs)
    except Exception:
        return False
    return True


@dataclass
class Tally:
    """What a run of generated modules came to: counts, and the refusals and misreadings with their modules."""

    counts: Counter = field(default_factory=Counter)
    refusals: list[tuple[str, Case]] = field(default_factory=list)
    misreadings: list[tuple[str, Case]] = field(default_factory=list)

    def check(self, label: str) -> None:
        """Refusals of right readings stay rare; the counts go to the report (pytest -s shows them)."""
        readings, refused = self.counts["well-formed readings"], self.counts["well-formed refused"]
        print(f"\n{label}: {dict(sorted(self.counts.items()))}")
        for text, case in self.refusals[:10]:
            print(f"  refused: {text}\n{case!r}")
        assert readings > 0
        assert refused <= MAX_REFUSAL_RATE * readings, (
            f"{refused} of {readings} readings of well-formed modules refused, e.g. {self.refusals[:3]}")


# --- the properties ------------------------------------------------------------------------------

def examine(case: Case, tally: Tally, registry: PatternRegistry) -> None:
    """The property for one module: every raw reading is right or refused, every planned one is right,
    and the readings of a well-formed module are right."""
    module = case.module()
    captures: list[Any] = []

    def kept_capture(*args: Any, **kwargs: Any) -> Any:  # the graph discover reads, kept for the raw readings
        captures.append(capture(*args, **kwargs))
        return captures[-1]

    try:
        with mock.patch.object(_DISCOVER, "capture", kept_capture):
            plan = _discover(case, module, registry)  # any exception but CaptureError fails the test
    except CaptureError as exc:
        assert not _runs_in_pytorch(case), f"capture failed on a module PyTorch runs: {exc}"
        tally.counts["capture refused"] += 1
        return
    [captured] = captures
    raw = match_graph(captured).matches
    planned = plan.matches
    assert all(m in raw for m in planned), "discover planned a reading the matcher did not make"
    try:
        oracle = Oracle(case, captured, module)
    except Exception as exc:  # shapes fake tensors let through, and PyTorch itself refuses
        assert not _runs_in_pytorch(case), f"the module runs in PyTorch, but not its graph: {exc}"
        assert not planned, "discover planned a reading of a module that does not run"
        tally.counts["does not run"] += 1
        return
    group = "well-formed" if case.well_formed else "random"
    for m in raw:
        excess, why = oracle.excess(m)
        tally.counts[f"{group} readings"] += 1
        tally.counts[f"{group} {m.pattern}" + (f" ({m.attention.mask} mask)" if m.attention else "")] += 1
        if m in planned:
            assert excess <= 1.0, f"discover planned a misreading: {_describe(m)}: {why}"
        else:
            tally.counts[f"{group} refused"] += 1
            reason = next((r.reason for r in plan.rejections if r.node == m.anchor), "?")
            tally.refusals.append((f"{_describe(m)}: {reason}", case))
        if excess > 1.0:
            tally.counts[f"{group} raw misreadings"] += 1
            tally.misreadings.append((f"{_describe(m)}: {why}", case))
            assert not case.well_formed, f"the matcher misread a well-formed module: {_describe(m)}: {why}"


def test_draws_do_not_depend_on_the_modules_imported_before(tmp_path, monkeypatch) -> None:
    """A project module full of constants, imported between two runs of the same derandomized property,
    leaves what it draws as it was: the cases above must not follow which of fact's modules earlier
    tests imported (hypothesis draws those constants, when it does, only in ranges that hold them)."""
    runs: list[list[tuple[int, float]]] = []

    @settings(max_examples=200, **{**SETTINGS, "derandomize": True})
    @given(st.integers(100, 899), st.floats(0.01, 3.0))
    def prop(size: int, factor: float) -> None:
        runs[-1].append((size, factor))

    runs.append([])
    prop()
    path = tmp_path / "many_constants.py"  # where hypothesis reads constants from: not a test file, not installed
    path.write_text(f"SIZES = {list(range(100, 900))}\nFACTORS = {[k / 64 + 0.001 for k in range(1, 192)]}\n")
    spec = importlib.util.spec_from_file_location("many_constants", path)
    assert spec is not None and spec.loader is not None
    constants = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(constants)
    monkeypatch.setitem(sys.modules, "many_constants", constants)
    runs.append([])
    prop()
    assert len(runs[0]) == 200 and runs[1] == runs[0]


def test_a_few_generated_modules_quickly(tmp_path) -> None:
    """The property on a handful of modules of each kind, for runs that leave the slow tests out."""
    tally = Tally()
    registry = PatternRegistry(tmp_path / "patterns.sqlite")

    @settings(max_examples=QUICK_EXAMPLES, **SETTINGS)
    @given(st.one_of(gemm_cases(), attention_cases()))
    def prop(case: Case) -> None:
        examine(case, tally, registry)

    prop()
    tally.check("quick")


@pytest.mark.slow
def test_gemm_readings_are_the_modules_own_or_refused(tmp_path) -> None:
    tally = Tally()
    registry = PatternRegistry(tmp_path / "patterns.sqlite")

    @settings(max_examples=GEMM_EXAMPLES, **SETTINGS)
    @given(gemm_cases())
    def prop(case: Case) -> None:
        examine(case, tally, registry)

    prop()
    tally.check("gemm")
    assert tally.counts["well-formed gemm_epilogue"] > GEMM_EXAMPLES // 5  # the generator reaches epilogues


@pytest.mark.slow
def test_attention_readings_are_the_modules_own_or_refused(tmp_path) -> None:
    tally = Tally()
    registry = PatternRegistry(tmp_path / "patterns.sqlite")

    @settings(max_examples=ATTENTION_EXAMPLES, **SETTINGS)
    @given(attention_cases())
    def prop(case: Case) -> None:
        examine(case, tally, registry)

    prop()
    tally.check("attention")
    for mask in ("none", "causal", "additive"):
        assert tally.counts[f"well-formed attention ({mask} mask)"] > ATTENTION_EXAMPLES // 50


@pytest.mark.slow
def test_readings_checked_at_a_reduced_batch_are_right_or_refused(tmp_path) -> None:
    """Modules too large to re-run whole are checked with a cut batch (or through a re-capture at
    ATen level): that path, forced here on small modules, must also plan no misreading and never raise.
    It refuses more (an input whose first dimension is not a batch cannot be cut), so no rate is asserted
    beyond it being a minority."""
    tally = Tally()
    registry = PatternRegistry(tmp_path / "patterns.sqlite")

    @settings(max_examples=REDUCED_EXAMPLES, **SETTINGS)
    @given(st.one_of(gemm_cases(), attention_cases()))
    def prop(case: Case) -> None:
        examine(case, tally, registry)

    with mock.patch.object(semantics, "FULL_SHAPE_FLOPS", 0):
        prop()
    print(f"\nreduced batch: {dict(sorted(tally.counts.items()))}")
    assert tally.counts["well-formed refused"] <= 0.3 * tally.counts["well-formed readings"]


# --- planted misreadings -------------------------------------------------------------------------

def plant(match: Match, draw: Any) -> tuple[str, Match]:
    """A reading that differs from `match` in one thing a kernel would get wrong, and what that is."""
    roles = dict(match.operands)
    if match.attention is not None:
        a = match.attention
        how = draw(st.sampled_from(["mask", "scale", *(["swap q and k"] if a.seq_q == a.seq_k else [])]))
        if how == "scale":
            scale = (a.scale if a.scale is not None else a.head_dim ** -0.5) * draw(st.sampled_from([0.5, 2.0, -1.0]))
            return how, dataclasses.replace(match, attention=dataclasses.replace(a, scale=scale))
        if how == "swap q and k":
            return how, _swapped(match, "q", "k")
        mask = {"causal": "none", "none": "causal", "additive": "none"}[a.mask]
        return how, dataclasses.replace(match, attention=dataclasses.replace(a, mask=mask))
    steps, args = list(match.epilogue), list(match.epilogue_args or ((None, None),) * len(match.epilogue))
    tuned = [i for i, (lo, hi) in enumerate(args) if lo is not None or hi is not None]
    kinds = ["add a step", *(["constant"] if tuned else []), *(["drop a step"] if steps else []),
             *(["another activation"] if any(s in _OTHER for s in steps) else []),
             *(["swap a and b"] if {"a", "b"} <= roles.keys() else [])]
    how = draw(st.sampled_from(kinds))
    if how == "constant":
        i = draw(st.sampled_from(tuned))
        lo, hi = args[i]
        if (draw(st.booleans()) and lo is not None) or hi is None:
            lo = (lo or 0.0) + max(0.25, abs(lo or 0.0) / 2)
        else:
            hi = hi - max(0.25, abs(hi) / 2)
        args[i] = (lo, hi)
    elif how == "drop a step":
        i = draw(st.integers(0, len(steps) - 1))
        del steps[i], args[i]
    elif how == "another activation":
        i = next(j for j, s in enumerate(steps) if s in _OTHER)
        steps[i], args[i] = _OTHER[steps[i]], (None, None)
    elif how == "swap a and b":
        return how, _swapped(match, "a", "b")
    else:
        steps.append(draw(st.sampled_from(["relu", "sigmoid", "tanh", "gelu_erf", "scale"])))
        args.append((draw(st.sampled_from([0.5, -2.0, 3.0])), None) if steps[-1] == "scale" else (None, None))
    return how, dataclasses.replace(match, epilogue=tuple(steps), epilogue_args=tuple(args))


def _swapped(match: Match, one: str, other: str) -> Match:
    roles = dict(match.operands)
    swap = {one: roles[other], other: roles[one]}
    return dataclasses.replace(match, operands=tuple((r, swap.get(r, ref)) for r, ref in match.operands))


_OTHER = {"relu": "gelu_erf", "gelu_erf": "gelu_tanh", "gelu_tanh": "gelu_erf", "silu": "sigmoid",
          "sigmoid": "silu", "tanh": "sigmoid", "mish": "silu", "leaky_relu": "relu", "clamp": "relu"}


@pytest.mark.slow
def test_planted_misreadings_are_always_refused(tmp_path) -> None:
    """discover, its matcher replaced by one that plants a misreading in each reading it makes, keeps
    none of them: the module check can fail, and does, for every kind of misreading."""
    counts: Counter = Counter()
    registry = PatternRegistry(tmp_path / "patterns.sqlite")

    @settings(max_examples=PLANTED_EXAMPLES, **SETTINGS)
    @given(st.one_of(gemm_cases(), attention_cases()), st.data())
    def prop(case: Case, data: st.DataObject) -> None:
        module = case.module()
        wrong: list[Match] = []

        def planting_matcher(captured: Any, **kwargs: Any) -> MatchResult:
            raw = match_graph(captured, **kwargs)
            try:
                oracle = Oracle(case, captured, module)
            except Exception:  # a module PyTorch itself cannot run (test_*_or_refused says so)
                return MatchResult(rejections=list(raw.rejections))
            for m in raw.matches:
                how, planted = plant(m, data.draw)
                if planted in raw.matches:
                    continue
                counts[f"planted: {how}"] += 1
                if oracle.excess(planted)[0] > 1e3:  # off by 1e-3 at least: a misreading on any inputs
                    counts[f"wrong: {how}"] += 1
                    wrong.append(planted)
            return MatchResult(matches=list(wrong), rejections=list(raw.rejections))

        with mock.patch.object(_DISCOVER, "match_graph", planting_matcher):
            try:
                plan = _discover(case, module, registry)
            except CaptureError:
                return
        kept = [m for m in wrong if m in plan.matches]
        assert not kept, f"a planted misreading was kept: {[_describe(m) for m in kept]}"

    prop()
    print(f"\nplanted: {dict(sorted(counts.items()))}")
    planted = sum(v for k, v in counts.items() if k.startswith("planted"))
    assert sum(v for k, v in counts.items() if k.startswith("wrong")) >= 0.8 * planted > 0
