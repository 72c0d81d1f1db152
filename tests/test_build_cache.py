"""The build cache on real (tiny, CPU) extensions: keys, reuse, integrity, locking, kill -9."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import jinja2
import pytest

from fact.compile.cache import BuildCache, BuildRequest, request_key
from fact.core.errors import BuildError

FIXTURES = Path(__file__).with_name("fixtures")
ENV = jinja2.Environment(loader=jinja2.FileSystemLoader(FIXTURES), undefined=jinja2.StrictUndefined)


def tiny(value: int = 7, **kw) -> BuildRequest:
    source = ENV.get_template("tiny_ext.c.j2").render(value=value)
    return BuildRequest(name="tiny", sources={"tiny.cpp": source}, with_cuda=False, cxx_flags=("-O1",), **kw)


def test_build_load_and_reuse(tmp_path: Path) -> None:
    cache = BuildCache(tmp_path)
    first = cache.get(tiny(7))
    assert first.built_now and first.module.value == 7
    again = BuildCache(tmp_path).get(tiny(7))  # a new process would see the same: no rebuild
    assert not again.built_now and again.module.value == 7 and again.seconds < 0.1
    same = cache.get(tiny(7))  # loaded already in this cache: the library's path, not its folder
    assert same.path == first.path and same.path.is_file() and same.path.suffix == ".so"


@pytest.mark.parametrize("change", [
    {"sources": {"tiny.cpp": "// edited\n"}}, {"cxx_flags": ("-O2",)}, {"cuda_arch_list": "9.0a"},
    {"environment": {"torch": "2.99"}}, {"environment": {"nvidia-cutlass": "9"}}, {"environment": {"nvcc": "12.4"}},
    {"cuda_flags": ("-DNDEBUG",)},
])
def test_every_input_changes_the_key(change: dict) -> None:
    base = tiny()
    fields = {**base.__dict__, **change}
    if "sources" in change:
        fields["sources"] = {"tiny.cpp": base.sources["tiny.cpp"] + change["sources"]["tiny.cpp"]}
    assert request_key(BuildRequest(**fields)) != request_key(base)
    assert request_key(tiny()) == request_key(base)


def test_flipped_byte_is_refused_and_rebuilt(tmp_path: Path) -> None:
    cache = BuildCache(tmp_path)
    built = cache.get(tiny(11))
    lib = built.path
    data = bytearray(lib.read_bytes())
    data[len(data) // 2] ^= 0xFF
    flipped = lib.with_suffix(".flipped")
    flipped.write_bytes(bytes(data))
    os.replace(flipped, lib)  # a new inode: the copy this process already mapped stays intact
    assert cache.lookup(built.key) is None
    rebuilt = BuildCache(tmp_path).get(tiny(11))
    assert rebuilt.built_now and rebuilt.module.value == 11


def test_compile_error_names_log_and_command(tmp_path: Path) -> None:
    bad = BuildRequest(name="broken", sources={"broken.cpp": "this is not C++;\n"}, with_cuda=False)
    with pytest.raises(BuildError) as info:
        BuildCache(tmp_path).get(bad)
    err = info.value
    assert err.log_path is not None and err.log_path.read_text()
    assert "ninja -v" in err.command and "compiler log" in str(err)
    assert BuildCache(tmp_path).lookup(request_key(bad)) is None


def test_build_timeout_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(BuildError, match="did not finish"):
        BuildCache(tmp_path, timeout=0.5).get(tiny(13))


CONCURRENT = r"""
import sys, json
sys.path.insert(0, sys.argv[2])
from tests.test_build_cache import tiny
from fact.compile.cache import BuildCache
b = BuildCache(sys.argv[1]).get(tiny(int(sys.argv[3])))
print(json.dumps({"built_now": b.built_now, "value": b.module.value}))
"""


@pytest.mark.slow
def test_four_processes_build_once(tmp_path: Path) -> None:
    repo = str(Path(__file__).resolve().parents[1])
    procs = [subprocess.Popen([sys.executable, "-c", CONCURRENT, str(tmp_path), repo, "21"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(4)]
    results = []
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err[-2000:]
        results.append(json.loads(out.strip().splitlines()[-1]))
    assert sum(r["built_now"] for r in results) == 1
    assert all(r["value"] == 21 for r in results)


@pytest.mark.slow
def test_kill_9_during_builds_never_leaves_a_loadable_partial(tmp_path: Path) -> None:
    repo = str(Path(__file__).resolve().parents[1])
    for i in range(20):
        p = subprocess.Popen([sys.executable, "-c", CONCURRENT, str(tmp_path), repo, "31"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        time.sleep(0.15 * (i % 10) + 0.05)
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()
        key = request_key(tiny(31))
        lib = BuildCache(tmp_path).lookup(key)
        if lib is not None:  # only a complete, checksummed library is ever visible
            assert BuildCache(tmp_path).get(tiny(31)).module.value == 31
    start = time.perf_counter()
    final = BuildCache(tmp_path).get(tiny(31))
    assert final.module.value == 31 and time.perf_counter() - start < 120


def test_a_note_beside_a_build_lives_as_long_as_the_build(tmp_path: Path) -> None:
    cache = BuildCache(tmp_path)
    lib = cache.ensure(tiny(11))
    assert cache.noted(lib.key, "verified-x") is None
    cache.note(lib.key, "verified-x", {"category": "ok", "worst": 1e-3})
    assert BuildCache(tmp_path).noted(lib.key, "verified-x") == {"category": "ok", "worst": 1e-3}
    (tmp_path / lib.key / "notes" / "verified-y.json").write_text("{not json")
    assert cache.noted(lib.key, "verified-y") is None
    lib.path.write_bytes(lib.path.read_bytes() + b"\0")  # the build changed: its notes no longer hold
    assert cache.noted(lib.key, "verified-x") is None


def test_a_verification_record_is_named_by_what_the_outcome_depends_on() -> None:
    from fact.compose.synthesize import verification_key
    from fact.realize.catalog import representative
    from fact.verify.check import GemmCase
    from fact.verify.worker import Job

    spec = next(s for s in representative() if s.family == "sm90_gemm")
    job = Job("lib.so", "mod", spec, (GemmCase(128, 128, 64),), (0, 1))
    assert verification_key(job) == verification_key(Job("other.so", "mod2", spec, job.cases, job.seeds))
    assert verification_key(job) != verification_key(Job("lib.so", "mod", spec, job.cases, (0, 1, 2)))
    assert verification_key(job) != verification_key(Job("lib.so", "mod", spec, (GemmCase(128, 128, 72),), job.seeds))
    assert verification_key(job) != verification_key(Job("lib.so", "mod", spec, job.cases, job.seeds, knobs=(1, 2, 1)))
