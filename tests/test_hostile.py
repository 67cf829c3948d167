"""Hostile servers against the real remote backends and the real command line.

Each flavour of tests/hostile_servers.py (llama.cpp, vLLM, OpenAI) fails in each way it
can: a reply dripped a byte at a time (head and all, or its body only), never sent, or
1.5 GB long; NaN, infinite, positive and too-big log-probabilities; token ids outside
the vocabulary (the first one past it too, which vLLM's backend learns the size of);
JSON nested 100,000 deep; valid JSON of the wrong shape (indices out of range, more
results than asked, absurd sizes); a 500 that echoes the request's credentials, one of
many lines, an HTML 404, an error streamed with newlines, an event stream with no events
(empty, junk, not JSON, not UTF-8). Every case must end within its deadline in one clear
line of error that names the server and the field (or, for -inf candidates and a
log-prob rounded above 0, a clean result of numbers <= 0), never a traceback or a key,
in-process (the backend classes under `expand`, and their `sample` for ramify) and in
`python -m weave expand` (exit 2, one `error:` line).
A reply given up on stops being read and is freed; a timeout of any size is taken.
"""

from __future__ import annotations

import gc
import json
import logging
import math
import os
import re
import subprocess
import sys
import time
import tracemalloc
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from backends.errors import BackendError
from backends.llamacpp import LlamaCppBackend
from backends.openai import OpenAIBackend
from backends.replies import MAX_REPLY_BYTES
from backends.vllm import VLLMBackend
from tests.hostile_servers import COMMON, FLOOD_BYTES, PLANTED, SHAPES, hostile_server
from tests.servers import free_port
from weave.finite import non_finite
from weave.search.beams import expand
from weave.search.codec import search_to_dict
from weave.search.params import SearchParams

ROOT = Path(__file__).resolve().parent.parent
KEY = "sk-hostile-test-key-do-not-leak-0123456789"
TIMEOUT = 1.0  # seconds, each backend's whole-request deadline here
STARTUP = 30.0  # a CLI process's own start, four at once on a loaded machine (a hang: 300 s)
STORY = "Once upon a time,"
PARAMS = SearchParams(cutoff=0.1, max_depth=3, max_suggestions=5)  # " the" splits: a word
EXPECTED = {  # mode -> what the error says (None: a clean result)
    "ok": None,
    "neg_inf": None,
    "rounding": None,
    "drip": "too slow",
    "drip_body": "too slow",
    "silent": "too slow",
    "flood": "too slow|more than 64 MiB|over 64 MiB",
    "nan": "is nan, expected a finite log-probability",
    "inf": "is inf, expected a finite log-probability",
    "positive": r"is 0\.5, expected a log-probability \(at most 0\)",
    "huge_logprob": r"is 1000000000.*, expected a number a float holds",
    "deep": "nested over 32 levels deep",
    "multiline": r"HTTP 500: upstream failed while handling POST request echoed: upstream",
    "html_404": r"HTTP 404: <!DOCTYPE html> <html>|not found \(404\)",
    "huge_id": "token id 1000000000000, outside the vocabulary",
    "negative_id": "token id -5, outside the vocabulary",
    "past_vocab": r"token id 100, outside the vocabulary \(0\.\.99\)",
    "quiet_vocab": r"does not say its vocabulary's size \(it took a stop token past any "
    r"vocabulary; /tokenizer_info names none\), so the token ids it sends cannot be checked",
    "info_vocab": r"token id 150, outside the vocabulary \(0\.\.99\)",
    "echo_key": "HTTP 500",
    "tokenize_without_id": r"/tokenize tokens\[0\]\.id is None",
    "probabilities_not_objects": r"completion_probabilities\[0\] is 1, expected an object",
    "n_ctx_text": "/props n_ctx is 'lots'",
    "max_model_len_text": "/v1/models max_model_len is 'lots'",
    "index_text": r"choices\[0\]\.index is '0', expected a whole number",
    "without_tokens": "logprobs has no 'tokens'",
    "logprob_text": "logprob is 'abc', expected a number",
    "without_logprobs": "no log-probabilities",
    "logprob_bool": "logprob is True, expected a number",
    "bytes_not_bytes": r"bytes is \[300, 'a'\], expected a list of byte values",
    "index_out_of_range": r"index is 7, expected an index in 0\.\.0|index 7 names no prompt",
    "negative_index": r"index is -1, expected an index in 0\.\.0",
    "huge_index": r"choices\[0\]\.index is 1000000000, expected an index in 0\.\.0",
    "minus_index": r"choices\[0\]\.index is -1, expected an index in 0\.\.0",
    "truncated": "broke off its reply|Connection broken: IncompleteRead",
    "hang_up": "closed the connection without answering",
    "extra_results": r"/completion gave 2 results, 1 asked|index is 1, expected an index in 0\.\.0",
    "extra_choices": r"[23] choices, [12] asked|names no prompt|expected 2 choices",
    "huge_slots": r"/props total_slots is 1000000000, expected 1\.\.1024",
    "tiny_context": r"/v1/models max_model_len is 1, expected a whole number of at least 128",
    "stream_error": "failed while streaming: the model failed: at decode at step 3",
    # a 200 event stream without events: never "no suggestions" (vLLM's was, issue 31)
    "empty_stream": "sent no event|not JSON: ''|expected 1 results",
    "junk_stream": r"sent no event|not JSON: '\\x00\\x17. junk|expected 1 results",
    "text_stream": "sent no event|not JSON: 'hello, not json'|expected 1 results",
    "utf8_stream": "not JSON: '(data: )?\ufffd\ufffd",
}
ID_MODES = ("huge_id", "negative_id", "past_vocab")  # OpenAI's API has no token ids
CASES = [
    (flavour, mode)
    for flavour in ("llamacpp", "vllm", "openai")
    for mode in COMMON + SHAPES[flavour]
    if not (flavour == "openai" and mode in ID_MODES)
]
RULED_OUT = " a"  # the candidate neg_inf gives -Infinity


