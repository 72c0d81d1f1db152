"""The static check of an answer against the skeleton's contract, before anything is compiled.

Each rule is a small function over the answer; a rule that fails gives a refusal with its reason.
The check is deliberately conservative: whatever it cannot read unambiguously (line splices,
literals, digraphs, non-ASCII text) it refuses instead of interpreting, so that what the checker
read is exactly what nvcc would read.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from fact.agentic.answer import COMPATIBLE_SCHEDULES, MAX_SLOT_CHARS, MAX_TOTAL_CHARS, TUNABLES, Answer

SLOTS = ("functors", "fusion", "fusion_arguments")
# Headers a composition may include: CUTLASS, CuTe and CUDA's own device headers.
ALLOWED_INCLUDE = re.compile(
    r"^(cutlass/[\w/.]+\.(h|hpp)|cute/[\w/.]+\.hpp|cuda/std/[\w/]+|cuda_(fp16|bf16|fp8)\.h|cuda_runtime\.h)$")
# Identifiers that reach files, processes, the network, the environment or loaded code.
FORBIDDEN_CALLS = frozenset({
    "fopen", "freopen", "fwrite", "fread", "fputs", "fprintf", "printf", "puts", "fclose", "remove", "rename",
    "unlink", "mkdir", "rmdir", "open", "creat", "write", "read", "close", "mmap", "ioctl", "system", "popen",
    "execl", "execlp", "execle", "execv", "execvp", "execve", "fork", "vfork", "clone", "kill", "signal", "raise",
    "exit", "_exit", "abort", "atexit", "socket", "connect", "bind", "listen", "accept", "send", "recv",
    "sendto", "recvfrom", "getaddrinfo", "gethostbyname", "curl_easy_init", "getenv", "setenv", "putenv",
    "unsetenv", "dlopen", "dlsym", "LoadLibrary", "ofstream", "ifstream", "fstream", "filesystem", "thread",
    "async", "FILE", "syscall", "ptrace", "chmod", "chown", "symlink", "link", "tmpfile", "tmpnam", "malloc",
    "calloc", "realloc", "free",
})
# Host-side CUDA runtime and launches: the skeleton owns memory, streams and launches.
HOST_RUNTIME = re.compile(r"^cuda(Malloc|Free|Memcpy|Memset|Stream|Event|Launch|DeviceSet|SetDevice|DeviceReset|"
                          r"Graph|Host|Func|Ipc|Import|External|ProfilerStart|ProfilerStop)")
HOST_MARKERS = frozenset({"__global__", "main", "extern", "__attribute__", "__declspec", "thread_local",
                          "torch", "at", "c10", "pybind11", "PYBIND11_MODULE", "TORCH_LIBRARY", "TORCH_CHECK",
                          "namespace", "goto", "setjmp", "longjmp"})
# Names the skeleton defines; a composition that redefines them would take over host code.
SKELETON_NAMES = frozenset({"Gemm", "GemmKernel", "CollectiveMainloop", "CollectiveEpilogue", "TileShape",
                            "ClusterShape", "ElementAB", "ElementC", "ElementD", "make_arguments", "kRound"})
ARGUMENT_WORDS = frozenset({"bias", "ElementC", "ElementD", "float", "nullptr"})


@dataclass(frozen=True)
class Refusal:
    """One way the answer steps outside the contract."""

    rule: str
    slot: str
    reason: str

    def __str__(self) -> str:
        return f"[{self.rule}] {self.slot}: {self.reason}"


@dataclass(frozen=True)
class Context:
    """What the check needs besides the answer: the exemplars the prompt offered."""

    offered_exemplars: frozenset[str] = frozenset()


# -- reading C++ without interpreting it -------------------------------------------------------

def strip_comments(text: str) -> str | None:
    """The text with comments replaced by spaces, or None when a block comment is left open.
    Only meaningful on text without literals or line splices (those rules run first)."""
    out, i, n = [], 0, len(text)
    while i < n:
        if text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
            out.append(" ")
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            if j < 0:
                return None
            out.append(" ")
            i = j + 2
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def _code_lines(code: str) -> list[str]:
    return [ln for ln in code.splitlines() if ln.strip()]


def _identifiers(code: str) -> list[str]:
    return re.findall(r"[A-Za-z_]\w*", code)


def _without_directives(code: str) -> str:
    return "\n".join(ln for ln in code.splitlines() if not ln.lstrip().startswith("#"))


def _top_level_statements(code: str) -> list[str]:
    """Statements at brace depth 0, each up to its `;` (or its closing `}` and `;`)."""
    statements, depth, start = [], 0, 0
    for i, ch in enumerate(code):
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
        elif ch == ";" and depth == 0:
            statements.append(code[start:i + 1].strip())
            start = i + 1
    tail = code[start:].strip()
    if tail:
        statements.append(tail)
    return [s for s in statements if s]


def _enclosing_headers(code: str, pos: int) -> list[str]:
    """The text before each `{` enclosing `pos`, innermost last."""
    stack: list[str] = []
    last = 0
    for i, ch in enumerate(code[:pos]):
        if ch == "{":
            stack.append(code[last:i])
            last = i + 1
        elif ch == "}":
            if stack:
                stack.pop()
            last = i + 1
        elif ch == ";":
            last = i + 1
    return stack


# -- the rules ---------------------------------------------------------------------------------

Rule = Callable[[Answer, Context], list[Refusal]]


def _slots(answer: Answer) -> list[tuple[str, str]]:
    return [(s, getattr(answer.composition, s)) for s in SLOTS]


def size(answer: Answer, ctx: Context) -> list[Refusal]:
    out = [Refusal("size", s, f"{len(t)} characters; the slot holds at most {MAX_SLOT_CHARS[s]}")
           for s, t in _slots(answer) if len(t) > MAX_SLOT_CHARS[s]]
    total = sum(len(t) for _, t in _slots(answer))
    if total > MAX_TOTAL_CHARS:
        out.append(Refusal("size", "composition", f"{total} characters in all; at most {MAX_TOTAL_CHARS}"))
    return out


def plain_text(answer: Answer, ctx: Context) -> list[Refusal]:
    out = []
    for s, t in _slots(answer):
        bad = sorted({c for c in t if ord(c) > 126 or (ord(c) < 32 and c not in "\n\t")})
        if bad:
            out.append(Refusal("plain_text", s, f"characters outside printable ASCII {[hex(ord(c)) for c in bad[:4]]} "
                               "(hidden or look-alike text cannot be reviewed)"))
        if re.search(r"\\\s*\n", t):
            out.append(Refusal("plain_text", s, "a backslash line splice: it joins lines before comments end"))
        if re.search(r"%:|<%|%>|\?\?[=/'()!<>-]", t):
            out.append(Refusal("plain_text", s, "digraphs or trigraphs: they spell # and braces in disguise"))
    return out


def literals(answer: Answer, ctx: Context) -> list[Refusal]:
    out = []
    for s, t in _slots(answer):
        body = "\n".join(ln for ln in t.splitlines() if not re.match(r"\s*#\s*include\b", ln))
        if re.search(r"[\"']", body):
            out.append(Refusal("literals", s, "string or character literals: a composition computes, it does not "
                               "name files, commands or addresses"))
    return out


def comments(answer: Answer, ctx: Context) -> list[Refusal]:
    return [Refusal("comments", s, "a block comment left open swallows the skeleton after the slot")
            for s, t in _slots(answer) if strip_comments(t) is None]


def _code(answer: Answer) -> list[tuple[str, str]]:
    return [(s, strip_comments(t) or "") for s, t in _slots(answer)]


def preprocessor(answer: Answer, ctx: Context) -> list[Refusal]:
    out = []
    for s, code in _code(answer):
        for ln in code.splitlines():
            stripped = ln.strip()
            if "#" not in stripped:
                continue
            inc = re.fullmatch(r"#\s*include\s*[<\"]([^>\"]+)[>\"]", stripped)
            if inc:
                if s != "functors":
                    out.append(Refusal("preprocessor", s, f"#include {inc.group(1)}: includes belong in functors"))
                elif not ALLOWED_INCLUDE.match(inc.group(1)) or ".." in inc.group(1):
                    out.append(Refusal("includes", s, f"#include {inc.group(1)}: only CUTLASS, CuTe and CUDA "
                                       "device headers may be included"))
                continue
            if re.fullmatch(r"#\s*pragma\s+unroll(\s+\d+)?", stripped):
                continue
            out.append(Refusal("preprocessor", s, f"{stripped[:60]!r}: the only directives allowed are "
                               "#include of CUTLASS/CuTe/CUDA headers and #pragma unroll"))
    return out


def forbidden_calls(answer: Answer, ctx: Context) -> list[Refusal]:
    out = []
    for s, code in _code(answer):
        words = set(_identifiers(_without_directives(code)))
        for w in sorted(words & FORBIDDEN_CALLS):
            out.append(Refusal("side_effects", s, f"{w}: file, process, network, environment or memory "
                               "management calls are not part of a composition"))
        for w in sorted(w for w in words if HOST_RUNTIME.match(w)):
            out.append(Refusal("host_runtime", s, f"{w}: the skeleton owns memory, streams and launches"))
        if "<<<" in code:
            out.append(Refusal("host_runtime", s, "<<<...>>>: a kernel launch; the skeleton owns launches"))
    return out


def host_code(answer: Answer, ctx: Context) -> list[Refusal]:
    out = []
    for s, code in _code(answer):
        words = set(_identifiers(_without_directives(code)))
        for w in sorted(words & HOST_MARKERS):
            out.append(Refusal("host_code", s, f"{w}: host code, linkage or namespaces belong to the skeleton"))
        for w in sorted(words & SKELETON_NAMES - ({"ElementC", "ElementD", "TileShape", "kRound"})):
            out.append(Refusal("skeleton_names", s, f"{w}: a name the skeleton defines"))
        for w in sorted(w for w in words if w.lower().startswith("fact_") or w.startswith("Fact")):
            out.append(Refusal("skeleton_names", s, f"{w}: names starting fact_/Fact are the skeleton's"))
        if re.search(r"\b__host__\b", code) and not re.search(r"\b__host__\s+__device__\b|\b__device__\s+__host__\b",
                                                             code):
            out.append(Refusal("host_code", s, "__host__ functions: only device (or host-device) code"))
        if re.search(r"\bstatic\b(?!_assert|_cast)", code):
            out.append(Refusal("host_code", s, "static storage: a composition holds no state"))
    return out


def asm_blocks(answer: Answer, ctx: Context) -> list[Refusal]:
    out = []
    for s, code in _code(answer):
        for m in re.finditer(r"\b(asm|__asm__|__asm)\b", code):
            headers = [h for h in _enclosing_headers(code, m.start()) if "(" in h]
            head = headers[-1] if headers else ""
            device_only = bool(re.search(r"\b(__device__|CUTLASS_DEVICE)\b", head)) and not re.search(
                r"\b(__host__|CUTLASS_HOST_DEVICE|CUTLASS_HOST)\b", head)
            if s != "functors" or not device_only:
                out.append(Refusal("asm", s, "an asm block outside a device-only function"))
    return out


def balance(answer: Answer, ctx: Context) -> list[Refusal]:
    out = []
    for s, code in _code(answer):
        for open_, close in ("{}", "()", "[]"):
            depth = 0
            for ch in code:
                depth += (ch == open_) - (ch == close)
                if depth < 0:
                    break
            if depth != 0:
                out.append(Refusal("balance", s, f"unbalanced {open_}{close}: a slot may not close or open the "
                                   "skeleton's scopes"))
    return out


def shapes(answer: Answer, ctx: Context) -> list[Refusal]:
    """Each slot holds only the kind of declaration it is for."""
    out = []
    code = dict(_code(answer))
    fusion = _top_level_statements(_without_directives(code["fusion"]))
    for st in fusion:
        if not re.match(r"(template\s*<[^;{]*>\s*)?using\s+\w+\s*=", st):
            out.append(Refusal("slot_shape", "fusion", f"{st[:60]!r}: the fusion slot holds only `using` declarations"))
    if not fusion or not re.match(r"using\s+Fusion\s*=", fusion[-1]):
        out.append(Refusal("slot_shape", "fusion", "the last declaration must be `using Fusion = ...;`"))
    for st in _top_level_statements(_without_directives(code["functors"])):
        if not re.match(r"(template\b|struct\b|using\b|static_assert\b)", st):
            out.append(Refusal("slot_shape", "functors", f"{st[:60]!r}: only functor templates, structs and "
                               "type aliases"))
    args = code["fusion_arguments"]
    stray = re.sub(r"[{}(),.\s-]|\b\d+(\.\d*)?([eE][-+]?\d+)?[fF]?\b", " ", args)
    words = set(_identifiers(stray))
    unknown = sorted(words - ARGUMENT_WORDS)
    leftover = re.sub(r"[A-Za-z_]\w*|\s", "", stray)
    if unknown or leftover:
        out.append(Refusal("slot_shape", "fusion_arguments", f"only braces, numbers and {sorted(ARGUMENT_WORDS)} may "
                           f"appear; found {(unknown + list(leftover))[:6]}"))
    return out


def tunables(answer: Answer, ctx: Context) -> list[Refusal]:
    out = []
    t = answer.tunables
    for name in sorted(set(t) - set(TUNABLES)):
        out.append(Refusal("tunables", name, f"not a tunable of the skeleton (known: {', '.join(TUNABLES)})"))
    for name, allowed in TUNABLES.items():
        if name not in t:
            out.append(Refusal("tunables", name, "missing"))
            continue
        for v in (t[name].value, *t[name].candidates):
            if v not in allowed:
                out.append(Refusal("tunables", name, f"{v!r} is not a candidate ({', '.join(allowed)})"))
    if {"kernel_schedule", "epilogue_schedule", "tile"} <= set(t) and not out:
        ks = t["kernel_schedule"].value
        if COMPATIBLE_SCHEDULES[ks] != t["epilogue_schedule"].value:
            out.append(Refusal("tunables", "epilogue_schedule", f"{ks} needs {COMPATIBLE_SCHEDULES[ks]}"))
        if "Cooperative" in ks and int(t["tile"].value.split("x")[0]) < 128:
            out.append(Refusal("tunables", "tile", "a cooperative schedule needs at least 128 rows per tile"))
    return out


def grounding(answer: Answer, ctx: Context) -> list[Refusal]:
    return [Refusal("grounding", "exemplars", f"{g.id!r} was not among the exemplars offered")
            for g in answer.exemplars if g.id not in ctx.offered_exemplars]


# The order matters only for reading: the rules that make text unambiguous come first, and the
# rules that read code run on text those first rules accepted.
RULES: tuple[Rule, ...] = (size, plain_text, literals, comments, preprocessor, forbidden_calls, host_code,
                           asm_blocks, balance, shapes, tunables, grounding)
_GATES = 4  # size, plain_text, literals, comments: later rules only read text these accepted


def check(answer: Answer, ctx: Context = Context()) -> list[Refusal]:
    """Every refusal the answer earns; an empty list means it may be compiled."""
    refusals: list[Refusal] = []
    for i, rule in enumerate(RULES):
        if i == _GATES and refusals:
            break
        refusals.extend(rule(answer, ctx))
    return refusals


__all__ = ["RULES", "Context", "Refusal", "check", "strip_comments"]
