"""Stage 2b, tune: the fastest verified kernel for a GEMM on this GPU, remembered.

    target = Target(Arch.SM90, DType.BF16, Precision.BF16, Layout.ROW, Layout.COL, (), ProblemShape(4096, 4096, 4096))
    db = TuningDB(None, Environment.current(device_name, Arch.SM90))
    result = tune(target, runner=LocalRunner(), builder=LocalBuilder(), db=db, strategy="topk",
                  budget=Budget(configs=64, seconds=300))
    spec, measurement = result.best

Seams: a picklable BenchRequest (no tensors) and a Measurement value (a failure is a value with
a reason); strategies (fact.tune.strategies) share one signature, runners
(fact.tune.runners) another; the SQLite TuningDB keys every row by device and versions and
validates rows on load.
"""

from __future__ import annotations

from fact.tune.candidates import NoCandidateError, Rejection, Space, Target, enumerate_space
from fact.tune.db import Environment, TuningDB, TuningDBError
from fact.tune.device import H100_SXM, DeviceProfile
from fact.tune.measurement import Measurement, Status
from fact.tune.rank import predict_ms, rank
from fact.tune.request import BenchRequest, Config, Knobs, Raster
from fact.tune.sweep import Budget, Progress, SweepResult, tune

__all__ = ["H100_SXM", "BenchRequest", "Budget", "Config", "DeviceProfile", "Environment", "Knobs", "Measurement",
           "NoCandidateError", "Progress", "Raster", "Rejection", "Space", "Status", "SweepResult", "Target",
           "TuningDB", "TuningDBError", "enumerate_space", "predict_ms", "rank", "tune"]
