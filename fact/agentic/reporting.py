"""A synthesis record as a line of the composition report (origin "llm", with its grounding)."""

from __future__ import annotations

from fact.agentic.loop import SynthesisRecord
from fact.compose.report import ItemReport, Report


def item_for(record: SynthesisRecord) -> ItemReport:
    """The report item of a synthesized kernel: composed only when it verified, else kept."""
    match = record.match
    composed = record.status == "verified"
    v = record.verification
    verification = ({"category": v.get("category", "ok" if v.get("ok") else "failed_check"),
                     "worst": v["worst_rel_err"], "tolerance": v.get("tolerance", 0.0),
                     "cases": v.get("cases", 0), "seeds": v.get("cases", 0)}
                    if "worst_rel_err" in v else {"category": record.status})
    return ItemReport(match_id=f"{match.get('pattern', 'llm')}@{match.get('anchor', record.task_id)}",
                      pattern=str(match.get("pattern", "llm_gemm_epilogue")), nodes=list(match.get("nodes", [])),
                      status="composed" if composed else "kept", reason="" if composed else record.reason,
                      kernel=record.kernel, exemplars=[e["id"] for e in record.exemplars], origin="llm",
                      precision=str(match.get("precision", "")), verification=verification)


def add_records(report: Report, records: list[SynthesisRecord]) -> Report:
    """Append one item per record, with a note of the LLM spend."""
    for r in records:
        report.items.append(item_for(r))
        a = r.account
        report.notes.append(f"{r.kernel or r.task_id}: LLM {r.model}, prompt {r.prompt_sha[:12]}, {r.rounds} round(s), "
                            f"{a.get('tokens', 0)} tokens, ${a.get('cost_usd', 0.0):.4f}, status {r.status}")
    return report


__all__ = ["add_records", "item_for"]
