"""The optional LLM reviewer: confirms or reorders a plan and proposes patterns for what the
rules left unmatched. Every answer is validated; nothing it says can add a kernel the
realization stage cannot build, change a flag, write a file or reach the network.

litellm is imported here only, lazily, with its model price list read locally
(LITELLM_LOCAL_MODEL_COST_MAP) so importing it makes no network request.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import logging
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jinja2

from fact.core.errors import FactError, MissingDependencyError
from fact.core.paths import cache_home
from fact.discover.plan import Plan, PlanItem
from fact.patterns import pattern_table
from fact.patterns.engine import precision_for, read_gemm, staging_note
from fact.patterns.ops import op_of
from fact.patterns.table import GEMM_RULES
from fact.patterns.types import Match

log = logging.getLogger(__name__)
PROMPTS = Path(__file__).with_name("prompts")
_ENV = jinja2.Environment(loader=jinja2.FileSystemLoader(PROMPTS), undefined=jinja2.StrictUndefined,
                          autoescape=False, keep_trailing_newline=True)
ANSWER_KEYS = {"summary", "confirm", "order", "proposals"}


class AgentError(FactError):
    """The LLM could not give a usable answer (after retries)."""


@dataclass
class Account:
    """Tokens and money spent, and how the calls went."""

    calls: int = 0
    cache_hits: int = 0
    retries: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    failures: list[str] = field(default_factory=list)

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


def json_object(content: str) -> dict[str, Any] | str:
    """An LLM's answer as a JSON object (a ``` fence around it allowed), or a string saying why not."""
    text = content.strip()
    if text.startswith("```"):
        text = text.strip("`").removeprefix("json").strip()
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        return f"not JSON ({exc.msg} at line {exc.lineno} column {exc.colno})"
    if not isinstance(data, dict):
        return "not a JSON object"
    return data


