"""The headless command line: `python -m weave expand ...` and `python -m weave loom ...`.

`expand` reads a story, runs one expansion on the configured backend and prints the ranked
suggestions (or, with --json, the search as one strict JSON object, `weave.search.codec`);
`loom` lists, shows, exports and imports saved stories (`weave.loom_cli`). Errors, a
mistyped command line's included, become one line on stderr and exit status 2; an option
is known by its whole name only (no abbreviations), and the help states each option's
default and bounds. A reader that stops early (`| head`) ends the output quietly, exit
status 0. Nothing else here knows about terminals. A story file is read up to
MAX_STORY_BYTES.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import replace
from pathlib import Path

from backends import BackendError, create_backend
from weave import loom_cli
from weave.bounds import bound_of, problem
from weave.config import ConfigError, load_settings
from weave.loom.formats import without_surrogates
from weave.loom.store import StoreError
from weave.search.beams import SearchResult, expand
from weave.search.codec import search_to_dict
from weave.search.params import SearchParams
from weave.story import bans_cli, steering_cli
from weave.story.guard import Guard
from weave.story.model_context import fitted_context, sent_ids
from weave.view.messages import bar_caption, worth_text
from weave.view.present import bar_shares, share_text

EXIT_ERROR = 2
MAX_STORY_BYTES = 4 << 20  # far more than any model's context holds (~1M tokens of text)


class OneLineParser(argparse.ArgumentParser):
    """An argument parser whose errors are one line on stderr, exit status 2, and which
    takes an option by its whole name only: "--cut" is not "--cutoff" but an error naming
    it (a script's typo would otherwise run with another option than the one meant)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, allow_abbrev=False, **kwargs)

    def parse_known_args(self, args=None, namespace=None):
        """As argparse's, but an option this command does not have is named first: argparse
        said "one of the arguments --story --story-file is required" for `--stroy x`."""
        args = sys.argv[1:] if args is None else list(args)
        if self._subparsers is None and (unknown := self._unknown(args)):
            self.error(f"unrecognized arguments: {' '.join(unknown)}")
        return super().parse_known_args(args, namespace)

    def _unknown(self, args: list[str]) -> list[str]:
        """The options in `args` this parser has not (`--name`, `--name=value`; one with a
        space is a value), each with the values after it, as argparse lists them."""
        given = args[: args.index("--")] if "--" in args else args
        unknown: list[str] = []
        for i, arg in enumerate(given):
            if not (arg.startswith("--") and " " not in arg):
                continue
            if arg.split("=", 1)[0] in self._option_string_actions:
                continue
            values = []
            for value in given[i + 1 :]:
                if value.startswith("-"):
                    break
                values.append(value)
            unknown += [arg, *([] if "=" in arg else values)]
        return unknown

    def error(self, message: str):
        self.exit(EXIT_ERROR, f"error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    search, sections = _configured_search()
    _in = lambda name: _bounds(search, name)  # noqa: E731
    parser = OneLineParser(prog="python -m weave", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True, parser_class=OneLineParser)
    ex = commands.add_parser("expand", help="suggest continuations of a story")
    story = ex.add_mutually_exclusive_group(required=True)
    story.add_argument("--story", help="the story text")
    story.add_argument("--story-file", type=Path, help="a UTF-8 file holding the story")
    ex.add_argument("--rule", choices=bound_of(SearchParams, "rule").options,
                    help="what the cutoff is measured against: relative, a share of the "
                    "beam's likeliest token's probability; v03, LLooM v0.3's, a probability, "
                    "with v0.3's cutoff 0.2, multiplier 1 and split limit 3 unless given "
                    f"(default: {search.rule})")  # fmt: skip
    ex.add_argument("--cutoff", type=float,
                    help=f"the least probability, or share of the top one's, to split "
                    f"({_in('cutoff')})")  # fmt: skip
    ex.add_argument(
        "--multiplier", type=float, help=f"cutoff scale per depth ({_in('multiplier')})"
    )
    ex.add_argument("--split-limit", type=int,
                    help=f"children per beam, 0 = no limit ({_in('split_limit')})")  # fmt: skip
    ex.add_argument("--max-depth", type=int, help=f"tokens per suggestion ({_in('max_depth')})")
    ex.add_argument("--max-suggestions", type=int,
                    help=f"suggestions at most ({_in('max_suggestions')})")  # fmt: skip
    stop = f"end beams at '.' or ',' (default: {'yes' if search.auto_stop else 'no'})"
    ex.add_argument("--auto-stop", action=argparse.BooleanOptionalAction, default=None,
                    help=stop)  # fmt: skip
    ex.add_argument("--score", choices=bound_of(SearchParams, "score").options,
                    help=f"ranking score (default: {search.score})")  # fmt: skip
    ex.add_argument("--chains", action=argparse.BooleanOptionalAction, default=None,
                    help="use greedy-chain requests where the backend has them "
                    "(default: yes, where it has them)")  # fmt: skip
    ex.add_argument("--backend", choices=["mlx", "llamacpp", "vllm", "openai"],
                    help="override the configured backend (default: as configured, "
                    "else llama.cpp, vLLM, OpenAI by what is set, else mlx)")  # fmt: skip
    ex.add_argument("--json", action="store_true", help="print one JSON object")
    ex.epilog = ("Defaults are config.toml's [search] (LLOOM_CONFIG names another file); a "
                 "model's [models] section there overrides them for that model"
                 f"{sections}.")  # fmt: skip
    steering_cli.add_arguments(ex)
    bans_cli.add_arguments(ex)
    loom_cli.add_parser(commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "loom":
        return _loom(args)
    try:
        given = _given(args)  # before the model loads: a mistyped option fails at once
        story = _read_story(args)
        steering = steering_cli.steering_from(args, without_surrogates)
        bans = bans_cli.bans_from(args)
        settings = load_settings()
        if args.backend:
            settings = replace(settings, backend=args.backend)
        backend = create_backend(settings)
        configured = settings.search_for(backend.model_name)
        params = replace(configured.under(given.get("rule", configured.rule)), **given)
        context = fitted_context(backend, steering, story, room=params.max_depth)
        bans = settings.bans.joined(bans)  # config.toml's [bans], then the options'
        guard = Guard(bans, story) if bans.active else None
        result = expand(backend, sent_ids(backend, context), params, guard=guard)
    except (BackendError, ConfigError, ValueError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_ERROR
    try:
        data = search_to_dict(result, params, steering.in_force(story))
        data["pruned"] = len(result.pruned)  # branches the bans and the guard pruned
        data["pruned_branches"] = [{"text": p.text, "by": p.by} for p in result.pruned]
        data["notes"] = list(result.notes)  # what the search could not do (a bias unreached)
        out = json.dumps(data, ensure_ascii=False, allow_nan=False) if args.json else None
    except ValueError as e:  # backends let no NaN through; this is the last guard
        print(f"error: the result holds a number JSON cannot carry ({e})", file=sys.stderr)
        return EXIT_ERROR
    return emit(out if args.json else to_text(result, params))


def _loom(args: argparse.Namespace) -> int:
    try:
        out = loom_cli.run(args)
    except (StoreError, ConfigError, OSError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_ERROR
    return emit(out)


def emit(text: str) -> int:
    """Print `text`; a reader that has gone (`| head`) is no error: the rest goes nowhere
    and the exit status is 0. Stdout is pointed at /dev/null so that Python's own flush at
    exit does not fail on the closed pipe a second time."""
    try:
        print(text, flush=True)
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 0


def _read_story(args: argparse.Namespace) -> str:
    if args.story is not None:
        return without_surrogates(args.story)  # argv bytes that were not UTF-8 arrive as surrogates
    with open(args.story_file, "rb") as f:  # a device like /dev/zero never ends: read a cap
        data = f.read(MAX_STORY_BYTES + 1)
    if len(data) > MAX_STORY_BYTES:
        raise ValueError(f"{args.story_file} is longer than {MAX_STORY_BYTES >> 20} MiB: "
                         "give the story's end, which is what the model reads")  # fmt: skip
    try:
        return without_surrogates(data.decode("utf-8"))
    except UnicodeDecodeError as e:
        raise ValueError(f"{args.story_file} is not UTF-8 text ({e.reason})") from e


def _configured_search() -> tuple[SearchParams, str]:
    """The [search] defaults the help states, and the [models] sections in words: the
    settings', or the built-in defaults where the settings cannot be read (the error is
    for a command that uses them to report)."""
    try:
        settings = load_settings()
    except (ConfigError, OSError):
        return SearchParams(), ""
    sections = [
        f"{name}: " + ", ".join(f"{key} {value}" for key, value in values.items())
        for name, values in settings.model_search.items()
    ]
    return settings.search, f" ({'; '.join(sections)})" if sections else ""


def _bounds(search: SearchParams, name: str) -> str:
    """SearchParams' field `name`: its bounds and default, for the help."""
    return f"{bound_of(SearchParams, name)}; default: {getattr(search, name)}"


def _given(args: argparse.Namespace) -> dict:
    """The search options given, by SearchParams field; one outside its bounds is a
    ValueError naming the option."""
    given = {
        "rule": args.rule,
        "cutoff": args.cutoff,
        "multiplier": args.multiplier,
        "split_limit": args.split_limit,
        "max_depth": args.max_depth,
        "max_suggestions": args.max_suggestions,
        "auto_stop": args.auto_stop,
        "score": args.score,
        "use_chains": args.chains,
    }
    given = {k: v for k, v in given.items() if v is not None}
    for name, value in given.items():
        bound = bound_of(SearchParams, name)
        wrong = bound and problem(f"--{name.replace('_', '-')}", value, bound)
        if wrong:
            raise ValueError(wrong)
    return given


def to_text(result: SearchResult, params: SearchParams) -> str:
    """The suggestions, one a line: rank, share of the ranking as the page's bar shows it
    (`weave.view.present.bar_shares`), probability, text, and the texts it stands for
    (`Suggestion.variants`, "also"); then what the figures are, what the search cost and
    what its suggestions are worth."""
    shares = bar_shares(result.suggestions, params.score)
    lines = [
        f"{i:3d}. {share_text(share):>8}  p {share_text(s.probability):>8}  {s.text!r}"
        + (f"  (also {', '.join(map(repr, s.variants))})" if s.variants else "")
        for i, (s, share) in enumerate(zip(result.suggestions, shares, strict=True), 1)
    ]
    lines.append(bar_caption(params.score).replace("Bars: each", "Figures: each"))
    if result.suggestions:
        lines.append(f"ranked by {params.score}; {worth_text(result.suggestions)}")
    st = result.stats
    lines.append(
        f"{len(result.suggestions)} suggestions in {st.seconds:.2f} s "
        f"on {st.backend} ({st.model}): {st.forward_calls} forward calls, "
        f"{st.model_tokens} model tokens, {st.prefill_tokens} prefill tokens"
    )
    if result.pruned:
        lines.append(f"{len(result.pruned)} branches pruned by the bans")
    lines += [f"note: {note}" for note in result.notes]
    return "\n".join(lines)
