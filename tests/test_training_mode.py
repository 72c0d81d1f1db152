"""The train/eval mode of a module-level capture: calls reading `self.training` (F.dropout and its kin)
follow the mode the returned graph is put in, with the flag the calling module had at capture; a
forward that otherwise depends on the mode gets a graph of its own mode that refuses the other."""

from __future__ import annotations

import copy
import io

import pytest
import torch
from torch import nn
from torch.nn import functional as F

from fact.capture import capture, mode_is_fixed
from fact.capture.modes import ModeError, ModeGuard
from fact.discover import discover_captured
from fact.patterns import match_graph
from fact.verify.semantics import check_matches

from .test_compose import _dispatches, composed

X = torch.randn(4224, 256)  # over 32 output tiles: exact fp32 serves a K this short (choose.exact_refusal)


class DropoutBetween(nn.Module):
    """Linear -> F.dropout(training=self.training) -> Linear."""

    def __init__(self, training_arg: str = "training=self.training") -> None:
        super().__init__()
        self.fc = nn.Linear(256, 256)
        self.proj = nn.Linear(256, 256)
        self.training_arg = training_arg

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.fc(x)
        if self.training_arg == "training=self.training":
            y = F.dropout(y, 0.5, training=self.training)
        elif self.training_arg == "positional":
            y = F.dropout(y, 0.5, self.training)
        elif self.training_arg == "training=False":
            y = F.dropout(y, 0.5, training=False)
        else:
            y = F.dropout(y, 0.5, training=True)
        return self.proj(y)


def _followers(gm: torch.fx.GraphModule) -> dict[str, nn.Module]:
    """The leaf modules capture put where a call followed the mode, by node name."""
    return {n.name: gm.get_submodule(n.target) for n in gm.graph.nodes
            if n.op == "call_module" and "follows_mode" in str(n.target)}


def _dropped(gm: torch.fx.GraphModule, module: nn.Module, x: torch.Tensor) -> float:
    """The share of zeros `module` (a submodule of gm) puts out in a call of gm."""
    out = []
    handle = module.register_forward_hook(lambda mod, args, result: out.append(result))
    try:
        with torch.no_grad():
            gm(x)
    finally:
        handle.remove()
    return float((out[0] == 0).float().mean())


def _calls(gm: torch.fx.GraphModule, x: torch.Tensor, seeds: tuple[int, ...] = (0, 1)) -> list[torch.Tensor]:
    outs = []
    for seed in seeds:
        torch.manual_seed(seed)
        with torch.no_grad():
            outs.append(gm(x))
    return outs


@pytest.mark.parametrize("form", ["training=self.training", "positional"])
def test_a_functional_dropout_reading_the_mode_follows_the_captured_graphs_mode(form: str) -> None:
    torch.manual_seed(0)
    module = DropoutBetween(form).eval()
    gm = capture(module, [X]).graph_module
    [dropout] = _followers(gm).values()
    assert type(dropout) is nn.Dropout and (dropout.p, dropout.inplace, dropout.training) == (0.5, False, False)
    assert not any(n.target is F.dropout for n in gm.graph.nodes)
    with torch.no_grad():
        torch.testing.assert_close(gm(X), module(X), rtol=0, atol=0)
    gm.train()
    first, second = _calls(gm, X)
    assert not torch.equal(first, second)  # drops, at random
    assert 0.45 < _dropped(gm, dropout, X) < 0.55
    gm.eval()
    first, second = _calls(gm, X)
    assert torch.equal(first, second)
    with torch.no_grad():
        torch.testing.assert_close(first, module(X), rtol=0, atol=0)
    assert module.training is False and module.fc.training is False  # the caller's modes, as they were


