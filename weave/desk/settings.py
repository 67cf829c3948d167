"""A story's settings as a tab holds them, one value: `StorySettings`.

A story's settings record is saved beside it (so exported and imported with it): the
search's settings (the page's sliders), the story's steering (`weave.story.steering`),
its bans (`weave.story.bans`), and what another tool's file kept aside
(`weave.interop.foreign.kept_aside`), which the search's settings never replace. The
page reads the value as one and writes it as one (`Workspace.set_settings`); `read`
takes a stored record, saying what of it cannot be used.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from weave.interop.foreign import kept_aside
from weave.story.bans import Bans, bans_in, with_bans
from weave.story.steering import Steering, steering_in, with_steering


@dataclass(frozen=True)
class StorySettings:
    """A story's settings: its `record` (the search's settings as the page set them; as
    stored, the whole record, the steering and bans in their saved form among them), its
    `steering` (memory, note and lorebook) and its `bans` (bans, bias and repetition
    guard), which the record saves."""

    record: dict[str, Any] = field(default_factory=dict)
    steering: Steering = Steering()
    bans: Bans = Bans()

    def to_record(self, before: StorySettings) -> dict[str, Any]:
        """The record these settings save, over `before`'s (what an import kept aside
        stays)."""
        record = with_bans(with_steering(self.record, self.steering), self.bans)
        return record | kept_aside(before.record)


@dataclass(frozen=True)
class Read:
    """A stored record as a tab takes it, and what of it cannot be used (None: all can)."""

    settings: StorySettings
    notice: str | None = None


def read(record: dict[str, Any], before: StorySettings) -> Read:
    """The settings stored as `record`; steering that cannot be read leaves `before`'s,
    bans that cannot be read leave none (each said in `notice`)."""
    steering, notice = before.steering, None
    try:
        steering = steering_in(record)
    except ValueError as e:  # a store edited by hand: the story opens, unsteered
        notice = f"This story's memory, note and lorebook cannot be read ({e})."
    try:
        saved = bans_in(record)
    except ValueError as e:  # likewise: the story opens without bans
        return Read(StorySettings(record, steering), f"This story's bans cannot be read ({e}).")
    if saved.left_out:  # saved before patterns ran on RE2: the others apply
        notice = (
            f"A saved ban pattern cannot run and is left out: {'; '.join(saved.left_out)}. "
            "The story's other bans apply; the pattern goes when the bans are next saved."
        )
    return Read(StorySettings(record, steering, saved.bans), notice)
