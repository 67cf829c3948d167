"""🎲 Sampling on the page: the sampler's sliders, the parameters they give, and drawing
at this node under a status, and the samples drawn here listed below the suggestions, best
first, one full-width row each (`page.rows`, as the suggestions are). Widgets only: the
draw is `Offers.sample`'s (n8loom's ramify, `weave.search.ramify`).
"""

from __future__ import annotations

from dataclasses import replace

import streamlit as st

from backends import Backend
from page.rows import Row, offer_row
from weave.bounds import bound_of
from weave.config import Settings
from weave.desk import session
from weave.desk.spot import Draw
from weave.search.ramify import RamifyParams
from weave.view import messages, present

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
        report = lambda p: status.update(label=messages.live_status(p))  # noqa: E731
        draw = ws.offers.sample(backend, ws.spot, params, progress=report)
        if draw is None:
            status.update(label="No samples: see below", state="error")
        else:
            status.update(label=messages.draw_status(draw.result, asked=params.n),
                          state="complete")  # fmt: skip


def samples_ui(ws: session.Workspace, draw: Draw, prefix_space: bool) -> None:
    """The samples drawn here, likeliest first: each its share of the samples' probability
    over a bar as long as its part of the best one's (its log-probability a hover away),
    its text, ✏️, 📌 and ➜."""
    st.markdown(f"**🎲 Samples** · {messages.draw_status(draw.result, asked=draw.params.n)}")
    space = "p" if prefix_space else "n"
    samples = draw.result.samples
    shares = present.sample_shares([sample.logprob for sample in samples])
    ranked = sorted(enumerate(samples), key=lambda s: -s[1].logprob)
    with st.container(key="samples", gap=None):
        for i, sample in ranked:  # the key keeps the draw's order: a box keeps its sample
            row = Row(ws, draw.piece(sample), f"smp_{draw.tag}_{space}_{i}", prefix_space)
            filled = shares[i] / max(shares)
            title = (f"Its share of these samples' probability (its tokens' log-probabilities "
                     f"summed: {sample.logprob:.1f})")  # fmt: skip
            figure = (f'<span class="share" title="{title}" style="--filled: {filled:.0%}">'
                      f"{present.share_html(shares[i])}</span>")  # fmt: skip
            offer_row(row, present.sample_html(sample.text, prefix_space=prefix_space), figure)
