"""The client's tests, run with a leak check: a test that leaves a socket
(or a transport, a stream, a file) for the garbage collector fails.

Python reports an unclosed socket only as a ResourceWarning from __del__,
ignored by default and, even with ``-W error``, printed as "Exception
ignored" rather than failing anything. So discovery (``python3 -m unittest
discover -s clients/python/tests -t clients/python``, as ``make
test-python`` runs it) comes through load_tests below, which runs every
test with ResourceWarnings recorded, collects the garbage after each one
and fails the test that left any; after the last test it fails the run if
the process still holds a socket (one kept alive past every test, which
would be reported only at exit). PYTHONTRACEMALLOC=20 adds where each
leaked object was made."""

from __future__ import annotations

import gc
import os
import tracemalloc
import unittest
import warnings
from typing import Any, List, Optional


def open_sockets() -> Optional[List[str]]:
    """This process's open socket file descriptors (as /proc/self/fd shows
    them), None where there is no /proc."""
    try:
        names = os.listdir("/proc/self/fd")
    except OSError:
        return None
    found = []
    for n in names:
        try:
            target = os.readlink("/proc/self/fd/" + n)
        except OSError:  # the fd listing itself, closed since
            continue
        if target.startswith("socket:"):
            found.append("fd %s (%s)" % (n, target))
    return found


def describe_leak(w: warnings.WarningMessage) -> str:
    """One warning as the failure reports it: the message, then where the
    object was allocated when tracemalloc traces."""
    text = "%s:%s: %s" % (w.filename, w.lineno, w.message)
    tb = tracemalloc.get_object_traceback(w.source) if w.source is not None and tracemalloc.is_tracing() else None
    if tb is not None:
        text += "\n  allocated at:\n" + "\n".join("    " + line for line in tb.format())
    return text


class LeakCheck:
    """Records warnings while the run lasts; takes the ResourceWarnings
    raised since the last take, after a garbage collection, and prints the
    others as Python would have."""

    def __init__(self) -> None:
        self._catch = warnings.catch_warnings(record=True)
        self._log: List[warnings.WarningMessage] = []

    def __enter__(self) -> "LeakCheck":
        self._log = self._catch.__enter__()
        warnings.simplefilter("always", ResourceWarning)
        return self

    def __exit__(self, *exc: Any) -> None:
        self.take()
        self._catch.__exit__(*exc)

    def take(self) -> List[warnings.WarningMessage]:
        gc.collect()
        n = len(self._log)
        got, self._log[:n] = self._log[:n], []
        leaks = []
        for w in got:
            if issubclass(w.category, ResourceWarning):
                leaks.append(w)
            else:
                warnings.showwarning(w.message, w.category, w.filename, w.lineno, w.file, w.line)
        return leaks


class LeakCheckedSuite(unittest.TestSuite):
    """Runs its tests under a LeakCheck: each test's leaks fail that test;
    a socket still open once every test and class cleanup ran fails the
    run (reported against the suite's last test)."""

    def run(self, result: unittest.TestResult, debug: bool = False) -> unittest.TestResult:
        stop_test = result.stopTest
        last: List[Any] = [None]
        with LeakCheck() as check:

            def checked_stop(test: Any) -> None:
                leaks = check.take()
                if leaks:
                    fail(result, test, "left %d unclosed resource(s) to the garbage collector:\n%s" % (
                        len(leaks), "\n".join(describe_leak(w) for w in leaks)))
                last[0] = test
                stop_test(test)

            result.stopTest = checked_stop  # type: ignore[method-assign]
            try:
                before = open_sockets()
                super().run(result, debug)
            finally:
                del result.stopTest
            leaks = check.take()
            after = open_sockets()
            problems = [describe_leak(w) for w in leaks]
            if before is not None and after is not None:
                problems += ["still open: " + s for s in sorted(set(after) - set(before))]
            if problems and last[0] is not None:
                fail(result, last[0], "after every test ran, the suite still holds %d resource(s):\n%s" % (
                    len(problems), "\n".join(problems)))
        return result


def fail(result: unittest.TestResult, test: Any, why: str) -> None:
    err = AssertionError("leak: " + why)
    result.addFailure(test, (AssertionError, err, None))


def load_tests(loader: unittest.TestLoader, standard_tests: unittest.TestSuite, pattern: Optional[str]) -> unittest.TestSuite:
    here = os.path.dirname(os.path.abspath(__file__))
    suite = LeakCheckedSuite()
    suite.addTests(standard_tests)
    suite.addTests(loader.discover(start_dir=here, pattern=pattern or "test*.py"))
    return suite
