"""The command line's bans and bias options, for `python -m weave expand`:

    --ban PHRASE            ban a phrase (repeatable; whole words, case ignored)
    --ban-regex RE          ban a regular expression's matches (repeatable)
    --ban-file FILE         a list: one phrase per line, or a JSON list of [phrase, weight]
    --bias PHRASE=WEIGHT    add WEIGHT (log-prob, -20..20) to each token extending PHRASE
    --no-repeat-words N     prune a beam repeating N words of the story's end (0 = off)
    --slop                  ban the shipped slop list (weave/story/data/slop.txt)

The rules are `weave.story.bans`'; a bad value or list is one `ValueError` naming the option or
the entry, which `weave.cli` prints as one line.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from weave.story.bans import MAX_REPEAT_WORDS, BanRule, Bans, parse_list

MAX_LIST_BYTES = 4 << 20  # 10,000 phrases of 200 characters, with room


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--ban", action="append", default=[], metavar="PHRASE",
                        help="ban a phrase (repeatable)")  # fmt: skip
    parser.add_argument("--ban-regex", action="append", default=[], metavar="RE",
                        help="ban a regular expression's matches (repeatable)")  # fmt: skip
    listed = "phrases to ban, one a line, or a JSON list of [phrase, weight]"
    parser.add_argument("--ban-file", type=Path, metavar="FILE", help=listed)
    parser.add_argument("--bias", action="append", default=[], metavar="PHRASE=WEIGHT",
                        help="favour (+) or disfavour (-) a phrase (repeatable)")  # fmt: skip
    repeats = f"prune beams repeating N words of the story (2..{MAX_REPEAT_WORDS}, 0 = off)"
    parser.add_argument("--no-repeat-words", type=int, default=0, metavar="N", help=repeats)
    parser.add_argument("--slop", action="store_true", help="ban the shipped slop list")


def bans_from(args: argparse.Namespace) -> Bans:
    """The bans the options ask for.

    Raises:
        ValueError: one line naming the option, or the list file and its entry.
    """
    rules = [*_rules("--ban", [dict(text=p) for p in args.ban]),
             *_rules("--ban-regex", [dict(text=p, regex=True) for p in args.ban_regex]),
             *_rules("--bias", [_bias(b) for b in args.bias])]  # fmt: skip
    if args.ban_file is not None:
        with open(args.ban_file, "rb") as f:
            data = f.read(MAX_LIST_BYTES + 1)
        if len(data) > MAX_LIST_BYTES:
            raise ValueError(f"{args.ban_file}: larger than {MAX_LIST_BYTES >> 20} MiB")
        try:
            rules += parse_list(data)
        except ValueError as e:
            raise ValueError(f"{args.ban_file}: {e}") from e
    try:
        return Bans(tuple(rules), args.no_repeat_words, args.slop)
    except ValueError as e:
        message = str(e).removeprefix("bans: ")
        if message.startswith("no_repeat_words"):
            message = "--no-repeat-words" + message.removeprefix("no_repeat_words")
        raise ValueError(message) from e


def _bias(given: str) -> dict:
    phrase, _, weight = given.rpartition("=")
    try:
        return dict(text=phrase, weight=float(weight))
    except ValueError:
        raise ValueError(f"--bias {given!r}: write PHRASE=WEIGHT, WEIGHT a number") from None


def _rules(option: str, values: list[dict]) -> list[BanRule]:
    out = []
    for i, value in enumerate(values, 1):
        try:
            out.append(BanRule(**value))
        except ValueError as e:
            message = str(e).removeprefix("bans: rule")
            raise ValueError(f"{option} #{i}{message}") from e
    return out
