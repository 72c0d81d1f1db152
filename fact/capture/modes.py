"""The train/eval mode in a module-level trace.

torch.fx runs forward on the live module, so `self.training` is read once and its value is baked into
the graph: `F.dropout(x, p, training=self.training)` becomes a dropout that never drops, or always
does, whatever mode the graph is later put in. Capture traces the module once in eval mode and once
in training mode (`follow_modes`). Where the two graphs differ only in such calls, each call becomes
the nn module that does the same thing (F.dropout -> nn.Dropout), a leaf of the graph with the flag
of the module whose forward made the call: it follows `train()` and `eval()` like any nn.Dropout.
Where they differ in anything else (`if self.training: ...`), no graph follows a change of mode: the
graph is the one the modules' own modes trace, and it refuses the other mode (`ModeError`).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

import torch
from torch import nn
from torch.nn import functional as F

from fact.core.errors import FactError

# A functional call whose `training` argument follows the module's mode -> the nn module computing the
# same call, and the call's arguments its constructor takes (by the same names)
FOLLOWERS: dict[Callable[..., Any], tuple[type[nn.Module], tuple[str, ...]]] = {
    F.dropout: (nn.Dropout, ("p", "inplace")),
    F.dropout1d: (nn.Dropout1d, ("p", "inplace")),
    F.dropout2d: (nn.Dropout2d, ("p", "inplace")),
    F.dropout3d: (nn.Dropout3d, ("p", "inplace")),
    F.alpha_dropout: (nn.AlphaDropout, ("p", "inplace")),
    F.feature_alpha_dropout: (nn.FeatureAlphaDropout, ("p", "inplace")),
    F.rrelu: (nn.RReLU, ("lower", "upper", "inplace")),
}
GUARD = "mode_guard"  # the stem of the name of a graph's ModeGuard submodule
# torch.fx's deepcopy of a GraphModule sets the attributes named in this entry of its meta again
_PRESERVED = "_user_preserved_attributes"


class ModeError(FactError, RuntimeError):
    """A module whose graph holds the computation of one mode was asked to run in the other."""


def follow_modes(module: nn.Module, evaluated: torch.fx.GraphModule, flags: dict[str, bool],
                 trace: Callable[[], torch.fx.GraphModule]) -> torch.fx.GraphModule:
    """The module-level graph of `module` that computes as the module does in every mode it is put in,
    or, where no graph can, the one that computes as it does in its modes at capture, refusing others.

    Args:
        module: the traced module, every submodule in eval mode (as capture traces it).
        evaluated: its symbolic trace in eval mode (changed in place when kept).
        flags: the `training` flag of each submodule by qualified name ("" the module itself), as the
            caller had them.
        trace: traces `module` in the modes its submodules are in now.

    Returns:
        `evaluated`, with every call that follows the mode replaced by its nn module; or, when the
        traces differ otherwise, a graph locked to the module's own mode (see `mode_note`).
    """
    now = [(m, m.training) for m in module.modules()]
    try:
        for m in module.modules():  # the flags only: a module's own train() may hold some submodules back
            m.training = True
        why: str | None
        try:
            trained = trace()
        except Exception as exc:  # a forward fx traces in eval mode only
            why = f"the forward cannot be traced in training mode ({type(exc).__name__}: {_first_line(exc)})"
        else:
            followers, why = _compare(evaluated, trained)
            if why is None:
                _replace(evaluated, followers, flags)
                return evaluated
        if any(flags.values()):  # the graph of the modes the caller had them in
            for name, m in module.named_modules():
                m.training = flags.get(name, flags[""])
            kept = trace()
        else:
            kept = evaluated
        lock(kept, flags[""], why)
        return kept
    finally:
        for m, mode in now:
            m.training = mode


def mode_note(gm: nn.Module) -> str | None:
    """What a graph locked to one mode (`lock`) says about it, for the capture's notes; else None."""
    guard = next((m for m in gm.children() if isinstance(m, ModeGuard)), None)
    if guard is None:
        return None
    mode, other = _names(guard.traced_mode)
    return (f"forward depends on self.training in a way no one graph follows ({guard.why}): the graph computes as "
            f"the module does in {mode} mode, the mode it was captured in, and the module fact returns refuses "
            f"{other} mode (use the original module in {other} mode, or put it in {other} mode and synthesize it "
            "again)")


