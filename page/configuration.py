"""The ⚙️ Configuration popover: the search's stop and split conditions, its rule, the
ranking, and the display choices; `config_ui` returns them to the page.

Each widget's key is `cfg_*`: `CONFIG_KEYS` maps a search widget to its `SearchParams`
field, `DISPLAY_KEYS` the page's own choices (prefix space, shading). The values start
from the model's defaults (`[search]` and its `[models]` section), but for those the writer
set, saved with the story: a reopened story's saved settings set the widgets
(`load_settings_into_widgets`; which ones a widget may take is `SearchParams.from_saved`'s),
and a rule picked brings its own knobs (`SearchParams.under`). The sliders' bounds are
`SearchParams`' fields' (`weave.bounds`). Widgets only.
"""

from __future__ import annotations

from dataclasses import replace

import streamlit as st

from backends import Backend
from page.state import tab
from weave.bounds import bound_of
from weave.config import Settings
from weave.desk import session
from weave.search.params import SearchParams

SCORES = bound_of(SearchParams, "score").options
CONFIG_KEYS = {  # widget key -> SearchParams field
    "cfg_auto_stop": "auto_stop",
    "cfg_max_depth": "max_depth",
    "cfg_max_suggestions": "max_suggestions",
    "cfg_cutoff": "cutoff",
    "cfg_multiplier": "multiplier",
    "cfg_split_limit": "split_limit",
    "cfg_score": "score",
    "cfg_rule": "rule",
}
RULES = {"relative": "Relative", "v03": "LLooM v0.3"}  # the rule select's labels
SLIDERS = {  # widget key -> label, step, help; bounds: SearchParams' field's
    "cfg_max_depth": ("Max Depth", 1, "Tokens per suggestion at most"),
    "cfg_max_suggestions": ("Max Suggestions", 1, "Suggestions at most"),
    "cfg_cutoff": ("Cutoff", 0.01, "The least probability a token needs to start a new beam: "
                   "under the relative rule, as a share of its beam's likeliest token's"),
    "cfg_multiplier": ("Multiplier", 0.05,
                       "Cutoff scale per token (below 1: split more as beams grow; above "
                       "1: narrower after the first words)"),
    "cfg_split_limit": ("Split Limit", 1, "Children per beam at most (0: no limit)"),
}  # fmt: skip
DISPLAY_KEYS = {"cfg_prefix_space": "prefix_space", "cfg_shading": "shading"}  # page-only


def config_ui(
    settings: Settings, backend: Backend | None, ws: session.Workspace
) -> tuple[SearchParams, bool, bool]:
    """The Configuration popover; returns the search parameters and the display choices.

    The values start from the model's defaults (`[search]` and its `[models]` section),
    but for those the writer set, saved with the story (any that differs from the model's
    default): a story continued with another model takes that model's for the rest.
    """
    defaults = settings.search_for(backend.model_name) if backend else settings.search
    if tab().settings_for != (ws.story_id, defaults):  # another story, or another model
        tab().settings_for = (ws.story_id, defaults)
        load_settings_into_widgets(ws, defaults)
    for key, field in CONFIG_KEYS.items():
        st.session_state.setdefault(key, getattr(defaults, field))
    for key in DISPLAY_KEYS:
        st.session_state.setdefault(key, True)
    stop, split, show = st.columns(3)
    with stop:
        stop_ui()
    with split:
        split_ui(defaults)
    with show:
        prefix_space, shading = display_ui()
    values = {field: st.session_state[key] for key, field in CONFIG_KEYS.items()}
    params = replace(defaults, **values)
    chosen = params.to_saved(defaults)
    record = {**chosen, "prefix_space": prefix_space, "shading": shading}
    ws.set_settings(replace(ws.settings, record=record))
    return params, prefix_space, shading


def load_settings_into_widgets(ws: session.Workspace, defaults: SearchParams) -> None:
    """A reopened story's saved settings set the widgets, `defaults` the others; a saved
    one its widget cannot take is named in the story's notice, and the default is used
    (`SearchParams.from_saved`)."""
    record = ws.settings.record
    saved = {field: record[field] for field in CONFIG_KEYS.values() if field in record}
    values, refused = SearchParams.from_saved(saved, defaults)
    st.session_state.update(
        {key: values.get(f, getattr(defaults, f)) for key, f in CONFIG_KEYS.items()}
    )
    for key, field in DISPLAY_KEYS.items():
        if isinstance(record.get(field), bool):
            st.session_state[key] = record[field]
    if refused:
        unusable = (
            f"This story's saved {', '.join(refused)} cannot be used (see the bounds "
            "in Configuration): the defaults are used instead."
        )
        ws.notice = f"{ws.notice} {unusable}" if ws.notice else unusable


def stop_ui() -> None:
    st.markdown("**Stop conditions**")
    st.checkbox("Auto-Stop", key="cfg_auto_stop", help="End a beam at '.' or ','")
    slider_ui("cfg_max_depth")
    slider_ui("cfg_max_suggestions")


def split_ui(defaults: SearchParams) -> None:
    st.markdown("**Split conditions**")
    st.selectbox(
        "Rule",
        list(RULES),
        format_func=RULES.get,
        key="cfg_rule",
        on_change=rule_changed,
        args=(defaults,),
        help="Relative: the cutoff is a share of the beam's likeliest token's probability, "
        "so the first words spread wide where the model is unsure and the rest stay "
        "narrow. LLooM v0.3: the cutoff is a probability (v0.3's knobs come with it).",
    )
    for key in ("cfg_cutoff", "cfg_multiplier", "cfg_split_limit"):
        slider_ui(key)


def rule_changed(defaults: SearchParams) -> None:
    """A rule picked brings its own knobs: the model's defaults for the configured rule,
    LLooM's for the other (`SearchParams.under`)."""
    knobs = defaults.under(st.session_state.cfg_rule)
    for key in ("cfg_cutoff", "cfg_multiplier", "cfg_split_limit"):
        st.session_state[key] = getattr(knobs, CONFIG_KEYS[key])


def slider_ui(key: str) -> None:
    label, step, help_text = SLIDERS[key]
    bound = bound_of(SearchParams, CONFIG_KEYS[key])
    st.slider(label, bound.low, bound.high, step=step, key=key, help=help_text)


def display_ui() -> tuple[bool, bool]:
    """Scoring, prefix space and token shading; returns (prefix_space, shading)."""
    st.markdown("**Ranking and display**")
    st.radio(
        "Scoring",
        SCORES,
        key="cfg_score",
        horizontal=True,
        help="words: log-probability per word, whole clauses first; joint: sum of "
        "log-probabilities (short texts first); lloom: v0.3's sum of probabilities",
    )
    prefix_space = st.checkbox(
        "Prefix space",
        key="cfg_prefix_space",
        help="Show suggestions without their leading space; put it back when accepting",
    )
    shading = st.checkbox(
        "Token probabilities",
        key="cfg_shading",
        help="Shade each token of a suggestion by its probability",
    )
    return prefix_space, shading
