"""Which llama-server slot each prompt goes to, and in what order.

llama-server's slots share no KV cache: a prompt is compared with what its slot last held
and only the part after their common prefix is evaluated (`cache_prompt`); a prompt that
lands on a slot holding another beam re-reads the story and the path that differ. So the
client keeps its own record of what each slot holds (a prompt and the tokens generated
after it, less the last, which is sampled but never evaluated) and plans each batch:

- every prompt goes to the slot whose held tokens share the longest prefix with it, where
  only its new tokens are evaluated; a story no slot knows goes to the slot least
  recently used, so several stories (or page sessions) each keep a slot of their own;
- the prompts for one slot travel in one request pinned to it (`id_slot`), which the
  server runs one after another in the order given: each next the one that costs least
  to read by then.

What a prompt costs is not only what its slot holds. The server keeps a prompt cache in
host memory (`--cache-ram`, 8 GiB by default): when a pinned prompt shares less than half
of what its slot holds, the slot's state is saved there and the saved state that fits the
prompt best is restored in its place (`restored` follows the server's rule). So a slot
can go back to a path it left, and the client models the cache as it models the slots:
an order that switches paths where the server restores one reads less. The model is a
belief: other clients, and slots the server saves while idle, change the cache unseen,
and a server without one (`--cache-ram 0`) is detected from its counts.

Measured with bench/bench_llamacpp.py (server tokens against the story once plus one per
tree node, `-np 4`, the three starting stories): ordering by shared prefix alone, 1.58x,
1.59x, 1.34x; with the prompt cache modelled, 1.43x, 1.59x, 1.34x. The second story does
not gain: at 17 tokens it is most of every prompt, so a switch never falls under half of
what the slot holds and the server never consults its cache. What remains is a slot
holding one path at a time: a depth's beams that diverged early re-read their paths from
where they part. A search stays in one slot. Replaying logged searches against four
slots, spreading prompts over idle slots cost more tokens (every other slot must first
read the story and the beam's path: reading is how a slot gets a prefix, unless the
client copies one, below), and even placing each prompt with hindsight, in the slot that
made the rest of the search cheapest, came within about 5% of one slot. Asking for the
chains of likely splits one depth early, while their parent still sits in the slot, cost
more than it saved (1.48x, 1.76x, 1.36x): the depth's other prompts come between, and
splits the cap then crowds out are read for nothing.

Wall time on a CPU server (the embedded model on 2 cores) is the server's own: its
prompt and decode timings came to 0.92 s of a 0.98 s search. A decode took ~9.5 ms for
one token and ~3.5 ms more for each further token it reads (15.7 ms for 2, 25 ms for 5),
so both the tokens and the decode calls count. Both this client and v0.3 make about one
decode per tree node that has children (68 and 59 on the first story); this client reads
126 tokens against v0.3's 204 and saves its per-request overhead: 1.4-1.6x on loopback.
v0.3's 59 are already the fewest one slot can make (one per node with children), so what
a client in one slot can gain on it is bounded: bench_llamacpp.py replays each story's
tree at that least (the story once, then each node with children alone, depth first, one
token a decode), and v0.3's wall time came to 1.7-2.2x that server time (1.87x and 2.04x
over the three stories in two runs).

Fewer decode calls would need beams decoded side by side in several slots, each holding
its beam's path. A slot can be given another's state without reading it: the server's
slot save and restore (`--slot-save-path`; `POST /slots/N?action=save|restore`, ~3 ms a
round trip for a story's KV) copy it, and the copy holds (the next prompt reads only
its new token). `n_cmpl`'s children copy their parent's state too, but clear it when they
finish; the prompt cache (`--cache-ram`) moves a state to one slot, only for a pinned
slot that holds something sharing under half with the prompt. But a decode costs more
for every row it batches: chains side by side in 2, 3 and 4 slots ran 1.1x, 1.3x and
1.5x faster than in turn (bench_llamacpp.py's last section), and a search's depths hold
one or two new beams until its last ones. Spreading each depth's new beams over slots
copied that way (measured on the bench's three stories, 2026-11-24) ran 1.41x v0.3
against 1.45x staying in one slot, its tokens 1.41x the least against 1.47x. So copies
are not used, and no server flag beyond the defaults is needed.

Owns: the record of slot contents and the plan. Not: requests (`backends.llamacpp`).
"""

from __future__ import annotations

import itertools
import threading
from dataclasses import dataclass

Tokens = tuple[int, ...]
SIMILAR = 0.1  # llama-server's --slot-prompt-similarity default
MISSES = 3  # foreseen restores that never showed before the prompt cache is thought absent
SAVED = 64  # saved states remembered: a bound on the client's memory; the server keeps more


@dataclass(frozen=True)
class SlotWork:
    """Prompts (their indices, in the order to send them) for one slot; slot None: any."""

    slot: int | None
    rows: list[int]


