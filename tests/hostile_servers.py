"""A scriptable hostile server: one real loopback HTTP server per backend flavour, well
behaved or failing in one chosen way, for tests/test_hostile.py.

Flavours answer as llama-server (`/props`, `/v1/models`, `/tokenize`, `/detokenize`,
`/completion`), vLLM (`/v1/models`, `/tokenize`, `/detokenize`, `/v1/completions`) and
an OpenAI-compatible API (`/v1/chat/completions`); the vLLM flavour refuses a stop token
past its VOCAB_SIZE tokens as vLLM does, naming its size. Every request gets the same next-token
distribution (".", ",", " the", " a"), so a search ends after one token. A sampling
request (`Backend.sample`) draws the second candidate at every position, so the modes
that break that candidate break the drawn tokens. A mode changes one thing, as a broken
or malicious server would:

  ok            well behaved
  drip          the whole reply, status line first, one byte every DRIP_SECONDS
  drip_body     the head at once, then the body (an event stream's too) a byte at a time
  silent        reads the request and never answers
  flood         the head at once, then a body of FLOOD_BYTES, as fast as it is read
  nan, inf      a candidate's log-probability is NaN / +Infinity (JSON that is not JSON)
  neg_inf       a candidate's log-probability is -Infinity (a token ruled out: dropped)
  positive      a candidate's log-probability is 0.5 (a probability of 1.6)
  huge_logprob  a candidate's log-probability is 10**400 (no float holds it)
  rounding      the top candidate's log-probability is 5e-5 (rounding: read as 0)
  huge_id       a candidate's token id is 10**12
  past_vocab    a candidate's token id is VOCAB_SIZE, the first past the vocabulary
  negative_id   a candidate's token id is -5
  quiet_vocab   (vLLM) takes a stop token past its vocabulary without naming its size, and
                has no /tokenizer_info; a candidate's id is VOCAB_SIZE
  info_vocab    (vLLM) likewise, but its /tokenizer_info names `vocab_size`; a candidate's
                id is VOCAB_SIZE + 50
  deep          the completion's reply is JSON nested 100,000 deep
  echo_key      HTTP 500 whose message echoes the request's headers (Authorization too)
  multiline     HTTP 500 whose text body is many lines (a server echoing the request)
  html_404      HTTP 404 with an HTML page
  empty_stream  a completion's 200 event stream with no bytes at all
  junk_stream   ... holding only binary junk
  text_stream   ... holding "hello, not json" (no `data:` line)
  utf8_stream   ... whose one `data:` line is not UTF-8
  truncated     a completion's reply broken off halfway through its body (the connection
                closed short of its Content-Length)
  hang_up       a completion's request read, then the connection closed with no reply
  huge_index    an OpenAI reply's choice `index` is 10**9
  minus_index   ... is -1
  + shapes of each flavour (SHAPES): valid JSON of the wrong shape.

`sent` (a list given to `hostile_server`) gets the bytes each flood reply got out, so a
test sees when the client stopped reading.

These are fakes at the HTTP boundary only: the backends under test are the real ones.
"""

from __future__ import annotations

import json
import math
import threading
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

DRIP_SECONDS = 0.2
FLOOD_BYTES = 1_500_000_000
DEEP = 100_000
VOCAB_SIZE = 100
SEPARATOR_ID = 31  # vLLM's backend joins look-ups with "\x1f"
PIECES = {5: " the", 6: " a", 8: ".", 9: ",", SEPARATOR_ID: "\x1f"}
TOP = [(8, -0.4), (9, -1.4), (5, -2.3), (6, -3.0)]  # the distribution after any prompt
COMMON = ("ok", "drip", "drip_body", "silent", "flood", "nan", "inf", "neg_inf", "positive",
          "huge_logprob", "rounding", "huge_id", "negative_id", "deep", "echo_key", "multiline",
          "html_404", "empty_stream", "junk_stream", "text_stream",
          "utf8_stream", "past_vocab", "truncated", "hang_up")  # fmt: skip
SHAPES = {
    "llamacpp": ("tokenize_without_id", "probabilities_not_objects", "n_ctx_text",
                 "index_out_of_range", "negative_index", "extra_results", "huge_slots",
                 "stream_error"),
    "vllm": ("max_model_len_text", "index_text", "without_tokens", "index_out_of_range",
             "extra_choices", "tiny_context", "stream_error", "quiet_vocab", "info_vocab"),
    "openai": ("logprob_text", "without_logprobs", "logprob_bool", "bytes_not_bytes",
               "extra_choices", "huge_index", "minus_index"),
}  # fmt: skip
COMPLETIONS = ("/completion", "/v1/completions", "/v1/chat/completions")
PLANTED = ("X-Upstream-Authorization", "Bearer sk-planted-by-the-hostile-server-0042")
ID_OF = {piece: i for i, piece in PIECES.items()}