def _functional(fn):
    class Functional(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return fn(self, x)
    return Functional()


@pytest.mark.parametrize(("fn", "cls", "settings", "shape"), [
    (lambda m, x: F.dropout1d(x, 0.3, m.training), nn.Dropout1d, {"p": 0.3}, (4, 16, 32)),
    (lambda m, x: F.dropout2d(x, p=0.3, training=m.training), nn.Dropout2d, {"p": 0.3}, (4, 16, 8, 8)),
    (lambda m, x: F.dropout3d(x, 0.3, m.training, False), nn.Dropout3d, {"p": 0.3}, (2, 16, 4, 4, 4)),
    (lambda m, x: F.alpha_dropout(x, 0.2, m.training), nn.AlphaDropout, {"p": 0.2}, (64, 256)),
    (lambda m, x: F.feature_alpha_dropout(x, 0.2, training=m.training), nn.FeatureAlphaDropout, {"p": 0.2},
     (4, 16, 8, 8)),
    (lambda m, x: F.rrelu(x, 0.1, 0.3, m.training), nn.RReLU, {"lower": 0.1, "upper": 0.3}, (64, 256)),
    (lambda m, x: F.rrelu(x.clone(), lower=0.2, training=m.training, inplace=True), nn.RReLU,
     {"lower": 0.2, "upper": 1 / 3, "inplace": True}, (64, 256)),
], ids=["dropout1d", "dropout2d", "dropout3d", "alpha_dropout", "feature_alpha_dropout", "rrelu", "rrelu-keywords"])
def test_every_functional_that_reads_the_mode_becomes_its_module(fn, cls, settings, shape) -> None:
    module = _functional(fn).eval()
    x = torch.randn(shape)
    gm = capture(module, [x]).graph_module
    [follower] = _followers(gm).values()
    assert type(follower) is cls and not follower.training
    assert {name: getattr(follower, name) for name in settings} == settings
    with torch.no_grad():
        assert torch.equal(gm(x), module(x))
    gm.train()
    first, second = _calls(gm, x)
    assert not torch.equal(first, second)


class Attention(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.qkv = nn.Linear(64, 192)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = self.qkv(x).split(64, dim=-1)
        att = F.softmax(q @ k.transpose(-2, -1) / 8.0, dim=-1)
        att = F.dropout(att, 0.5, training=self.training)
        return att @ v


class Block(nn.Module):
    """An inlined (non-leaf) attention whose dropout reads the attention's own flag."""

    def __init__(self) -> None:
        super().__init__()
        self.attn = Attention()
        self.proj = nn.Linear(64, 64)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.proj(self.attn(x))


@pytest.mark.parametrize(("root", "attn"), [(False, False), (False, True), (True, False)])
def test_a_dropout_of_an_inlined_submodule_takes_that_submodules_flag(root: bool, attn: bool) -> None:
    module = Block().train(root)
    module.attn.train(attn)  # e.g. Monte Carlo dropout kept on in an eval model
    x = torch.randn(2, 32, 64)
    gm = capture(module, [x]).graph_module
    [dropout] = _followers(gm).values()
    assert dropout.training is attn and gm.training is root
    assert (module.training, module.attn.training, module.proj.training) == (root, attn, root)
    gm.train()
    assert _calls(gm, x)[0].shape == (2, 32, 64) and 0.4 < _dropped(gm, dropout, x) < 0.6
    gm.eval()
    assert _dropped(gm, dropout, x) < 0.05 and torch.equal(*_calls(gm, x))
    with torch.no_grad():
        torch.testing.assert_close(gm(x), module.eval()(x), rtol=0, atol=0)


def test_literal_training_flags_stay_as_they_are() -> None:
    off = capture(DropoutBetween("training=False").train(), [X]).graph_module
    on = capture(DropoutBetween("training=True").eval(), [X]).graph_module
    for gm in (off, on):
        assert not _followers(gm) and [n.target for n in gm.graph.nodes if n.op == "call_function"] == [F.dropout]
    off.train()
    assert torch.equal(*_calls(off, X))  # training=False never drops, whatever the mode
    assert not torch.equal(*_calls(on, X))  # training=True drops in eval mode too


@pytest.mark.parametrize(("make", "nodes"), [
    (lambda: DropoutBetween("training=True").eval(), ("fc",)),
    (lambda: DropoutBetween().train(), ("fc",)),
    (lambda: DropoutBetween().eval(), ("fc", "dropout_follows_mode_0")),
    (lambda: DropoutBetween("training=False").train(), ("fc", "dropout")),
], ids=["literal-true", "following-training", "following-eval", "literal-false"])
def test_a_dropout_that_drops_ends_the_match_as_a_training_dropout_module_does(make, nodes) -> None:
    result = match_graph(capture(make(), [X]), arch="sm90")
    first = next(m for m in result.matches if m.anchor == "fc")
    assert first.nodes == nodes and first.epilogue == ("bias",)
    reasons = [r.reason for r in result.rejections]
    assert any("an active dropout (p=0.5, in training)" in r for r in reasons) is (len(nodes) == 1), reasons


class RreluAfter(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(256, 256)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.rrelu(self.fc(x), 0.1, 0.3, self.training)


@pytest.mark.parametrize("mode", [False, True], ids=["eval", "train"])
def test_a_functional_rrelu_reading_the_mode_is_read_as_its_module(mode: bool) -> None:
    """In eval mode the leaky_relu of its mean slope, which joins the match; in training, random."""
    result = match_graph(capture(RreluAfter().train(mode), [X]), arch="sm90")
    first = next(m for m in result.matches if m.anchor == "fc")
    if mode:
        assert first.nodes == ("fc",) and first.epilogue == ("bias",)
    else:
        assert first.nodes == ("fc", "rrelu_follows_mode_0") and first.epilogue == ("bias", "leaky_relu")
        assert first.epilogue_args[1] == (pytest.approx(0.2), None)
    reasons = [r.reason for r in result.rejections]
    assert any("an RReLU in training draws its negative slope" in r for r in reasons) is mode, reasons


class DropoutMlp(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(64, 128)
        self.proj = nn.Linear(128, 64)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.proj(F.relu(F.dropout(self.fc(x), 0.5, training=self.training)))


def test_a_module_composed_in_eval_mode_drops_once_put_in_training_mode() -> None:
    torch.manual_seed(0)
    module = DropoutMlp().eval()
    x = torch.randn(4224, 64)
    gm, _ = composed(module, [x])
    fc = next(d for d in _dispatches(gm) if d.call is not None and "fc" in d.original._modules)
    assert ("dropout_follows_mode_0", "training", False) in fc.call.settings  # read through, as the identity
    with torch.no_grad():
        torch.testing.assert_close(gm(x), module(x), rtol=1e-4, atol=1e-4)
    assert fc.kernel_calls == 1
    gm.train()
    first, second = _calls(gm, x)
    assert not torch.equal(first, second) and fc.kernel_calls == 1  # the original ops, dropping
    gm.eval()
    with torch.no_grad():
        torch.testing.assert_close(gm(x), module(x), rtol=1e-4, atol=1e-4)
    assert fc.kernel_calls == 2


def test_a_module_composed_in_training_mode_drops_and_serves_once_in_eval_mode() -> None:
    torch.manual_seed(0)
    module = DropoutMlp().train()
    x = torch.randn(4224, 64)
    gm, _ = composed(module, [x])
    [dropout] = _followers(gm).values()
    assert gm.training and dropout.training
    assert 0.4 < _dropped(gm, dropout, x) < 0.6
    first, second = _calls(gm, x)
    assert not torch.equal(first, second)
    assert all(d.kernel_calls == 0 for d in _dispatches(gm))
    gm.eval()
    with torch.no_grad():
        torch.testing.assert_close(gm(x), module.eval()(x), rtol=1e-4, atol=1e-4)
    assert any(d.kernel_calls for d in _dispatches(gm))


class Branching(nn.Module):
    """A forward that takes another path in training mode: no one graph follows the mode."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(256, 256)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.relu(self.fc(x))
        if self.training:
            y = y * 0.5
        return y


@pytest.mark.parametrize("mode", [False, True], ids=["eval", "train"])
def test_a_forward_branching_on_the_mode_keeps_its_own_mode_and_refuses_the_other(mode: bool) -> None:
    module = Branching().train(mode)
    captured = capture(module, [X])
    gm = captured.graph_module
    [note] = [n for n in captured.trace_notes if "self.training" in n]
    own, other = ("training", "eval") if mode else ("eval", "training")
    assert f"computes as the module does in {own} mode" in note and f"refuses {other} mode" in note
    assert gm.training is mode and module.training is mode and mode_is_fixed(gm)
    with torch.no_grad():
        torch.testing.assert_close(gm(X), module(X), rtol=0, atol=0)  # the branch of its own mode
    with pytest.raises(ModeError, match=f"cannot be put in {other} mode.*synthesize it again"):
        gm.train(not mode)
    assert isinstance(ModeError("x"), RuntimeError)
    assert gm.train(mode) is gm and gm.training is mode  # its own mode is accepted
    copied, reloaded = copy.deepcopy(gm), _reloaded(gm)
    with torch.no_grad():
        torch.testing.assert_close(copied(X), module(X), rtol=0, atol=0)
        torch.testing.assert_close(reloaded(X), module(X), rtol=0, atol=0)
    with pytest.raises(ModeError, match=f"captured in {own} mode"):
        copied.train(not mode)  # the copy refuses as the original does
    assert gm.training is mode and copied.training is mode
    # unpickling a GraphModule keeps its graph and submodules, not an overridden train(): the guard refuses
    reloaded.train(not mode)
    with pytest.raises(ModeError, match=f"captured in {own} mode"), torch.no_grad():
        reloaded(X)


def _reloaded(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    buffer = io.BytesIO()
    torch.save(gm, buffer)
    buffer.seek(0)
    return torch.load(buffer, weights_only=False)


def test_a_guard_refuses_a_flag_set_behind_trains_back() -> None:
    gm = capture(Branching().eval(), [X]).graph_module
    [guard] = [m for m in gm.modules() if isinstance(m, ModeGuard)]
    guard.train()
    with pytest.raises(ModeError, match="captured in eval mode"), torch.no_grad():
        gm(X)


def test_a_forward_traceable_only_in_eval_mode_is_kept_in_eval_mode() -> None:
    class DataDependentInTraining(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(256, 256)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = self.fc(x)
            if self.training and y.sum() > 0:  # fx cannot trace a branch on a tensor's value
                y = -y
            return y

    module = DataDependentInTraining().eval()
    captured = capture(module, [X])
    [note] = [n for n in captured.trace_notes if "self.training" in n]
    assert "cannot be traced in training mode" in note
    with pytest.raises(ModeError):
        captured.graph_module.train()


class BranchingBeforeLinear(nn.Module):
    """Deterministic in both modes, by another path in each: the input is doubled in training mode."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(256, 256)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.relu(self.fc(x * 2 if self.training else x))


@pytest.mark.parametrize("mode", [False, True], ids=["eval", "train"])
def test_a_graph_of_one_mode_is_checked_in_float64_in_that_mode(mode: bool) -> None:
    module = BranchingBeforeLinear().train(mode)
    plan, captured = discover_captured(module, [X], arch="sm90")
    assert mode_is_fixed(captured.graph_module)
    assert not [r.reason for r in plan.rejections if r.node == "fc"]
    [item] = plan.items
    assert item.match.nodes == ("fc", "relu") and item.match.epilogue == ("bias", "relu")
    assert dict(item.match.operands)["a"] == ("mul" if mode else "x")
    [verdict] = check_matches(captured, [item.match], [X])
    assert verdict.agrees and verdict.rel_err < 1e-12, verdict.reason
    assert captured.graph_module.training is mode  # the check ran on a copy


def test_a_composed_branching_module_refuses_the_other_mode() -> None:
    torch.manual_seed(0)
    module = Branching().eval()
    gm, _ = composed(module, [X])
    assert any(d.call is not None for d in _dispatches(gm))
    with torch.no_grad():
        torch.testing.assert_close(gm(X), module(X), rtol=1e-4, atol=1e-4)
    with pytest.raises(ModeError):
        gm.train()
    assert not gm.training and not any(m.training for m in gm.modules())


def test_a_module_without_mode_dependence_gets_no_note_and_no_guard() -> None:
    captured = capture(nn.Sequential(nn.Linear(256, 256), nn.Dropout(0.1), nn.ReLU()).eval(), [X])
    assert not captured.trace_notes and not mode_is_fixed(captured.graph_module)
    assert not any(isinstance(m, ModeGuard) for m in captured.graph_module.modules())
    assert not _followers(captured.graph_module)