def backend_for(flavour: str, url: str, timeout: float = TIMEOUT):
    if flavour == "llamacpp":
        return LlamaCppBackend(url, timeout=timeout)
    if flavour == "vllm":
        return VLLMBackend(url, timeout=timeout)
    return OpenAIBackend(api_key=KEY, model="hostile", base_url=f"{url}/v1", timeout=timeout)


def search(flavour: str, url: str, waits: list[float] | None = None):
    """A search on a fresh backend; `waits` gets the seconds spent on the server, for
    starting the backend (where it asks anything) and for the search, each."""
    waits = [] if waits is None else waits
    started = time.monotonic()
    try:
        backend = backend_for(flavour, url)
    finally:
        if flavour != "openai":  # OpenAI's client asks nothing at start (it loads certificates)
            waits.append(time.monotonic() - started)
    started = time.monotonic()
    try:
        return expand(backend, backend.tokenize(STORY), PARAMS)
    finally:
        waits.append(time.monotonic() - started)
        backend.close()


def assert_clean(result) -> None:
    """Suggestions and tree hold finite numbers only, log-probs <= 0, strict JSON, no
    ruled-out token."""
    saved = search_to_dict(result, PARAMS)
    assert result.suggestions and non_finite(saved) is None
    assert all(s.logprob <= 0 for s in result.suggestions)
    json.dumps(saved, allow_nan=False)
    texts = [n["text"] for n in _nodes(saved["tree"])]
    assert RULED_OUT not in texts


def _nodes(node: dict):
    for child in node.get("children", []):
        yield child
        yield from _nodes(child)


def assert_hidden(text: str) -> None:
    assert KEY not in text and KEY[-12:] not in text
    assert PLANTED[1] not in text and "sk-planted" not in text


@pytest.mark.parametrize("flavour, mode", CASES)
def test_the_backend_classes(flavour, mode, caplog):
    caplog.set_level(logging.DEBUG)
    waits: list[float] = []
    with hostile_server(flavour, mode) as url:
        if EXPECTED[mode] is None:
            assert_clean(search(flavour, url))
            return
        with pytest.raises(BackendError, match=EXPECTED[mode]) as error:
            search(flavour, url, waits)
    message = str(error.value)
    assert message.startswith(f"{flavour} at {url}") and "\n" not in message
    assert_hidden(message + repr(error.value) + caplog.text)
    assert max(waits) < 1.8 * TIMEOUT  # one deadline, not two: nothing retried after it


