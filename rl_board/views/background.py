"""The findings' checks of each loaded run, each in a daemon thread of its own: no run's checks wait for
another's, a run no session shows any more has its checks cancelled, and a server told to stop does not
wait for them. ``state.start_findings`` (which keeps the session's side) and the findings panel use it."""

from __future__ import annotations

import threading

from ..analysis.run import Run
from ..base.defaults import setting


def run_key(run: Run) -> tuple:
    """A cheap key of one snapshot of a run: where it is, how it was read, and what the load read."""
    options = run.options
    return (str(run.path), options.pad_token, options.eos_token, options.fields, options.tokenizer, hash(run.report),
            id(run), len(run._samples))


# the findings panel waits this long for the checks (RL_BOARD_FINDINGS_WAIT), then draws them when they finish
FINDINGS_WAIT_SECONDS = 0.05


def findings_wait() -> float:
    """Seconds the findings panel waits for the checks before it draws without them."""
    return setting("RL_BOARD_FINDINGS_WAIT")


class _Checks:
    """The findings of one run, computed in a daemon thread of their own: no run's checks wait for
    another's, and a server told to stop does not wait for them. ``stop`` cancels them; ``viewers``
    counts the sessions showing the run (the checks are cancelled when the last one leaves it)."""

    def __init__(self, run: Run):
        self.stop = threading.Event()
        self.done = threading.Event()
        self.result = None  # the Findings, or the exception the checks raised
        self.viewers = 0
        threading.Thread(target=self._work, args=(run,), daemon=True, name="rl-board-findings").start()

    def _work(self, run: Run) -> None:
        from ..analysis.findings import get_findings as kept_or_computed

        try:
            self.result = kept_or_computed(run, self.stop)
        except BaseException as exc:  # noqa: BLE001 (shown where the findings are read, as before)
            self.result = exc
        finally:
            self.done.set()

    @property
    def cancelled(self) -> bool:
        return self.stop.is_set() and not (self.done.is_set() and not isinstance(self.result, BaseException))


CHECKS: dict[tuple, _Checks] = {}  # run key -> its checks, newest last
CHECKS_LOCK = threading.Lock()
CHECKS_KEPT = 8  # runs whose findings are kept (the oldest go first, cancelled if still running)


def kept_checks(key: tuple, run: Run) -> _Checks:
    """The checks of the run ``key`` names, started now unless running or done (a cancelled one starts again)."""
    with CHECKS_LOCK:
        checks = CHECKS.pop(key, None)
        if checks is None or checks.cancelled:
            checks = _Checks(run)
        CHECKS[key] = checks
        while len(CHECKS) > CHECKS_KEPT:
            CHECKS.pop(next(iter(CHECKS))).stop.set()
        return checks


def get_findings(run: Run, wait: float | None = None):
    """``findings.compute_findings`` of the run (started by ``start_findings``, or now), once done; None
    when ``wait`` seconds pass first."""
    checks = kept_checks(run_key(run), run)
    if not checks.done.wait(wait):
        return None
    if isinstance(checks.result, BaseException):
        raise checks.result
    return checks.result
