"""The one small interface every backend implements.

A backend turns token-id contexts into the model's most likely next tokens. It owns
transport, caching and tokenization; it knows nothing about beams, cutoffs or pages
(that is `weave.search.beams`). Errors leave a backend only as `BackendError`
(`backends.errors`); the server backends' common base is `backends.greedy_path`'s.
"""

from __future__ import annotations

import codecs
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from typing import Protocol

from backends.errors import BackendError


@dataclass(frozen=True)
class Candidate:
    """One possible next token.

    `raw` is the token's bytes when the backend knows them; a token may hold half of a
    UTF-8 character, so beam text is built by joining `raw` and decoding once. `open`
    says the token leaves a character unfinished where a backend that knows no bytes
    holds its part back (vLLM's texts): a beam ending on it ends inside a character.
    """

    token_id: int
    text: str
    logprob: float
    raw: bytes | None = None
    open: bool = False

    @property
    def piece(self) -> bytes:
        return self.raw if self.raw is not None else self.text.encode("utf-8")


@dataclass(frozen=True)
class Continuation:
    """One sampled continuation: its tokens (never a control token), their text (the
    backend's detokenization of exactly those tokens) and the sum of their log-probs under
    the model's raw distribution (before min-p and temperature reshape it)."""

    token_ids: tuple[int, ...]
    text: str
    logprob: float


class Cancelled(Exception):
    """The caller no longer wants this answer (`Backend.cancellable`'s `wanted()` turned
    False): its page session is gone or has asked for something else. Not a failure:
    nothing to show the writer."""


class ThreadWanted:
    """Per calling thread, whether its work is still wanted: the `wanted()` of the
    `Backend.cancellable` block it runs in (always, outside one). The state behind
    `cancellable` for a backend that honours it."""

    def __init__(self) -> None:
        self._local = threading.local()

    @property
    def wanted(self) -> Callable[[], bool]:
        """This thread's check (always True outside a `cancellable` block)."""
        return getattr(self._local, "wanted", None) or always

    @contextmanager
    def cancellable(self, wanted: Callable[[], bool]) -> Iterator[None]:
        previous = getattr(self._local, "wanted", None)
        self._local.wanted = wanted
        try:
            yield
        finally:
            self._local.wanted = previous


def always() -> bool:
    """Wanted always: the check outside a `cancellable` block, and of work no tab waits on."""
    return True


@dataclass(frozen=True)
class Usage:
    """What a backend spent: see `BackendStats`."""

    forward_calls: int = 0
    model_tokens: int = 0
    prefill_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.forward_calls + other.forward_calls,
            self.model_tokens + other.model_tokens,
            self.prefill_tokens + other.prefill_tokens,
        )

    def __sub__(self, other: Usage) -> Usage:
        return Usage(
            self.forward_calls - other.forward_calls,
            self.model_tokens - other.model_tokens,
            self.prefill_tokens - other.prefill_tokens,
        )


class BackendStats:
    """Running counters, kept per calling thread, so that concurrent page sessions
    sharing one backend each see only their own work (`weave.search.beams` reads the
    difference over one expansion). Call `add` from the thread that made the request.

    forward_calls:  model forwards (local) or HTTP round trips (remote).
    model_tokens:   token positions the model evaluated (prefill and beams).
    prefill_tokens: context positions evaluated other than one-token steps after a cached
                    prefix (those are a search's decode steps; the rest is story prefill).
    """

    def __init__(self) -> None:
        self._local = threading.local()

    def add(self, *, forward_calls: int = 0, model_tokens: int = 0, prefill_tokens: int = 0):
        self._local.usage = self.snapshot() + Usage(forward_calls, model_tokens, prefill_tokens)

    def snapshot(self) -> Usage:
        return getattr(self._local, "usage", Usage())


@dataclass(frozen=True)
class TokenAlternatives:
    """What the model offered at one position of a text: the log-probability of the token
    that is there, and the k most likely tokens there (most likely first)."""

    position: int  # index of the token in the ids asked about
    token_id: int
    text: str  # the token's own text: "" when it ends inside a character (see token_texts)
    logprob: float | None  # None: the backend knows it only among the top-k, and it is not
    top: list[Candidate]


def token_texts(pieces: Sequence[bytes], start: int) -> list[str]:
    """The own text of each token from index `start` of `pieces` (the tokens' bytes, from a
    few tokens before `start` so that a character split there is whole again): complete
    characters only, so a token that ends inside a character has "" and the token that
    completes it the whole character, as a reader sees the text grow."""
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    texts = [decoder.decode(piece) for piece in pieces]
    return texts[start:]


HEAL_K = 100  # candidates a healed depth asks a server for (see `Backend.heal_k`)

