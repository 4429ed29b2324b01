"""PASS/FAIL reporting shared by the OpenAI client checks (openai_sdk_check.py,
openai_tools_check.py): one line per check, groups in which an exception is
one failure rather than the end of the run, and a closing summary whose
return value is the script's exit status."""

from __future__ import annotations

import sys
import traceback
from dataclasses import dataclass, field
from typing import Callable


@dataclass
class Results:
    passed: int = 0
    failed: list[str] = field(default_factory=list)


RESULTS = Results()


def check(name: str, cond: bool, detail: str = "") -> bool:
    """Records and prints one check; returns cond so callers can stop early."""
    line = f"{'PASS' if cond else 'FAIL'} {name}"
    if detail:
        line += f": {detail}"
    print(line, flush=True)
    if cond:
        RESULTS.passed += 1
    else:
        RESULTS.failed.append(name)
    return cond


def run_group(name: str, fn: Callable[[], None]) -> None:
    """Runs one group of checks; an exception is one failure, not the end.
    The failure names the caller's line it came through (not the SDK's)."""
    caller = sys._getframe(1).f_code.co_filename
    print(f"--- {name}", flush=True)
    try:
        fn()
    except Exception as e:  # noqa: BLE001 - any exception is a failed check
        here = [f for f in traceback.extract_tb(e.__traceback__) if f.filename == caller]
        where = f" (line {here[-1].lineno}: {here[-1].line})" if here else ""
        check(f"{name}: no exception", False, f"{type(e).__name__}: {e}{where}")


def summary(program: str) -> int:
    """Prints the totals; 1 when any check failed, else 0."""
    failed = RESULTS.failed
    total = RESULTS.passed + len(failed)
    if failed:
        print(f"{program}: FAILED {len(failed)} of {total} checks: {', '.join(failed)}", flush=True)
        return 1
    print(f"{program}: all {total} checks passed", flush=True)
    return 0
