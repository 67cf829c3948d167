"""The OpenAI backend: chat (or legacy completions) log-probabilities via the `openai` client.

A text-only backend: the API takes text and returns token strings, no ids. The search
still passes id lists, so this backend interns token strings into ids of its own
(`token_native = False`): the story is one pseudo-token, each candidate another. Those
ids mean something only inside this instance; text is what crosses the wire.

Chat models (`logprobs: true, top_logprobs: k <= 20`) answer a new assistant turn rather
than continue raw text. The prompt asks them to continue: a system message tells the
model to reply with the continuation of the user's text only, verbatim, and the user
message is the story plus the beam so far. Legacy completions models
(`gpt-3.5-turbo-instruct`, `davinci-002`, `babbage-002`; `logprobs <= 5`) continue the
raw text. The endpoint is picked by model name, or set explicitly.

The API key arrives as an argument (read once, in `backends.__init__`); it is never
logged, shown, put in an error or in `url`.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

from backends.base import Backend, BackendError, Candidate

LEGACY_MODELS = ("gpt-3.5-turbo-instruct", "davinci-002", "babbage-002")
CHAT_MAX_LOGPROBS = 20
LEGACY_MAX_LOGPROBS = 5
PARALLEL_REQUESTS = 4
DEFAULT_URL = "https://api.openai.com/v1"
INSTRUCTION = (
    "You continue stories. Reply with the continuation of the user's text only, exactly "
    "where it stops (mid-sentence if it stops mid-sentence), with no preamble or quotes."
)
CHAT_NOTE = (
    "Chat model: it answers a new assistant turn. LLooM sends your story with an "
    "instruction to continue it verbatim, so suggestions are the model's continuation, "
    "not the raw next tokens of your text; token ids are not exact here."
)


class OpenAIBackend(Backend):
    name = "openai"
    token_native = False

    def __init__(
        self,
        *,
        api_key: str,
        model: str,
        base_url: str | None = None,
        endpoint: str = "auto",
        timeout: float = 60.0,
    ):
        super().__init__()
        import openai  # late: only this backend needs the package

        self._openai = openai
        self._base_url = (base_url or DEFAULT_URL).rstrip("/")
        self._client = openai.OpenAI(
            api_key=api_key, base_url=self._base_url, timeout=timeout, max_retries=1
        )
        self._model = model
        self.endpoint = _endpoint(model, endpoint)
        self._strings: list[str] = []
        self._ids: dict[str, int] = {}
        self._intern_lock = threading.Lock()

    # -- Backend ---------------------------------------------------------------------
    @property
    def model_name(self) -> str:
        return self._model

    @property
    def url(self) -> str:
        return self._base_url

    @property
    def note(self) -> str | None:
        """What the page says while this backend is active."""
        return CHAT_NOTE if self.endpoint == "chat" else None

    def tokenize(self, text: str) -> list[int]:
        return [self._intern(text)] if text else []

    def detokenize(self, ids: list[int]) -> str:
        return "".join(self._strings[i] for i in ids)

    def top_logprobs(self, contexts: list[list[int]], k: int) -> list[list[Candidate]]:
        return [chain[0] for chain in self._chains(contexts, k, [1] * len(contexts))]

    def greedy_chains(self, contexts, k, lengths):
        return self._chains(contexts, k, lengths)

    def close(self) -> None:
        self._client.close()

    # -- requests --------------------------------------------------------------------
    def _chains(self, contexts, k, lengths) -> list[list[list[Candidate]]]:
        texts = [self.detokenize(ctx) for ctx in contexts]
        with ThreadPoolExecutor(PARALLEL_REQUESTS) as pool:
            answers = list(pool.map(self._ask, texts, [k] * len(texts), lengths))
        for _, tokens in answers:
            self.stats.add(forward_calls=1, model_tokens=tokens)
        return [chain for chain, _ in answers]

    def _ask(self, text: str, k: int, length: int) -> tuple[list[list[Candidate]], int]:
        try:
            if self.endpoint == "chat":
                return self._ask_chat(text, k, length)
            return self._ask_completion(text, k, length)
        except self._openai.OpenAIError as e:
            raise self._error(e) from e

    def _ask_chat(self, text: str, k: int, length: int):
        reply = self._client.chat.completions.create(
            model=self._model,
            messages=[
                {"role": "system", "content": INSTRUCTION},
                {"role": "user", "content": text},
            ],
            max_tokens=length,
            temperature=0,
            logprobs=True,
            top_logprobs=min(k, CHAT_MAX_LOGPROBS),
        )
        content = reply.choices[0].logprobs.content if reply.choices[0].logprobs else None
        if not content:
            raise self._plain_error("the reply carried no log-probabilities for this model")
        chain = [
            self._ranked((t.token, t.logprob, t.bytes) for t in pos.top_logprobs) for pos in content
        ]
        return chain, _used(reply)

    def _ask_completion(self, text: str, k: int, length: int):
        reply = self._client.completions.create(
            model=self._model,
            prompt=text,
            max_tokens=length,
            temperature=0,
            logprobs=min(k, LEGACY_MAX_LOGPROBS),
        )
        logprobs = reply.choices[0].logprobs
        if not logprobs or not logprobs.top_logprobs:
            raise self._plain_error("the reply carried no log-probabilities for this model")
        chain = [
            self._ranked((t, lp, None) for t, lp in pos.items()) for pos in logprobs.top_logprobs
        ]
        return chain, _used(reply)

    def _ranked(self, options) -> list[Candidate]:
        out = []
        for token, logprob, raw in options:
            piece = bytes(raw) if raw else token.encode("utf-8")
            out.append(Candidate(self._intern(token), token, float(logprob), piece))
        out.sort(key=lambda c: -c.logprob)
        return out

    def _intern(self, text: str) -> int:
        with self._intern_lock:
            if text not in self._ids:
                self._ids[text] = len(self._strings)
                self._strings.append(text)
            return self._ids[text]

    # -- errors ----------------------------------------------------------------------
    def _plain_error(self, message: str) -> BackendError:
        return BackendError(f"{message} (model {self._model})", backend=self.name, url=self.url)

    def _error(self, e: Exception) -> BackendError:
        """One clear line per failure; the server's words are passed on except for 401s,
        whose messages echo part of the key."""
        o = self._openai
        if isinstance(e, o.AuthenticationError):
            message = "the API key was rejected (401): check OPENAI_API_KEY"
        elif isinstance(e, o.PermissionDeniedError):
            message = f"this key may not use model {self._model!r} (403): check OPENAI_MODEL"
        elif isinstance(e, o.RateLimitError):
            message = "rate limited or out of quota (429): wait, or check the account's limits"
        elif isinstance(e, o.APITimeoutError):
            message = "no answer in time: the service is slow; raise the timeout or retry"
        elif isinstance(e, o.APIConnectionError):
            message = "cannot connect: check OPENAI_BASE_URL and the network"
        elif isinstance(e, o.NotFoundError):
            message = f"model {self._model!r} not found (404): check OPENAI_MODEL"
        elif isinstance(e, o.APIStatusError):
            message = f"HTTP {e.status_code}: {_status_message(e)}"
        else:
            message = f"request failed: {type(e).__name__}"
        return BackendError(message, backend=self.name, url=self.url)


def _endpoint(model: str, endpoint: str) -> str:
    if endpoint in ("chat", "completions"):
        return endpoint
    if endpoint != "auto":
        raise BackendError(
            f"endpoint {endpoint!r} is not chat, completions or auto (OPENAI_ENDPOINT)",
            backend="openai",
        )
    legacy = model in LEGACY_MODELS or model.startswith(("davinci", "babbage"))
    return "completions" if legacy else "chat"


def _used(reply) -> int:
    usage = getattr(reply, "usage", None)
    return int(getattr(usage, "total_tokens", 0) or 0)


def _status_message(e) -> str:
    body = getattr(e, "body", None)
    if isinstance(body, dict):
        body = body.get("error", body)
        if isinstance(body, dict):
            return str(body.get("message", body))[:300]
    return str(getattr(e, "message", ""))[:300]
