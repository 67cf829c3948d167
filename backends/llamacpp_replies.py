"""Reading llama-server's replies: `/completion`'s candidates in both shapes, and what
`/props`, `/tokenize` and `/v1/models` say.

The current shape, `completion_probabilities: [{id, token, bytes, logprob, top_logprobs:
[...]}]` (token bytes kept, so split UTF-8 characters join), and the pre-Dec-2024
`[{content, probs: [{tok_str, prob}]}]`, whose token strings the caller maps back to ids
(`old_id`, with `/tokenize`). A reply is one result or a list of them, put in `index`
order; a stream's events are gathered into the same results. A position the server merged
(several tokens shown as one character) ends a chain; a sample's tokens, their log-probs
and the server's timings are read here too.

Every field is checked where it is read (`backends.replies`): a token id must lie in the
vocabulary, a log-probability must be finite (-inf candidates are dropped), and a wrong
shape is an error naming the field.

Owns: the shape of a reply. Not: requests or slots (`backends.llamacpp`), asking the
tokenizer (`backends.llamacpp_tokens`), wording of HTTP errors (`backends.http`).
"""

from __future__ import annotations

from collections.abc import Callable

from backends import replies
from backends.base import Candidate, Continuation, Positions

FA_HINT = "null probabilities: restart llama-server without -fa (flash attention)"

OldId = Callable[[str], int]  # a pre-Dec-2024 token string's id


def chain_of(
    result: dict, k: int, error: replies.Error, vocab_size: int | None, old_id: OldId
) -> Positions:
    """The positions of a greedy path, up to the first the server merged away.

    While generated text ends inside a UTF-8 character the server holds back that
    position's probabilities and later reports only the character's last token, its
    `bytes` being the whole character. The chain stops before such a merge.
    """
    positions = result.get("completion_probabilities")
    if not positions and count_of(result.get("tokens_predicted")) > 0:
        return []
    if not (isinstance(positions, list) and positions):
        raise error("unexpected reply: no completion_probabilities: does this server "
                    "support n_probs?")  # fmt: skip
    found = []
    for j, position in enumerate(positions):
        what = f"/completion completion_probabilities[{j}]"
        replies.of_type(position, dict, error, what)
        if _merged(position):
            break
        found.append(_position(position, k, what, error, vocab_size, old_id))
    return found


def _position(
    position: dict, k: int, what: str, error: replies.Error, vocab_size: int | None, old_id: OldId
) -> list[Candidate]:
    if "top_logprobs" in position:
        key = "top_logprobs"
        read = lambda o, at: current(o, at, error, vocab_size)  # noqa: E731
    elif "probs" in position:
        key = "probs"
        read = lambda o, at: _old(o, at, error, old_id)  # noqa: E731
    else:
        raise error("unknown completion_probabilities shape")
    entries = replies.of_type(position[key] or [], list, error, f"{what}.{key}")
    options = [read(o, f"{what}.{key}[{i}]") for i, o in enumerate(entries)]
    options = [o for o in options if o is not None]  # -inf: ruled out by the model
    if not options:
        raise error("unexpected reply: an empty list of probabilities")
    options.sort(key=lambda c: -c.logprob)
    return options[:k]


def current(
    option: object, what: str, error: replies.Error, vocab_size: int | None
) -> Candidate | None:
    """A candidate of the current shape (None: its log-prob is -inf)."""
    replies.of_type(option, dict, error, what)
    if option.get("logprob") is None or "id" not in option:
        raise error(FA_HINT)
    logprob = replies.logprob(option["logprob"], error, f"{what}.logprob")
    token_id = replies.token_id(option["id"], error, f"{what}.id", vocab_size)
    raw = replies.token_bytes(option.get("bytes"), error, f"{what}.bytes")
    token = replies.of_type(option.get("token", ""), str, error, f"{what}.token")
    text = raw.decode("utf-8", errors="replace") if raw is not None else token
    return None if logprob is None else Candidate(token_id, text, logprob, raw)


def _old(option: object, what: str, error: replies.Error, old_id: OldId) -> Candidate | None:
    """Pre-Dec-2024 servers give token strings and probabilities, no ids."""
    replies.of_type(option, dict, error, what)
    prob, text = option.get("prob"), option.get("tok_str")
    if prob is None or text is None:
        raise error(FA_HINT)
    logprob = replies.probability(prob, error, f"{what}.prob")
    text = replies.of_type(text, str, error, f"{what}.tok_str")
    return None if logprob is None else Candidate(old_id(text), text, logprob)


