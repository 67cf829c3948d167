"""🎲 Sampling on the page: the sampler's sliders, the parameters they give, and drawing
at this node under a status. Widgets only: the draw is `Offers.sample`'s (n8loom's ramify,
`weave.search.ramify`); its samples are listed by `lloom.samples_ui` beside the suggestions.
"""

from __future__ import annotations

from dataclasses import replace

import streamlit as st

from backends import Backend
from weave.bounds import bound_of
from weave.config import Settings
from weave.desk import session
from weave.search.ramify import RamifyParams
from weave.view import present

SAMPLE_SLIDERS = {  # widget key -> RamifyParams field, label, step, help; bounds: the field's
    "smp_n": ("n", "Samples", 1, "Continuations to draw"),
    "smp_temperature": ("temperature", "Temperature", 0.05, "0: always the most likely token"),
    "smp_min_p": ("min_p", "Min-p", 0.01,
                  "Drop tokens below this share of the top token's probability"),
    "smp_max_tokens": ("max_tokens", "Max tokens", 1, "Tokens per sample at most"),
}  # fmt: skip


def sample_settings_ui(settings: Settings) -> None:
    """The sampler's sliders (🎲 Sample draws with them)."""
    for key, (field, label, step, help_text) in SAMPLE_SLIDERS.items():
        bound = bound_of(RamifyParams, field)
        st.session_state.setdefault(key, getattr(settings.sample, field))
        st.slider(label, bound.low, bound.high, step=step, key=key, help=help_text)


def sample_params(settings: Settings) -> RamifyParams:
    values = {spec[0]: st.session_state[key] for key, spec in SAMPLE_SLIDERS.items()}
    return replace(settings.sample, **values)


def sample(ws: session.Workspace, backend: Backend, params: RamifyParams) -> None:
    with st.status("Sampling…", expanded=False) as status:
        report = lambda p: status.update(label=present.live_status(p))  # noqa: E731
        draw = ws.offers.sample(backend, ws.spot, params, progress=report)
        if draw is None:
            status.update(label="No samples: see below", state="error")
        else:
            status.update(label=present.draw_status(draw.result), state="complete")