def lock(gm: torch.fx.GraphModule, mode: bool, why: str) -> None:
    """Fix `gm` to `mode`: its train() refuses the other mode (as torch.export's module refuses both),
    and a ModeGuard first in its graph refuses a call in the other mode (a flag set behind train()'s
    back, or a copy that lost the override: a pickled GraphModule keeps its graph and submodules only).

    Args:
        gm: the graph module (changed in place).
        mode: the mode its graph computes (True: training).
        why: how the module's forward depends on the mode, for the messages.
    """
    guard = ModeGuard(mode, why)
    name = _free_name(gm, GUARD)
    gm.add_submodule(name, guard)
    first = next(n for n in gm.graph.nodes if n.op != "placeholder")
    with gm.graph.inserting_before(first):
        gm.graph.call_module(name, ())
    gm.recompile()
    gm.training = mode
    gm.train = _TracedMode(gm, mode, why)  # type: ignore[method-assign]
    gm.meta.setdefault(_PRESERVED, {})["train"] = gm.train


class ModeGuard(nn.Module):
    """The first call of a graph that computes one mode only: refuses to run in the other. A leaf of
    the graph, so it travels with it (pickled, copied, compiled); its flag follows the module's."""

    _is_impure = True  # torch.fx keeps it through dead-code elimination

    def __init__(self, traced_mode: bool, why: str) -> None:
        super().__init__()
        self.traced_mode = traced_mode
        self.why = why
        self.training = traced_mode

    def forward(self) -> None:
        if self.training != self.traced_mode:
            raise ModeError(refusal(self.traced_mode, self.why))

    def extra_repr(self) -> str:
        return f"traced_mode={'train' if self.traced_mode else 'eval'}"


class _TracedMode:
    """`train` of a graph module locked to one mode: the other mode raises ModeError; its own mode is
    nn.Module.train's. Pickled without its module (GraphModule's unpickling drops it: the ModeGuard
    refuses then); a deepcopy follows the copied module."""

    def __init__(self, module: Any, mode: bool, why: str) -> None:
        self.module, self.mode, self.why = module, mode, why

    def __call__(self, mode: bool = True) -> Any:
        if not isinstance(mode, bool):
            raise ValueError("training mode is expected to be boolean")
        if mode != self.mode:
            raise ModeError(refusal(self.mode, self.why))
        return nn.Module.train(self.module, mode)

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (None, self.mode, self.why))

    def __deepcopy__(self, memo: dict[int, Any]) -> _TracedMode:
        return type(self)(memo.get(id(self.module), self.module), self.mode, self.why)


def refusal(mode: bool, why: str) -> str:
    """The message of a ModeError: what happened, and what to do instead."""
    traced, other = _names(mode)
    return (f"this module was captured in {traced} mode and its forward depends on the mode ({why}): its graph "
            f"computes only as in {traced} mode, so it cannot be put in {other} mode. Use the original module in "
            f"{other} mode, or put the original in {other} mode and synthesize it again")


def _names(mode: bool) -> tuple[str, str]:
    return ("training", "eval") if mode else ("eval", "training")


@dataclass(frozen=True)
class _Ref:
    """A node argument, by name, so that the arguments of two graphs' nodes compare."""

    name: str


