"""A writing group on one page server: 8 writers logged in as themselves, searching at once.

Starts `streamlit run lloom.py` with a login (`[auth]` against `oidc-provider-mock`, a real
OpenID Connect provider on loopback) and the shared local MLX backend (or, with
`--backend vllm`, a vLLM server on loopback serving the embedded model), then in headless
Chromium logs each writer in through Streamlit's own callback, starts a story of their
own and accepts a suggestion `--rounds - 1` times, all writers at once; the same for one
writer alone first. Every search must be answered with no error on the page, and no
writer may see another's story (on the page or in their view of the store). Prints the
median and 95th-percentile search time (the engine's own `stats.seconds`, as saved with
each node's suggestions) of one writer alone and of the group, side by side.

    .venv/bin/python -m bench.bench_group [--writers 8] [--rounds 3] [--backend mlx|vllm]
"""

from __future__ import annotations

import argparse
import logging
import statistics
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

from playwright.sync_api import sync_playwright

from backends.embedded import ensure_embedded_model
from scripts.screenshot import ACCEPT, launch_browser, wait_for_suggestions, wait_idle
from tests.servers import free_port
from tests.test_private import auth_secrets, log_in, page_server, settled
from tests.vllm_server import vllm_server
from weave.config import load_settings
from weave.loom.store import LoomStore

OWN_STORY = "✍️ Write my own"


def opening(writer: str) -> str:
    """A writer's own opening, with a mark no other writer's page may show."""
    name = writer.split("@")[0]
    return f"The diary of {name} began on a cold morning by the lighthouse."


def run_writers(browser, url: str, writers: list[str], rounds: int) -> list:
    """Log each writer in, then play `rounds` searches for all of them at once."""
    pages = []
    for writer in writers:
        context = browser.new_context(viewport={"width": 1400, "height": 1000})
        page = context.new_page()
        page.set_default_timeout(600_000)
        page.goto(url)
        log_in(page, writer)
        page.get_by_text(OWN_STORY).click()
        page.get_by_label("Your story").fill(opening(writer))
        pages.append(page)
    for step in range(rounds):
        for page in pages:  # all at once: each click returns as soon as it is sent
            if step == 0:
                page.get_by_role("button", name="Start").click()
            else:
                page.get_by_role("button", name=ACCEPT, exact=True).first.click()
        for page in pages:
            wait_idle(page)
            wait_for_suggestions(page)
            wait_idle(page)
    return pages


def check(store: LoomStore, pages: list, writers: list[str]) -> list[float]:
    """Every writer has exactly their own story, sees no other's, and every search of
    theirs was answered; returns the searches' times."""
    seconds = []
    for page, writer in zip(pages, writers, strict=True):
        text = settled(page)
        assert "cannot be used" not in text and "Traceback" not in text, text[-2000:]
        others = [opening(w) for w in writers if w != writer]
        assert not any(o[:30] in text for o in others), f"{writer} sees another's story"
        mine = store.as_writer(writer)
        (info,) = mine.stories()
        loom = mine.load(info.id)
        assert loom.text().startswith(opening(writer))
        for node_id in loom.nodes:
            saved = mine.suggestions(info.id, node_id)
            if saved is not None:
                seconds.append(saved["stats"]["seconds"])
    return seconds


def p95(values: list[float]) -> float:
    return statistics.quantiles(values, n=20, method="inclusive")[-1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--writers", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--backend", choices=["mlx", "vllm"], default="mlx")
    args = parser.parse_args()
    import oidc_provider_mock

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # the provider's request log

    with (
        ExitStack() as stack,
        tempfile.TemporaryDirectory(prefix="lloom-group-") as folder,
        oidc_provider_mock.run_server_in_thread() as provider,
        sync_playwright() as p,
    ):
        data, port = Path(folder), free_port()
        secrets_file = auth_secrets(data, port, f"http://localhost:{provider.server_port}")
        env = {"LLOOM_BACKEND": args.backend}
        if args.backend == "vllm":
            model = ensure_embedded_model(load_settings().cache_dir)
            env["VLLM_API_URL"] = stack.enter_context(vllm_server(model, data / "vllm.log"))
        store = LoomStore(data)
        browser = launch_browser(p)
        login = ("--secrets.files", str(secrets_file))
        print(f"backend: {args.backend}; the machine may be shared and loaded")
        with page_server(data, *login, env=env, port=port):
            url = f"http://127.0.0.1:{port}"
            rows = []
            for label, writers in (
                ("one writer alone", ["solo@example.org"]),
                (f"{args.writers} writers at once",
                 [f"writer{k}@example.org" for k in range(args.writers)]),
            ):  # fmt: skip
                start = time.monotonic()
                pages = run_writers(browser, url, writers, args.rounds)
                wall = time.monotonic() - start
                seconds = check(store, pages, writers)
                assert len(seconds) >= len(writers) * args.rounds, seconds
                rows.append((label, len(seconds), statistics.median(seconds), p95(seconds), wall))
                for page in pages:
                    page.context.close()
        browser.close()
    print(f"{'':24} {'searches':>8} {'median s':>9} {'p95 s':>7} {'wall s':>7}")
    for label, n, median, high, wall in rows:
        print(f"{label:24} {n:8d} {median:9.2f} {high:7.2f} {wall:7.1f}")
    print(
        f"group / alone: median x{rows[1][2] / rows[0][2]:.2f}, p95 x{rows[1][3] / rows[0][3]:.2f}"
    )
    print("every search answered, no error, no writer saw another's story")
    return 0


if __name__ == "__main__":
    sys.exit(main())
