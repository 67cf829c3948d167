"""Reading the replies of vLLM's one-position requests: a prompt's own log-probs
(`prompt_logprobs`, for the alternatives at each of its tokens) and the log-probs of
ids a request names (`logprob_token_ids`, for a bias's ids).

Every field is checked where it is read (`backends.replies`): a token id must lie below
`id_bound`, a log-probability must be finite (-inf: left out), and a wrong shape is an
error naming the server and the field. Candidates come without text: the backend spells
them (`backends.vllm_texts`).

Owns: the shape of those replies. Not: the requests or their usage (`backends.vllm`),
a streamed reply's chains (`backends.vllm_chains`).
"""

from __future__ import annotations

import re

from backends import replies
from backends.base import Candidate
from backends.http import JsonClient, expect
from backends.vllm_chains import ordered_choices, token_id

PROMPT_KEY = re.compile(r"^(?:token_id:)?(\d+)$")  # prompt_logprobs keys: ids, maybe prefixed

Scored = tuple[list[Candidate], float | None]  # a position's top-k, and its own token's log-prob


def prompt_logprobs(
    reply: object, ids: list[int], start: int, k: int, client: JsonClient, id_bound: int
) -> list[Scored]:
    """For each position start.. of the prompt `ids`, its top-k (without text) and the
    log-prob of its own token, from a reply of one choice with `prompt_logprobs`."""
    choices = reply.get("choices") if isinstance(reply, dict) else None
    expect(isinstance(choices, list) and len(choices) == 1 and isinstance(choices[0], dict),
           client, "expected one choice")  # fmt: skip
    positions = choices[0].get("prompt_logprobs")
    expect(isinstance(positions, list) and len(positions) == len(ids), client,
           "no prompt_logprobs for every prompt token")  # fmt: skip
    return [
        _prompt_position(positions[i], ids[i], k, client, id_bound) for i in range(start, len(ids))
    ]


def _prompt_position(entry: object, own: int, k: int, client: JsonClient, id_bound: int) -> Scored:
    """(top-k without text, log-prob of the prompt's own token `own`) from one entry:
    {id: {logprob, rank, decoded_token}}, the prompt's token among them. A -inf
    log-prob leaves its token out of the top-k (the own token's is then unknown)."""
    expect(isinstance(entry, dict) and entry, client, "an empty prompt_logprobs entry")
    found: dict[int, float | None] = {}
    for key, value in entry.items():
        match = PROMPT_KEY.match(str(key))
        expect(match is not None and isinstance(value, dict) and "logprob" in value,
               client,
               f"a prompt_logprobs entry {key!r} without an id and a log-prob")  # fmt: skip
        what = f"prompt_logprobs[{key!r}]"
        token = replies.token_id(int(match.group(1)), client.error, what, id_bound)
        found[token] = replies.logprob(value["logprob"], client.error, f"{what}.logprob")
    expect(own in found, client, "prompt_logprobs without the prompt's own token")
    finite = [(i, lp) for i, lp in found.items() if lp is not None]
    top = sorted(finite, key=lambda item: (-item[1], item[0]))[:k]
    return [Candidate(i, "", lp) for i, lp in top], found[own]


def named_logprobs(
    reply: object, prompts: int, client: JsonClient, id_bound: int
) -> list[dict[int, float]]:
    """Each of `prompts` prompts' next-token log-probs of the ids its request named
    ({id: log-prob}, -inf left out), from a reply of one choice a prompt."""
    choices = reply.get("choices") if isinstance(reply, dict) else None
    expect(isinstance(choices, list) and len(choices) == prompts, client,
           f"expected {prompts} choices")  # fmt: skip
    out = []
    for i, choice in enumerate(ordered_choices(choices, client)):
        logprobs = choice.get("logprobs")
        positions = logprobs.get("top_logprobs") if isinstance(logprobs, dict) else None
        expect(isinstance(positions, list) and len(positions) == 1, client,
               f"choices[{i}] without one top_logprobs entry")  # fmt: skip
        entry = replies.of_type(positions[0], dict, client.error, "top_logprobs[0]")
        weighed = {}
        for key, value in entry.items():
            logprob = replies.logprob(value, client.error, f"top_logprobs[{key!r}]")
            if logprob is not None:
                weighed[token_id(key, client, id_bound)] = logprob
        out.append(weighed)
    return out