def _compare(evaluated: torch.fx.GraphModule, trained: torch.fx.GraphModule) -> tuple[list[torch.fx.Node], str | None]:
    """The nodes of `evaluated` whose call follows the mode (False where `trained` has True), and why the
    graphs differ otherwise (None when they do not). fx names nodes by the code path, so the same
    forward traces the same names in the same order."""
    a, b = list(evaluated.graph.nodes), list(trained.graph.nodes)
    followers = []
    for x, y in zip(a, b, strict=False):
        where = f"node {x.name} ({_describe(x)})"
        if (x.name, x.op) != (y.name, y.op) or not _same(x.target, y.target):
            return [], (f"traced in training mode the graph has {y.name} ({_describe(y)}) where in eval mode it has "
                        f"{x.name} ({_describe(x)})")
        if x.op == "call_function" and x.target in FOLLOWERS:
            seen, want = _bound(x), _bound(y)
            if seen is not None and want is not None:
                flag, trained_flag = seen.pop("training"), want.pop("training")
                if not _same(_refs(seen), _refs(want)):
                    return [], f"{where} has other arguments in training mode"
                if flag is False and trained_flag is True:
                    if not _buildable(x.target, seen):
                        return [], f"{where} follows the mode with arguments that are not constants"
                    followers.append(x)
                elif not _same(_refs(flag), _refs(trained_flag)):
                    return [], f"{where} has training={trained_flag} in training mode, {flag} in eval mode"
                continue
        if not (_same(_refs(x.args), _refs(y.args)) and _same(_refs(x.kwargs), _refs(y.kwargs))):
            return [], f"{where} has other arguments in training mode"
    if len(a) != len(b):  # fx ends every graph with its output node: one graph cannot be the other's start
        return [], f"traced in training mode the graph has {len(b)} nodes, in eval mode {len(a)}"
    return followers, None


def _replace(gm: torch.fx.GraphModule, followers: list[torch.fx.Node], flags: dict[str, bool]) -> None:
    """Each follower call becomes a call of its nn module, a new leaf of `gm` with the flag of the module
    whose forward made the call."""
    for node in followers:
        cls, names = FOLLOWERS[node.target]  # type: ignore[index]
        arguments = _bound(node)
        assert arguments is not None
        module = cls(**{name: arguments[name] for name in names})
        module.training = flags.get(_caller(node), flags[""])
        name = _free_name(gm, f"{getattr(node.target, '__name__', 'dropout')}_follows_mode")
        gm.add_submodule(name, module)
        with gm.graph.inserting_before(node):
            call = gm.graph.call_module(name, (arguments["input"],))
        call.meta.update(node.meta)
        node.replace_all_uses_with(call)
        gm.graph.erase_node(node)
    if followers:
        gm.recompile()


def _caller(node: torch.fx.Node) -> str:
    """The qualified name of the module whose forward made the call ("" the traced module itself): the
    innermost entry of the module stack torch.fx records, (qualified name, class) by key."""
    stack = node.meta.get("nn_module_stack") or {}
    if not stack:
        return ""
    key, value = list(stack.items())[-1]
    return str(value[0]) if isinstance(value, tuple) and value else str(key)


def _bound(node: torch.fx.Node) -> dict[str, Any] | None:
    """The call's arguments by parameter name, defaults filled in (positional or keyword alike)."""
    try:
        bound = inspect.signature(node.target).bind(*node.args, **node.kwargs)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    bound.apply_defaults()
    return dict(bound.arguments)


def _buildable(fn: Any, arguments: dict[str, Any]) -> bool:
    """Whether the nn module of `fn` can be built from the call's arguments: plain constants."""
    _, names = FOLLOWERS[fn]
    for name in names:
        value = arguments.get(name)
        if name == "inplace" and not isinstance(value, bool):
            return False
        if name != "inplace" and (isinstance(value, bool) or not isinstance(value, (int, float))):
            return False
    return True


def _refs(value: Any) -> Any:
    return torch.fx.node.map_arg(value, lambda n: cast(Any, _Ref(n.name)))


def _same(a: Any, b: Any) -> bool:
    """Equal values; what == cannot answer (a tensor, a NaN) compares by its repr."""
    try:
        if bool(a == b):
            return True
    except Exception:
        pass
    return repr(a) == repr(b)


def _describe(node: torch.fx.Node) -> str:
    return f"{node.op} {getattr(node.target, '__name__', node.target)}"


def _free_name(gm: nn.Module, stem: str) -> str:
    i = 0
    while hasattr(gm, f"{stem}_{i}"):
        i += 1
    return f"{stem}_{i}"


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else ""
