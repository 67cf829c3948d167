"""Token text for the vLLM backend: each candidate's text, looked up from the server.

vLLM's API gives no token bytes: it decodes each token alone, and a token holding part
of a UTF-8 character decodes to U+FFFD. Text comes from `/detokenize`, many ids in one
request (joined by a separator token and split again), a block of VOCAB_BLOCK ids at a
time (the whole 49,152-token vocabulary here is three blocks, ~45 ms and ~210 kB each):
a thread started with `TokenTexts` fetches every block in turn until one ends past the
vocabulary, so a search rarely waits for one, and an id not yet known brings its whole
block. Where a context ends inside a character, a candidate's text is the difference
between decoding the context's open run of tokens with and without it, so a character
split over tokens is held back until its last byte arrives and then appears whole, on
the token that completes it, as an incremental detokenizer shows it (`raw` is that
text's UTF-8: the beam's joined pieces decode to exactly what the server decodes for its
ids, less an unfinished last character).

Look-ups count in `BackendStats` per thread, as a request does: those made on a
searching thread count in its stats; those made ahead on this module's own thread do not.

Owns: the texts known (each id alone, open runs), the look-ups, the ahead-of-time thread.
Not: the /detokenize request itself (the backend's `detokenize`), nor which tokens are
control tokens (it reports the ids that decode to nothing).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from backends.base import BackendStats, Candidate, Positions
from backends.errors import BackendError

log = logging.getLogger(__name__)

SEPARATOR = "\x1f"  # ASCII unit separator: its byte token never merges with a neighbour
REPLACEMENT = "\ufffd"  # what a lone token holding part of a character decodes to
MAX_RUN = 8  # tokens kept in an open run (a character has at most 4 bytes)
PARALLEL_LOOKUPS = 8  # /detokenize calls at once when the server has no separator token
VOCAB_BLOCK = 16384  # ids whose texts one look-up brings (ids past the vocabulary: "")
MAX_VOCAB = 1 << 20  # no served vocabulary is this large (the largest are ~262k tokens)

Ids = tuple[int, ...]


def separator_token(
    tokenize: Callable[[str], list[int]], detokenize: Callable[[list[int]], str], url: str
) -> int | None:
    """The token that is the separator character alone (the last of its tokenization:
    SentencePiece puts a word-start piece first), or None: then token text is looked
    up one id per request, in parallel."""
    ids = tokenize(SEPARATOR)
    if ids and detokenize(ids[-1:]) == SEPARATOR:
        return ids[-1]
    log.info("vLLM at %s: no separator token; token text is looked up per id", url)
    return None


class TokenTexts:
    """Texts of a server's tokens, looked up through `detokenize` (one /detokenize round
    trip per call), joined by `separator` where there is one; ids below `id_bound` only
    (the vocabulary's size where the server says it). Ids found to decode to nothing
    are passed to `learn_controls`; round trips are added to `stats`. Starts fetching
    every block ahead, on a thread of its own, as it is made."""

    def __init__(
        self,
        detokenize: Callable[[list[int]], str],
        separator: int | None,
        *,
        stats: BackendStats,
        learn_controls: Callable[[set[int]], None],
        id_bound: int = MAX_VOCAB,
    ):
        self._detokenize, self._separator, self._id_bound = detokenize, separator, id_bound
        self._stats, self._learn_controls = stats, learn_controls
        self._pieces: dict[int, str] = {}  # each id decoded alone
        self._run_texts: dict[Ids, str] = {}  # open runs decoded, with and without a token
        self._lookups = threading.Lock()  # one look-up at a time: a search waits for one ahead
        threading.Thread(target=self._prefetch, name="lloom-vllm-texts", daemon=True).start()

    def spell(self, contexts: list[list[int]], chains: list[Positions]) -> list[Positions]:
        """Give every candidate its text: look-ups only for ids never seen (a block at a
        time) and for the rare open runs (a context ending mid-character)."""
        ids = {c.token_id for chain in chains for top in chain for c in top}
        ids.update(i for ctx in contexts for i in ctx[-MAX_RUN:])
        self._look_up_pieces(ids)
        steps = [
            list(zip(chain, self._runs(ctx, chain), strict=True))
            for ctx, chain in zip(contexts, chains, strict=True)
        ]  # (top-k, open run before it) at every position
        runs = {run for chain in steps for _, run in chain if run}
        runs |= {run + (c.token_id,) for chain in steps for top, run in chain if run for c in top}
        todo = sorted(run for run in runs if run not in self._run_texts)
        if todo:
            self._run_texts.update(zip(todo, self._decode_each(todo), strict=True))
        return [[[self._spelled(run, c) for c in top] for top, run in chain] for chain in steps]

    def _runs(self, context: list[int], chain: Positions) -> list[Ids]:
        """The open run before each position of a chain: the trailing tokens whose text
        ends inside a character (empty almost always)."""
        run: Ids = ()
        for i in context[-MAX_RUN:]:
            run = self._extended(run, i)
        out = []
        for top in chain:
            out.append(run)
            run = self._extended(run, top[0].token_id)
        return out

    def _extended(self, run: Ids, token_id: int) -> Ids:
        if self._pieces[token_id].endswith(REPLACEMENT):
            return (run + (token_id,))[-MAX_RUN:]
        return ()

    def _spelled(self, run: Ids, candidate: Candidate) -> Candidate:
        """The text `candidate` adds after `run`: complete characters only."""
        if run:
            before = _settled(self._run_texts[run])
            whole = self._run_texts[run + (candidate.token_id,)]
            after = _settled(whole)
            text = after[len(before) :] if after.startswith(before) else after
        else:
            whole = self._pieces[candidate.token_id]
            text = _settled(whole)
        return Candidate(candidate.token_id, text, candidate.logprob, text.encode("utf-8"),
                         open=whole.endswith(REPLACEMENT))  # fmt: skip

    def _prefetch(self) -> None:
        """Every token's text, a block at a time from the commonest (a vocabulary numbers
        them first), looked up while the backend waits for its first search or alongside
        that search's first request, until a block ends past the vocabulary (ids there
        have no text). A failure is left to a search's own look-up, which reports it."""
        try:
            for start in range(0, self._id_bound, VOCAB_BLOCK):
                self._look_up_pieces({start})
                if not self._pieces.get(start + VOCAB_BLOCK - 1):
                    return
        except BackendError as e:
            log.debug("token texts not fetched ahead: %s", e)

    def _look_up_pieces(self, ids: set[int]) -> None:
        """Texts for the ids not seen before, with every other id of their blocks (a
        vocabulary is numbered from 0; its end is not advertised), in one request."""
        if all(i in self._pieces for i in ids):
            return
        with self._lookups:
            self._look_up_blocks(ids)

    def _look_up_blocks(self, ids: set[int]) -> None:
        unseen = sorted(i for i in ids if i not in self._pieces)
        if not unseen:
            return
        blocks = sorted({i // VOCAB_BLOCK for i in unseen})  # ids are < id_bound: checked
        wanted = [
            i
            for block in blocks
            for i in range(block * VOCAB_BLOCK, min((block + 1) * VOCAB_BLOCK, self._id_bound))
            if i not in self._pieces and i != self._separator
        ]
        texts = self._decode_joined([(i,) for i in wanted]) if self._separator is not None else None
        if texts is None:  # a token in the block holds the separator: only the ids needed
            wanted = unseen
            texts = self._decode_each([(i,) for i in wanted])
        self._pieces.update(zip(wanted, texts, strict=True))
        if self._separator is not None:
            self._pieces[self._separator] = SEPARATOR
        # A server that skips control tokens when decoding shows them as nothing (and so
        # are ids past the vocabulary, which no reply names).
        empty = {i for i in wanted if not self._pieces[i]}
        if empty:
            self._learn_controls(empty)

    def _decode_each(self, sequences: list[Ids]) -> list[str]:
        """Each sequence's text: in one request where the separator allows, else one
        request per sequence, in parallel."""
        texts = self._decode_joined(sequences) if self._separator is not None else None
        if texts is None:
            with ThreadPoolExecutor(PARALLEL_LOOKUPS) as pool:
                texts = list(pool.map(lambda s: self._detokenize(list(s)), sequences))
            self._stats.add(forward_calls=len(sequences))
        return texts

    def _decode_joined(self, sequences: list[Ids]) -> list[str] | None:
        """One /detokenize for all: separator, seq, separator, seq, ..., separator.
        None when the text does not split back into as many parts."""
        joined = [self._separator]
        for sequence in sequences:
            joined += [*sequence, self._separator]
        parts = self._detokenize(joined).split(SEPARATOR)
        self._stats.add(forward_calls=1)
        if len(parts) != len(sequences) + 2 or parts[0] or parts[-1]:
            return None  # a token held the separator character
        return parts[1:-1]


def _settled(text: str) -> str:
    """Text less a trailing incomplete character (shown as U+FFFD)."""
    return text.rstrip(REPLACEMENT)