def token_ids(text: str) -> list[int]:
    """The fake tokenizer: a known piece is its id, any other character one id in 40..89."""
    return [ID_OF.get(ch, 40 + ord(ch) % 50) for ch in text]


def piece(token_id: int) -> str:
    return PIECES.get(token_id, chr(ord("a") + token_id % 26) if 40 <= token_id < 90 else "")


def top(mode: str) -> list[tuple[int, float]]:
    """The candidates in `mode`: the second one broken where the mode says."""
    (a, la), (b, lb), *rest = TOP
    changed = {"nan": (b, math.nan), "inf": (b, math.inf), "huge_id": (10**12, lb),
               "negative_id": (-5, lb), "past_vocab": (VOCAB_SIZE, lb), "positive": (b, 0.5),
               "quiet_vocab": (VOCAB_SIZE, lb), "info_vocab": (VOCAB_SIZE + 50, lb),
               "huge_logprob": (b, 10**400)}.get(mode, (b, lb))  # fmt: skip
    options = [(a, 5e-5 if mode == "rounding" else la), changed, *rest]
    if mode == "neg_inf":
        options[-1] = (options[-1][0], -math.inf)
    return options


class Events(list):
    """A reply sent as a server-sent event stream (`data: {...}` lines), not one JSON."""


class Refusal(dict):
    """An HTTP 400 for a request checked before it runs: no mode breaks it."""


# -- flavours: (path, request body) -> reply -------------------------------------------------
def llamacpp(mode: str, path: str, body: dict):
    if path == "/props":
        n_ctx = "lots" if mode == "n_ctx_text" else 2048
        slots = 10**9 if mode == "huge_slots" else 1
        return {"model_path": "/models/hostile.Q4_0.gguf", "default_generation_settings":
                {"n_ctx": n_ctx}, "eos_token": "", "total_slots": slots}  # fmt: skip
    if path == "/v1/models":
        return {"data": [{"id": "hostile", "meta": {"n_vocab": VOCAB_SIZE}}]}
    if path == "/tokenize":
        ids = token_ids(body.get("content", ""))
        return {"tokens": [{"piece": "?"} for _ in ids] if mode == "tokenize_without_id" else ids}
    if path == "/detokenize":
        return {"content": "".join(piece(i) for i in body.get("tokens", []))}
    if path == "/completion":
        if "n_cmpl" in body:  # sampling: n_cmpl completions of one prompt
            count = body["n_cmpl"] + (mode == "extra_results")
            return [_llama_sample(mode, i, body["n_predict"]) for i in range(count)]
        prompts = body["prompt"] if isinstance(body["prompt"][0], list) else [body["prompt"]]
        count = len(prompts) + (mode == "extra_results")
        results = [_llama_result(mode, i, body.get("n_predict", 1)) for i in range(count)]
        if body.get("stream"):  # a chain that stops at '.' or ',': one final event per prompt
            return Events({**result, "stop": True} for result in results)
        return results
    return None


def _llama_sample(mode: str, index: int, length: int) -> dict:
    drawn, logprob = top(mode)[1]
    position = {"id": drawn, "token": piece(drawn), "bytes": list(piece(drawn).encode()),
                "logprob": logprob}  # fmt: skip
    return {"index": _llama_index(mode, index), "tokens": [drawn] * length,
            "content": piece(drawn) * length,
            "completion_probabilities": [position] * length,
            "timings": {"prompt_n": 3, "predicted_n": length}}  # fmt: skip


def _llama_result(mode: str, index: int, length: int) -> dict:
    options = [{"id": i, "token": piece(i), "bytes": list(piece(i).encode()), "logprob": lp}
               for i, lp in top(mode)]  # fmt: skip
    position = {**options[0], "top_logprobs": options}
    positions = [1, 2, 3] if mode == "probabilities_not_objects" else [position] * length
    return {"index": _llama_index(mode, index), "content": piece(TOP[0][0]) * length,
            "completion_probabilities": positions,
            "timings": {"prompt_n": 3, "predicted_n": length}}  # fmt: skip


def _llama_index(mode: str, index: int) -> int:
    return {"index_out_of_range": index + 7, "negative_index": -1 - index}.get(mode, index)


