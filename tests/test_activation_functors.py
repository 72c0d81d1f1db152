"""The epilogue's activation functors (fact/realize/templates/_macros.j2), compiled for the host and run on
the values verification never draws: NaN, infinities and signed zeros. A fused epilogue must give what
PyTorch gives there, so that a NaN or an overflow in the module still shows in its output."""

from __future__ import annotations

import math
import shutil
import struct
import subprocess
from collections.abc import Callable

import pytest
import torch
import torch.nn.functional as F

from fact.realize.render import ENV
from fact.realize.spec import Step

# Each step as the template spells it, and PyTorch's own op for it (float32 in and out).
CASES: dict[str, tuple[Step, Callable[[torch.Tensor], torch.Tensor]]] = {
    "relu": (Step("relu"), torch.relu),
    "leaky_relu": (Step("leaky_relu", 0.01), lambda x: F.leaky_relu(x, 0.01)),
    "clamp": (Step("clamp", -1.0, 1.0), lambda x: x.clamp(-1.0, 1.0)),
    "clamp_min": (Step("clamp", 0.0, None), lambda x: x.clamp(min=0.0)),
    "clamp_max": (Step("clamp", None, 6.0), lambda x: x.clamp(max=6.0)),
    "gelu_erf": (Step("gelu_erf"), F.gelu),
    "gelu_tanh": (Step("gelu_tanh"), lambda x: F.gelu(x, approximate="tanh")),
    "silu": (Step("silu"), F.silu),
    "sigmoid": (Step("sigmoid"), torch.sigmoid),
    "tanh": (Step("tanh"), torch.tanh),
    "mish": (Step("mish"), F.mish),
    "scale": (Step("scale", 0.5), lambda x: x * 0.5),
}
# Where the host form is exact to the last bit of float32 (the others round through expf, erff, tanhf).
BITWISE = ("relu", "leaky_relu", "clamp", "clamp_min", "clamp_max", "scale")
# (fp32's largest magnitudes overflow inside the smooth forms in PyTorch's order or in the functor's: only the
# piecewise steps are held to them)
SPECIAL = [math.nan, -math.nan, math.inf, -math.inf, 0.0, -0.0, 1e-40, -1e-40, 1e30, -1e30, 0.5, -0.5,
           2.0, -2.0, 7.0, -7.0, 30.0, -30.0, 3.0e38, -3.0e38]
SMOOTH_UP_TO = len(SPECIAL) - 2


@pytest.fixture(scope="module")
def run_functors(tmp_path_factory: pytest.TempPathFactory):
    """Every case's functor on SPECIAL, computed by the rendered C++ (host pass), as float32 tensors."""
    compiler = shutil.which("g++") or shutil.which("c++")
    if compiler is None:
        pytest.skip("no host C++ compiler")
    functors = ENV.from_string('{% import "_macros.j2" as m %}'
                               '{% for name, step in steps %}{{ m.activation_functor(name, step) }}\n{% endfor %}')
    names = list(CASES)
    source = "\n".join([
        "#define CUTLASS_HOST_DEVICE",
        "#define CUTLASS_PRAGMA_UNROLL",
        # the functors' array form needs only an indexable array: a stand-in for cutlass::Array
        "namespace cutlass { template <class T, int N> struct Array { T v[N];",
        "  T& operator[](int i) { return v[i]; } T const& operator[](int i) const { return v[i]; } }; }",
        "#include <cmath>",
        "#include <cstdint>",
        "#include <cstdio>",
        "#include <cstring>",
        "using namespace std;",
        functors.render(steps=[(f"Case{i}", CASES[n][0]) for i, n in enumerate(names)]),
        "static uint32_t bits(float y) { uint32_t u; memcpy(&u, &y, 4); return u; }",
        "int main() {",
        "  uint32_t u;",
        "  while (scanf(\"%x\", &u) == 1) {",
        "    float x; memcpy(&x, &u, 4);",
        *[f"    printf(\"%08x \", bits(Case{i}<float>()(x)));" for i in range(len(names))],
        "    printf(\"\\n\");",
        "  }",
        "}",
    ])
    work = tmp_path_factory.mktemp("functors")
    (work / "functors.cpp").write_text(source)
    built = subprocess.run([compiler, "-std=c++17", "-O2", str(work / "functors.cpp"), "-o", str(work / "functors")],
                           capture_output=True, text=True)
    if built.returncode:
        pytest.fail(f"{compiler} failed on the rendered functors:\n{built.stderr[-4000:]}")
    text = "".join(f"{struct.unpack('<I', struct.pack('<f', v))[0]:08x}\n" for v in SPECIAL)
    out = subprocess.run([str(work / "functors")], input=text, capture_output=True, text=True, check=True).stdout
    rows = [[struct.unpack("<f", struct.pack("<I", int(h, 16)))[0] for h in line.split()] for line in out.splitlines()]
    return {name: torch.tensor([row[i] for row in rows], dtype=torch.float32) for i, name in enumerate(names)}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_nan_stays_a_nan_and_an_infinity_lands_where_pytorch_puts_it(run_functors, case: str) -> None:
    end = len(SPECIAL) if case in BITWISE else SMOOTH_UP_TO
    x = torch.tensor(SPECIAL[:end], dtype=torch.float32)
    got, want = run_functors[case][:end], CASES[case][1](x)
    assert bool(got[x.isnan()].isnan().all()), case
    # where PyTorch's own answer is a number (its CPU GELU gives NaN at +inf, the functor +inf)
    num = ~want.isnan()
    assert not bool(got[num].isnan().any()), (case, x[num & got.isnan()].tolist())
    inf = want[num].isinf()
    assert torch.equal(got[num].isinf(), inf), (case, got.tolist(), want.tolist())
    assert torch.equal(got[num][inf], want[num][inf]), (case, got.tolist(), want.tolist())


@pytest.mark.parametrize("case", BITWISE)
def test_the_piecewise_steps_are_exact_to_the_bit(run_functors, case: str) -> None:
    x = torch.tensor(SPECIAL, dtype=torch.float32)
    got, want = run_functors[case], CASES[case][1](x)
    assert torch.equal(got.isnan(), want.isnan()), (case, got.tolist(), want.tolist())
    num = ~want.isnan()
    assert torch.equal(got[num], want[num]), (case, got.tolist(), want.tolist())