class SlotBook:
    """What each of a server's `slots` holds, as far as this client knows (0 slots: the
    server did not say, and the server picks)."""

    def __init__(self, slots: int):
        self.held: list[Tokens] = [() for _ in range(slots)]
        self.saved: list[Tokens] | None = []  # the server's prompt cache as far as known
        self._restores = [0, 0]  # restores foreseen that the server's counts [missed, showed]
        self._used = [0] * slots  # when each slot was last planned, for least-recently-used
        self._clock = itertools.count(1)
        self._lock = threading.Lock()  # page sessions share one backend

    def plan(self, prompts: list[list[int]]) -> list[SlotWork]:
        """Each prompt to the slot that can reuse most of it; one work list per slot used."""
        if not self.held:
            return [SlotWork(None, list(range(len(prompts))))]
        with self._lock:
            rows: dict[int, list[int]] = {}
            for i, prompt in enumerate(prompts):
                slot = max(
                    range(len(self.held)),
                    key=lambda s: (shared(prompt, self.held[s]), -self._used[s]),
                )
                rows.setdefault(slot, []).append(i)
            for slot in rows:
                self._used[slot] = next(self._clock)
            return [
                SlotWork(s, self._ordered(self.held[s], mine, prompts)) for s, mine in rows.items()
            ]

    def unread(self, prompt: list[int]) -> int:
        """The tokens of `prompt` the slot that `plan` would give it has yet to read (from
        what it holds, or what the prompt cache restores); all of them where the server
        did not say how many slots it has."""
        with self._lock:
            if not self.held:
                return len(prompt)
            saved = self.saved
            return min(
                _cost(held, prompt, None if saved is None else list(saved)) for held in self.held
            )

    def hold(self, slot: int, prompt: Tokens, tokens: Tokens, read: int) -> None:
        """Record that `slot` ran `prompt`, evaluating `read` of its tokens (the server's
        `timings.prompt_n`), and now holds `tokens`; results of one slot come in the order
        the server ran them. The model of the server's prompt cache is a belief (other
        clients' requests, and slots saved while idle, change it unseen); where the
        restores it foresees never show in the server's counts (no prompt cache:
        `--cache-ram 0`, or an older server), it is turned off."""
        with self._lock:
            if not 0 <= slot < len(self.held):
                return
            held = self.held[slot]
            if self.saved is not None:
                start = restored(held, prompt, self.saved)
                plain = len(prompt) - shared(held, prompt)
                if start is not held and plain > len(prompt) - shared(start, prompt):
                    self._restores[read < plain] += 1
                if self._restores[False] >= MISSES and not self._restores[True]:
                    self.saved = None
            self.held[slot] = tokens

    def _ordered(self, held: Tokens, rows: list[int], prompts: list[list[int]]) -> list[int]:
        """Greedy: next the prompt that costs the slot least to read by then (from what it
        holds, or from a state its prompt cache restores), sharing most with it on a tie."""
        order, left = [], list(rows)
        saved = None if self.saved is None else list(self.saved)
        while left:
            costs = {i: (_cost(held, prompts[i], saved), -shared(prompts[i], held)) for i in left}
            best = min(left, key=costs.__getitem__)
            if saved is not None:
                restored(held, prompts[best], saved)
            order.append(best)
            left.remove(best)
            held = tuple(prompts[best])
        return order


def _cost(held: Tokens, prompt: list[int], saved: list[Tokens] | None) -> int:
    """The prompt tokens a slot holding `held` evaluates for `prompt`."""
    start = held if saved is None else restored(held, prompt, list(saved))
    return max(1, len(prompt) - shared(prompt, start))


def restored(held: Tokens, prompt, saved: list[Tokens]) -> Tokens:
    """What a slot holding `held`, pinned to `prompt`, starts from under llama-server's
    prompt cache (on by default: `--cache-ram`; tools/server `get_available_slot` and
    `server_prompt_cache`), updating `saved` as the server updates that cache. Where the
    prompt shares less than half of what the slot holds (or under a tenth of itself),
    the slot's state is saved to host memory, unless a saved state already contains it,
    and the saved state that shares a larger part of both itself and the prompt than the
    slot did (and at least a quarter of itself) is restored into the slot instead."""
    if not held or not prompt:
        return held
    common = shared(held, prompt)
    if common / len(prompt) <= SIMILAR:
        common = 0
    elif common / len(held) >= 0.5:
        return held
    if not any(shared(state, held) == len(held) for state in saved):
        saved[:] = [state for state in saved if shared(state, held) < len(state)]
        saved.append(held)
        del saved[:-SAVED]  # the oldest first, as the server makes room
    best, keep, similar = None, common / len(held), common / len(prompt)
    for state in saved:
        n = shared(state, prompt)
        if n >= len(state) / 4 and n / len(state) > keep and n / len(prompt) > similar:
            best, keep, similar = state, n / len(state), n / len(prompt)
    if best is None:
        return held
    saved.remove(best)
    return best


def shared(a, b) -> int:
    """Length of the common prefix of two token sequences."""
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n
