"""The page's "🚫 Bans & bias" panel: the story's banned phrases, patterns and bias, the
repetition guard and the shipped slop list, and what the last search here pruned; and
which of the model's alternatives at a story token the bans would prune (marked 🚫).

Phrases typed here are whole words with case ignored (a list imported or kept with other
options keeps them while its lines are not edited). Every change is saved with the story
at once (`Workspace.set_settings`); a bad entry is one line naming it, and the saved bans
stay. Widgets only: the rules are `weave.story.bans`'.
"""

from __future__ import annotations

from dataclasses import replace

import streamlit as st

from backends.base import TokenAlternatives
from page.state import tab
from weave.desk.alternatives import story_before
from weave.desk.session import Workspace
from weave.story.bans import MAX_REPEAT_WORDS, BanRule, Bans, parse_list, slop_rules
from weave.story.guard import banned_among
from weave.view.present import md, shorten

SHOWN_PRUNED = 8  # pruned branches listed under the panel


def bans_ui(ws: Workspace) -> None:
    """The story's bans, saved as they change; below, what the last search here pruned."""
    panel = tab().bans
    if panel.seen != ws.settings.bans:  # another tab's, or another story's
        panel.rev += 1
    bans, rev = ws.settings.bans, f"{ws.story_id}_{panel.rev}"
    banned = st.text_area(
        "Banned phrases (one a line)", _lines(r for r in bans.rules if r.banned and not r.regex),
        key=f"bans_phrases_{rev}", help="A suggestion that would complete one is pruned at "
        "that token, and its room goes to the next (whole words, case ignored).",
    )  # fmt: skip
    patterns = st.text_area(
        "Banned patterns (regular expressions, one a line)",
        _lines(r for r in bans.rules if r.regex), key=f"bans_regex_{rev}", height=68,
        help="Python's syntax, run on RE2 (never slow): no lookaround or backreferences; "
        "`\\w`, `\\d`, `\\s` and `\\b` are ASCII, `\\pL` is a letter of any script.",
    )  # fmt: skip
    bias = st.text_area(
        "Bias (phrase = weight, one a line)",
        "\n".join(f"{r.text} = {r.weight:g}" for r in bans.rules if not r.banned),
        key=f"bans_bias_{rev}", height=68, help="Added to the log-probability of each token "
        "that goes on with the phrase: + favours it, - sinks it (-20..20).",
    )  # fmt: skip
    repeat = st.number_input(
        "Repetition guard: prune a run of this many words from the story (0 = off)",
        0, MAX_REPEAT_WORDS, bans.no_repeat_words, key=f"bans_repeat_{rev}",
    )  # fmt: skip
    slop = st.toggle(f"Ban the slop list ({len(slop_rules())} phrases common in model prose)",
                     bans.slop, key=f"bans_slop_{rev}")  # fmt: skip
    try:
        rules = _kept(bans, _rules(banned, patterns, bias))
        _save(ws, Bans(rules, int(repeat), slop))
    except ValueError as e:
        st.error(f"**Not saved.** {md(str(e).removeprefix('bans: '))}", icon="🚫")
    st.file_uploader("Import a list (one phrase a line, or JSON [phrase, weight] pairs)",
                     type=["txt", "json"], key=f"bans_import_{rev}", on_change=_import,
                     args=(ws, f"bans_import_{rev}"))  # fmt: skip
    if panel.import_error:
        st.error(f"**That list cannot be imported.** {md(panel.import_error)}")
    _pruned_ui(ws)


def _rules(banned: str, patterns: str, bias: str) -> tuple[BanRule, ...]:
    """The rules the text areas hold; a bad line is a ValueError naming it."""
    rules = [*parse_list(banned)] if banned.strip() else []
    for n, line in enumerate(patterns.split("\n"), 1):
        if line.strip():
            rules.append(_named(dict(text=line.strip(), regex=True), f"pattern line {n}"))
    for n, line in enumerate(bias.split("\n"), 1):
        if line.strip():
            phrase, eq, weight = line.rpartition("=")
            try:
                value = float(weight) if eq else None
            except ValueError:
                value = None
            if value is None:
                raise ValueError(f"bias line {n}: write “phrase = weight”, weight a number")
            rules.append(_named(dict(text=phrase.strip(), weight=value), f"bias line {n}"))
    return tuple(rules)


def _named(values: dict, where: str) -> BanRule:
    try:
        return BanRule(**values)
    except ValueError as e:
        raise ValueError(str(e).replace("bans: rule", where, 1)) from e


def _kept(bans: Bans, rules: tuple[BanRule, ...]) -> tuple[BanRule, ...]:
    """`rules`, each as saved where it was (keeping options the panel does not show)."""
    saved = {(r.text, r.regex, r.weight): r for r in bans.rules}
    return tuple(saved.get((r.text, r.regex, r.weight), r) for r in rules)


def _lines(rules) -> str:
    return "\n".join(r.text for r in rules)


def _import(ws: Workspace, key: str) -> None:
    def with_file(data: bytes) -> Bans:
        saved = ws.settings.bans
        try:
            return Bans((*saved.rules, *parse_list(data)), saved.no_repeat_words, saved.slop)
        except ValueError as e:
            raise ValueError(str(e).removeprefix("bans: ")) from e

    bans = tab().bans.uploaded(key, with_file)
    if bans is not None:
        _save(ws, bans)
        tab().bans.rev += 1


def _save(ws: Workspace, bans: Bans) -> None:
    if bans != ws.settings.bans:
        ws.set_settings(replace(ws.settings, bans=bans))
    tab().bans.seen = ws.settings.bans  # this tab's widgets hold it


def banned_alternatives(ws: Workspace, rows: list[TokenAlternatives], at: int) -> dict[int, str]:
    """Which of the model's alternatives at row `at` of the story's last tokens `rows` the
    bans would prune (by index, and why): the alternatives picker marks them."""
    try:
        before = story_before(ws.text, rows, rows[at])
    except ValueError:  # another text's tokens: nothing to mark (a branch there says why)
        return {}
    return banned_among(ws.spot.bans, before, rows[at].top)


def _pruned_ui(ws: Workspace) -> None:
    pruned = ws.offers.pruned(ws.cursor)
    if not pruned:
        return
    st.caption(f"🚫 The last search here pruned {len(pruned)} branch"
               f"{'es' if len(pruned) != 1 else ''}:")  # fmt: skip
    for p in pruned[:SHOWN_PRUNED]:
        st.caption(f"“{md(shorten(p.text, 50))}” — {md(p.by)}")
