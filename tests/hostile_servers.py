"""A scriptable hostile server: one real loopback HTTP server per backend flavour, well
behaved or failing in one chosen way, for tests/test_hostile.py.

Flavours answer as llama-server (`/props`, `/v1/models`, `/tokenize`, `/detokenize`,
`/completion`), vLLM (`/v1/models`, `/tokenize`, `/detokenize`, `/v1/completions`) and
an OpenAI-compatible API (`/v1/chat/completions`). Every request gets the same next-token
distribution (".", ",", " the", " a"), so a search ends after one token. A sampling
request (`Backend.sample`) draws the second candidate at every position, so the modes
that break that candidate break the drawn tokens. A mode changes one thing, as a broken
or malicious server would:

  ok            well behaved
  drip          the whole reply, status line first, one byte every DRIP_SECONDS
  silent        reads the request and never answers
  nan, inf      a candidate's log-probability is NaN / +Infinity (JSON that is not JSON)
  neg_inf       a candidate's log-probability is -Infinity (a token ruled out: dropped)
  huge_id       a candidate's token id is 10**12
  negative_id   a candidate's token id is -5
  echo_key      HTTP 500 whose message echoes the request's headers (Authorization too)
  + shapes of each flavour (SHAPES): valid JSON of the wrong shape.

These are fakes at the HTTP boundary only: the backends under test are the real ones.
"""

from __future__ import annotations

import json
import math
import threading
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

DRIP_SECONDS = 0.2
VOCAB_SIZE = 100
SEPARATOR_ID = 31  # vLLM's backend joins look-ups with "\x1f"
PIECES = {5: " the", 6: " a", 8: ".", 9: ",", SEPARATOR_ID: "\x1f"}
TOP = [(8, -0.4), (9, -1.4), (5, -2.3), (6, -3.0)]  # the distribution after any prompt
COMMON = ("ok", "drip", "silent", "nan", "inf", "neg_inf", "huge_id", "negative_id", "echo_key")
SHAPES = {
    "llamacpp": ("tokenize_without_id", "probabilities_not_objects", "n_ctx_text"),
    "vllm": ("max_model_len_text", "index_text", "without_tokens"),
    "openai": ("logprob_text", "without_logprobs"),
}
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
               "negative_id": (-5, lb)}.get(mode, (b, lb))  # fmt: skip
    options = [(a, la), changed, *rest]
    if mode == "neg_inf":
        options[-1] = (options[-1][0], -math.inf)
    return options


class Events(list):
    """A reply sent as a server-sent event stream (`data: {...}` lines), not one JSON."""


# -- flavours: (path, request body) -> reply -------------------------------------------------
def llamacpp(mode: str, path: str, body: dict):
    if path == "/props":
        n_ctx = "lots" if mode == "n_ctx_text" else 2048
        return {"model_path": "/models/hostile.Q4_0.gguf", "default_generation_settings":
                {"n_ctx": n_ctx}, "eos_token": "", "total_slots": 1}  # fmt: skip
    if path == "/v1/models":
        return {"data": [{"id": "hostile", "meta": {"n_vocab": VOCAB_SIZE}}]}
    if path == "/tokenize":
        ids = token_ids(body.get("content", ""))
        return {"tokens": [{"piece": "?"} for _ in ids] if mode == "tokenize_without_id" else ids}
    if path == "/detokenize":
        return {"content": "".join(piece(i) for i in body.get("tokens", []))}
    if path == "/completion":
        if "n_cmpl" in body:  # sampling: n_cmpl completions of one prompt
            return [_llama_sample(mode, i, body["n_predict"]) for i in range(body["n_cmpl"])]
        prompts = body["prompt"] if isinstance(body["prompt"][0], list) else [body["prompt"]]
        results = [_llama_result(mode, i, body.get("n_predict", 1)) for i in range(len(prompts))]
        if body.get("stream"):  # a chain that stops at '.' or ',': one final event per prompt
            return Events({**result, "stop": True} for result in results)
        return results
    return None


def _llama_sample(mode: str, index: int, length: int) -> dict:
    drawn, logprob = top(mode)[1]
    position = {"id": drawn, "token": piece(drawn), "bytes": list(piece(drawn).encode()),
                "logprob": logprob}  # fmt: skip
    return {"index": index, "tokens": [drawn] * length, "content": piece(drawn) * length,
            "completion_probabilities": [position] * length,
            "timings": {"prompt_n": 3, "predicted_n": length}}  # fmt: skip


