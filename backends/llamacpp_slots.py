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
  server runs one after another in the order given: each next the one sharing most with
  what the slot holds by then (siblings share their whole parent).

A search thus stays in one slot. Replaying logged searches of the three starting stories
against four slots, spreading prompts over idle slots cost more tokens (every other slot
must first read the story and the beam's path: llama-server copies no prefix between
slots), and even placing each prompt with hindsight, in the slot that made the rest of
the search cheapest, came within about 5% of one slot. What remains is a slot holding one path
at a time: a depth's beams that diverged early re-read their paths from where they part.

Owns: the record of slot contents and the plan. Not: requests (`backends.llamacpp`).
"""

from __future__ import annotations

import itertools
import threading
from dataclasses import dataclass

Tokens = tuple[int, ...]


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

    def hold(self, slot: int, tokens: Tokens) -> None:
        """Record what `slot` holds after a request."""
        with self._lock:
            if 0 <= slot < len(self.held):
                self.held[slot] = tokens

    @staticmethod
    def _ordered(held: Tokens, rows: list[int], prompts: list[list[int]]) -> list[int]:
        """Greedy: next the prompt sharing most with what the slot holds by then."""
        order, left = [], list(rows)
        while left:
            best = max(left, key=lambda i: shared(prompts[i], held))
            order.append(best)
            left.remove(best)
            held = tuple(prompts[best])
        return order


def shared(a, b) -> int:
    """Length of the common prefix of two token sequences."""
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n
