"""The tuning database: one SQLite file, one row per measurement (failures included).

A row is keyed by the environment (device name, arch, CUTLASS, CUDA and torch versions), the
GEMM (family, dtypes, layouts, epilogue, precision), the problem shape, the kernel (spec key)
and its run-time knobs. Each row carries a sha256 of its own fields: on load a row whose
checksum does not match, whose spec does not parse back to its key, or whose environment is
not the current one is ignored, never trusted. WAL mode and a busy timeout make concurrent
writers safe; every write is one transaction, so a killed sweep leaves whole rows only and a
second run resumes where it stopped (a measured config costs no GPU time).

The verified-pattern registry lives here too (table `patterns`), so that a team pools one file.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import functools
import hashlib
import json
import logging
import math
import os
import sqlite3
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from fact.core.enums import Arch, DType, Layout, Precision
from fact.core.errors import FactError
from fact.core.paths import cache_home
from fact.core.specs import ProblemShape
from fact.realize.spec import GemmSpec, Mode, Schedule, Scheduler, Sm80Tiles, Sm90SplitTiles, Sm90Tiles, Step
from fact.tune.candidates import Target
from fact.tune.measurement import Measurement, Status, fastest
from fact.tune.request import Knobs

SCHEMA_VERSION = 1
EXPORT_FORMAT = "fact-tuning-export"
log = logging.getLogger(__name__)


class TuningDBError(FactError):
    """The tuning database cannot be used (the message says what to do)."""


@dataclass(frozen=True)
class Environment:
    """What makes a measurement valid elsewhere: the same device and the same software."""

    device: str
    arch: str
    cutlass: str
    cuda: str
    torch: str

    @classmethod
    def current(cls, device: str, arch: Arch) -> Environment:
        """This process's versions on `device` (a GPU name) of architecture `arch`."""
        import importlib.metadata as md

        def version(pkg: str) -> str:
            try:
                return md.version(pkg)
            except md.PackageNotFoundError:
                return "absent"

        try:
            import torch

            cuda = str(torch.version.cuda)
            torch_version = str(torch.__version__)
        except ImportError:
            cuda, torch_version = "absent", "absent"
        # the CUTLASS version, and which of fact's kernel templates: a kernel's spec key names its
        # configuration, not its code, and a template change (a faster launch, a fix) makes it another kernel
        return cls(device, arch.value, f"{version('nvidia-cutlass')}+fact.{templates_digest()[:12]}", cuda, torch_version)


def templates_digest(folder: Path | None = None) -> str:
    """sha256 of the kernel templates (every `*.j2` file under `folder`, hidden ones left out, so an
    editor's swap file does not count; default fact/realize/templates, read once per process): part of
    a measurement's environment, so rows timed on other kernel code are never served."""
    return _digest(folder) if folder is not None else _templates_digest()


@functools.cache
def _templates_digest() -> str:
    return _digest(Path(__file__).resolve().parents[1] / "realize" / "templates")


