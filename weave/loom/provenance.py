"""Where a node of the loom came from: who or what made it, and how.

A `Provenance` rides on every node made since it existed (`Node.provenance`); a node from an
older story has none, and says so ("unknown provenance"). It records what the node's other
fields do not: how the writer came to keep it (`how`, one of `HOWS`), a suggestion's place
in its list and probability, a sample's seed, the backend, the model that wrote it, when
it was asked for and how long the model took, and which logged-in writer added it to the
loom (the store says so as it saves the node: `weave.loom.store_rows.stamped`). The node's
own `params`, `score`, `model` (the tokenizer of its token ids) and `created` are not
repeated here.

Pure values and their JSON form (`to_dict` / `from_dict`, strict: an unknown key or a wrong
type is a `ValueError` naming it). The store keeps the JSON; the page and `loom show`
describe it (`describe`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields, replace
from typing import Any

HOWS = (
    "typed",  # the writer's own text
    "suggestion",  # a search's suggestion, accepted as offered
    "kept",  # a suggestion kept as a branch (the cursor stayed)
    "sampled",  # a sample drawn by a ramification
    "alternative",  # a story branched at another token the model offered
    "edited suggestion",  # a suggestion the writer changed before taking it
    "partial suggestion",  # a suggestion taken up to a word, or the rest of one so taken
    "imported",  # read from another loom tool's file (`source` names it)
)
AUTHORS = ("human", "model", "mixed", "system")  # Open Loom's author roles


@dataclass(frozen=True)
class Provenance:
    """How one node came to be. Every field but `how` may be unknown (None)."""

    how: str
    rank: int | None = None  # the suggestion's place in its list, from 1
    probability: float | None = None  # the suggestion's (or sample's) probability, 0..1
    seed: int | None = None  # the sampling seed, when the draw had one
    backend: str | None = None  # "mlx", "llamacpp", "vllm", "openai", or another tool's provider
    model: str | None = None  # the model that wrote it
    requested: float | None = None  # when the model was asked (seconds since the epoch)
    latency_ms: float | None = None  # how long the model took to answer
    source: str | None = None  # for an import: the format it came from
    author: str | None = None  # for an import: the file's author role, one of AUTHORS
    writer: str | None = None  # the logged-in writer who added it (their address)

    def __post_init__(self) -> None:
        if self.how not in HOWS:
            raise ValueError(f"a provenance's how is one of {', '.join(HOWS)}, not {self.how!r}")
        if self.author is not None and self.author not in AUTHORS:
            raise ValueError(f"a provenance's author is one of {', '.join(AUTHORS)}")
        for name in ("rank", "seed"):
            value = getattr(self, name)
            if value is not None and not (type(value) is int and 0 <= value < 1 << 53):
                raise ValueError(f"a provenance's {name} is a non-negative int")
        for name in ("probability", "requested", "latency_ms"):
            value = getattr(self, name)
            if value is not None and not (type(value) in (int, float) and math.isfinite(value)
                                          and value >= 0):  # fmt: skip
                raise ValueError(f"a provenance's {name} is a finite number, at least 0")
        for name in ("backend", "model", "source", "writer"):
            if not isinstance(getattr(self, name), str | None):
                raise ValueError(f"a provenance's {name} is a string")

    def to_dict(self) -> dict[str, Any]:
        """The JSON form: the known fields only (read by name: a story of a million
        nodes is written and read a node at a time, and `asdict` deep-copies)."""
        return {k: v for k in _FIELDS if (v := getattr(self, k)) is not None}

    @classmethod
    def from_dict(cls, data: Any) -> Provenance:
        if not isinstance(data, dict) or "how" not in data:
            raise ValueError("a provenance is an object with a 'how'")
        unknown = data.keys() - _FIELDS
        if unknown:
            raise ValueError(f"a provenance has an unknown field {sorted(unknown)[0]!r}")
        floats = {k: float(v) for k in ("probability", "requested", "latency_ms")
                  if type(v := data.get(k)) is int}  # fmt: skip  # the rest checked as given
        return cls(**(data | floats))

    def describe(self) -> str:
        """One line for a tooltip: "suggestion 2 (p=0.31) · mlx SmolLM2 · 412 ms · by
        ana@example.org"."""
        head = self.how + (f" {self.rank}" if self.rank is not None else "")
        if self.probability is not None:
            head += f" (p={self.probability:.2g})"
        if self.seed is not None:
            head += f", seed {self.seed}"
        if self.source:
            head += f" from {self.source}" + (f" ({self.author})" if self.author else "")
        made_by = " ".join(x for x in (self.backend, self.model) if x)
        timing = f"{self.latency_ms:.0f} ms" if self.latency_ms is not None else ""
        who = f"by {self.writer}" if self.writer else ""
        return " · ".join(x for x in (head, made_by, timing, who) if x)


_FIELDS = tuple(f.name for f in fields(Provenance))  # in order: the JSON form keeps it
UNKNOWN = "unknown provenance"  # what a node made before provenance was kept says


def describe(provenance: Provenance | None) -> str:
    """A node's provenance as one line; `UNKNOWN` for a node from an older story."""
    return UNKNOWN if provenance is None else provenance.describe()


def taken(offered: Provenance | None, move: str, *, changed: bool) -> Provenance | None:
    """The provenance of a piece `offered` once taken by `move` ("accept" or "keep"):
    "edited suggestion" when the writer changed its text, "kept" when kept as a branch."""
    if offered is None:
        return None
    if changed:
        return replace(offered, how="edited suggestion")
    return replace(offered, how="kept") if move == "keep" and offered.how != "sampled" else offered


def probability(score: float | None) -> float | None:
    """A suggestion's probability from its score (a sum of log-probabilities)."""
    return None if score is None or not math.isfinite(score) else min(1.0, math.exp(score))