Positions = list[list[Candidate]]  # top-k at successive positions, as a backend reads them


class Chain(Protocol):
    """The top-k at successive positions of one greedy path (`Backend.greedy_chains`):
    chain[j] is the top-k after the context plus the path's first j tokens, its greedy
    token chain[j][0]. Positions may arrive as a server makes them: indexing waits for
    the one asked, `len()` for the path's end."""

    def __getitem__(self, index: int) -> list[Candidate]: ...

    def __len__(self) -> int: ...

    def known_length(self) -> int | None:
        """The path's length once its end is known, else None; never waits."""
        ...

    def close(self) -> None:
        """No beam follows this path any more: the backend may stop making it."""
        ...


class Backend(ABC):
    """Batched, token-native next-token log-probabilities.

    A class attribute: `name`, the short backend name ("mlx", "llamacpp", "vllm",
    "openai"). Instance attributes:
    `special_token_ids`, control tokens (end of text, chat markers) that the search never
    offers as story text, filled by a backend that knows them; and `vocab_size`, how
    many token ids the model has (valid ids are 0 .. vocab_size - 1; None where the
    backend does not know), which `check_ids` reads.

    Optional abilities are declared here, each with the default that is the one way to
    say "not supported": it answers None (`top_logprobs_also`, `alternatives`,
    `greedy_chains`, `sample`, `cache_bytes`, `note`). Hints that change no answer
    (`read_ahead`, `cancellable`, `background`, `searching`) do nothing by default.
    Callers ask the method; nobody probes for attributes.
    """

    name: str = "backend"

    def __init__(self) -> None:
        self.stats = BackendStats()
        self.special_token_ids: frozenset[int] = frozenset()
        self.vocab_size: int | None = None

    # -- what the page shows -------------------------------------------------------
    @property
    @abstractmethod
    def model_name(self) -> str:
        """The model in use, as the user would recognise it."""

    @property
    def url(self) -> str | None:
        """The server address for remote backends, as the page shows it and logs name it:
        never a key, a password in it `redacted`; None for local ones."""
        return None

    @property
    def context_length(self) -> int | None:
        """The model's context window in tokens, when known."""
        return None

    @property
    def read_window(self) -> int | None:
        """The most tokens of a context's end this backend reads: the model's window, or
        less where reading is slow (the MLX backend on a CPU); None when unknown."""
        return self.context_length

    def check_ids(self, ids: Sequence[object]) -> None:
        """Raise a `BackendError` naming the first of `ids` that is not one of this model's
        token ids (not an int, negative, or past `vocab_size`): an id the model has no
        embedding row for must never reach it (MLX reads past the table, or crashes)."""
        bad = invalid_id(ids, self.vocab_size)
        if bad is not None:
            known = "" if self.vocab_size is None else f" (0 to {self.vocab_size - 1:,})"
            raise BackendError(
                f"token id {ids[bad]!r:.40} is not one of the model's token ids{known}",
                backend=self.name,
                url=self.url,
            )

    @property
    def note(self) -> str | None:
        """Optional: what the page says while this backend is active."""
        return None

    @property
    def model_facts(self) -> str | None:
        """Optional: what the model is, in one line (its size, weights and memory)."""
        return None

    @property
    def cache_bytes(self) -> int | None:
        """Optional: bytes of KV cache the backend holds in this process now (None: it
        keeps none, or a server keeps it)."""
        return None

    @property
    def cache_cap_bytes(self) -> int | None:
        """Optional: the most `cache_bytes` may hold between calls."""
        return None

    @property
    def heal_k(self) -> int:
        """How many candidates a healed depth asks for (`weave.search.healing`: a beam held to the
        text typed after the story's last token boundary keeps only the candidates that
        agree with it). By default HEAL_K, what one server request affords; a backend
        that reads the whole vocabulary in process answers all of it, and is exact."""
        return HEAL_K

    # -- tokens --------------------------------------------------------------------
    @abstractmethod
    def tokenize(self, text: str) -> list[int]:
        """The model's token ids for `text` (no BOS: contexts carry what the model needs)."""

    @abstractmethod
    def detokenize(self, ids: list[int]) -> str:
        """Text for token ids."""

    def prompt_ids(self, ids: Sequence[int], text: str) -> list[int]:
        """The ids to send for a context whose model tokens are `ids` and whose text is
        `text`: the ids themselves, where they are the model's tokens. A backend whose API
        takes text (OpenAI) sends the text as its own ids instead."""
        return list(ids)

    # -- log-probabilities -----------------------------------------------------------
    @abstractmethod
    def top_logprobs(self, contexts: list[list[int]], k: int) -> list[list[Candidate]]:
        """For each context, its k most likely next tokens, most likely first."""

    def top_logprobs_also(
        self, contexts: list[list[int]], k: int, also: list[Sequence[int]]
    ) -> list[list[Candidate]] | None:
        """Optional: `top_logprobs`, each context's top k followed by those of the ids
        `also[i]` that are not among them, with their log-probs, most likely first (the
        list stays most likely first: none of them beats the k-th). A search asks this
        for the tokens a bias weighs (`weave.story.bias`), so a favoured phrase the model
        ranks below the top k can come in. An id the backend could not weigh is left out
        (llama.cpp finds them among a larger top-n). Returns None when the backend can
        weigh no token outside its top k (OpenAI's API)."""
        return None

    def read_ahead(self, context: list[int], k: int, report: Callable[[int, int], None]) -> None:
        """Optional: read a long `context` (and its top-k) into the backend's cache before
        a search, calling report(tokens read, tokens in all) on the caller's thread as it
        goes, so a page can show how far a long story has been read. Backends whose server
        keeps its own cache leave it to the first request and do nothing here."""

    def unread(self, context: list[int]) -> int:
        """Optional: how many of `context`'s tokens `read_ahead` would read chunk by chunk,
        showing progress (0: a search reads what is left without a wait worth showing). A
        page reads a story with any such tokens apart (`weave.desk.reading`) and goes on.
        Backends whose server keeps its own cache say 0."""
        return 0

    def alternatives(
        self, ids: list[int], k: int, *, start: int = 1
    ) -> list[TokenAlternatives] | None:
        """Optional: for each position i in start..len(ids)-1, the log-prob of ids[i] after
        ids[:i] and the top-k there, so that a writer can pick another token anywhere in
        the story. Returns None when the backend cannot (its server gives no log-probs of
        a prompt's own tokens)."""
        return None

    def greedy_chains(
        self, contexts: list[list[int]], k: int, lengths: list[int], *, stops: tuple[str, ...] = ()
    ) -> list[Chain] | None:
        """Optional: top-k at each of `lengths[i]` positions along each context's greedy path.

        result[i] is a `Chain`: result[i][j] is the top-k after contexts[i] plus the first
        j greedy tokens. Remote backends answer a whole beam in one request this way. A
        path may end early just after a greedy token whose text holds one of `stops` (the
        search's auto-stop ends the beam there), so a server stops generating what no beam
        would use; a chain may also be shorter than asked for other reasons, and the
        search asks again for beams that go on. A chain's positions may arrive as the
        server makes them; the search closes each once no beam follows it, so the server
        stops making positions nobody reads. Returns None when the backend cannot.
        """
        return None

    def cancellable(self, wanted: Callable[[], bool]) -> AbstractContextManager[None]:
        """Optional hint: within this block, this thread's reads and searches may stop
        (with `Cancelled`) once wanted() is False, leaving the model to
        other writers. By default nothing stops: the work simply finishes."""
        return nullcontext()

    def background(self, wanted: Callable[[], bool]) -> AbstractContextManager[None]:
        """Optional hint: within this block, this thread's requests are background work
        (look-ahead, `weave.desk.lookahead`): a backend that queues requests serves every
        writer's first. wanted() may be called on another thread, so it must be cheap and
        thread-safe. By default the work is `cancellable` and runs as a writer's would."""
        return self.cancellable(wanted)

    def searching(self) -> AbstractContextManager[None]:
        """Optional hint: within this block, this thread runs one search (`weave.search`),
        asking depth after depth until the block ends; a backend that queues background
        work holds it back until then. By default nothing is held."""
        return nullcontext()

    def close(self) -> None:
        """Release connections or memory; the backend is not used afterwards."""

    def sample(
        self,
        context: list[int],
        *,
        n: int,
        temperature: float,
        min_p: float,
        max_tokens: int,
        seed: int | None = None,
    ) -> list[Continuation] | None:
        """Optional: n continuations of `context` drawn by the model, in the order drawn.

        At each position, tokens whose probability is below `min_p` times the top token's
        are dropped and the rest sampled at `temperature` (0: the top token). A sample
        ends after `max_tokens` tokens or at a control token, which it does not include.
        `seed` makes the draw repeatable where the backend can. Servers draw with their
        own samplers; a backend's `sample` says where they differ from this. Counted in
        `stats` as a search is. Returns None when the backend cannot sample.
        """
        return None


def invalid_id(ids: Sequence[object], vocab_size: int | None) -> int | None:
    """The position of the first of `ids` that is not an int in 0 .. vocab_size - 1 (any
    int >= 0 when `vocab_size` is None), or None when all are."""
    top = vocab_size if vocab_size is not None else float("inf")
    for position, token_id in enumerate(ids):
        if type(token_id) is not int or not 0 <= token_id < top:
            return position
    return None
