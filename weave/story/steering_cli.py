"""`python -m weave expand`'s steering options, and the `Steering` they give.

    --memory TEXT      text always at the top of the context
    --note TEXT        the author's note, its own line `--note-depth` lines from the end
    --note-depth N     (default 3)
    --lore FILE        a lorebook: LLooM's own JSON form (as the loom export writes it),
                       a SillyTavern world-info file or a character book (`weave.story.lorebook`)

A bad value or lorebook file is one `ValueError` naming the option or the file; `weave.cli`
prints it. This module owns these options only; the context is `weave.story.context`'s.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

from weave.story.lorebook import read_lorebook
from weave.story.steering import DEFAULT_NOTE_DEPTH, MAX_NOTE_DEPTH, Steering


def add_arguments(parser: argparse.ArgumentParser) -> None:
    memory = "text always at the top of the context (default: none)"
    parser.add_argument("--memory", default="", help=memory)
    note = "the author's note, a line near the end (default: none)"
    parser.add_argument("--note", default="", help=note)
    depth = (f"the note goes before the story's last N lines (1..{MAX_NOTE_DEPTH:,}; "
             f"default: {DEFAULT_NOTE_DEPTH})")  # fmt: skip
    parser.add_argument("--note-depth", type=int, default=DEFAULT_NOTE_DEPTH, help=depth)
    lore = "a lorebook file: LLooM's JSON or SillyTavern world info (default: none)"
    parser.add_argument("--lore", type=Path, help=lore)


def steering_from(args: argparse.Namespace, clean: Callable[[str], str]) -> Steering:
    """The steering the options ask for; `clean` makes argv text storable (surrogates).

    Raises:
        ValueError: one line naming the option or the lorebook file.
    """
    lore = read_lorebook(args.lore) if args.lore is not None else ()
    if not 1 <= args.note_depth <= MAX_NOTE_DEPTH:
        raise ValueError(f"--note-depth must be a whole number in 1..{MAX_NOTE_DEPTH:,}")
    try:
        return Steering(clean(args.memory), clean(args.note), args.note_depth, lore)
    except ValueError as e:  # a text past its cap
        raise ValueError(f"--{str(e).removeprefix('steering: ')}") from e