def vllm(mode: str, path: str, body: dict):
    if path == "/v1/models":
        length = {"max_model_len_text": "lots", "tiny_context": 1}.get(mode, 2048)
        return {"data": [{"id": "hostile", "max_model_len": length}]}
    if path == "/tokenize":
        return {"tokens": token_ids(body.get("prompt", ""))}
    if path == "/detokenize":
        return {"prompt": "".join(piece(i) for i in body.get("tokens", []))}
    if path == "/tokenizer_info" and mode == "info_vocab":
        return {"tokenizer_class": "HostileTokenizer", "vocab_size": VOCAB_SIZE}
    past = [i for i in body.get("stop_token_ids", []) if not 0 <= i < VOCAB_SIZE]
    if path == "/v1/completions" and past and mode not in ("quiet_vocab", "info_vocab"):
        return Refusal(error={"message": f"token_id(s) {past} in stop_token_ids contain "
                              f"out-of-vocab token ids. Vocabulary size: {VOCAB_SIZE}",
                              "type": "BadRequestError", "code": 400})  # fmt: skip
    if path == "/v1/completions" and "n" in body:  # sampling: n choices of one prompt
        drawn, logprob = top(mode)[1]
        length = body["max_tokens"]
        logprobs = {"tokens": [f"token_id:{drawn}"] * length, "token_logprobs": [logprob] * length}
        choices = [{"index": i, "logprobs": logprobs, "text": piece(drawn) * length,
                    "finish_reason": "length"}
                   for i in range(body["n"] + (mode == "extra_choices"))]  # fmt: skip
        return {"choices": choices, "usage": {"prompt_tokens": 3, "completion_tokens": length}}
    if path == "/v1/completions":
        length = body.get("max_tokens", 1)
        count = len(body["prompt"]) + (mode == "extra_choices")
        choices = [_vllm_choice(mode, i, length) for i in range(count)]
        usage = {"prompt_tokens": 3, "completion_tokens": length}
        if body.get("stream"):  # a chunk per prompt per position, as vLLM streams them
            chunks = [{"choices": [chunk]} for choice in choices for chunk in _vllm_chunks(choice)]
            return Events([*chunks, {"choices": [], "usage": usage}])
        return {"choices": choices, "usage": usage}
    return None


def _vllm_chunks(choice: dict) -> list[dict]:
    """A whole choice as the chunks that stream it: one position each."""
    logprobs, length = choice["logprobs"], len(choice["logprobs"]["top_logprobs"])
    return [{**choice, "text": "", "finish_reason": "length" if j == length - 1 else None,
             "logprobs": {key: value[j : j + 1] for key, value in logprobs.items()}}
            for j in range(length)]  # fmt: skip


def _vllm_choice(mode: str, index: int, length: int) -> dict:
    position = {f"token_id:{i}": lp for i, lp in top(mode)}
    logprobs = {"top_logprobs": [position] * length,
                "tokens": [f"token_id:{TOP[0][0]}"] * length}  # fmt: skip
    if mode == "without_tokens":
        del logprobs["tokens"]
    index = {"index_text": str(index), "index_out_of_range": index + 7}.get(mode, index)
    return {"index": index, "logprobs": logprobs,
            "text": piece(TOP[0][0]) * length, "finish_reason": "length"}  # fmt: skip