def draw(flavour: str, url: str) -> list:
    """Two samples (ramify's request) from a fresh backend."""
    backend = backend_for(flavour, url)
    try:
        context = backend.tokenize(STORY)
        return backend.sample(context, n=2, temperature=1.0, min_p=0.1, max_tokens=3, seed=1)
    finally:
        backend.close()


SAMPLE_CASES = [(flavour, mode) for flavour, mode in CASES if mode in COMMON]


@pytest.mark.parametrize("flavour, mode", SAMPLE_CASES)
def test_sampling(flavour, mode, caplog):
    caplog.set_level(logging.DEBUG)
    with hostile_server(flavour, mode) as url:
        if EXPECTED[mode] is None:
            drawn = draw(flavour, url)
            assert len(drawn) == 2 and all(c.token_ids and math.isfinite(c.logprob) for c in drawn)
            return
        started = time.monotonic()
        with pytest.raises(BackendError, match=EXPECTED[mode]) as error:
            draw(flavour, url)
        waited = time.monotonic() - started
    message = str(error.value)
    assert message.startswith(f"{flavour} at {url}") and "\n" not in message
    assert_hidden(message + repr(error.value) + caplog.text)
    assert waited < 1.8 * TIMEOUT + 1.0  # one deadline (and a client's start), not two


@pytest.mark.parametrize("flavour", ["llamacpp", "vllm", "openai"])
def test_a_huge_reply_given_up_stops_being_read_and_is_freed(flavour):
    """1.5 GB offered as fast as it is read: the request fails within its deadline, the
    server soon cannot send more (the connection was closed, by a reader thread too) and
    what was read is dropped. tracemalloc counts what Python holds, whatever the load."""
    sent: list[int] = []
    with hostile_server(flavour, "flood", sent) as url:
        backend = backend_for(flavour, url)  # its imports are not what is measured
        context = backend.tokenize(STORY)
        gc.collect()
        tracemalloc.start()
        try:
            started = time.monotonic()
            with pytest.raises(BackendError, match=EXPECTED["flood"]):
                expand(backend, context, PARAMS)
            assert time.monotonic() - started < 2 * TIMEOUT + 1.0
            time.sleep(TIMEOUT)  # a reader given up stops at its deadline
            stopped = sum(sent)
            time.sleep(0.5)
            assert sum(sent) == stopped < FLOOD_BYTES / 4
            gc.collect()
            held, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
            backend.close()
    assert peak < 3 * MAX_REPLY_BYTES and held < 16 << 20


@pytest.mark.parametrize(
    "flavour, timeout", [("llamacpp", 1e10), ("vllm", 1e10), ("openai", 1e12), ("vllm", math.inf)]
)
def test_a_huge_timeout_is_a_long_one(flavour, timeout):
    with hostile_server(flavour) as url:
        backend = backend_for(flavour, url, timeout)
        try:
            assert_clean(expand(backend, backend.tokenize(STORY), PARAMS))
            if flavour != "openai":
                assert backend.client.timeout <= 31 * 24 * 3600
        finally:
            backend.close()


@pytest.mark.parametrize("flavour", ["llamacpp", "vllm", "openai"])
@pytest.mark.parametrize("timeout", [0, -1.0, math.nan])
def test_a_timeout_that_is_no_time_is_an_error(flavour, timeout):
    with hostile_server(flavour) as url, pytest.raises(BackendError, match="above 0") as error:
        backend_for(flavour, url, timeout)
    assert str(error.value).startswith(f"{flavour} at ")


def weave_cli(flavour: str, url: str) -> tuple[subprocess.CompletedProcess, float]:
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(("LLAMA_", "VLLM_", "OPENAI_", "LLOOM_"))}  # fmt: skip
    env.update({
        "LLOOM_BACKEND": flavour, "LLAMA_API_URL": url, "VLLM_API_URL": url,
        "OPENAI_BASE_URL": f"{url}/v1", "OPENAI_API_KEY": KEY, "OPENAI_MODEL": "hostile",
        "LLAMA_TIMEOUT": str(TIMEOUT), "VLLM_TIMEOUT": str(TIMEOUT), "OPENAI_TIMEOUT": str(TIMEOUT),
    })  # fmt: skip
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "weave", "expand", "--story", STORY, "--max-depth", "3", "--json"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    return done, time.monotonic() - started


