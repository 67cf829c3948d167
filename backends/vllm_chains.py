"""Reading a vLLM completions reply: greedy chains as they stream in, and its fields.

A streamed reply (`stream: true`) is a run of chunks, one choice each, `index` naming
its prompt; each position reaches the search as the server makes it (`StreamedChain`),
so the search can ask its new beams while the server goes on with the older chains,
and their prompts join the step that makes those chains' next tokens (measured: 14-16
steps for a 25-suggestion search on the starting stories, 22-40 when each reply was read
whole). A chain no beam follows any more is closed; once all of a reply's chains are,
the connection is dropped and the server stops that request. A server that ignores
`stream` answers one JSON body holding every choice whole; it is read the same way.

Every field is checked where it is read (`backends.replies`): a token key must be
"token_id:N" with N in the vocabulary (the backend's `id_bound`), a log-probability finite (-inf
candidates are dropped), and a wrong shape is an error naming the server and the field.
A reply's usage is counted into the stats of the thread that reads it; one dropped
before its usage came counts what was sent and received.

Owns: a reply's chains, its parsing, its usage. Not: request shapes and the logprobs
limit (`backends.vllm`), token text (`backends.vllm_texts`), the reading of a stream
(`backends.http`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from backends import replies
from backends.base import BackendStats, Candidate, Positions
from backends.http import EventStream, JsonClient, expect
from backends.vllm_texts import TokenTexts

TOKEN_KEY = re.compile(r"^token_id:(-?\d+)$")


def token_id(key: object, client: JsonClient, id_bound: int) -> int:
    """The id in a "token_id:N" key (the server's `return_tokens_as_token_ids`), below
    `id_bound` (the vocabulary's size)."""
    match = TOKEN_KEY.match(str(key))
    expect(match is not None, client, f"token {key!r} is not 'token_id:N'")
    return replies.token_id(int(match.group(1)), client.error, f"token {key!r}", id_bound)


def ranked(position: object, k: int, client: JsonClient, id_bound: int) -> list[Candidate]:
    """The top-k of one top_logprobs entry ({"token_id:N": logprob}), without text."""
    expect(isinstance(position, dict) and position, client, "an empty top_logprobs entry")
    out = []
    for key, value in position.items():
        logprob = replies.logprob(value, client.error, f"top_logprobs[{key!r}]")
        if logprob is not None:  # -inf: a token the model rules out
            out.append(Candidate(token_id(key, client, id_bound), "", logprob))
    expect(bool(out), client, "no finite log-probability in a top_logprobs entry")
    out.sort(key=lambda c: (-c.logprob, c.token_id))  # ties: the lower id, as argmax
    return out[:k]  # the sampled token may come on top of the k asked for


def ordered_choices(choices: list, client: JsonClient) -> list[dict]:
    """A reply's choices, each checked to be an object with a whole-number `index`
    (0 where absent), in index order."""
    for i, choice in enumerate(choices):
        replies.of_type(choice, dict, client.error, f"choices[{i}]")
        replies.of_type(choice.get("index", 0), int, client.error, f"choices[{i}].index")
    return sorted(choices, key=lambda c: c.get("index", 0))


def count_usage(stats: BackendStats, usage: object) -> None:
    """A reply's `usage` into `stats`: prompt tokens less those the server reports as
    cached (`prompt_tokens_details.cached_tokens`), plus completion tokens."""
    usage = usage if isinstance(usage, dict) else {}
    details = usage.get("prompt_tokens_details")
    cached = details.get("cached_tokens") if isinstance(details, dict) else 0
    prompt = max(_count_of(usage.get("prompt_tokens")) - _count_of(cached), 0)
    completion = _count_of(usage.get("completion_tokens"))
    stats.add(model_tokens=prompt + completion, prefill_tokens=prompt)


class StreamedReply:
    """One completions request's reply as it arrives: each prompt's positions (top-k
    without text), checked as they come. Everything here runs on the thread that asked
    (a reader thread only receives the events), so usage is counted where it belongs.
    A control token the server stopped on is passed to `learn_controls`; every id must
    be below `id_bound`."""

    def __init__(
        self,
        events: EventStream,
        contexts: list[list[int]],
        k: int,
        *,
        client: JsonClient,
        stats: BackendStats,
        texts: TokenTexts,
        learn_controls: Callable[[set[int]], None],
        id_bound: int,
    ):
        self.events, self.contexts, self.k, self.id_bound = events, contexts, k, id_bound
        self.client, self.stats, self.texts = client, stats, texts
        self.learn_controls = learn_controls
        rows = len(contexts)
        self.positions: list[Positions] = [[] for _ in range(rows)]
        self.ended = [False] * rows  # the server finished the prompt's path
        self.diverged = [False] * rows  # its path left our top token (a tie): no more
        self.last: list[int | None] = [None] * rows  # the last token drawn
        self.open = rows  # chains not yet closed
        self.usage: object = None
        self.events_read = 0
        self.finished = False  # the reply's end has been read (and every prompt checked)
        self.error = client.error

    def chains(self) -> list[StreamedChain]:
        return [StreamedChain(self, row) for row in range(len(self.contexts))]

    def over(self, row: int) -> bool:
        return self.ended[row] or self.diverged[row] or self.finished

    def pull(self) -> None:
        """Take the next event (waiting for it); at the reply's end, check every prompt
        was answered."""
        event = self.events.next()
        if event is None:
            self.finished = True
            expect(self.events_read > 0, self.client,
                   "/v1/completions sent no event: an empty reply, or not server-sent "
                   "events of JSON (is this a vLLM server?)")  # fmt: skip
            for row in range(len(self.contexts)):
                self._check_answered(row)
            return
        self.events_read += 1
        replies.of_type(event, dict, self.error, "a /v1/completions reply")
        if "usage" in event:
            self.usage = event["usage"]
        choices = event.get("choices")
        if not self.events.streamed:  # one body: every choice, in index order
            expect(isinstance(choices, list) and len(choices) == len(self.contexts),
                   self.client, f"expected {len(self.contexts)} choices")  # fmt: skip
        replies.of_type(choices, list, self.error, "choices")
        for i, choice in enumerate(ordered_choices(choices, self.client)):
            row = choice.get("index", 0) if self.events.streamed else i
            expect(0 <= row < len(self.contexts), self.client,
                   f"choices[{i}].index {row} names no prompt sent")  # fmt: skip
            self._take(row, choice)

    def _take(self, row: int, choice: dict) -> None:
        logprobs = choice.get("logprobs")
        logprobs = logprobs if isinstance(logprobs, dict) else {}
        positions = logprobs.get("top_logprobs")
        expect(isinstance(positions, list) and (positions or self.events.streamed),
               self.client,
               "a choice without top_logprobs: does the server allow logprobs?")  # fmt: skip
        tops = [ranked(position, self.k, self.client, self.id_bound) for position in positions]
        tokens = replies.field(logprobs, "tokens", list, self.error, "a choice's logprobs")
        expect(len(tokens) == len(positions), self.client,
               f"{len(tokens)} logprobs.tokens for {len(positions)} top_logprobs")  # fmt: skip
        for top, token in zip(tops, tokens, strict=True):
            drawn = token_id(token, self.client, self.id_bound)
            self.last[row] = drawn
            if self.diverged[row]:
                continue
            self.positions[row].append(top)
            if drawn != top[0].token_id:  # a tie broken the other way: the path went on
                self.diverged[row] = True  # from another token than our top one
        if choice.get("finish_reason") is not None:
            self.ended[row] = True
            self._check_answered(row)
            stopped_on_token = choice["finish_reason"] == "stop" and not isinstance(
                choice.get("stop_reason"), str
            )
            if stopped_on_token and self.last[row] is not None:  # a control token, not one
                self.learn_controls({self.last[row]})  # of our stop strings

    def _check_answered(self, row: int) -> None:
        expect(bool(self.positions[row]), self.client,
               "a choice without top_logprobs: does the server allow logprobs?")  # fmt: skip

    def release(self) -> None:
        """One chain is done with; once all are, the reply is settled: read to its end
        when the server has finished every path (its usage comes last), else dropped,
        which stops the server computing paths no beam will use."""
        self.open -= 1
        if self.open:
            return
        if all(self.ended[row] or self.diverged[row] for row in range(len(self.contexts))):
            while not self.events.over:
                self.pull()
        self.events.close()
        if isinstance(self.usage, dict):
            count_usage(self.stats, self.usage)
        else:  # dropped before its usage came: what was sent and received, none cached
            prompt = sum(len(ctx) for ctx in self.contexts)
            completion = sum(len(p) for p in self.positions)
            self.stats.add(model_tokens=prompt + completion, prefill_tokens=prompt)


class StreamedChain(Sequence):
    """The top-k at successive positions of one prompt's greedy path, spelled, as they
    arrive: indexing or iterating waits for the positions needed and no more, and
    `len()` waits for the path's end. `close()` when done with it (a search drops a
    beam's chain once the beam ends or leaves the path)."""

    def __init__(self, reply: StreamedReply, row: int):
        self.reply, self.row = reply, row
        self.spelled: Positions = []
        self.closed = False

    def __getitem__(self, index):
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        if index < 0:
            index += len(self)
        arrived = self.reply.positions[self.row]
        while index >= len(arrived) and not self.reply.over(self.row):
            self.reply.pull()
        if not 0 <= index < len(arrived):
            raise IndexError(index)
        if index >= len(self.spelled):
            context = self.reply.contexts[self.row] + [top[0].token_id for top in self.spelled]
            new = arrived[len(self.spelled) : index + 1]
            [spelled] = self.reply.texts.spell([context], [new])
            self.spelled += spelled
        return self.spelled[index]

    def __len__(self) -> int:
        while not self.reply.over(self.row):
            self.reply.pull()
        return len(self.reply.positions[self.row])

    def known_length(self) -> int | None:
        """The path's length once its end has arrived, else None (this does not wait)."""
        return len(self.reply.positions[self.row]) if self.reply.over(self.row) else None

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.reply.release()


def _count_of(value: object) -> int:
    return value if isinstance(value, int) and value > 0 else 0