def openai(mode: str, path: str, body: dict):
    if path != "/v1/chat/completions":
        return None
    options = [
        {"token": piece(i), "bytes": list(piece(i).encode()), "logprob": lp} for i, lp in top(mode)
    ]
    if mode in ("logprob_text", "logprob_bool"):
        options[1]["logprob"] = "abc" if mode == "logprob_text" else True
    if mode == "bytes_not_bytes":
        options[1]["bytes"] = [300, "a"]
    if "n" in body:  # sampling: the drawn tokens' log-probs only
        content, n = [options[1]] * body["max_tokens"], body["n"]
    else:
        content, n = [{**options[0], "top_logprobs": options}] * body.get("max_tokens", 1), 1
    n += mode == "extra_choices"
    logprobs = None if mode == "without_logprobs" else {"content": content}
    index = {"huge_index": 10**9, "minus_index": -1}.get(mode)
    return {"id": "x", "object": "chat.completion", "created": 0, "model": "hostile",
            "choices": [{"index": i if index is None else index,
                         "message": {"role": "assistant", "content": "."},
                         "logprobs": logprobs, "finish_reason": "length"} for i in range(n)],
            "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4}}  # fmt: skip


FLAVOURS = {"llamacpp": llamacpp, "vllm": vllm, "openai": openai}


# -- the server ---------------------------------------------------------------------------
MULTILINE = "upstream failed\n  while handling POST\n  request echoed:\n" * 20
HTML_404 = "<!DOCTYPE html>\n<html>\n<head><title>404 Not Found</title></head>\n<body>\n" \
    "<h1>Not Found</h1>\n<p>The requested URL was not found.</p>\n</body>\n</html>\n"  # fmt: skip
STREAM_ERROR = {"error": {"message": "the model failed:\n  at decode\n  at step 3\n"}}
NO_EVENTS = {
    "empty_stream": b"",
    "junk_stream": b"\x00\x17\xfe junk \x01\r\n\x9c\n\n",
    "text_stream": b"hello, not json\n\n",
    "utf8_stream": b"data: \xff\xfe{\xc3(\n\n",
}


@contextmanager
def hostile_server(flavour: str, mode: str = "ok", sent: list[int] | None = None):
    """A `flavour` server failing in `mode` on loopback; yields its URL. On leaving, any
    reply still dripping or flooding stops and its connection closes."""
    answer = FLAVOURS[flavour]
    closing = threading.Event()
    sent = [] if sent is None else sent

    class Handler(BaseHTTPRequestHandler):
        def _reply(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b"{}"
            body = json.loads(raw or b"{}")
            path = self.path.split("?")[0]
            payload = answer(mode, path, body if isinstance(body, dict) else {})
            if isinstance(payload, Refusal):
                self._send(400, json.dumps(payload).encode(), "application/json")
                return
            status = 200 if payload is not None else 404
            if mode == "echo_key" and path not in ("/props", "/v1/models", "/tokenize",
                                                   "/detokenize"):  # fmt: skip
                echoed = "; ".join(f"{k}: {v}" for k, v in [*self.headers.items(), PLANTED])
                status, payload = 500, {"error": {"message": f"bad request, headers: {echoed}"}}
            if mode == "stream_error" and isinstance(payload, Events):
                payload = Events([STREAM_ERROR])
            kind = "text/event-stream" if isinstance(payload, Events) else "application/json"
            if isinstance(payload, Events):
                data = "".join(f"data: {json.dumps(event)}\n\n" for event in payload)
            else:
                data = json.dumps(payload if payload is not None else {"error": "no such path"})
            if path in COMPLETIONS:
                status, data, kind = self._broken(status, data, kind)
            if path in COMPLETIONS and mode == "flood":
                self._flood(kind)
            else:
                self._send(status, data if isinstance(data, bytes) else data.encode(), kind)

        def _broken(self, status: int, data: str, kind: str) -> tuple[int, str | bytes, str]:
            """A completion's reply as `mode` breaks it whole."""
            if mode == "multiline":
                return 500, MULTILINE, "text/plain"
            if mode == "html_404":
                return 404, HTML_404, "text/html"
            if mode in NO_EVENTS:
                return 200, NO_EVENTS[mode], "text/event-stream"
            if mode == "deep":
                deep = "[" * DEEP + "]" * DEEP
                return status, f"data: {deep}\n\n" if kind == "text/event-stream" else deep, kind
            return status, data, kind

        def _flood(self, kind: str) -> None:
            """FLOOD_BYTES of one JSON string (an event stream's one line), until the client
            stops reading; `sent` counts what got out."""
            self.wfile.write(_head(200, kind, FLOOD_BYTES))
            chunk = b" " * (1 << 20)
            sent.append(0)
            row = len(sent) - 1
            try:
                while sent[row] < FLOOD_BYTES and not closing.is_set():
                    self.wfile.write(chunk)
                    sent[row] += len(chunk)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client stopped reading
            self.close_connection = True

        def _send(self, status: int, data: bytes, kind: str) -> None:
            head = _head(status, kind, len(data))
            if mode == "silent":
                closing.wait()
                return
            if mode == "hang_up" and self.path.split("?")[0] in COMPLETIONS:
                self.close_connection = True
                return
            if mode == "truncated" and self.path.split("?")[0] in COMPLETIONS:
                self.wfile.write(head + data[: len(data) // 2])
                self.close_connection = True
                return
            dripped = head + data if mode == "drip" else data if mode == "drip_body" else b""
            try:
                if not dripped:
                    self.wfile.write(head + data)
                    return
                if mode == "drip_body":
                    self.wfile.write(head)
                    self.wfile.flush()
                for byte in dripped:
                    if closing.wait(DRIP_SECONDS):
                        break
                    self.wfile.write(bytes([byte]))
                    self.wfile.flush()
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up: what a deadline does
            self.close_connection = True

        do_GET = do_POST = _reply

        def log_message(self, *args) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        closing.set()
        server.shutdown()
        server.server_close()


def _head(status: int, kind: str, length: int) -> bytes:
    return (
        f"HTTP/1.1 {status} X\r\nContent-Type: {kind}\r\n"
        f"Content-Length: {length}\r\nConnection: close\r\n\r\n"
    ).encode()
