"""A promoted synthesis becomes a learned pattern: discovery finds it and realization takes the
promoted source without the LLM; the report says origin "llm" and names the exemplars."""

import socket
from pathlib import Path

import pytest
import torch

import fact
from fact.agentic import LLMClient, corpus_exemplars, find_tasks
from fact.agentic import learned as learned_mod
from fact.agentic import loop as loop_mod
from fact.agentic.learned import ORIGIN_NOTE, find_promoted, realize_promoted, task_of
from fact.agentic.loop import VerifyOutcome
from fact.agentic.promote import promote
from fact.agentic.reporting import item_for
from fact.capture import capture
from fact.knowledge.base import KnowledgeBase
from fact.knowledge.corpus import DEFAULT_CORPUS
from fact.patterns.registry import PatternRegistry

from .llm_server import ScriptedServer

FIXTURES = Path(__file__).parent / "fixtures" / "agentic"
BF16 = torch.bfloat16


def _module(act: torch.nn.Module, seed: int = 0) -> torch.nn.Module:
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(256, 512), act).to(BF16)


def _fake_compile(sources, folder, **kw):
    sources.write(folder)
    return True, "", 0.5


@pytest.fixture(scope="module")
def promoted(tmp_path_factory: pytest.TempPathFactory):
    """An ELU synthesis replayed from a recorded answer, its verification FABRICATED (no GPU here:
    it stands for what gpu_verifier records), promoted into a scratch corpus and registry."""
    tmp = tmp_path_factory.mktemp("learned")
    mp = pytest.MonkeyPatch()
    mp.setattr(loop_mod, "compile_sources", _fake_compile)
    module = _module(torch.nn.ELU())
    task = find_tasks(capture(module, [torch.randn(128, 256, dtype=BF16)]))[0]
    with ScriptedServer() as server:
        server.script.append(("answer", (FIXTURES / "good_elu.json").read_text()))
        client = LLMClient("openai/fact-test", api_base=server.url, api_key="sk-test", cache_dir=tmp / "llm",
                           timeout=5, retries=0)
        rec = loop_mod.synthesize_task(task, client, corpus_exemplars(task), workdir=tmp / "build")
    mp.undo()
    assert rec.status == "compiled"
    rec.status = "verified"
    rec.verification = {"ok": True, "gpu": "FABRICATED TEST RECORD (no GPU)", "date": "2000-01-01",
                        "worst_rel_err": 0.004, "tolerance": 0.02, "cases": 5}
    registry = PatternRegistry(tmp / "patterns.json")
    done = promote(rec, tmp / "corpus", registry=registry, nvcc="13.0")
    kb = KnowledgeBase.in_memory([tmp / "corpus", DEFAULT_CORPUS], cutlass_examples=False)
    return {"record": rec, "done": done, "registry": registry, "kb": kb, "corpus": tmp / "corpus"}


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch):
    attempts: list[object] = []

    def refuse(self, addr):
        attempts.append(addr)
        raise OSError("network disabled in this test")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    return attempts


def test_discovery_finds_the_learned_pattern(promoted, no_network) -> None:
    # another module, other weights, another row count in the same shape bucket (100 -> 128)
    module = _module(torch.nn.ELU(), seed=1)
    plan = fact.discover(module, [torch.randn(100, 256, dtype=BF16)], arch="sm90", kb=promoted["kb"],
                         registry=promoted["registry"])
    [item] = plan.items
    m = item.match
    assert m.pattern == "llm_gemm_epilogue" and m.realization == "llm" and len(m.nodes) == 2
    assert m.epilogue == ("bias", "module:ELU") and m.problem.m == 100
    assert item.verified_before == promoted["done"].id and item.grounding == "promoted"
    assert [e.id for e in item.exemplars] == ["sm90_gemm_evt_bias_gelu"]
    assert promoted["record"].kernel in item.grounding_note and "without the LLM" in item.grounding_note
    assert not plan.rejections  # the ELU is covered, not left in PyTorch
    assert not no_network


@pytest.mark.parametrize("act", [torch.nn.ELU(alpha=3.0), torch.nn.Softplus(beta=3.0), torch.nn.PReLU()])
def test_a_lookalike_with_other_settings_is_not_the_learned_pattern(promoted, act) -> None:
    # the kind's name alone would read ELU(alpha=3) as the promoted ELU(alpha=1): it is no task at all
    plan = fact.discover(_module(act, seed=3), [torch.randn(100, 256, dtype=BF16)], arch="sm90", kb=promoted["kb"],
                         registry=promoted["registry"])
    assert all(i.match.realization != "llm" for i in plan.items)
    assert not find_tasks(fact.capture.capture(_module(act).eval(), [torch.empty(100, 256, dtype=BF16)]))


