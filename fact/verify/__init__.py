"""Stage 2b, verify: built kernels against float64 references, untrusted ones in a worker."""

from fact.verify.check import AttnCase, CaseResult, GemmCase, VerifyReport, default_gemm_cases, verify
from fact.verify.tolerance import TOLERANCE, tolerance
from fact.verify.worker import Job, Outcome, run_job

__all__ = ["TOLERANCE", "AttnCase", "CaseResult", "GemmCase", "Job", "Outcome", "VerifyReport",
           "default_gemm_cases", "run_job", "tolerance", "verify"]