def _digest(folder: Path) -> str:
    h = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*.j2") if p.is_file() and not p.name.startswith(".")):
        h.update(path.relative_to(folder).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


def default_path() -> Path:
    return cache_home() / "tuning.sqlite"


_COLUMNS = ("device", "arch", "cutlass", "cuda", "torch", "family", "dtype", "precision", "layouts", "epilogue",
            "batch", "m", "n", "k", "spec_key", "spec", "knobs", "kernel", "status", "median_ms", "spread", "runs",
            "reason", "baseline_ms", "verified", "created")
_KEY = ("device", "arch", "cutlass", "cuda", "torch", "family", "dtype", "precision", "layouts", "epilogue",
        "batch", "m", "n", "k", "spec_key", "knobs")
_SCHEMA = f"""
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS measurements (
  {", ".join(f"{c} {'INTEGER' if c in ('batch', 'm', 'n', 'k', 'runs', 'verified') else 'REAL' if c in ('median_ms', 'spread', 'baseline_ms') else 'TEXT'} NOT NULL" for c in _COLUMNS)},
  checksum TEXT NOT NULL,
  PRIMARY KEY ({", ".join(_KEY)})
);
CREATE INDEX IF NOT EXISTS by_gemm ON measurements (device, arch, dtype, precision, layouts, epilogue);
CREATE TABLE IF NOT EXISTS patterns (key TEXT PRIMARY KEY, kernel TEXT NOT NULL, date TEXT NOT NULL);
"""


# ---- specs as JSON (rows must rebuild the exact spec they measured) ---------------------------
def spec_to_json(spec: GemmSpec) -> str:
    def canon(value: Any) -> Any:
        if hasattr(value, "value") and not isinstance(value, (int, float, str)):
            return value.value
        if isinstance(value, dict):
            return {k: canon(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [canon(v) for v in value]
        return value

    data = canon(asdict(spec))
    data["tiles_kind"] = ("sm90_split" if isinstance(spec.tiles, Sm90SplitTiles)
                          else "sm90" if isinstance(spec.tiles, Sm90Tiles) else "sm80")
    return json.dumps(data, sort_keys=True)


def spec_from_json(text: str) -> GemmSpec:
    d = json.loads(text)
    t = d["tiles"]
    tiles: Sm80Tiles | Sm90Tiles
    if d["tiles_kind"] == "sm90":
        tiles = Sm90Tiles(tuple(t["tile"]), tuple(t["cluster"]), Schedule(t["schedule"]), Scheduler(t["scheduler"]))
    elif d["tiles_kind"] == "sm90_split":
        tiles = Sm90SplitTiles(tuple(t["tile"]), tuple(t["cluster"]), Schedule(t["schedule"]),
                               Scheduler(t["scheduler"]), int(t["promotion"]), bool(t.get("a_in_registers", False)),
                               int(t.get("accumulators", 3)), bool(t.get("presplit", False)),
                               bool(t.get("raw_big", False)), bool(t.get("plain_promotion", False)),
                               bool(t.get("f16_parts", False)), bool(t.get("f16_mainloop", False)))
    else:
        tiles = Sm80Tiles(tuple(t["threadblock"]), tuple(t["warp"]), tuple(t["instruction"]), t["stages"],
                          t["swizzle"], t["split_k"])
    steps = tuple(Step(s["kind"], s["a"], s["b"]) for s in d["epilogue"])
    return GemmSpec(Arch(d["arch"]), DType(d["dtype"]), Precision(d["precision"]), Layout(d["layout_a"]),
                    Layout(d["layout_b"]), steps, Mode(d["mode"]), tiles)


def _checksum(row: dict[str, Any]) -> str:
    blob = json.dumps([row[c] if not isinstance(row[c], float) or math.isfinite(row[c]) else repr(row[c])
                       for c in _COLUMNS], default=str)
    return hashlib.sha256(blob.encode()).hexdigest()


def _gemm_fields(target: Target) -> dict[str, Any]:
    p = target.problem
    return {"dtype": target.dtype.value, "precision": target.precision.value, "layouts": target.layout_tag,
            "epilogue": json.dumps([[s.kind, s.a, s.b] for s in target.epilogue]),
            "batch": p.batch, "m": p.m, "n": p.n, "k": p.k}


@dataclass(frozen=True)
class LoadReport:
    """What loading rows found: how many were used and how many ignored, by reason."""

    used: int
    ignored: dict[str, int]


class _Store:
    """One SQLite file of the tuning schema: opening (WAL, busy timeout) and recovery.

    A file that is not a readable SQLite database of this schema is moved aside (its new name
    is logged) and a fresh one is started: a damaged database only loses reuse, never
    correctness.
    """

    def __init__(self, path: Path | str | None, *, opened: bool = False) -> None:
        self.path = Path(path) if path else default_path()
        if not opened:  # `opened`: another store of this file has just checked it
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._open()

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, timeout=60.0, isolation_level=None)
        conn.execute("PRAGMA busy_timeout = 60000")
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = NORMAL")
        return conn

    def _open(self) -> None:
        try:
            conn = self._connect()
            try:
                ok = conn.execute("PRAGMA quick_check").fetchone()[0] == "ok"
                if ok:
                    conn.executescript(_SCHEMA)
                    found = conn.execute("SELECT value FROM meta WHERE name = 'schema'").fetchone()
                    if found is None:
                        conn.execute("INSERT OR IGNORE INTO meta VALUES ('schema', ?)", (str(SCHEMA_VERSION),))
                    elif found[0] != str(SCHEMA_VERSION):
                        raise TuningDBError(f"{self.path} has tuning schema {found[0]}; this fact reads "
                                            f"{SCHEMA_VERSION}. Export it with the fact that wrote it, or "
                                            "pass another --db.")
            finally:
                conn.close()
        except sqlite3.OperationalError as exc:
            if "locked" in str(exc) or "busy" in str(exc):  # another writer holds it: not damage
                raise TuningDBError(f"{self.path} is busy ({exc}); try again") from exc
            ok, reason = False, str(exc)
        except sqlite3.DatabaseError as exc:
            ok, reason = False, str(exc)
        else:
            reason = "integrity check failed"
        if not ok:
            aside = self.path.with_name(f"{self.path.name}.corrupt-{int(time.time())}")
            for suffix in ("", "-wal", "-shm"):
                with contextlib.suppress(FileNotFoundError):
                    os.replace(f"{self.path}{suffix}", f"{aside}{suffix}")
            log.warning("tuning database %s is unreadable (%s): moved to %s, starting a fresh one",
                        self.path, reason, aside)
            conn = self._connect()
            try:
                conn.executescript(_SCHEMA)
                conn.execute("INSERT OR IGNORE INTO meta VALUES ('schema', ?)", (str(SCHEMA_VERSION),))
            finally:
                conn.close()

    @contextlib.contextmanager
    def _conn(self) -> Iterator[sqlite3.Connection]:
        conn = self._connect()
        try:
            yield conn
        finally:
            conn.close()


class PatternTable(_Store):
    """The verified-pattern registry's rows in the tuning database (fact.patterns.registry reads
    them): pattern key -> the kernel (or corpus entry) that serves it, and when it was recorded."""

    def record(self, key: str, kernel: str, date: str | None = None) -> None:
        with self._conn() as conn:
            conn.execute("INSERT OR REPLACE INTO patterns VALUES (?, ?, ?)",
                         (key, kernel, date or dt.date.today().isoformat()))

    def lookup(self, key: str) -> str | None:
        with self._conn() as conn:
            row = conn.execute("SELECT kernel FROM patterns WHERE key = ?", (key,)).fetchone()
        return row[0] if row else None

    def count(self) -> int:
        with self._conn() as conn:
            return int(conn.execute("SELECT COUNT(*) FROM patterns").fetchone()[0])


class TuningDB(_Store):
    """The tuning database at `path` for one environment.

    Args:
        path: the SQLite file (default: $FACT_CACHE_DIR/tuning.sqlite).
        env: the environment whose rows are trusted; rows of any other are ignored on load.

    A damaged file is moved aside and a fresh one started (see _Store).
    """

    def __init__(self, path: Path | str | None, env: Environment) -> None:
        self.env = env
        self.ignored: dict[str, int] = {}
        super().__init__(path)
        self.patterns = PatternTable(self.path, opened=True)  # the verified-pattern registry's rows

    # -- rows ---------------------------------------------------------------------------------
    def _row(self, target: Target, spec: GemmSpec, m: Measurement) -> dict[str, Any]:
        row: dict[str, Any] = {**asdict(self.env), "family": spec.family, **_gemm_fields(target),
                               "spec_key": spec.key, "spec": spec_to_json(spec), "knobs": m.knobs,
                               "kernel": m.kernel, "status": m.status.value, "median_ms": float(m.median_ms),
                               "spread": float(m.spread), "runs": int(m.runs), "reason": m.reason,
                               "baseline_ms": float(m.baseline_ms) if math.isfinite(m.baseline_ms) else -1.0, "verified": int(m.verified),
                               "created": dt.datetime.now(dt.UTC).isoformat(timespec="seconds")}
        row["checksum"] = _checksum(row)
        return row

    def record(self, target: Target, spec: GemmSpec, measurement: Measurement) -> None:
        """Store one measurement (replacing an earlier one of the same config), atomically."""
        if measurement.cached:
            return
        self._insert([self._row(target, spec, measurement)])

    def _insert(self, rows: Sequence[dict[str, Any]]) -> None:
        cols = (*_COLUMNS, "checksum")
        sql = f"INSERT OR REPLACE INTO measurements ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})"
        with self._conn() as conn:
            conn.execute("BEGIN IMMEDIATE")
            try:
                conn.executemany(sql, [tuple(r[c] for c in cols) for r in rows])
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise

    def _validate(self, row: sqlite3.Row) -> tuple[GemmSpec, Measurement] | str:
        """The row's spec and measurement, or why it is not trusted."""
        data = dict(row)
        if data.pop("checksum") != _checksum(data):
            return "checksum"
        if any(data[k] != v for k, v in asdict(self.env).items()):
            return "other environment"
        try:
            spec = spec_from_json(data["spec"])
            knobs = Knobs.from_json(data["knobs"])
            status = Status(data["status"])
        except (ValueError, KeyError, TypeError, json.JSONDecodeError):
            return "unparseable"
        if spec.key != data["spec_key"] or spec.family != data["family"]:
            return "spec mismatch"
        problem = ProblemShape(data["m"], data["n"], data["k"], data["batch"])
        return spec, Measurement(spec.key, data["kernel"], knobs.to_json(), problem, status, data["median_ms"],
                                 data["spread"], data["runs"], data["reason"],
                                 data["baseline_ms"] if data["baseline_ms"] >= 0 else math.nan,
                                 bool(data["verified"]), 0.0, True)

    def _select(self, where: str, args: Sequence[Any]) -> list[tuple[GemmSpec, Measurement]]:
        with self._conn() as conn:
            conn.row_factory = sqlite3.Row
            rows = conn.execute(f"SELECT * FROM measurements WHERE {where}", args).fetchall()
        out = []
        for row in rows:
            verdict = self._validate(row)
            if isinstance(verdict, str):
                self.ignored[verdict] = self.ignored.get(verdict, 0) + 1
                continue
            out.append(verdict)
        return out

    def _gemm_where(self, target: Target, with_shape: bool) -> tuple[str, list[Any]]:
        fields = _gemm_fields(target)
        keys = ["device", "arch", "dtype", "precision", "layouts", "epilogue"]
        values: list[Any] = [self.env.device, self.env.arch] + [fields[k] for k in keys[2:]]
        if with_shape:
            keys += ["batch", "m", "n", "k"]
            values += [fields[k] for k in ("batch", "m", "n", "k")]
        return " AND ".join(f"{k} = ?" for k in keys), values

    def measurements(self, target: Target) -> list[tuple[GemmSpec, Measurement]]:
        """Every trusted measurement of `target` (this environment, this shape)."""
        return self._select(*self._gemm_where(target, True))

    def lookup(self, target: Target) -> dict[tuple[str, str], Measurement]:
        """Trusted measurements of `target` by (spec key, knobs JSON): what a sweep need not redo."""
        return {(m.spec_key, m.knobs): m for _, m in self.measurements(target)}

    def best(self, target: Target) -> tuple[GemmSpec, Measurement] | None:
        """The fastest verified, trusted measurement of `target` with full runs (the sweep's own
        rule: fact.tune.measurement.fastest), or None."""
        return fastest(self.measurements(target))

    def nearest(self, target: Target, top: int = 4) -> tuple[ProblemShape, list[tuple[GemmSpec, Measurement]]] | None:
        """The tuned shape nearest to `target`'s (log distance over batch, M, N, K) among the same
        GEMM in this environment, with its `top` fastest configs: seeds for a new search."""
        where, args = self._gemm_where(target, False)
        rows = [(s, m) for s, m in self._select(where, args) if m.ok and m.verified and m.problem != target.problem]
        if not rows:
            return None
        p = target.problem

        def distance(q: ProblemShape) -> float:
            return sum(abs(math.log(a / b)) for a, b in ((q.m, p.m), (q.n, p.n), (q.k, p.k), (q.batch, p.batch)))

        shape = min({m.problem for _, m in rows}, key=lambda q: (distance(q), str(q)))
        best = sorted((sm for sm in rows if sm[1].problem == shape), key=lambda sm: sm[1].median_ms)
        return shape, best[:top]

    def load_report(self) -> LoadReport:
        """Counts over the whole file: rows this environment trusts and rows it ignores, by reason."""
        self.ignored = {}
        used = len(self._select("1 = 1", ()))
        return LoadReport(used, dict(self.ignored))

    # -- pooling ------------------------------------------------------------------------------
    def export(self, path: Path | str) -> int:
        """Write every row (all environments) to a JSON-lines file with a header; returns the count."""
        with self._conn() as conn:
            conn.row_factory = sqlite3.Row
            rows = [dict(r) for r in conn.execute("SELECT * FROM measurements ORDER BY rowid")]
        dest = Path(path)
        tmp = dest.with_name(f".{dest.name}.partial")
        with tmp.open("w") as f:
            f.write(json.dumps({"format": EXPORT_FORMAT, "schema": SCHEMA_VERSION, "rows": len(rows)}) + "\n")
            for r in rows:
                f.write(json.dumps(r, default=repr) + "\n")
        os.replace(tmp, dest)
        return len(rows)

    def import_(self, path: Path | str) -> LoadReport:
        """Merge an exported file: rows whose checksum holds are stored (any environment: they
        are trusted only where the environment matches); the rest are counted and dropped.

        Raises:
            TuningDBError: the file is not a fact tuning export of this schema.
        """
        lines = Path(path).read_text().splitlines()
        try:
            header = json.loads(lines[0]) if lines else {}
        except json.JSONDecodeError:
            header = {}
        if header.get("format") != EXPORT_FORMAT or header.get("schema") != SCHEMA_VERSION:
            raise TuningDBError(f"{path} is not a fact tuning export of schema {SCHEMA_VERSION}")
        good, bad = [], 0
        for line in lines[1:]:
            try:
                row = json.loads(line)
                for c in ("median_ms", "baseline_ms"):
                    row[c] = float(row[c])
                if row.get("checksum") != _checksum({c: row[c] for c in _COLUMNS}):
                    raise ValueError("checksum")
                good.append(row)
            except (ValueError, KeyError, TypeError):
                bad += 1
        if good:
            self._insert(good)
        return LoadReport(len(good), {"damaged": bad} if bad else {})


__all__ = ["Environment", "LoadReport", "PatternTable", "TuningDB", "TuningDBError", "default_path", "spec_from_json",
           "spec_to_json", "templates_digest"]