def test_unlearned_patterns_stay_as_they_were(promoted) -> None:
    # Hardswish was never promoted; a different width falls in another shape bucket
    for module, rows in ((_module(torch.nn.Hardswish()), 128), (torch.nn.Sequential(
            torch.nn.Linear(256, 2048), torch.nn.ELU()).to(BF16), 128)):
        plan = fact.discover(module, [torch.randn(rows, 256, dtype=BF16)], arch="sm90", kb=promoted["kb"],
                             registry=promoted["registry"])
        assert [i.match.pattern for i in plan.items] == ["gemm_epilogue"]
        assert [r.op for r in plan.rejections] in (["Hardswish"], ["ELU"])


def test_promoted_source_is_realized_byte_for_byte_without_the_llm(promoted, no_network, tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(learned_mod, "compile_sources", _fake_compile)
    module = _module(torch.nn.ELU(), seed=2)
    inputs = [torch.randn(128, 256, dtype=BF16)]
    cap = capture(module, inputs)
    [(match, kernel)], notes = learned_mod.learned_matches(cap, promoted["registry"], "sm90", kb=promoted["kb"])
    assert not notes and kernel.entry_id == promoted["done"].id and kernel.model == "openai/fact-test"
    task = task_of(cap, match)
    seen: list[str] = []

    def verifier(t, sources, folder):
        seen.append(sources.files[sources.kernel_file])
        return VerifyOutcome(True, "seed 0: max rel error 0.004", {"worst_rel_err": 0.004, "tolerance": 0.02,
                                                                   "cases": 5, "gpu": "FABRICATED", "date": "2000-01-01"})

    rec = realize_promoted(task, kernel, workdir=tmp_path, verifier=verifier)
    assert rec.status == "verified" and rec.origin == "llm" and rec.rounds == 0 and rec.account["calls"] == 0
    assert rec.kernel == promoted["record"].kernel and rec.prompt_sha == promoted["record"].prompt_sha
    assert ORIGIN_NOTE.format(entry=kernel.entry_id) in rec.notes[0]
    written = (Path(rec.source_dir) / f"{rec.kernel}.cu").read_bytes()
    assert written == promoted["done"].source.read_bytes() == seen[0].encode()
    item = item_for(rec)
    assert item.origin == "llm" and item.status == "composed" and item.exemplars == ["sm90_gemm_evt_bias_gelu"]
    assert not no_network


def test_a_changed_promoted_entry_is_refused(promoted, tmp_path: Path) -> None:
    import shutil

    corpus = tmp_path / "corpus"
    shutil.copytree(promoted["corpus"], corpus)
    cu = next((corpus / "sm90").glob("*.cu"))
    assert "__expf(x) - 1.f" in cu.read_text()
    cu.write_text(cu.read_text().replace("__expf(x) - 1.f", "x"))  # a one-word edit after promotion
    why = find_promoted(promoted["done"].id, roots=[corpus])
    assert isinstance(why, str) and "changed since promotion" in why
    assert "in no corpus" in find_promoted("no_such_entry", roots=[corpus])
    kb = KnowledgeBase.in_memory([corpus, DEFAULT_CORPUS], cutlass_examples=False)
    plan = fact.discover(_module(torch.nn.ELU()), [torch.randn(128, 256, dtype=BF16)], arch="sm90", kb=kb,
                         registry=promoted["registry"])
    assert [i.match.pattern for i in plan.items] == ["gemm_epilogue"]
    assert any("changed since promotion" in n for n in plan.notes)


def test_synthesize_reports_the_learned_kernel(promoted, no_network, monkeypatch: pytest.MonkeyPatch) -> None:
    if torch.cuda.is_available():
        pytest.skip("the CPU report; the GPU composes (test_gpu_composes_the_learned_kernel)")
    monkeypatch.setattr(learned_mod, "compile_sources", _fake_compile)
    module = _module(torch.nn.ELU(), seed=3)
    synthesis = fact.synthesize(module, [torch.randn(128, 256, dtype=BF16)], arch="sm90", kb=promoted["kb"],
                                registry=promoted["registry"], compile_check=True)
    [item] = synthesis.report.items
    assert item.origin == "llm" and item.status == "planned" and item.kernel == promoted["record"].kernel
    assert item.exemplars == ["sm90_gemm_evt_bias_gelu"] and item.verification == {"category": "compiles"}
    assert any(ORIGIN_NOTE.format(entry=promoted["done"].id) in n for n in synthesis.report.notes)
    assert "| llm | sm90_gemm_evt_bias_gelu |" in synthesis.report.to_markdown()
    assert synthesis.module is module and not no_network


@pytest.mark.gpu
def test_gpu_composes_the_learned_kernel(promoted) -> None:
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    module = _module(torch.nn.ELU(), seed=4).cuda()
    x = torch.randn(128, 256, dtype=BF16, device="cuda")
    synthesis = fact.synthesize(module, [x], arch="sm90", kb=promoted["kb"], registry=promoted["registry"],
                                benchmark=False, faster_only=False)  # tiny: the race is a coin toss
    [item] = synthesis.report.items
    assert item.origin == "llm" and item.status == "composed", item.reason
    with torch.no_grad():
        want = torch.nn.functional.elu(torch.nn.functional.linear(x.double(), module[0].weight.double(),
                                                                  module[0].bias.double()))
        got = synthesis.module(x)
    assert float((got.double() - want).norm() / want.norm()) < 2e-2


def test_reference_cases_are_the_modules_own_computation() -> None:
    from fact.agentic.verify import reference_cases

    module = _module(torch.nn.ELU(), seed=5)
    inputs = [torch.randn(64, 256, dtype=BF16)]
    cap = capture(module, inputs)
    task = find_tasks(cap)[0]
    case, special = reference_cases(task, cap.graph_module, inputs, (7,), device="cpu")
    assert case["a"].dtype == BF16 and case["w"].shape == (512, 256) and case["expected"].dtype == torch.float64
    lin = module[0]
    for one in (case, special):
        want = torch.nn.functional.elu(torch.nn.functional.linear(one["a"].double(), lin.weight.double(),
                                                                  lin.bias.double()))
        assert torch.allclose(one["expected"], want, rtol=1e-12, atol=1e-12, equal_nan=True)
    # the special case: a NaN and an infinity in A, and ELU's own answer to them (NaN; +inf or -1 by sign)
    assert special["special"] and special["seed"] == 7 and "special" not in case
    assert special["a"].isnan().sum() == 1 and special["a"].isinf().sum() == 1
    assert special["expected"].isnan().any() and special["expected"].isinf().any()
    assert (special["expected"] == -1).any()  # ELU(-inf), where the infinity met a negative weight


def test_a_learned_kernel_is_judged_on_its_nans_and_infinities() -> None:
    from fact.agentic.verify import case_error

    expected = torch.tensor([[1.0, float("nan")], [float("inf"), -1.0]], dtype=torch.float64)
    assert case_error(expected.float(), expected) == (0.0, None)
    err, problem = case_error(torch.tensor([[1.0, 0.0], [float("inf"), -1.0]]), expected)  # a NaN lost
    assert err == 0.0 and "differ from the reference in NaN or infinity" in problem
    err, problem = case_error(torch.tensor([[1.5, float("nan")], [float("inf"), -1.0]]), expected)
    assert err == 0.5 and problem is None


def test_a_learned_kernel_composes_like_a_template_one(promoted) -> None:
    """The composition path of a learned kernel on the CPU: a SynthesizedSpec installed through
    compose's public install, with a reference implementation standing in for the built kernel."""
    from fact.agentic.learned import learned_matches, promoted_sources
    from fact.agentic.spec import synthesized_spec
    from fact.compose.rewrite import Dispatch, install

    module = _module(torch.nn.ELU(), seed=6).eval()
    inputs = [torch.randn(128, 256, dtype=BF16)]
    cap = capture(module, inputs)
    [(match, kernel)], _ = learned_matches(cap, promoted["registry"], "sm90", kb=promoted["kb"])
    task = task_of(cap, match)
    spec = synthesized_spec(task, promoted_sources(task, kernel), kernel.tunables)
    assert spec.op == kernel.kernel and spec.tiles.tile == (128, 128, 64) and spec.tiles.cluster == (2, 1)
    calls = []

    def reference(a, b, bias, residual):
        calls.append(a.shape)
        return torch.nn.functional.elu(a.double() @ b.double() + bias.double()).to(a.dtype)

    gm = cap.graph_module
    install(gm, match, spec, reference, "fact_0", device="cpu")
    gm.recompile()
    x = torch.randn(128, 256, dtype=BF16)
    with torch.no_grad():
        got, want = gm(x), module(x)
    assert calls == [(128, 256)] and isinstance(gm.fact_0, Dispatch) and gm.fact_0.kernel_calls == 1
    assert torch.allclose(got.float(), want.float(), atol=3e-2, rtol=3e-2)


@pytest.mark.parametrize("entry_id", ["../secrets", "a/../../b", "/etc/x", ""])
def test_an_entry_id_that_is_not_one_is_refused(entry_id: str, tmp_path: Path) -> None:
    from fact.agentic.learned import find_promoted

    assert "is not a corpus entry id" in str(find_promoted(entry_id, roots=[tmp_path]))
