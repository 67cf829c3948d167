"""The test process's memory, watched (issue 40): its resident size (VmRSS) after each
test, the files whose tests grew it most, and its high-water mark (VmHWM), printed in the
terminal summary so that every CI log shows it.

The run fails when the high-water mark passes `memory_limit_gb` (pyproject.toml; 0 turns
the check off): the suite must fit, with its servers and browsers, a 24 GiB machine that
other work shares, and a test that leaves a model or a page behind shows up here first,
as the file that grew, not as a kill by the kernel hundreds of tests later. A warning
would pass unread in a green log.

Reads Linux's /proc; elsewhere it says nothing and checks nothing. Registered from
tests/conftest.py. Owns the figures; what a test opens and closes is the test's.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import pytest

STATUS = Path("/proc/self/status")
GB = 1 << 30
SHOWN = 5  # the files (and, with -v, the tests) that grew the process most


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addini(
        "memory_limit_gb",
        "fail the run when the test process's VmHWM passes this many GiB (0: no check)",
        default="4",
    )


def pytest_configure(config: pytest.Config) -> None:
    if STATUS.exists():
        config.pluginmanager.register(Watch(float(config.getini("memory_limit_gb"))), "memory")


def status_kib(field: str) -> int:
    """`field` of /proc/self/status ("VmRSS", "VmHWM"), in KiB."""
    for line in STATUS.read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise LookupError(f"{STATUS} has no {field}")


class Watch:
    """VmRSS around each test; the peak and the limit at the end."""

    def __init__(self, limit_gb: float) -> None:
        self.limit = limit_gb * GB
        self.grown: dict[str, int] = {}  # test id -> bytes VmRSS grew over it (its teardown too)
        self.rss = 0

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem):
        before = status_kib("VmRSS") << 10
        try:
            return (yield)
        finally:
            self.rss = status_kib("VmRSS") << 10
            self.grown[item.nodeid] = self.rss - before

    def peak(self) -> int:
        return status_kib("VmHWM") << 10

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if self.limit and self.peak() > self.limit:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def pytest_terminal_summary(self, terminalreporter, config: pytest.Config) -> None:
        by_file: dict[str, int] = defaultdict(int)
        for test, grown in self.grown.items():
            by_file[test.split("::")[0]] += grown
        write = terminalreporter.write_line
        terminalreporter.section("memory")
        for path, grown in sorted(by_file.items(), key=lambda kv: -kv[1])[:SHOWN]:
            write(f"{grown / GB:+7.2f} GB  {path}")
        if config.get_verbosity() > 0:
            for test, grown in sorted(self.grown.items(), key=lambda kv: -kv[1])[:SHOWN]:
                write(f"{grown / GB:+7.2f} GB  {test}")
        peak, over = self.peak(), self.limit and self.peak() > self.limit
        limit = f"limit {self.limit / GB:.1f} GB" if self.limit else "no limit"
        line = f"test process memory: peak {peak / GB:.2f} GB (VmHWM, {limit}), "
        line += f"{self.rss / GB:.2f} GB at the end"
        if over:
            line += ": OVER THE LIMIT, the run fails (a test left something open?)"
        write(line, red=bool(over), bold=bool(over))
