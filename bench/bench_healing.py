"""Token healing on the MLX backend (the embedded model): does a story cut mid-word, or
just after a space, get the suggestions the model gives at the token boundary?

For each passage of a panel, cut it at `points` places (half inside a word, half just
after a space, in its second half) and search three ways:
  reference  the cut story given back to its last token boundary before the typed end
             (`weave.search.healing.heal`), searched unhealed with the same token budget, and
             only the suggestions that agree with the typed characters kept;
  healed     the cut story, healed (the search as LLooM makes it now);
  today      the cut story searched as typed (`expand(..., healing=False)`).
Each suggestion is read as the full story text it makes. Prints, per cut kind and in
all, the share of the reference's suggestions that the healed search and today's
search find, and their search times side by side; the target is >= 90 % healed.

    .venv/bin/python bench/bench_healing.py [--points 20] [--max-depth 6]

The panel is this file's own 20 short original passages (`PANEL`).
"""

from __future__ import annotations

import argparse
import random
import subprocess
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

# The backends package loads OpenBLAS, which must come before mlx.
# isort: off
from backends import create_backend  # noqa: E402
from weave.config import load_settings  # noqa: E402
from weave.search.healing import heal  # noqa: E402
from weave.search.beams import expand  # noqa: E402
from weave.search.params import SearchParams  # noqa: E402
# isort: on

PANEL = [
    "The lighthouse keeper counted the ships every evening, though none had come in years. "
    "Tonight the lamp flickered twice, and far out on the water something answered it.",
    "Mara kept her grandmother's recipes in a tin box that smelled of cloves. When the box "
    "was stolen, she realised she remembered none of them by heart.",
    "The train stopped between two stations, in a field of tall grass. Nobody on board "
    "could say why, and the conductor had already walked off toward the trees.",
    "Every clock in the village ran seven minutes slow, and the people liked it that way. "
    "The new schoolteacher, who wore two watches, did not.",
    "He found the letter folded inside a library book returned thirty years late. It was "
    "addressed to him, in his own handwriting, and it had never been opened.",
    "The river froze early that winter, so the children skated to school. On the third "
    "morning the ice sang under their blades like a struck glass.",
    "Our neighbour grew pumpkins the size of armchairs and never entered a single contest. "
    "She said the pumpkins would not enjoy the attention.",
    "The robot was built to sort letters, but the post office closed the week it arrived. "
    "It began, carefully, to sort the leaves in the park instead.",
    "At the edge of the desert stood a hotel with no guests and a piano that played at "
    "night. The manager swore he had never learned a note.",
    "Tomas inherited a map with one island drawn in pencil. Every other island was inked, "
    "labelled and dated, but that one had no name at all.",
    "The storm knocked out the power, so the family played cards by candlelight. By "
    "midnight the youngest had won the house, the car and the dog.",
    "In the market square a woman sold bottled weather: fog from the coast, a spring "
    "shower, one small and very expensive thunderstorm.",
    "The astronaut had trained for every emergency except silence. When the radio went "
    "quiet, she found herself humming just to hear something.",
    "Grandfather's garden had a gate that opened onto a wall. He oiled its hinges every "
    "Sunday, and would never say what he was waiting for.",
    "The detective noticed the clock first, then the teacup, then the missing painting. "
    "The butler, for once, noticed nothing at all.",
    "The bakery opened at four in the morning, and by five the whole street smelled of "
    "bread. Even the stray cats lined up along the window.",
    "After the flood the town rebuilt its bridge three feet higher. The river, as if "
    "offended, found a new path through the orchards.",
    "She learned to read from the labels on seed packets, so her first stories were about "
    "tomatoes. Her teacher thought they were rather good.",
    "The dragon had guarded the mountain pass for a thousand years and was very tired of "
    "it. One spring it simply left a note and flew south.",
    "The violinist played the same song on the corner each day, a little differently. "
    "Only the old man with the newspaper ever noticed the changes.",
]


@dataclass(frozen=True)
class Cut:
    passage: int
    text: str
    kind: str  # "word": inside a word; "space": just after a space


def cuts(passages: list[str], points: int, seed: int = 7) -> list[Cut]:
    """`points` cuts per passage, alternately inside a word (after its second letter at
    least) and just after a space, drawn from the passage's second half."""
    rng, out = random.Random(seed), []
    for i, text in enumerate(passages):
        half = len(text) // 2
        inside = [j for j in range(half, len(text)) if text[j - 2 : j + 1].isalpha()]
        spaced = [j for j in range(half, len(text)) if text[j - 1] == " "]
        for n in range(points):
            where, kind = (inside, "word") if n % 2 == 0 else (spaced, "space")
            out.append(Cut(i, text[: rng.choice(where)], kind))
    return out


def run(backend, cut: Cut, params: SearchParams) -> dict:
    """The three searches of one cut, each as a set of full story texts, with times."""
    ids = backend.tokenize(cut.text)
    healing = heal(ids, backend.detokenize, backend.tokenize)
    assert healing is not None, cut
    stem = backend.detokenize(list(healing.context))
    budget = replace(params, max_depth=params.max_depth + healing.tokens)  # the same tokens
    reference = expand(backend, list(healing.context), budget, healing=False)
    wanted = {stem + s.text for s in reference.suggestions}
    wanted = {t for t in wanted if t.startswith(cut.text) and len(t) > len(cut.text)}
    started = time.perf_counter()
    healed = expand(backend, ids, params)
    healed_s = time.perf_counter() - started
    started = time.perf_counter()
    today = expand(backend, ids, params, healing=False)
    today_s = time.perf_counter() - started
    return {
        "wanted": wanted,
        "healed": {stem + healed.typed + s.text for s in healed.suggestions},
        "today": {cut.text + s.text for s in today.suggestions},
        "seconds": (healed_s, today_s),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", type=int, default=20, help="cuts per passage")
    parser.add_argument("--max-depth", type=int, default=6)
    parser.add_argument("--max-suggestions", type=int, default=25)
    args = parser.parse_args()
    print(subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    backend = create_backend(load_settings(env={"LLOOM_BACKEND": "mlx"}), env={})
    params = SearchParams(max_depth=args.max_depth, max_suggestions=args.max_suggestions)
    passages = PANEL
    totals: dict[str, list[int]] = {}
    times = [0.0, 0.0]
    for cut in cuts(passages, args.points):
        got = run(backend, cut, params)
        for key in (cut.kind, "all"):
            row = totals.setdefault(key, [0, 0, 0])
            row[0] += len(got["wanted"])
            row[1] += len(got["wanted"] & got["healed"])
            row[2] += len(got["wanted"] & got["today"])
        times = [t + s for t, s in zip(times, got["seconds"], strict=True)]
    backend.close()
    print(f"{len(passages)} passages x {args.points} cuts, max_depth {args.max_depth}, "
          f"max_suggestions {args.max_suggestions}, embedded model on MLX")  # fmt: skip
    print(f"{'cut':<8}{'reference':>10}{'healed finds':>16}{'today finds':>16}")
    for key in ("word", "space", "all"):
        wanted, healed, today = totals.get(key, [0, 0, 0])
        print(f"{key:<8}{wanted:>10}{_share(healed, wanted):>16}{_share(today, wanted):>16}")
    print(f"search time, healed / today: {times[0] / times[1]:.2f}x "
          f"({times[0]:.1f} s / {times[1]:.1f} s)")  # fmt: skip
    print(subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())


def _share(found: int, wanted: int) -> str:
    return f"{found / wanted:.1%}" if wanted else "-"


if __name__ == "__main__":
    main()
