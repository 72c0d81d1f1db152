"""One LLM call at a time through litellm, behind a response cache keyed by the prompt's hash.

The cache stores the model's raw text, so a replay parses, checks and renders exactly what the
first run did and produces the same kernel byte for byte, with no network. litellm is imported
here only, lazily, with its price list read locally.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fact.core.errors import FactError
from fact.core.paths import cache_home
from fact.discover.agent import Account as _Account
from fact.discover.agent import load_litellm

CACHE_VERSION = 1


class SynthesisError(FactError):
    """The LLM gave no answer within the retries or the budget, or none is cached in replay."""


@dataclass(frozen=True)
class Budget:
    """Limits of one synthesis: rounds (answers asked for), tokens and money, all inclusive."""

    rounds: int = 3
    tokens: int = 200_000
    usd: float = 2.0


class Account(_Account):
    """What a synthesis spent and how its calls went (the plan reviewer's account, with its budget check)."""

    def exhausted(self, budget: Budget, rounds: int) -> str | None:
        """Which limit is spent, or None."""
        if rounds >= budget.rounds:
            return f"rounds: {rounds} of {budget.rounds}"
        if self.tokens >= budget.tokens:
            return f"tokens: {self.tokens} of {budget.tokens}"
        if self.cost_usd >= budget.usd:
            return f"money: ${self.cost_usd:.4f} of ${budget.usd:.2f}"
        return None


def prompt_sha(model: str, messages: list[dict[str, str]]) -> str:
    blob = json.dumps({"v": CACHE_VERSION, "model": model, "messages": messages}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()


@dataclass(frozen=True)
class Reply:
    content: str
    prompt_sha: str
    cached: bool


class LLMClient:
    """Chat completions with a response cache.

    Args:
        model: a litellm model string; api_base/api_key: an OpenAI-compatible endpoint.
        cache_dir: raw responses by prompt hash (default $FACT_CACHE_DIR/llm-synthesis).
        replay: answer only from the cache; never reach the model.
        timeout, retries, backoff: per request, retryable failures, first wait (doubling).
    """

    def __init__(self, model: str, *, api_base: str | None = None, api_key: str | None = None,
                 cache_dir: Path | str | None = None, replay: bool = False, timeout: float = 120.0,
                 retries: int = 2, backoff: float = 1.0) -> None:
        self.model, self.api_base, self.api_key = model, api_base, api_key
        self.cache_dir = Path(cache_dir) if cache_dir else cache_home() / "llm-synthesis"
        self.replay, self.timeout, self.retries, self.backoff = replay, timeout, retries, backoff

    def complete(self, messages: list[dict[str, str]], account: Account) -> Reply:
        """The model's text for `messages`, from the cache or the model.

        Raises:
            SynthesisError: no text within the retries, or replay mode without a cached answer.
        """
        sha = prompt_sha(self.model, messages)
        path = self.cache_dir / f"{sha}.json"
        if path.is_file():
            with contextlib.suppress(OSError, json.JSONDecodeError, KeyError):
                data = json.loads(path.read_text())
                if data.get("v") == CACHE_VERSION and data.get("prompt_sha") == sha:
                    account.cache_hits += 1
                    return Reply(data["content"], sha, cached=True)
        if self.replay:
            raise SynthesisError(f"replay mode and no cached answer for prompt {sha[:16]} in {self.cache_dir}")
        litellm = load_litellm("LLM kernel synthesis")
        retryable = tuple(getattr(litellm, n) for n in ("RateLimitError", "Timeout", "APIConnectionError",
                                                        "ServiceUnavailableError", "InternalServerError")
                          if hasattr(litellm, n))
        wait, last = self.backoff, "no attempt"
        for attempt in range(self.retries + 1):
            if attempt:
                account.retries += 1
                time.sleep(wait)
                wait *= 2
            account.calls += 1
            try:
                response = litellm.completion(model=self.model, messages=messages, timeout=self.timeout,
                                              api_base=self.api_base, api_key=self.api_key, temperature=0,
                                              response_format={"type": "json_object"}, num_retries=0)
            except retryable as exc:
                last = f"{type(exc).__name__}: {str(exc)[:200]}"
                account.failures.append(last)
                continue
            except Exception as exc:
                last = f"{type(exc).__name__}: {str(exc)[:200]}"
                account.failures.append(last)
                break
            self._charge(litellm, response, account)
            content = response.choices[0].message.content or ""
            self._store(sha, content)
            return Reply(content, sha, cached=False)
        raise SynthesisError(f"the LLM gave no answer after {self.retries + 1} attempt(s): {last}")

    def remember(self, messages: list[dict[str, str]], content: str) -> str:
        """Store `content` as the model's answer to `messages` (a recorded answer brought into the
        cache, so that a replay serves it with no network); returns the prompt hash."""
        sha = prompt_sha(self.model, messages)
        self._store(sha, content)
        return sha

    def _store(self, sha: str, content: str) -> None:
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        path = self.cache_dir / f"{sha}.json"
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps({"v": CACHE_VERSION, "model": self.model, "prompt_sha": sha,
                                   "content": content}, indent=1))
        tmp.replace(path)

    @staticmethod
    def _charge(litellm: Any, response: Any, account: Account) -> None:
        usage = getattr(response, "usage", None)
        if usage is not None:
            account.prompt_tokens += int(getattr(usage, "prompt_tokens", 0) or 0)
            account.completion_tokens += int(getattr(usage, "completion_tokens", 0) or 0)
        with contextlib.suppress(Exception):  # unknown models have no price; tokens still count
            account.cost_usd += float(litellm.completion_cost(completion_response=response) or 0.0)


__all__ = ["Account", "Budget", "LLMClient", "Reply", "SynthesisError", "prompt_sha"]
