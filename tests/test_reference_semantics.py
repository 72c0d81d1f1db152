"""The float64 reference a kernel is verified against (the spec's epilogue chain) computes what the
original module computes: checked on the CPU for every Linear + epilogue case of the test zoo."""

import pytest
import torch

from fact.capture import capture
from fact.patterns import match_graph
from fact.realize.choose import steps_of
from fact.verify.check import apply_steps

from .models.zoo import CASES

LINEAR_CASES = [c for c in CASES if c.name.startswith(("linear_", "matmul_explicit", "epilogue_capacity"))]


def _operands(module: torch.nn.Module):
    if hasattr(module, "lin"):
        return module.lin.weight.t(), module.lin.bias
    return module.w, module.b  # x @ w + b


@pytest.mark.parametrize("case", LINEAR_CASES, ids=[c.name for c in LINEAR_CASES])
def test_spec_chain_equals_module(case) -> None:
    torch.manual_seed(0)
    module = case.module().double().eval()
    shape = case.shapes[0][0]
    # match at the case's own dtype (float64 is not served), then evaluate both sides in float64
    served = case.module().eval()
    served.load_state_dict(module.state_dict())
    dtype = case.shapes[0][1]
    [match] = match_graph(capture(served.to(dtype), [torch.empty(shape, dtype=dtype)])).matches
    x = torch.rand(shape, dtype=torch.float64) * 4 - 2  # wide enough to reach clamp bounds and negative slopes
    w, b = _operands(module)
    flat = x.reshape(-1, x.shape[-1])
    residual = flat  # the zoo's residual cases add the input back
    got = apply_steps(flat @ w, steps_of(match), b, residual).reshape(*x.shape[:-1], -1)
    with torch.no_grad():
        want = module(x)
    if case.name == "epilogue_capacity":
        want = torch.logit(want.clamp(1e-12, 1 - 1e-12))  # the sigmoid stays outside the kernel
    torch.testing.assert_close(got, want, rtol=1e-9, atol=1e-9)


def test_every_epilogue_step_has_a_reference_and_an_unknown_one_is_refused() -> None:
    """A step the reference skipped would read as the identity and pass any kernel."""
    from fact.realize.spec import STEP_KINDS, Step

    x = torch.linspace(-3, 3, 16, dtype=torch.float64).reshape(4, 4)
    row = torch.ones(4, dtype=torch.float64)
    for kind in STEP_KINDS:
        step = Step(kind, a=0.5 if kind in ("scale", "leaky_relu", "clamp") else None, b=1.0 if kind == "clamp" else None)
        out = apply_steps(x, (step,), row, x)
        assert not torch.equal(out, x), kind  # every step changes something on this range
    unknown = Step("relu")
    object.__setattr__(unknown, "kind", "swish")  # past Step's own check, as a stale spec could be
    with pytest.raises(ValueError, match="no float64 reference for the epilogue step 'swish'"):
        apply_steps(x, (unknown,), None, None)
