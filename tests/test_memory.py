"""The test process's memory in every run's summary (tests/memory.py, issue 40): the peak
and the files that grew it, and a run whose peak passes the limit fails."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
HOLDS = "held = []\n\ndef test_holds():\n    held.append(b'x' * (96 << 20))\n"

pytestmark = pytest.mark.skipif(
    not Path("/proc/self/status").exists(), reason="reads Linux's /proc"
)


def run(tmp_path: Path, limit_gb: float) -> subprocess.CompletedProcess:
    """pytest on a test that keeps 96 MB, with the plugin and `limit_gb`."""
    (tmp_path / "test_holding.py").write_text(HOLDS)
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    command = [sys.executable, "-m", "pytest", "-q", "-p", "tests.memory",
               "-c", str(tmp_path / "pytest.ini"), "-o", f"memory_limit_gb={limit_gb}",
               str(tmp_path / "test_holding.py")]  # fmt: skip
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=120)


def test_the_summary_says_the_peak_and_the_file_that_grew(tmp_path):
    done = run(tmp_path, 4)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "test process memory: peak 0." in done.stdout
    assert "(VmHWM, limit 4.0 GB)" in done.stdout
    assert "+0.09 GB  test_holding.py" in done.stdout  # the 96 MB it keeps


def test_a_run_over_the_limit_fails_and_says_so(tmp_path):
    done = run(tmp_path, 0.05)  # the interpreter and pytest alone take more
    assert done.returncode == 1, done.stdout + done.stderr
    assert "1 passed" in done.stdout and "OVER THE LIMIT" in done.stdout