def lifted(
    result: dict,
    top: list[Candidate],
    ids: list[int],
    lift: float,
    error: replies.Error,
    vocab_size: int | None,
) -> list[Candidate]:
    """`ids`' raw log-probs, most likely first, from a reply whose `top_probs` are the top
    of the distribution with `ids` lifted by `lift` (`LlamaCppBackend.top_logprobs_also`),
    put back on the raw scale by the likeliest token of the raw `top` that is not lifted."""
    positions = result.get("completion_probabilities")
    if not isinstance(positions, list) or not positions:
        return []  # a drawn token inside a character: the server held them back
    what = "/completion completion_probabilities[0].top_probs"
    replies.of_type(positions[0], dict, error, "/completion position")
    entries = replies.of_type(positions[0].get("top_probs"), list, error, what)
    shown = {}
    for j, option in enumerate(entries):
        replies.of_type(option, dict, error, f"{what}[{j}]")
        lq = replies.probability(option.get("prob"), error, f"{what}[{j}].prob")
        if lq is not None:
            shown[option.get("id")] = (lq, option)
    asked = set(ids)
    reference = next((c for c in top if c.token_id in shown and c.token_id not in asked), None)
    if reference is None:
        return []
    log_z = reference.logprob - shown[reference.token_id][0]
    extra = []
    for token_id in asked & shown.keys():
        lq, option = shown[token_id]
        logprob = min(0.0, lq + log_z - lift)
        extra.append(current({**option, "logprob": logprob}, what, error, vocab_size))
    extra.sort(key=lambda c: -c.logprob)
    return extra


def continuation(
    result: dict, error: replies.Error, vocab_size: int | None, specials: frozenset[int]
) -> Continuation:
    """A completion's tokens up to the first control token (`specials`), or up to the first
    character the server reported as one entry for several tokens (its log-probs are
    not all known: the sample ends before it). A drawn token's log-prob must be finite."""
    tokens = result.get("tokens")
    positions = result.get("completion_probabilities") or []
    if not isinstance(tokens, list):
        raise error("unexpected reply: no tokens: does it know return_tokens?")
    replies.of_type(positions, list, error, "/completion completion_probabilities")
    ids, logprob, pieces = [], 0.0, []
    for j, (token, position) in enumerate(zip(tokens, positions, strict=False)):
        what = f"/completion completion_probabilities[{j}]"
        token = replies.token_id(token, error, f"/completion tokens[{j}]", vocab_size)
        if token in specials:
            break
        replies.of_type(position, dict, error, what)
        if position.get("id") != token:
            break
        if position.get("logprob") is None:
            raise error(FA_HINT)
        ids.append(token)
        logprob += replies.drawn_logprob(position["logprob"], error, f"{what}.logprob")
        raw = replies.token_bytes(position.get("bytes"), error, f"{what}.bytes")
        text = replies.of_type(position.get("token", ""), str, error, f"{what}.token")
        pieces.append(raw if raw is not None else text.encode("utf-8"))
    text = b"".join(pieces).decode("utf-8", errors="replace")
    return Continuation(tuple(ids), text, logprob)


def sampling_usage(results: list[dict]) -> dict[str, int]:
    """Prompt and drawn tokens of one request's completions, from the server's timings.
    The prompt is read once, for the first; the others copy its state and repeat its
    prompt figures."""
    timings = [r.get("timings") if isinstance(r.get("timings"), dict) else {} for r in results]
    prompt = count_of(timings[0].get("prompt_n"))
    drawn = sum(count_of(t.get("predicted_n")) for t in timings)
    return {"model_tokens": prompt + drawn, "prefill_tokens": prompt}


def _piece_bytes(piece: object, error: replies.Error, what: str) -> bytes:
    """A `/tokenize` piece: text, or a list of byte values where it is not valid UTF-8."""
    if isinstance(piece, list):
        return replies.token_bytes(piece, error, what)
    return replies.of_type(piece, str, error, what).encode("utf-8")


def _merged(position: dict) -> bool:
    """Whether an entry stands for several tokens: its bytes are not its own token's, nor
    the part of them before a stop string (the server cuts the text of a stop token)."""
    options = position.get("top_logprobs")
    options = options if isinstance(options, list) else []
    own = next(
        (o for o in options if isinstance(o, dict) and o.get("id") == position.get("id")), None
    )
    if own is None:
        return False
    mine, shown = own.get("bytes") or [], position.get("bytes") or []
    return not (isinstance(mine, list) and isinstance(shown, list) and mine[: len(shown)] == shown)


