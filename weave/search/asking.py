"""What one depth of the search asks its backend: each live beam's candidates.

A live beam (`Beam`) is a node of the token tree and the greedy chain it follows, if
any. Each depth, `Asker.candidates` gets every live beam's top-k in as few calls as it
can:
- a beam on a chain takes its next position from it (a streamed chain may still be
  arriving); new beams, and those whose chain ran out, are asked together: for greedy
  chains where they pay (`Backend.greedy_chains`, as far as the beam may live), else for
  one position;
- a beam still inside the text typed after the story's last token boundary asks
  `heal_k` candidates and keeps those that agree with it (`weave.search.healing`);
- under a bias, the ids its state names are asked beside the top-k where the backend
  can weigh them (`Backend.top_logprobs_also`) and the candidates reweighed
  (`weave.story.bias`); while a phrase is favoured, no chain is asked for.
How many candidates a beam can use (`Asker.k`) follows the rule's cutoff and the room.

Owns: the asking. Not: choosing among the candidates, the guard's screening, growing the
tree or ending beams (`weave.search.beams`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from backends.base import Backend, Candidate, Chain
from weave.search.healing import Constraint, narrowed
from weave.search.params import MAX_CANDIDATES, STOP_CHARS, SearchParams
from weave.search.tree import TreeNode
from weave.story.bias import BiasState, TokenBias, reweighed
from weave.story.guard import GuardState

GUARD_SPARE = 3  # candidates asked beyond the rule's under a guard, to fill pruned room
SPECIAL_SPARE = 2  # the most candidates asked beyond the rule's for control tokens skipped
MOST_ASKED = MAX_CANDIDATES + SPECIAL_SPARE + GUARD_SPARE  # the most one beam's step asks
UNREACHED = (
    "{backend} gives the log-probabilities of its top candidates only: a favoured phrase "
    "is favoured where the model ranks its first token among them, and never brought in "
    "from below"
)


@dataclass(eq=False)
class Beam:
    """A live beam: its last node and the greedy chain it is on, if any: the top-k at the
    positions after `taken` of them are the beam's next (a backend may still be making
    them: indexing a chain waits for the positions it needs)."""

    node: TreeNode
    chain: Chain | None = None
    taken: int = 0
    state: GuardState | None = None  # where the beam stands for the guard, if any
    free: int = 0  # its tokens that reach past the typed text (all, when nothing was typed)
    bias: BiasState | None = None  # where the beam stands for the bias, if any
    weights: dict[int, float] = field(default_factory=dict)  # its bias at this depth
    greedy: int | None = None  # the model's top token at this depth (a chain went on by it)


def inside_typed(held: Constraint | None, node: TreeNode) -> bool:
    """Whether the beam ending at `node` has not yet spelled all the typed text (`held`)."""
    return held is not None and held.active(node.piece_path())


def _next_of(beam: Beam) -> list[Candidate] | None:
    """The beam's next top-k from its chain (waiting for it), or None where it ran out."""
    if beam.chain is None:
        return None
    try:
        top = beam.chain[beam.taken]
    except IndexError:
        return None
    beam.taken += 1
    return top


def _ran_out(beam: Beam) -> bool:
    """Whether the beam's chain is known to hold no next position, without waiting: a
    chain still arriving tells its length once its end has come (`known_length`)."""
    if beam.chain is None:
        return False
    length = beam.chain.known_length()
    return length is not None and beam.taken >= length


def drop_chain(beam: Beam) -> None:
    """Let go of the beam's chain: a backend may stop making positions no beam will use."""
    if beam.chain is not None:
        beam.chain.close()
    beam.chain = None