def run_case(case: tuple[str, str]) -> tuple[str, subprocess.CompletedProcess, float]:
    flavour, mode = case
    with hostile_server(flavour, mode) as url:
        return (url, *weave_cli(flavour, url))


@pytest.fixture(scope="module")
def cli_runs():
    """Every case's CLI run, four processes at a time (each mostly waits on its server)."""
    with ThreadPoolExecutor(4) as pool:
        return dict(zip(CASES, pool.map(run_case, CASES), strict=True))


@pytest.mark.parametrize("flavour, mode", CASES)
def test_the_command_line(flavour, mode, cli_runs):
    url, done, elapsed = cli_runs[(flavour, mode)]
    assert_hidden(done.stdout + done.stderr)
    assert "Traceback" not in done.stderr
    if EXPECTED[mode] is None:
        assert done.returncode == 0, done.stderr
        out = json.loads(done.stdout, parse_constant=lambda c: pytest.fail(f"{c} in JSON"))
        assert out["suggestions"] and all(math.isfinite(s["logprob"]) for s in out["suggestions"])
        return
    assert done.returncode == 2 and not done.stdout
    [line] = done.stderr.splitlines()
    assert line.startswith(f"error: {flavour} at {url}")
    assert re.search(EXPECTED[mode], line), line
    assert elapsed < 2 * TIMEOUT + STARTUP


@pytest.mark.parametrize("flavour", ["llamacpp", "vllm", "openai"])
def test_a_closed_port_on_the_command_line(flavour):
    url = f"http://127.0.0.1:{free_port()}"
    done, elapsed = weave_cli(flavour, url)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    [line] = done.stderr.splitlines()
    assert line.startswith(f"error: {flavour} at {url}") and "connect" in line
    assert_hidden(line)
    assert elapsed < 2 * TIMEOUT + STARTUP


@pytest.mark.parametrize(
    "text, kept",
    [
        ("Authorization: Bearer sk-abc123def456", "Authorization: [redacted]"),
        ('{"authorization": "Basic dXNlcjpwYXNz"}', '{"authorization": "[redacted]"}'),
        ("headers: {'Authorization': 'Bearer tok'}", "headers: {'Authorization': '[redacted]'}"),
        ("x-api-key: zzz9, then", "x-api-key: [redacted], then"),
        ('{"api_key": "abcd"}', '{"api_key": "[redacted]"}'),
        ("got token Bearer eyJhbGciOi.x.y here", "got token Bearer [redacted] here"),
        ("key sk-proj-0123456789abcdef rejected", "key [redacted] rejected"),
        (
            "http://user:hunter2@10.0.0.1:8080/v1 down",
            "http://user:[redacted]@10.0.0.1:8080/v1 down",
        ),
        (
            "host=db user=w password=hunter2 sslmode=x",
            "host=db user=w password=[redacted] sslmode=x",
        ),
        ("slot unavailable (HTTP 503)", "slot unavailable (HTTP 503)"),
    ],
)
def test_credentials_are_redacted_from_every_backend_error(text, kept):
    error = BackendError(text, backend="vllm", url="http://127.0.0.1:8000")
    assert str(error) == f"vllm at http://127.0.0.1:8000: {kept}"


PASSWORD = "hunterPASSWORD2"


@pytest.mark.parametrize("flavour", ["llamacpp", "vllm", "openai"])
def test_a_password_in_a_server_url_is_never_shown_or_logged(flavour, caplog):
    """Issue 31: the page printed `Server: http://probeuser:hunterPASSWORD2@...`. The
    backend's `url` is what the page shows and the logs name: the password redacted."""
    caplog.set_level(logging.DEBUG)
    with hostile_server(flavour) as url:
        with_password = url.replace("://", f"://probeuser:{PASSWORD}@")
        backend = backend_for(flavour, with_password)
        try:
            assert_clean(expand(backend, backend.tokenize(STORY), PARAMS))
            shown = backend.url
        finally:
            backend.close()
    assert shown.startswith(url.replace("://", "://probeuser:[redacted]@"))
    logged = caplog.text + " ".join(str(r.args) for r in caplog.records)
    assert PASSWORD not in shown + logged
