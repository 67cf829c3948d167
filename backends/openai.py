"""The OpenAI backend: chat (or legacy completions) log-probabilities via the `openai` client.

A text-only backend: the API takes text and answers token
strings and bytes, no ids. The search still passes id lists, so this backend keeps a
vocabulary of its own that interns token *bytes* to ids: `tokenize(story)` is one
pseudo-token holding the whole story, each candidate token another, and `detokenize`
joins their bytes and decodes once (so a character split over tokens joins right). An
id is a hash of its bytes (two model tokens with the same bytes share one), so an id a
loom stored in another process names the same bytes here, or none this instance has met:
`check_ids` refuses those (and anything not an id) before any request, and the page
reads the text again. Text is what crosses the wire.

Prompts. Legacy completions models (`gpt-3.5-turbo-instruct`, `davinci-002`,
`babbage-002`; `logprobs <= 5`) continue the raw text: prompt = story + beam (their
log-probabilities are read in OpenAI's legacy shape, or in the chat shape that
llama.cpp's server answers there). Chat models
(`logprobs: true, top_logprobs <= 20`) answer a new assistant turn instead, so the
prompt asks them to continue: a system message tells the model to reply with the
continuation of the user's text only, verbatim; the user message is the story (the
context's first pseudo-token); the beam so far is

- a prefilled assistant message that the model continues (`continue_final_message`,
  which vLLM reads and llama.cpp's server does by itself) on any server but OpenAI's own,
  so a beam's chain and its depth-by-depth steps see the same prompt;
- appended to the user message on api.openai.com, which cannot continue an assistant
  message: there a greedy chain (the model's own turn) and a depth step (a fresh turn
  after story + beam) are conditioned slightly differently.

`greedy_chains` asks `max_tokens` = the remaining depth at temperature 0: one request
per beam answers its whole greedy path. Requests for a depth's beams go in parallel.

The API key arrives as an argument (read once, in `backends.__init__`); it is never
logged, shown, put in an error or in `url`: every server text an error quotes is
redacted of it (and of anything that looks like a credential). The timeout bounds each
request end to end (`backends.deadline`), and the client does not retry by itself: its
retries waited a back-off on top of a timeout, and hid a server's own error behind a
deadline; the writer's "Suggest again" is the retry. Each reply is read with a cap on
its size and depth and stops at the deadline (`backends.openai_transport`).
Log-probabilities must be finite numbers <= 0 (-inf candidates are dropped), token bytes
lists of byte values, and a reply holds the choices asked, no more
(`backends.replies`).

Usage: `forward_calls` are requests, `prefill_tokens` prompt tokens less those the API
reports as cached, `model_tokens` adds the completion tokens.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from functools import partial
from urllib.parse import unquote, urlparse, urlsplit, urlunsplit

from backends import openai_replies as shapes
from backends import replies
from backends.base import Backend, Candidate, Continuation
from backends.deadline import TooSlow, bounded, within
from backends.errors import BackendError
from backends.greedy_path import WholeChain
from weave.redaction import redacted

LEGACY_MODELS = ("gpt-3.5-turbo-instruct", "davinci-002", "babbage-002")
CHAT_MAX_LOGPROBS = 20
LEGACY_MAX_LOGPROBS = 5
PARALLEL_REQUESTS = 4
ID_LIMIT = 1 << 31  # a loom stores ids below this (weave.loom.formats)
DEFAULT_URL = "https://api.openai.com/v1"
OPENAI_HOST = "api.openai.com"
INSTRUCTION = (
    "You continue stories. Reply with the continuation of the user's text only, exactly "
    "where it stops (mid-sentence if it stops mid-sentence), with no preamble or quotes."
)
CHAT_NOTE = (
    "Chat model: it answers a new assistant turn rather than continuing your text. "
    "LLooM sends the story with an instruction to continue it verbatim{how}, so the "
    "suggestions are the model's continuation as an assistant, not the raw next tokens "
    "of your text. Tokens are matched by their text here, not by id."
)
PREFILLED = ", and the suggestion so far as the start of the model's answer"
APPENDED = ", the suggestion so far appended to it (OpenAI cannot continue an answer)"


class OpenAIBackend(Backend):
    name = "openai"

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
        import httpx2  # late: only this backend needs the package (and `openai`'s client)
        import openai

        from backends.openai_transport import BoundedTransport

        self._openai = openai
        self._base_url = (base_url or DEFAULT_URL).rstrip("/")
        self._model = model
        self._key = api_key
        if not api_key.strip():
            raise BackendError("no API key: set OPENAI_API_KEY", backend=self.name, url=self.url)
        try:
            timeout = bounded(timeout)
        except ValueError as e:
            raise BackendError(f"{e} (OPENAI_TIMEOUT)", backend=self.name, url=self.url) from None
        transport = BoundedTransport(timeout=timeout, error=self._plain_error)
        address, login = _login_apart(self._base_url)
        self._client = openai.OpenAI(
            api_key=api_key,
            base_url=address,
            timeout=timeout,
            max_retries=0,
            http_client=httpx2.Client(transport=transport, timeout=timeout, auth=login),
        )
        self._timeout = timeout
        self.endpoint = _endpoint(model, endpoint)
        self.prefill = urlparse(self._base_url).hostname != OPENAI_HOST
        self._pieces: dict[int, bytes] = {}  # id -> the token bytes it was interned for

    # -- Backend ---------------------------------------------------------------------
    @property
    def model_name(self) -> str:
        return self._model

    @property
    def url(self) -> str:
        return redacted(self._base_url, (self._key,))

    @property
    def note(self) -> str | None:
        """What the page says while this backend is active."""
        if self.endpoint != "chat":
            return None
        return CHAT_NOTE.format(how=PREFILLED if self.prefill else APPENDED)

    def tokenize(self, text: str) -> list[int]:
        return [self._intern(text.encode("utf-8"))] if text else []

    def prompt_ids(self, ids, text: str) -> list[int]:
        """The context's text as one id: the API reads text, and steering's parts are
        text joined (`Backend.prompt_ids`)."""
        return self.tokenize(text)

    def detokenize(self, ids: list[int]) -> str:
        self.check_ids(ids)
        return b"".join(self._pieces[i] for i in ids).decode("utf-8", errors="replace")

    def check_ids(self, ids) -> None:
        """Also refuses an id this instance has not interned (its text is unknown here)."""
        super().check_ids(ids)
        unknown = next((i for i in ids if i not in self._pieces), None)
        if unknown is not None:
            raise BackendError(f"token id {unknown} is not one of the token texts met here",
                               backend=self.name, url=self.url)  # fmt: skip

    def top_logprobs(self, contexts: list[list[int]], k: int) -> list[list[Candidate]]:
        return [chain[0] for chain in self._chains(contexts, k, [1] * len(contexts))]

    def greedy_chains(self, contexts, k, lengths, *, stops=()):
        chains = self._chains(contexts, k, lengths)  # stops unused: chains run their length
        return [WholeChain(chain) for chain in chains]

    def close(self) -> None:
        self._client.close()

    # -- requests --------------------------------------------------------------------
    def _chains(self, contexts, k, lengths) -> list[list[list[Candidate]]]:
        with ThreadPoolExecutor(PARALLEL_REQUESTS) as pool:
            answers = list(pool.map(self._ask, contexts, [k] * len(contexts), lengths))
        for _, usage in answers:  # counted here: stats are kept per calling thread
            self.stats.add(forward_calls=1, **usage)
        return [chain for chain, _ in answers]

    def _ask(self, context: list[int], k: int, length: int):
        ask = self._ask_chat if self.endpoint == "chat" else self._ask_completion
        with self._worded():
            return within(self._timeout, lambda: ask(context, k, length))

    @contextmanager
    def _worded(self) -> Iterator[None]:
        """Asking the server: its failures come out as one `BackendError` each (too slow, the
        client's error, a reply of an unexpected shape)."""
        try:
            yield
        except TooSlow as e:
            raise self._too_slow() from e
        except self._openai.OpenAIError as e:
            raise self._error(e) from e
        except (AttributeError, KeyError, TypeError, ValueError, OverflowError) as e:
            raise self._plain_error(f"unexpected reply ({type(e).__name__}: {e})") from e

    def _chat_prompt(self, context: list[int]) -> tuple[list[dict], dict | None]:
        """The messages for a context (story, then beam) and the extra fields they need."""
        story, beam = self._prompt_text(context[:1]), self._prompt_text(context[1:])
        messages = [{"role": "system", "content": INSTRUCTION}]
        if beam and self.prefill:
            messages += [{"role": "user", "content": story}, {"role": "assistant", "content": beam}]
            return messages, {"continue_final_message": True, "add_generation_prompt": False}
        messages.append({"role": "user", "content": story + beam})
        return messages, None

    def _json(self, resource, **request) -> dict:
        """POST `request` through one of the client's resources; the reply's own JSON
        (`backends.openai_replies` reads it, not the package's models)."""
        raw = resource.with_raw_response.create(**request)
        reply = replies.parsed(raw.content, self._plain_error, "the reply")
        return replies.of_type(reply, dict, self._plain_error, "the reply")

    def _chain(self, reply: dict) -> tuple[list[list[Candidate]], dict[str, int]]:
        """The greedy path of a request for one choice, and its usage."""
        found = shapes.choices(reply, 1, self._plain_error)
        positions = shapes.top_positions(found[0] if found else None, self._plain_error)
        chain = [[self._candidate(piece, lp) for piece, lp in top] for top in positions]
        return chain, shapes.usage(reply)

    def _candidate(self, piece: bytes, logprob: float) -> Candidate:
        return Candidate(self._intern(piece), piece.decode("utf-8", "replace"), logprob, piece)

    def _ask_chat(self, context: list[int], k: int, length: int):
        messages, extra = self._chat_prompt(context)
        reply = self._json(
            self._client.chat.completions,
            model=self._model,
            messages=messages,
            max_tokens=length,
            temperature=0,
            logprobs=True,
            top_logprobs=min(k, CHAT_MAX_LOGPROBS),
            extra_body=extra,
        )
        return self._chain(reply)

    def _ask_completion(self, context: list[int], k: int, length: int):
        reply = self._json(
            self._client.completions,
            model=self._model,
            prompt=self._prompt_text(context),
            max_tokens=length,
            temperature=0,
            logprobs=min(k, LEGACY_MAX_LOGPROBS),
        )
        return self._chain(reply)

    def _prompt_text(self, ids: list[int]) -> str:
        """Text to send: an unfinished character at the end cannot travel as text."""
        return self.detokenize(ids).rstrip("\ufffd")

    def _intern(self, piece: bytes) -> int:
        """The id of `piece`: a hash of its bytes below ID_LIMIT, or where another piece
        holds that id already (rare), the next free one after it."""
        token_id = int.from_bytes(hashlib.blake2b(piece, digest_size=4).digest(), "big") >> 1
        while self._pieces.setdefault(token_id, piece) != piece:
            token_id = (token_id + 1) % ID_LIMIT
        return token_id

    # -- errors ----------------------------------------------------------------------
    def _too_slow(self) -> BackendError:
        return self._plain_error(
            f"too slow: no answer in time (whole within {self._timeout:g} s); the "
            "service is busy or stuck: retry, or raise OPENAI_TIMEOUT"
        )

    def _plain_error(self, message: str) -> BackendError:
        return BackendError(
            redacted(f"{message} (model {self._model})", (self._key,)),
            backend=self.name,
            url=self.url,
        )

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
            message = (
                "too slow: no answer in time; the service is busy: retry, or raise OPENAI_TIMEOUT"
            )
        elif isinstance(e, o.APIConnectionError):
            message = "cannot connect: check OPENAI_BASE_URL and the network"
        elif isinstance(e, o.NotFoundError):
            message = f"model {self._model!r} not found (404): check OPENAI_MODEL"
        elif isinstance(e, o.APIStatusError):
            message = f"HTTP {e.status_code}: {_status_message(e)}"
        else:
            message = f"request failed: {type(e).__name__}"
        return BackendError(redacted(message, (self._key,)), backend=self.name, url=self.url)

    # -- sampling (ramify) -------------------------------------------------------------
    def sample(self, context, *, n, temperature, min_p, max_tokens, seed=None):
        """One request with `n` choices at `temperature`, each drawn token's log-prob with
        it, the prompt as a search's (chat: the story to continue; legacy: raw text).
        `seed` is passed on (OpenAI promises only best effort). `min_p` goes as an extra
        field to servers other than OpenAI's (vLLM's and llama.cpp's read it); OpenAI has
        no min-p, so there it is not applied. Token ids are this instance's interned token
        bytes, as for candidates: `detokenize(token_ids)` is the sample's text. A server
        that answers fewer choices is asked again for the rest, seeds going on."""
        if temperature == 0 and n > 1:  # every draw is the greedy path (vLLM refuses n > 1)
            return n * self.sample(
                context, n=1, temperature=0, min_p=min_p, max_tokens=max_tokens, seed=seed
            )
        drawn: list[Continuation] = []
        while len(drawn) < n:
            start = None if seed is None else seed + len(drawn)
            draw = partial(self._draw, context, n - len(drawn), temperature, min_p, max_tokens)
            with self._worded():
                reply = within(self._timeout, partial(draw, start))
                choices = shapes.choices(reply, n - len(drawn), self._plain_error)
                if not choices:
                    raise self._plain_error("the reply carried no choices")
                drawn += [self._drawn(choice) for choice in choices]
            self.stats.add(forward_calls=1, **shapes.usage(reply))
        return drawn[:n]

    def _draw(self, context, n, temperature, min_p, max_tokens, seed):
        options = {"model": self._model, "n": n, "max_tokens": max_tokens}
        options |= {"temperature": temperature} | ({"seed": seed} if seed is not None else {})
        extra = {"min_p": min_p} if self.prefill else {}
        if self.endpoint == "chat":
            messages, prompt_extra = self._chat_prompt(context)
            extra |= prompt_extra or {}
            return self._json(
                self._client.chat.completions,
                messages=messages,
                logprobs=True,
                extra_body=extra or None,
                **options,
            )
        return self._json(
            self._client.completions,
            prompt=self._prompt_text(context),
            logprobs=1,
            extra_body=extra or None,
            **options,
        )

    def _drawn(self, choice: dict) -> Continuation:
        """A choice's tokens (interned by their bytes) and the sum of their log-probs."""
        options, _ = shapes.drawn(choice, self.endpoint == "chat", self._plain_error)
        ids = tuple(self._intern(piece) for piece, _ in options)
        return Continuation(ids, self.detokenize(list(ids)), float(sum(lp for _, lp in options)))


def _login_apart(url: str) -> tuple[str, tuple[str, str] | None]:
    """`url` less its `user:password@`, and that login, sent as HTTP basic auth as the
    URL would have had it sent: the client's HTTP library logs each request's URL."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url, None
    login, _, host = parts.netloc.rpartition("@")
    user, _, password = login.partition(":")
    return urlunsplit(parts._replace(netloc=host)), (unquote(user), unquote(password))


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


def _status_message(e) -> str:
    """The server's words in an error reply (its JSON's message, or its text), on one
    short line."""
    body = e.body
    if isinstance(body, dict):
        body = body.get("error", body)
        if isinstance(body, dict):
            return replies.one_line(str(body.get("message", body))[:4096])
    return replies.one_line(e.response.text[:4096] or str(e.message))
