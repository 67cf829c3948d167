"""The page started as README says (`streamlit run lloom.py`): what it prints on its way up
is the address to open, and no warning (Streamlit's "No runtime found" came once per
`st.cache_data` function: the launcher imports the page before the runtime exists)."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from tests.servers import free_port

ROOT = Path(__file__).resolve().parent.parent


def test_the_page_starts_without_warnings(tmp_path):
    port = free_port()
    command = [sys.executable, "-m", "streamlit", "run", str(ROOT / "lloom.py"),
               "--server.port", str(port), "--server.headless", "true",
               "--server.fileWatcherType", "none"]  # fmt: skip
    env = {**os.environ, "LLOOM_DATA_DIR": str(tmp_path)}
    with tempfile.TemporaryFile() as log:
        server = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=log)
        try:
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline and server.poll() is None:
                try:
                    with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=2) as reply:
                        if reply.status == 200:
                            break
                except OSError:
                    time.sleep(0.5)
            time.sleep(1)  # what it prints once up
        finally:
            server.terminate()
            server.wait(20)
        log.seek(0)
        printed = log.read().decode(errors="replace")
    assert f"http://127.0.0.1:{port}" in printed or f":{port}" in printed, printed
    assert "No runtime found" not in printed, printed
    assert "Warning" not in printed and "WARNING" not in printed, printed