def _llama_result(mode: str, index: int, length: int) -> dict:
    options = [{"id": i, "token": piece(i), "bytes": list(piece(i).encode()), "logprob": lp}
               for i, lp in top(mode)]  # fmt: skip
    position = {**options[0], "top_logprobs": options}
    positions = [1, 2, 3] if mode == "probabilities_not_objects" else [position] * length
    return {"index": index, "content": piece(TOP[0][0]) * length,
            "completion_probabilities": positions,
            "timings": {"prompt_n": 3, "predicted_n": length}}  # fmt: skip


def vllm(mode: str, path: str, body: dict):
    if path == "/v1/models":
        length = "lots" if mode == "max_model_len_text" else 2048
        return {"data": [{"id": "hostile", "max_model_len": length}]}
    if path == "/tokenize":
        return {"tokens": token_ids(body.get("prompt", ""))}
    if path == "/detokenize":
        return {"prompt": "".join(piece(i) for i in body.get("tokens", []))}
    if path == "/v1/completions" and "n" in body:  # sampling: n choices of one prompt
        drawn, logprob = top(mode)[1]
        length = body["max_tokens"]
        logprobs = {"tokens": [f"token_id:{drawn}"] * length, "token_logprobs": [logprob] * length}
        choices = [{"index": i, "logprobs": logprobs, "text": piece(drawn) * length,
                    "finish_reason": "length"} for i in range(body["n"])]  # fmt: skip
        return {"choices": choices, "usage": {"prompt_tokens": 3, "completion_tokens": length}}
    if path == "/v1/completions":
        length = body.get("max_tokens", 1)
        choices = [_vllm_choice(mode, i, length) for i in range(len(body["prompt"]))]
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
    return {"index": str(index) if mode == "index_text" else index, "logprobs": logprobs,
            "text": piece(TOP[0][0]) * length, "finish_reason": "length"}  # fmt: skip


def openai(mode: str, path: str, body: dict):
    if path != "/v1/chat/completions":
        return None
    options = [
        {"token": piece(i), "bytes": list(piece(i).encode()), "logprob": lp} for i, lp in top(mode)
    ]
    if mode == "logprob_text":
        options[1]["logprob"] = "abc"
    if "n" in body:  # sampling: the drawn tokens' log-probs only
        content, n = [options[1]] * body["max_tokens"], body["n"]
    else:
        content, n = [{**options[0], "top_logprobs": options}] * body.get("max_tokens", 1), 1
    logprobs = None if mode == "without_logprobs" else {"content": content}
    return {"id": "x", "object": "chat.completion", "created": 0, "model": "hostile",
            "choices": [{"index": i, "message": {"role": "assistant", "content": "."},
                         "logprobs": logprobs, "finish_reason": "length"} for i in range(n)],
            "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4}}  # fmt: skip


FLAVOURS = {"llamacpp": llamacpp, "vllm": vllm, "openai": openai}


# -- the server ---------------------------------------------------------------------------
@contextmanager
def hostile_server(flavour: str, mode: str = "ok"):
    """A `flavour` server failing in `mode` on loopback; yields its URL. On leaving, any
    reply still dripping stops and its connection closes."""
    answer = FLAVOURS[flavour]
    closing = threading.Event()

    class Handler(BaseHTTPRequestHandler):
        def _reply(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b"{}"
            body = json.loads(raw or b"{}")
            path = self.path.split("?")[0]
            payload = answer(mode, path, body if isinstance(body, dict) else {})
            status = 200 if payload is not None else 404
            if mode == "echo_key" and path not in ("/props", "/v1/models", "/tokenize",
                                                   "/detokenize"):  # fmt: skip
                echoed = "; ".join(f"{k}: {v}" for k, v in [*self.headers.items(), PLANTED])
                status, payload = 500, {"error": {"message": f"bad request, headers: {echoed}"}}
            kind = "application/json"
            if isinstance(payload, Events):
                data = "".join(f"data: {json.dumps(event)}\n\n" for event in payload)
                kind = "text/event-stream"
            else:
                data = json.dumps(payload if payload is not None else {"error": "no such path"})
            self._send(status, data.encode(), kind)

        def _send(self, status: int, data: bytes, kind: str) -> None:
            head = (
                f"HTTP/1.1 {status} X\r\nContent-Type: {kind}\r\n"
                f"Content-Length: {len(data)}\r\nConnection: close\r\n\r\n"
            ).encode()
            if mode == "silent":
                closing.wait()
                return
            try:
                if mode != "drip":
                    self.wfile.write(head + data)
                    return
                for byte in head + data:
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
