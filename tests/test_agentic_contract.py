"""The contract of synthesized compositions: hostile and out-of-contract answers are refused
before anything is compiled, each with its reason."""

import json
from pathlib import Path

import pytest

from fact.agentic import Context, check, parse
from fact.agentic.contract import RULES

FIXTURES = Path(__file__).parent / "fixtures" / "agentic"
OFFERED = Context(frozenset({"sm90_gemm_evt_bias_gelu", "sm90_gemm_evt_bias_gelu_tanh"}))


def good() -> dict:
    return json.loads((FIXTURES / "good_hardswish.json").read_text())


def with_slot(slot: str, text: str, append: bool = True) -> dict:
    a = good()
    a["composition"][slot] = (a["composition"][slot] + "\n" + text) if append else text
    return a


def _device_fn(body: str) -> str:
    return "template <class T>\nstruct Probe {\n  CUTLASS_HOST_DEVICE T operator()(T const& v) const {\n" + body + \
        "\n    return v;\n  }\n};"


HOSTILE = {
    "system_call": (with_slot("functors", _device_fn("    system(0);")), "side_effects"),
    "fopen_file": (with_slot("functors", _device_fn("    auto f = fopen(nullptr, nullptr);")), "side_effects"),
    "string_path": (with_slot("functors", _device_fn('    auto p = "/etc/passwd";')), "literals"),
    "socket": (with_slot("functors", _device_fn("    int s = socket(2, 1, 0); connect(s, nullptr, 0);")), "side_effects"),
    "getenv": (with_slot("functors", _device_fn("    auto e = getenv(nullptr);")), "side_effects"),
    "popen_char_literal": (with_slot("functors", _device_fn("    char c = 'x';")), "literals"),
    "include_stdlib": (with_slot("functors", "#include <cstdlib>", append=False), "includes"),
    "include_escape": (with_slot("functors", "#include \"cutlass/../../../etc/passwd.h\""), "includes"),
    "define_macro": (with_slot("functors", "#define Fusion int"), "preprocessor"),
    "pragma_once": (with_slot("fusion", "#pragma comment(lib, x)"), "preprocessor"),
    "host_asm": (with_slot("functors", "template <class T>\nstruct A {\n  CUTLASS_HOST_DEVICE void f() const { asm(\"nop\"); }\n};"),
                 "literals"),
    "asm_outside_device": (with_slot("functors", "template <class T>\nstruct A {\n  CUTLASS_HOST_DEVICE void f() const "
                                     "{ asm volatile (nop); }\n};"), "asm"),
    "global_kernel": (with_slot("functors", "__global__ void k() {}"), "host_code"),
    "host_function": (with_slot("functors", "template <class T>\n__host__ void h() {}"), "host_code"),
    "kernel_launch": (with_slot("functors", _device_fn("    k<<<1, 1>>>();")), "host_runtime"),
    "cuda_malloc": (with_slot("functors", _device_fn("    cudaMalloc(nullptr, 0);")), "host_runtime"),
    "static_constructor": (with_slot("functors", "struct S { S(); };\nstatic S s;"), "host_code"),
    "attribute_constructor": (with_slot("functors", "__attribute__((constructor)) void f() {}"), "host_code"),
    "namespace_escape": (with_slot("functors", "}  // namespace\nint main() { return 0; }\nnamespace {"), "host_code"),
    "unbalanced_brace": (with_slot("fusion", "}"), "balance"),
    "open_comment": (with_slot("fusion", "/* swallow the skeleton"), "comments"),
    "line_splice": (with_slot("functors", "// a comment \\\nint x = 0;"), "plain_text"),
    "digraph": (with_slot("functors", "%:include <cstdlib>"), "plain_text"),
    "trojan_source": (with_slot("functors", "// \u202e hidden"), "plain_text"),
    "redefine_gemm": (with_slot("fusion", "using Gemm = int;", append=False), "skeleton_names"),
    "fact_symbol": (with_slot("functors", "template <class T> struct fact_gemm_run {};"), "skeleton_names"),
    "fusion_not_using": (with_slot("fusion", "int x = 0;"), "slot_shape"),
    "fusion_missing": (with_slot("fusion", "using Other = int;", append=False), "slot_shape"),
    "argument_expression": (with_slot("fusion_arguments", "{ { {}, {(ElementC const*)g.a, ElementC(0), {}}, {} }, {} }",
                                      append=False), "slot_shape"),
    "oversized": (with_slot("functors", "// " + "x" * 7000), "size"),
    "unknown_tunable": ({**good(), "tunables": {**good()["tunables"], "nvcc_flags": {"value": "-G"}}}, "tunables"),
    "tile_not_candidate": ({**good(), "tunables": {**good()["tunables"], "tile": {"value": "512x512x512"}}}, "tunables"),
    "schedule_mismatch": ({**good(), "tunables": {**good()["tunables"], "epilogue_schedule": {"value": "TmaWarpSpecialized"}}},
                          "tunables"),
    "cites_unknown_exemplar": ({**good(), "exemplars": [{"id": "evil_entry", "why": "trust me"}]}, "grounding"),
}


def test_good_fixtures_pass_the_contract() -> None:
    for path in sorted(FIXTURES.glob("*.json")):
        answer = parse(path.read_text())
        assert not isinstance(answer, str), path.name
        assert check(answer, OFFERED) == [], path.name


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_answer_is_refused_with_its_reason(name: str) -> None:
    data, rule = HOSTILE[name]
    answer = parse(json.dumps(data))
    assert not isinstance(answer, str), answer
    refusals = check(answer, OFFERED)
    assert refusals, f"{name} was accepted"
    assert rule in {r.rule for r in refusals}, refusals
    assert all(r.reason for r in refusals)


def test_at_least_twenty_hostile_cases_and_every_rule_exercised() -> None:
    assert len(HOSTILE) >= 20
    exercised = {rule for _, rule in HOSTILE.values()}
    names = {r.__name__ for r in RULES}
    assert {"size", "plain_text", "literals", "comments", "preprocessor", "asm", "balance", "tunables",
            "grounding"} <= exercised | names


@pytest.mark.parametrize("content,needle", [
    ("Here you go: {not json", "not JSON"),
    ("[1, 2]", "not a JSON object"),
    ('{"composition": {"fusion": "using Fusion = int;"}}', "composition.fusion_arguments"),
    (json.dumps({**good(), "write_file": "/tmp/x"}), "write_file"),
])
def test_malformed_or_extra_fields_are_not_answers(content: str, needle: str) -> None:
    why = parse(content)
    assert isinstance(why, str) and needle in why


def test_asm_rule_accepts_device_only_functions() -> None:
    fn = ("template <class T>\nstruct Ex2 {\n  CUTLASS_DEVICE float operator()(float x) const {\n    float y;\n"
          "    asm volatile (ex2_approx_f32 : =f(y) : f(x));\n    return y;\n  }\n};")
    answer = parse(json.dumps(with_slot("functors", fn)))
    assert not isinstance(answer, str)
    assert [r.rule for r in check(answer, OFFERED)] == []