class Asker:
    """One search's asking: its backend, context and parameters, the typed text a beam is
    held to (`held`), whether a guard screens the candidates (it prunes some: a few more
    are asked), the guard's list's bias, and whether the backend weighs the ids a bias
    names (`reach`, learnt on the first ask)."""

    def __init__(self, backend: Backend, context: list[int], params: SearchParams,
                 held: Constraint | None, guarded: bool, bias: TokenBias | None):  # fmt: skip
        self.backend = backend
        self.context = context
        self.params = params
        self.held = held
        self.guarded = guarded
        self.bias = bias  # the guard's list's bias, if it has one
        self.reach: bool | None = None  # whether the backend weighs the ids a bias names

    def k(self, free: int) -> int:
        """How many candidates a beam `free` tokens past the typed text can use."""
        room = self.params.max_suggestions
        limit = self.params.split_limit or room
        cutoff = self.params.cutoff_at(free)
        if self.params.rule == "relative":
            if cutoff > 1:
                limit = 1
        elif cutoff * (MAX_CANDIDATES + 1) > 1:  # at most 1/cutoff tokens can clear it
            limit = min(limit, int(1 / cutoff) + 1)
        # Control tokens are skipped, and a guard prunes some: ask for a few more.
        special = min(len(self.backend.special_token_ids), SPECIAL_SPARE)
        spare = special + (GUARD_SPARE if self.guarded else 0)
        return max(1, min(limit, room, MAX_CANDIDATES)) + spare

    def candidates(self, live: list[Beam], finished: int) -> list[list[Candidate]]:
        """Each live beam's top-k, `finished` beams having ended: a beam held to the typed
        text its allowed candidates (`_narrowed`), the others theirs (`_free`); under a
        bias, reweighed."""
        for beam in live:
            beam.weights = self.bias.weights_at(beam.bias) if self.bias is not None else {}
        held = [beam for beam in live if self._held(beam)]
        free = [beam for beam in live if not self._held(beam)]
        found = dict(zip(free, self._free(free, finished), strict=True)) if free else {}
        for beam in free:
            options = found[beam]
            beam.greedy = options[0].token_id if options else None
            if beam.weights:
                found[beam] = reweighed(options, beam.weights)
        found.update(self._narrowed(held))
        return [found[beam] for beam in live]

    def _held(self, beam: Beam) -> bool:
        return inside_typed(self.held, beam.node)

    def _narrowed(self, held: list[Beam]) -> dict[Beam, list[Candidate]]:
        """The candidates of beams still inside the typed text that agree with it, in one
        call asking `heal_k` of each (one position: a greedy chain would follow a token
        the constraint may refuse); under a bias, narrowed first, then reweighed."""
        if not held:
            return {}
        assert self.held is not None
        contexts = [self.context + beam.node.token_ids() for beam in held]
        k = self.k(0)
        answers = self._ask(contexts, max(k, self.backend.heal_k), held)
        found = {}
        for beam, options in zip(held, answers, strict=True):
            beam.greedy = None  # no chain
            done = beam.node.piece_path()
            if beam.weights:
                found[beam] = reweighed(narrowed(self.held, done, options, len(options)),
                                        beam.weights)[:k]  # fmt: skip
            else:
                found[beam] = narrowed(self.held, done, options, k)
        return found

    def _free(self, live: list[Beam], finished: int) -> list[list[Candidate]]:
        """Each free beam's top-k: new beams are asked first (a backend that streams its
        chains answers while the server still makes the older ones' next positions),
        then the older beams take theirs from their chains. A beam whose chain is known
        to have run out is asked with the new ones; one found out only on reading (a
        streamed chain that ended unannounced) is asked again after."""
        for beam in live:
            if _ran_out(beam):
                drop_chain(beam)
        found = self._fill([beam for beam in live if beam.chain is None], len(live), finished)
        ran_out = []
        for beam in live:
            if beam in found:
                continue
            top = _next_of(beam)
            if top is None:
                drop_chain(beam)
                ran_out.append(beam)
            else:
                found[beam] = top
        found.update(self._fill(ran_out, len(live), finished))
        return [found[beam] for beam in live]

    def _fill(self, needy: list[Beam], live: int, finished: int) -> dict[Beam, list[Candidate]]:
        """Ask the backend about `needy` beams (of `live`, `finished` having ended) in one
        call: greedy chains where they pay (each beam keeps its chain, as long as
        `_chain_length`), else the top-k here. Returns each beam's top-k. While a phrase
        is favoured, and the backend can weigh the ids it names, no chain: a chain's later
        positions would need the ids the bias names there, which depend on the path the
        server has not made yet."""
        if not needy:
            return {}
        contexts = [self.context + beam.node.token_ids() for beam in needy]
        lengths = [self._chain_length(beam, live, finished) for beam in needy]
        favoured = self.bias is not None and self.bias.favours and self.reach is not False
        if self.params.use_chains is not False and max(lengths) > 1 and not favoured:
            least = min(beam.free for beam in needy)
            k = max(self.k(f) for f in range(least, self.params.max_depth))
            stops = tuple(STOP_CHARS) if self.params.auto_stop else ()
            chains = self.backend.greedy_chains(contexts, k, lengths, stops=stops)
            if chains is not None:
                for beam, chain in zip(needy, chains, strict=True):
                    beam.chain, beam.taken = chain, 0
                return {beam: _next_of(beam) or [] for beam in needy}
        answers = self._ask(contexts, max(self.k(b.free) for b in needy), needy)
        return dict(zip(needy, answers, strict=True))

    def _ask(self, contexts: list[list[int]], k: int, beams: list[Beam]) -> list[list[Candidate]]:
        """Each context's top-k, and beside it the log-probs of the ids its beam's bias
        names where the backend can weigh them (once it said it cannot, never asked again)."""
        if self.reach is not False and any(beam.weights for beam in beams):
            asked = [sorted(beam.weights) for beam in beams]
            answers = self.backend.top_logprobs_also(contexts, k, asked)
            self.reach = answers is not None
            if answers is not None:
                return answers
        return self.backend.top_logprobs(contexts, k)

    def notes(self) -> tuple[str, ...]:
        """What the writer should know of this search: that a favoured phrase could not be
        brought in from below the backend's top candidates."""
        if self.reach is False and self.bias is not None and self.bias.favours:
            return (UNREACHED.format(backend=self.backend.name),)
        return ()

    def _chain_length(self, beam: Beam, live: int, finished: int) -> int:
        """How far along its greedy path a beam is worth asking about: to its depth (a
        beam going on past it to reach a word asks again); under v0.3's rule, not far
        past where the cap is likely to end it. There, once finished plus live beams reach
        the cap, every beam takes its top token and ends, so positions asked beyond would
        be computed for nothing; the room left lasts about room / live depths if each beam
        splits once a depth, and the depth that reaches the cap still needs one more
        position. (A path asked too short only costs asking again.)"""
        remaining = max(1, self.params.max_depth - beam.free)
        if self.params.rule != "v03":
            return remaining
        room = self.params.max_suggestions - finished - live
        return 1 if room <= 0 else min(remaining, 1 + -(-room // max(live, 1)))