def ordered(reply: object, asked: int, error: replies.Error) -> list[dict]:
    """A `/completion` reply's results (one object, or a list of them) in `index` order:
    at most `asked`, each index (its place where absent) naming a distinct prompt."""
    results = reply if isinstance(reply, list) else [reply]
    if len(results) > asked:
        raise error(f"unexpected reply: /completion gave {len(results)} results, {asked} asked")
    indices = [
        _index(replies.of_type(result, dict, error, f"/completion result {i}").get("index", i),
               asked, error, f"/completion result {i} index")
        for i, result in enumerate(results)
    ]  # fmt: skip
    if len(set(indices)) < len(indices):
        raise error(f"unexpected reply: /completion results share an index ({indices})")
    return [result for _, result in sorted(zip(indices, results, strict=True))]


def _index(value: object, asked: int, error: replies.Error, what: str) -> int:
    """A result's `index`: which of the `asked` prompts (or completions) it answers."""
    replies.of_type(value, int, error, what)
    if not 0 <= value < asked:
        raise replies.wrong(error, what, value, f"an index in 0..{asked - 1}")
    return value


def gathered(events: list, asked: int, error: replies.Error) -> list[dict]:
    """A stream's events made into one result per prompt, as a whole reply gives them:
    its positions in order, its generated tokens, and the final event's fields."""
    results: dict[int, dict] = {}
    for event in events:
        if not isinstance(event, dict):
            continue
        index = _index(event.get("index", 0), asked, error, "/completion (streamed) index")
        result = results.setdefault(index, {"completion_probabilities": [], "tokens": []})
        for key in ("completion_probabilities", "tokens"):
            part = event.get(key)
            result[key] += part if isinstance(part, list) else []
        if event.get("stop"):
            result.update({key: event[key] for key in ("timings", "id_slot", "tokens_cached",
                           "index", "tokens_predicted") if key in event})  # fmt: skip
    return [results[i] for i in sorted(results)]


def window_of(props: dict, error: replies.Error) -> int | None:
    """The model's window, from `/props` (`n_ctx`, in its default generation settings or
    at its top), where the server says."""
    settings = props.get("default_generation_settings")
    settings = settings if isinstance(settings, dict) else {}
    n_ctx = settings.get("n_ctx") or props.get("n_ctx")
    return replies.count(n_ctx or None, error, "/props n_ctx", least=replies.MIN_CONTEXT)


def n_vocab(reply: object, error: replies.Error) -> int | None:
    """The vocabulary's size from a `/v1/models` reply, where it names one (meta.n_vocab)."""
    models = reply.get("data") if isinstance(reply, dict) else None
    first = models[0] if isinstance(models, list) and models else None
    meta = first.get("meta") if isinstance(first, dict) else None
    n_vocab = meta.get("n_vocab") if isinstance(meta, dict) else None
    return replies.count(n_vocab, error, "/v1/models meta.n_vocab")


def token_ids(reply: object, error: replies.Error, vocab_size: int | None) -> list[int]:
    """The ids of a `/tokenize` reply (plain ids, or objects with an `id`)."""
    tokens = replies.field(reply, "tokens", list, error, "/tokenize")
    return [
        replies.token_id(
            t.get("id") if isinstance(t, dict) else t,
            error,
            f"/tokenize tokens[{i}].id",
            vocab_size,
        )
        for i, t in enumerate(tokens)
    ]


def token_pieces(reply: object, ids: list[int], error: replies.Error) -> list[bytes] | None:
    """Each token's bytes from a `/tokenize` reply `with_pieces`, or None where its ids are
    not `ids` (the text tokenized otherwise) or it gave no pieces."""
    tokens = reply.get("tokens") if isinstance(reply, dict) else None
    pieced = isinstance(tokens, list) and all(isinstance(t, dict) for t in tokens)
    if not (pieced and [t.get("id") for t in tokens] == list(ids)):
        return None
    return [
        _piece_bytes(t.get("piece"), error, f"/tokenize tokens[{i}].piece")
        for i, t in enumerate(tokens)
    ]


def timings_of(result: dict) -> tuple[int, int]:
    """The prompt tokens a result's request read and the tokens it predicted (its
    `timings`' prompt_n and predicted_n; 0 where absent)."""
    found = result.get("timings")
    found = found if isinstance(found, dict) else {}
    return count_of(found.get("prompt_n")), count_of(found.get("predicted_n"))


def count_of(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0
