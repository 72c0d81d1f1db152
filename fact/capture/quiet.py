"""What torch prints while fact captures: kept out of the way of fact's own one-line CaptureError.

A failed meta kernel logs a full traceback; a failed torch.export prints its partial graph to stderr
and logs its guesses at the failing line. Fact's CaptureError says what failed in one line, so these
go to fact's debug log instead (logger fact.capture.quiet); a successful export's messages pass on as usual.
"""

from __future__ import annotations

import contextlib
import io
import logging
import sys
import threading
from collections.abc import Iterator
from typing import TextIO

log = logging.getLogger(__name__)

# sys.stderr is one for the whole process: two threads holding it back at once would restore each
# other's stand-in
_STDERR_LOCK = threading.RLock()


@contextlib.contextmanager
def quiet_fake_tensors() -> Iterator[None]:
    """Fake tensors log every failed meta kernel with a full traceback, torch.export's included; the
    CaptureError says it in a line."""
    quiet = logging.getLogger("torch._subclasses.fake_tensor")
    level = quiet.level
    quiet.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        quiet.setLevel(level)


class _Holding(logging.Handler):
    """Keeps the records it is handed, to pass them on or drop them once the outcome is known."""

    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def _torch_loggers() -> list[logging.Logger]:
    """torch's loggers that print on their own: torch gives many of them a stderr handler of their own
    and stops their records from reaching the root logger. Its structured trace (torch.__trace, for
    TORCH_TRACE) writes to files, not the terminal, and is left as it is."""
    found = []
    for name, logger in list(logging.Logger.manager.loggerDict.items()):
        if ((name == "torch" or name.startswith("torch.")) and not name.startswith("torch.__")
                and isinstance(logger, logging.Logger) and logger.handlers):
            found.append(logger)
    return found


@contextlib.contextmanager
def held_back(what: str) -> Iterator[None]:
    """Hold back what torch writes to stderr and logs while the block runs.

    When the block succeeds, everything held passes on as if written then. When it raises, the
    held text and records go to fact's debug log, and the exception propagates: the caller turns
    it into one line.

    Args:
        what: the name of the step, for the debug log ("torch.export").
    """
    holding = _Holding()
    with _STDERR_LOCK:
        loggers = _torch_loggers()
        saved = [(logger, logger.handlers, logger.propagate) for logger in loggers]
        for logger in loggers:
            logger.handlers = [holding]
            logger.propagate = False
        stderr, text = sys.stderr, io.StringIO()
        sys.stderr = text
        try:
            yield
        except BaseException:
            _restore(saved, stderr)
            if text.getvalue().strip():
                log.debug("%s printed, before failing:\n%s", what, text.getvalue().rstrip())
            for record in holding.records:
                log.debug("%s logged (%s, %s): %s", what, record.name, record.levelname, record.getMessage())
            raise
        else:
            _restore(saved, stderr)
            stderr.write(text.getvalue())
            for record in holding.records:
                logging.getLogger(record.name).handle(record)


def _restore(saved: list[tuple[logging.Logger, list[logging.Handler], bool]], stderr: TextIO) -> None:
    sys.stderr = stderr
    for logger, handlers, propagate in saved:
        logger.handlers = handlers
        logger.propagate = propagate
