"""Agentic realization: an LLM writes the CUTLASS composition inside fact's fixed skeleton.

    task = find_tasks(capture(module, inputs))[0]
    record = synthesize_task(task, LLMClient("openai/..."), corpus_exemplars(task), workdir=...)

The answer is checked against the contract before anything is compiled; compiler errors go
back in bounded rounds; a kernel is composed only after verification on a GPU. A verified kernel
promoted into the corpus becomes a learned pattern that later discovery realizes without the LLM
(fact.agentic.learned); the answer's tunables are swept by fact's tuner (fact.agentic.sweep).
"""

from fact.agentic.answer import Answer, answer_schema, parse
from fact.agentic.client import Account, Budget, LLMClient, SynthesisError
from fact.agentic.contract import Context, Refusal, check
from fact.agentic.loop import SynthesisRecord, VerifyOutcome, synthesize_task
from fact.agentic.prompt import Exemplar, corpus_exemplars
from fact.agentic.task import SynthesisTask, find_tasks, task_for

__all__ = ["Account", "Answer", "Budget", "Context", "Exemplar", "LLMClient", "Refusal", "SynthesisError",
           "SynthesisRecord", "SynthesisTask", "VerifyOutcome", "answer_schema", "check", "corpus_exemplars",
           "find_tasks", "parse", "synthesize_task", "task_for"]
