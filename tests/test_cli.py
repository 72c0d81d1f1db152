import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

import fact
from fact.cli import build_parser, main
from fact.compile.toolchain import find_toolchain

REPO = Path(__file__).resolve().parents[1]
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
# A terminal 80 columns wide, and stdout not a terminal (a pipe) with COLUMNS=80.
OUTPUTS = [{"COLUMNS": "80", "TTY_COMPATIBLE": "1"}, {"COLUMNS": "80", "TTY_COMPATIBLE": "0"}]


def test_query_json(built_index: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--index", str(built_index), "query", "3xTF32 fp32-accurate GEMM", "--arch", "sm80", "--json"]) == 0
    hits = json.loads(capsys.readouterr().out)
    assert hits[0]["id"] == "sm80_gemm_3xtf32_fast_accurate"
    assert all(h["metadata"]["arch"] == "sm80" for h in hits)


def test_query_where_filter(built_index: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--index", str(built_index), "query", "gemm", "--where", "op=bmm", "--json"]) == 0
    assert {h["metadata"]["op"] for h in json.loads(capsys.readouterr().out)} == {"bmm"}
    assert main(["--index", str(built_index), "query", "gemm", "--where", "nonsense"]) == 2


@pytest.mark.slow
def test_eval_and_stats(built_index: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--index", str(built_index), "eval", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert {r["mode"] for r in rows} == {"dense", "lexical", "hybrid"}
    hybrid_all = next(r for r in rows if r["mode"] == "hybrid" and r["arch"] == "all")
    assert hybrid_all["recall_at_5"] >= 0.9 and hybrid_all["mrr"] >= 0.75
    assert main(["--index", str(built_index), "stats"]) == 0
    assert "cutlass-examples" in capsys.readouterr().out


def test_unreachable_server_exits_cleanly(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--url", "http://127.0.0.1:9", "query", "gemm"]) == 1
    err = capsys.readouterr().err
    assert "chroma server" in err and "Traceback" not in err


def test_plan_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    example = Path(__file__).resolve().parents[1] / "examples" / "mingpt_block.py"
    out = tmp_path / "plan.json"
    assert main(["plan", f"{example}:Block", "--arch", "sm90", "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert "attention" in text and "layer_norm" in text
    from fact.discover import Plan

    plan = Plan.load(out)
    assert [i.match.pattern for i in plan.items].count("gemm_epilogue") == 4
    assert main(["plan", f"{example}:Block", "--input", "2,64,768:bfloat16", "--arch", "sm80"]) == 0
    assert "bf16" in capsys.readouterr().out


def test_plan_bad_targets(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "nowhere.py:X"]) == 2
    assert "no such file" in capsys.readouterr().err
    src = tmp_path / "m.py"
    src.write_text("import torch\nclass M(torch.nn.Module):\n    def forward(self, x):\n        return x @ x\n")
    assert main(["plan", f"{src}:Missing", "--input", "64,64"]) == 2
    assert "defines no 'Missing'" in capsys.readouterr().err
    assert main(["plan", f"{src}:M"]) == 2
    assert "--input" in capsys.readouterr().err
    assert main(["plan", f"{src}:M", "--input", "64,32"]) == 1
    assert "inputs do not fit" in capsys.readouterr().err


def _printed_under(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], env: dict[str, str],
                   argv: list[str]) -> tuple[int, str]:
    """Run the command line with `env` as the only output settings; return its status and plain stdout."""
    for name in ("COLUMNS", "TTY_COMPATIBLE", "FORCE_COLOR", "NO_COLOR"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    rc = main(argv)
    return rc, ANSI.sub("", capsys.readouterr().out)


def _assert_fits(text: str, whole: list[str], width: int = 80) -> None:
    lines = text.splitlines()
    assert lines and max(len(line) for line in lines) <= width, max(lines, key=len)
    assert "…" not in text
    words = set(re.split(r"[\s,│┃]+", text))
    for item in whole:
        assert item in words, f"{item} is not printed whole"


def test_query_readable_at_80_columns(built_index: Path, capsys: pytest.CaptureFixture[str],
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    argv = ["--index", str(built_index), "query", "stream-K GEMM for very large K", "--arch", "sm90", "-k", "8"]
    assert main([*argv, "--json"]) == 0
    ids = [h["id"] for h in json.loads(capsys.readouterr().out)]
    assert len(ids) == 8 and max(len(i) for i in ids) > 40  # long cutlass/... ids are among them
    for env in OUTPUTS:
        rc, text = _printed_under(monkeypatch, capsys, env, argv)
        assert rc == 0
        _assert_fits(text, ids)
        assert "score: " in text and "lexical rank: " in text  # the columns that did not fit, as fields


def test_query_wide_terminal_is_a_table(built_index: Path, capsys: pytest.CaptureFixture[str],
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    argv = ["--index", str(built_index), "query", "3xTF32 fp32-accurate GEMM", "--arch", "sm80", "-k", "2",
            "--where", "source=fact"]
    rc, text = _printed_under(monkeypatch, capsys, {"COLUMNS": "250"}, argv)
    assert rc == 0
    assert re.search(r"┃ +# ┃ id +┃ +score ┃", text)
    assert "│ sm80_gemm_3xtf32_fast_accurate " in text


def test_plan_readable_at_80_columns(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    from fact.discover import Plan

    example = REPO / "examples" / "mingpt_block.py"
    argv = ["plan", f"{example}:Block", "--arch", "sm90", "--json", str(tmp_path / "plan.json")]
    for env in OUTPUTS:
        rc, text = _printed_under(monkeypatch, capsys, env, argv)
        assert rc == 0
        plan = Plan.load(tmp_path / "plan.json")
        exemplars = [e.id for item in plan.items for e in item.exemplars[:2]]
        assert any(len(e) > 20 for e in exemplars)
        _assert_fits(text, exemplars + [r.node for r in plan.rejections])
        assert "saved ms: " in text


def test_plan_level(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from fact.discover import Plan

    src = tmp_path / "m.py"
    src.write_text("import torch\nclass M(torch.nn.Module):\n    def forward(self, x):\n        return x @ x\n")
    for level in ("module", "aten"):
        out = tmp_path / f"{level}.json"
        assert main(["plan", f"{src}:M", "--input", "256,256", "--arch", "sm80", "--level", level,
                     "--json", str(out)]) == 0
        assert Plan.load(out).level == level
        assert f"captured at {level} level" in capsys.readouterr().out
    assert main(["plan", f"{src}:M", "--input", "256,256", "--level", "graph"]) == 2
    assert "invalid choice: 'graph'" in capsys.readouterr().err


def _actions(parser: argparse.ArgumentParser, path: str = "fact"):
    for action in parser._actions:
        yield path, action
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _actions(sub, f"{path} {name}")


def test_every_option_has_help() -> None:
    missing = [f"{path} {'/'.join(a.option_strings) or a.dest}" for path, a in _actions(build_parser())
               if not a.help or a.help == argparse.SUPPRESS]
    assert missing == []
    subcommands = [(path, a) for path, a in _actions(build_parser()) if isinstance(a, argparse._SubParsersAction)]
    assert subcommands and all(choice.help for _, a in subcommands for choice in a._choices_actions)


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"fact {fact.__version__}"


def _subparser(argv: list[str]) -> argparse.ArgumentParser:
    parser = build_parser()
    for word in argv:
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parser = sub.choices[word]
    return parser


def test_readme_options_exist() -> None:
    readme = (REPO / "README.md").read_text()
    commands = re.findall(r"`(fact [^`]+)`", readme) + re.findall(r"^ {4}(fact .+)$", readme, flags=re.M)
    scripts = re.findall(r"`python (scripts/\S+\.py)([^`]*)`", readme)
    assert len(commands) >= 6 and len(scripts) >= 2
    checked = 0
    for command in commands:
        words = command.split()[1:]
        path = []
        parser = build_parser()
        while words and not words[0].startswith(("-", "[")) and words[0] not in ("TEXT",):
            try:
                parser = _subparser([*path, words[0]])
            except (StopIteration, KeyError):
                break
            path.append(words.pop(0))
        known = {o for a in parser._actions for o in a.option_strings}
        for option in re.findall(r"(?<![\w-])(--?[a-z][\w-]*)", " ".join(words)):
            assert option in known, f"README: `{command}` names {option}, which fact {' '.join(path)} lacks"
            checked += 1
    for script, options in scripts:
        help_text = subprocess.run([sys.executable, str(REPO / script), "--help"], capture_output=True,
                                   text=True, check=True).stdout
        for option in re.findall(r"(?<![\w-])(--?[a-z][\w-]*)", options):
            assert re.search(rf"(?<![\w-]){re.escape(option)}(?![\w-])", help_text), f"{script} lacks {option}"
            checked += 1
    every = {o for _, a in _actions(build_parser()) for o in a.option_strings}
    for option in re.findall(r"`(--[a-z][\w-]*)[^`]*`", readme):
        assert option in every, f"README names {option}, which no fact command has"
        checked += 1
    assert checked >= 15


def test_index_build_cutlass_examples_flag() -> None:
    parse = build_parser().parse_args
    assert parse(["index", "build"]).cutlass_examples is True
    assert parse(["index", "build", "--cutlass-examples"]).cutlass_examples is True
    assert parse(["index", "build", "--no-cutlass-examples"]).cutlass_examples is False


@pytest.mark.parametrize("k", ["0", "-3", "five", "2.5"])
def test_k_must_be_a_positive_int(k: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["query", "gemm", "-k", k]) == 2
    err = capsys.readouterr().err
    assert f"argument -k: expected a positive whole number, got '{k}'" in err and "Traceback" not in err


def test_empty_query_says_why(built_index: Path, capsys: pytest.CaptureFixture[str]) -> None:
    index = ["--index", str(built_index)]
    assert main([*index, "query", "gemm", "--where", "op=nonesuch"]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "no entry of the" in captured.err and "op='nonesuch'" in captured.err and "gemm" in captured.err
    assert main([*index, "query", "gemm", "--where", "colour=blue", "--json"]) == 1
    captured = capsys.readouterr()
    assert json.loads(captured.out) == [] and "has a field 'colour'" in captured.err
    assert main([*index, "query", "zzqx vwkj", "--mode", "lexical", "--arch", "sm80"]) == 1
    assert "pass the filters, but none matched 'zzqx vwkj' in lexical retrieval" in capsys.readouterr().err


def test_markup_never_eats_text(built_index: Path, capsys: pytest.CaptureFixture[str],
                                monkeypatch: pytest.MonkeyPatch) -> None:
    text = "[arch] GEMM for -gencode [sm_80,compute_80] :thumbs_up: [bold]"
    rc, out = _printed_under(monkeypatch, capsys, {"COLUMNS": "200"},
                             ["--index", str(built_index), "query", text, "-k", "1"])
    assert rc == 0 and " ".join(repr(text).split()) in " ".join(out.split())


def _one_line_error(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    return err


def test_errors_are_one_line_with_usage_or_failure_status(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    src = tmp_path / "m.py"
    src.write_text("import torch\nclass M(torch.nn.Module):\n    def __init__(self, n=4):\n"
                   "        super().__init__()\n        assert n > 0, 'n must be positive'\n"
                   "    def forward(self, x):\n        return x @ x\n")
    assert main(["plan", f"{src}:M", "--input", "64,64", "--init", "{n: 1}"]) == 2
    assert "fact plan: error: --init takes a JSON object" in _one_line_error(capsys)
    assert main(["plan", f"{src}:M", "--input", "64,64", "--init", "[1]"]) == 2
    _one_line_error(capsys)
    assert main(["plan", f"{src}:M", "--input", "sixty-four"]) == 2
    assert "--input takes SHAPE" in _one_line_error(capsys)
    assert main(["plan", f"{src}:M", "--input", "64,,64"]) == 2  # an empty dimension is no dimension
    assert "--input takes SHAPE" in _one_line_error(capsys)
    assert main(["plan", f"{src}:M", "--input", "64,64:bf17"]) == 2
    assert "unknown dtype 'bf17'" in _one_line_error(capsys)
    assert main(["plan", f"{src}:M", "--input", "64,64", "--init", '{"n": 0}']) == 1
    assert "constructing M failed: AssertionError: n must be positive" in _one_line_error(capsys)

    import importlib

    def broken(*args, **kwargs):
        raise RuntimeError("something unforeseen")

    monkeypatch.setattr(importlib.import_module("fact.discover"), "discover", broken)
    assert main(["plan", f"{src}:M", "--input", "64,64"]) == 1
    assert "fact plan: error: RuntimeError: something unforeseen (run 'fact -v" in _one_line_error(capsys)
    assert main(["-v", "plan", f"{src}:M", "--input", "64,64"]) == 1
    assert "Traceback" in capsys.readouterr().err  # asked for with -v


@pytest.mark.parametrize("command", ["plan", "synthesize"])
def test_a_module_where_no_pattern_matches_exits_1_and_says_so(command: str, tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    """The README's rule: a command that finds nothing exits 1 and says why."""
    src = tmp_path / "m.py"
    src.write_text("import torch\nclass M(torch.nn.Module):\n    def forward(self, x):\n"
                   "        return torch.relu(x) * 2\n")
    assert main([command, f"{src}:M", "--input", "64,64", "--arch", "sm80"]) == 1
    out, err = capsys.readouterr()
    said = " ".join((out + err).split())
    assert "no pattern covers 'relu'" in said
    assert ("no subgraph matched a pattern" if command == "plan" else "nothing to synthesize (no match was kept") in said


@pytest.mark.parametrize("command", ["plan", "synthesize"])
def test_a_module_no_tracer_takes_is_one_line_of_fact(command: str, tmp_path: Path,
                                                      capfd: pytest.CaptureFixture[str]) -> None:
    """torch.export prints its partial graph before raising: the command line shows fact's line only."""
    src = tmp_path / "m.py"
    src.write_text("import torch\nclass M(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n"
                   "        self.l = torch.nn.Linear(64, 64)\n    def forward(self, x):\n        y = self.l(x)\n"
                   "        return y * 2 if y.sum() > 0 else y\n")
    assert main([command, f"{src}:M", "--input", "32,64"]) == 1
    out, err = capfd.readouterr()
    assert out == "" and "def forward" not in err, err
    assert err.startswith(f"fact {command}: error: neither torch.fx.symbolic_trace nor torch.export could trace M")
    assert len(err.strip().splitlines()) == 1, err


def test_python_dash_m_fact_runs_the_same_command_line():
    """`python -m fact` is the `fact` command: its parser answers and its exit codes come through."""
    ok = subprocess.run([sys.executable, "-m", "fact", "--help"], capture_output=True, text=True, cwd=REPO)
    assert ok.returncode == 0 and "synthesize" in ok.stdout
    bad = subprocess.run([sys.executable, "-m", "fact", "no-such-command"], capture_output=True, text=True, cwd=REPO)
    assert bad.returncode == 2 and "invalid choice" in bad.stderr


LINEAR_RELU = ("import torch\nclass M(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n"
               "        self.l = torch.nn.Linear(512, 512)\n    def forward(self, x):\n        return torch.relu(self.l(x))\n")


def test_synthesize_exits_1_when_a_kernel_fails_to_build(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    """A compiler that fails every kernel: the original ops stay, and the exit status says it failed."""
    nvcc = tmp_path / "nvcc"
    nvcc.write_text("#!/bin/sh\ncase \"$*\" in *--version*) echo 'Cuda compilation tools, release 13.0, V13.0.48';"
                    " exit 0;; esac\necho 'nvcc: error: simulated failure' >&2\nexit 1\n")
    nvcc.chmod(0o755)
    monkeypatch.setenv("FACT_NVCC", str(nvcc))
    src = tmp_path / "m.py"
    src.write_text(LINEAR_RELU)
    find_toolchain.cache_clear()  # found once per process: this test's nvcc must be the one found
    try:
        assert main(["synthesize", f"{src}:M", "--input", "512,512:bf16", "--arch", "sm80"]) == 1  # fact's spelling too
    finally:
        find_toolchain.cache_clear()
    out, err = capsys.readouterr()
    assert "does not compile" in out
    assert "1 kernel(s) failed to build, their original ops kept: gemm_epilogue:" in err


def test_synthesize_refuses_a_save_path_that_is_a_file_before_it_starts(tmp_path: Path,
                                                                        capsys: pytest.CaptureFixture[str]) -> None:
    src = tmp_path / "m.py"
    src.write_text(LINEAR_RELU)
    taken = tmp_path / "taken"
    taken.write_text("")
    assert main(["synthesize", f"{src}:M", "--input", "512,512", "--save", str(taken)]) == 2
    assert "exists and is not a folder" in capsys.readouterr().err


def test_plan_render_keeps_kernels_that_differ_only_in_their_constants_apart(tmp_path: Path) -> None:
    """Two clamps of other bounds share a kernel name (it leaves constants out): each keeps a folder."""
    src = tmp_path / "m.py"
    src.write_text("import torch\nclass M(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n"
                   "        self.a = torch.nn.Linear(512, 512)\n        self.b = torch.nn.Linear(512, 512)\n"
                   "    def forward(self, x):\n        return self.b(self.a(x).clamp(-1, 1)).clamp(0, 6)\n")
    out = tmp_path / "rendered"
    assert main(["plan", f"{src}:M", "--input", "512,512:bfloat16", "--arch", "sm90", "--render", str(out)]) == 0
    sources = sorted(p.read_text() for p in out.glob("*/*.cu"))
    assert len(sources) == 2
    assert any("-1.0f" in s and "1.0f" in s for s in sources) and any("6.0f" in s for s in sources)