def load_litellm(purpose: str = "the LLM plan reviewer") -> Any:
    """litellm, offline-configured (local cost map, no telemetry); `purpose` names the feature in
    the error when it is not installed."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    try:
        import litellm
    except ImportError:
        raise MissingDependencyError("litellm", "agent", purpose) from None
    litellm.telemetry = False
    return litellm


def _retryable(litellm: Any) -> tuple[type[BaseException], ...]:
    names = ("RateLimitError", "Timeout", "APIConnectionError", "ServiceUnavailableError",
             "InternalServerError", "APIError")
    return tuple(getattr(litellm, n) for n in names if hasattr(litellm, n))


def graph_summary(captured: Any, limit: int = 120) -> list[str]:
    lines = []
    for n in captured.nodes:
        if n.op in ("placeholder", "output", "get_attr"):
            continue
        op = op_of(n, captured.graph_module)
        spec = n.meta.get("fact_spec")
        shape = "x".join(map(str, spec.shape)) if spec else "-"
        lines.append(f"{n.name} = {op.kind if op else n.op}({', '.join(a.name for a in n.all_input_nodes)}) -> {shape}")
    return lines[:limit]


class PlanAgent:
    """Review a plan with an LLM through litellm.

    Args:
        model: a litellm model string ("openai/gpt-4o-mini", "anthropic/claude-...").
            Credentials come from the provider's usual environment variables.
        api_base: an OpenAI-compatible endpoint, if not the provider's default.
        timeout: seconds per request.
        retries: further attempts after a retryable failure or a malformed answer.
        backoff: first wait in seconds; doubles each retry.
        cache_dir: responses cached by prompt hash (default ~/.cache/fact/llm).
        replay: answer only from the cache; never call the model.
    """

    def __init__(self, model: str, *, api_base: str | None = None, api_key: str | None = None,
                 timeout: float = 60.0, retries: int = 3, backoff: float = 1.0,
                 cache_dir: Path | str | None = None, replay: bool = False) -> None:
        self.model, self.api_base, self.api_key = model, api_base, api_key
        self.timeout, self.retries, self.backoff = timeout, retries, backoff
        self.cache_dir = Path(cache_dir) if cache_dir else cache_home() / "llm"
        self.replay = replay
        self.account = Account()

    # -- prompting ---------------------------------------------------------------------
    def messages(self, plan: Plan, captured: Any, exemplar_text: dict[str, str]) -> list[dict[str, str]]:
        user = _ENV.get_template("review.j2").render(
            plan=plan, table=pattern_table(), graph=graph_summary(captured), exemplar_text=exemplar_text)
        return [{"role": "system", "content": _ENV.get_template("system.j2").render()},
                {"role": "user", "content": user}]

    def _key(self, messages: list[dict[str, str]]) -> str:
        blob = json.dumps({"model": self.model, "messages": messages}, sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()

    def ask(self, messages: list[dict[str, str]]) -> dict[str, Any]:
        """A validated-shape JSON answer, from the cache or the model.

        Raises:
            AgentError: when no usable answer came within the retries (or none is cached in replay).
        """
        key = self._key(messages)
        cached = self.cache_dir / f"{key}.json"
        if cached.is_file():
            self.account.cache_hits += 1
            return json.loads(cached.read_text())["answer"]
        if self.replay:
            raise AgentError(f"replay mode and no cached answer for prompt {key[:12]}")
        litellm = load_litellm()
        retryable = _retryable(litellm)
        wait = self.backoff
        last = "no attempt"
        for attempt in range(self.retries + 1):
            if attempt:
                self.account.retries += 1
                time.sleep(wait)
                wait *= 2
            try:
                self.account.calls += 1
                response = litellm.completion(
                    model=self.model, messages=messages, timeout=self.timeout, api_base=self.api_base,
                    api_key=self.api_key, response_format={"type": "json_object"}, num_retries=0)
            except retryable as exc:
                last = f"{type(exc).__name__}: {str(exc)[:200]}"
                self.account.failures.append(last)
                continue
            except Exception as exc:
                last = f"{type(exc).__name__}: {str(exc)[:200]}"
                self.account.failures.append(last)
                break
            self._charge(litellm, response)
            content = response.choices[0].message.content or ""
            answer = parse_answer(content)
            if isinstance(answer, str):
                last = f"malformed answer: {answer}"
                self.account.failures.append(last)
                continue
            self.cache_dir.mkdir(parents=True, exist_ok=True)
            tmp = cached.with_suffix(".tmp")
            tmp.write_text(json.dumps({"model": self.model, "answer": answer}, indent=1))
            tmp.replace(cached)
            return answer
        raise AgentError(f"the LLM gave no usable answer after {self.retries + 1} attempt(s): {last}")

    def _charge(self, litellm: Any, response: Any) -> None:
        usage = getattr(response, "usage", None)
        if usage is not None:
            self.account.prompt_tokens += int(getattr(usage, "prompt_tokens", 0) or 0)
            self.account.completion_tokens += int(getattr(usage, "completion_tokens", 0) or 0)
        # unknown models have no price; their tokens are still counted
        with contextlib.suppress(Exception):
            self.account.cost_usd += float(litellm.completion_cost(completion_response=response) or 0.0)

    # -- reviewing ---------------------------------------------------------------------
    def review(self, plan: Plan, captured: Any, kb: Any = None) -> Plan:
        """The plan, reordered and extended by whatever of the answer survives validation.
        Any failure returns the plan unchanged with the reason in `review`."""
        exemplar_text = _exemplar_text(plan, kb)
        try:
            answer = self.ask(self.messages(plan, captured, exemplar_text))
        except (AgentError, MissingDependencyError) as exc:
            log.warning("plan review skipped: %s", exc)
            return dataclasses.replace(plan, review={"error": str(exc), "account": dataclasses.asdict(self.account)})
        return apply_answer(plan, captured, answer, self.account)


def _exemplar_text(plan: Plan, kb: Any) -> dict[str, str]:
    texts: dict[str, str] = {}
    snapshot = kb.snapshot() if kb is not None else None
    docs = dict(zip(snapshot.ids, snapshot.documents, strict=True)) if snapshot else {}
    for item in plan.items:
        for ex in item.exemplars:
            doc = docs.get(ex.id, "")
            first = doc.split("\n", 2)[:2]
            texts[ex.id] = " ".join(first)[:600].replace("</exemplar>", "")
    return texts


def parse_answer(content: str) -> dict[str, Any] | str:
    """The answer object, or a string saying what is wrong with it."""
    data = json_object(content)
    if isinstance(data, str):
        return data
    if not isinstance(data.get("summary", ""), str) or not isinstance(data.get("confirm", True), bool):
        return "summary must be a string and confirm a boolean"
    if not isinstance(data.get("order", []), list) or not isinstance(data.get("proposals", []), list):
        return "order and proposals must be lists"
    return data


def apply_answer(plan: Plan, captured: Any, answer: dict[str, Any], account: Account | None = None) -> Plan:
    """Keep only what the realization stage can build; log every dropped part with its reason."""
    dropped: list[str] = []
    extra = sorted(set(answer) - ANSWER_KEYS)
    if extra:
        dropped.append(f"ignored unknown fields {extra}")
    items = list(plan.items)
    ids = [i.match.id for i in items]
    order = answer.get("order") or []
    if order:
        if sorted(map(str, order)) == sorted(ids):
            rank = {mid: n for n, mid in enumerate(order)}
            items.sort(key=lambda i: rank[i.match.id])
        else:
            dropped.append("order is not a permutation of the match ids: kept the estimated order")
    accepted: list[str] = []
    rejected_nodes = {r.node: r for r in plan.rejections}
    root = captured.graph_module
    nodes = {n.name: n for n in root.graph.nodes}
    realizable = {r.name: r for r in GEMM_RULES}
    for prop in answer.get("proposals") or []:
        if not isinstance(prop, dict) or not {"node", "pattern"} <= set(prop):
            dropped.append(f"proposal {str(prop)[:80]!r} lacks node/pattern")
            continue
        name, pattern = str(prop["node"]), str(prop["pattern"])
        if name not in rejected_nodes or name not in nodes:
            dropped.append(f"proposal for {name!r}: not a rejected node of this graph")
            continue
        if pattern not in realizable:
            dropped.append(f"proposal {pattern!r} for {name}: not a pattern the realization stage can build")
            continue
        op = op_of(nodes[name], root)
        if op is None or op.kind not in realizable[pattern].anchors:
            dropped.append(f"proposal {pattern!r} for {name}: {op.kind if op else 'node'} is not a GEMM anchor")
            continue
        gemm = read_gemm(op, root)
        if isinstance(gemm, str):
            dropped.append(f"proposal {pattern!r} for {name}: {gemm}")
            continue
        prec = precision_for(gemm.dtype, plan.precision_policy)
        staging = staging_note(gemm, prec)
        rule = realizable[pattern]
        match = Match(pattern=rule.name, family=rule.family, anchor=name, nodes=(name,), output=name,
                      dtype=gemm.dtype, precision=prec, realization=rule.realization, problem=gemm.problem,
                      layouts=gemm.layouts, epilogue=("bias",) if gemm.bias else (), operands=gemm.operands,
                      notes=(f"proposed by the LLM reviewer: {str(prop.get('reason', ''))[:200]}",
                             *([staging] if staging else [])))
        from fact.discover.cost import estimate

        est = estimate(match, plan.arch)
        items.append(PlanItem(match, (), est.eager_s * 1e3, est.tuned_s * 1e3))
        accepted.append(name)
    for reason in dropped:
        log.info("reviewer output dropped: %s", reason)
    review = {
        "summary": str(answer.get("summary", ""))[:2000],
        "confirm": bool(answer.get("confirm", True)),
        "accepted_proposals": accepted,
        "dropped": dropped,
        "account": dataclasses.asdict(account) if account else {},
    }
    rejections = tuple(r for r in plan.rejections if r.node not in accepted)
    return dataclasses.replace(plan, items=tuple(items), rejections=rejections, review=review)


__all__ = ["Account", "AgentError", "PlanAgent", "apply_answer", "graph_summary", "parse_answer"]
