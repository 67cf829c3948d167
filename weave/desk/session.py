"""One tab's place in a story's loom, without Streamlit: a story id, a cursor, its moves.

A `Workspace` is a cursor over the loom `weave.loom.store` keeps (no history of its own):
every move is one `LoomStore.update`, and `refresh` rereads the loom on every rerun, so
other tabs' nodes appear. A write that fails stays pending (`weave.desk.pending`): the
move is shown at once, `save_error` says it is not saved, and it is saved at the next
change or rerun. A tab does not leave a story while moves of it are unsaved. Lone
suggestions accepted by themselves in a row are one chain that one undo takes back
(`weave.desk.lone`). The story's settings, steering and bans are one value
(`weave.desk.settings.StorySettings`), saved with the story; its bans, joined to the
page's default ones (config.toml's, given at construction), go with `spot`. A story
another writer shared with this one to read (`role`) is moved about and bookmarked,
never added to: a move that would add a node is refused here, saying why.
Streamlit may start a tab's next script run while the last one is still inside a slow
save, so the moves and the reads that replace the loom hold the tab's lock: one run's
move waits for the other's save, and the pending moves are saved once each, in order.
What a node offers is `weave.desk.offers`'; the list of stories, and
importing and exporting them, `weave.desk.library`'s.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from threading import RLock

from weave.desk import settings as story_settings
from weave.desk.library import Library
from weave.desk.lone import Lone, LoneChain
from weave.desk.lookahead import LookAhead
from weave.desk.offers import Offers
from weave.desk.pending import Move, PendingMoves
from weave.desk.reading import Reading
from weave.desk.settings import StorySettings
from weave.desk.spot import Piece, Spot
from weave.loom.formats import without_surrogates
from weave.loom.loom import NoSuchNode, new_id
from weave.loom.provenance import Provenance
from weave.loom.store import LoomStore, StoreError, StoryNotFound
from weave.story.bans import Bans

READ_ONLY = ("This story was shared with you to read: you can move about it and bookmark it, "
             "not add to it (its owner can let you co-write).")  # fmt: skip
NO_BANS = Bans()


def one_run_at_a_time(method):
    """Hold the tab's lock through `method`: two overlapping script runs of one tab
    neither save a pending move twice nor take one from under the other."""

    @wraps(method)
    def held(self, *args, **kwargs):
        with self._lock:
            return method(self, *args, **kwargs)

    return held


class Workspace:
    """This tab's cursor in one story of `store`: its moves, its `offers` there, and its
    `library` of other stories; `default_bans` (config.toml's [bans]) guard every story
    beside its own. A failure to save is kept in `save_error`, never raised."""

    def __init__(self, store: LoomStore, *, default_bans: Bans = NO_BANS) -> None:
        self._lock = RLock()  # see `one_run_at_a_time`
        self.store = store
        self.library = Library(store)
        self._save = self.library.save
        self.default_bans = default_bans
        self.ahead = LookAhead(0)  # this tab's look-ahead; its rows are the page's setting
        self.reading = Reading()  # this tab's long story read in the background
        self.pending = PendingMoves(self.library)  # moves shown but not yet saved
        self.close()

    @property
    def save_error(self) -> str | None:  # what failed last in the store (None once one works)
        return self.library.save_error

    # -- where this tab is ----------------------------------------------------------------
    @property
    def started(self) -> bool:
        return self.loom is not None

    @property
    def cursor(self) -> str:
        return self.loom.cursor

    @property
    def text(self) -> str:
        """The story shown: the current path's text."""
        return self.loom.text()

    @one_run_at_a_time
    def refresh(self) -> None:
        """Read the loom as stored now (other tabs' nodes too), keeping this tab's cursor;
        while moves are pending, save them instead, in order (those that fail stay)."""
        if self.story_id is None:
            return
        if self.pending:
            saved = self.pending.save(self.story_id, self.loom)
            self.loom, self.notice = saved.loom, saved.dropped or self.notice
            return
        try:  # a read that works does not clear `save_error`: it says what failed last
            stored = self.store.load(self.story_id)
            record = self.store.settings(self.story_id)  # another tab may have steered
            title = self.store.info(self.story_id).title  # renamed, or its opening rewritten
        except StoreError as e:
            self.library.failed(e, reading=True)
            return
        self.loom = stored.at(self.cursor) if self.cursor in stored.nodes else stored
        self.title = title
        read = story_settings.read(record, self.settings)  # what cannot be used is said
        self.settings, self.notice = read.settings, read.notice or self.notice

    # -- opening and closing ------------------------------------------------------------
    @one_run_at_a_time
    def start(self, text: str) -> bool:
        """A new story holding `text`; False (`save_error` says why) where it cannot be made."""
        if self.pending.kept(self.refresh):
            return False
        typed = Provenance("typed")
        made = self._save(lambda: self.store.create(without_surrogates(text), provenance=typed))
        if made is None:
            return False
        self.close()
        self.story_id, self.loom = made
        self.title, self.role = self.library.title(self.story_id), "owner"
        return True

    @one_run_at_a_time
    def open(self, story_id: str, node_id: str | None = None, *, notice: str | None = None) -> bool:
        """Reopen a story at `node_id` (else where it was left); False where it is not here.
        `notice`: what to say once it is open (an import's, `Library.import_file`)."""
        if self.pending.kept(self.refresh):
            return False
        try:
            loom = self.store.load(story_id)
        except StoryNotFound:  # purged, or never here: the page says so, nothing failed
            return False
        except StoreError as e:
            self.library.failed(e, reading=True)
            return False
        self.close()
        self.story_id = story_id
        self.loom = loom.at(node_id) if node_id in loom.nodes else loom
        info = self.library.save(lambda: self.store.info(story_id), reading=True)
        self.title, self.role = (info.title, info.role) if info else ("", "owner")
        record = self.library.save(lambda: self.store.settings(story_id), reading=True)
        read = story_settings.read(record or {}, self.settings)
        self.settings, self.notice = read.settings, read.notice or self.notice
        self.lone = self.lone.held()  # reopening changes nothing by itself
        self.notice = notice or self.notice
        return True

    @one_run_at_a_time
    def close(self) -> None:
        """Back to the start page, the tab forgetting the story (its settings, searches,
        notices); the story stays saved (this tab stays while its moves cannot be saved:
        `save_error`)."""
        if self.pending.kept(self.refresh):
            return
        self.story_id, self.loom, self.title, self.role = None, None, "", "owner"
        self.settings = StorySettings()
        self.pending = PendingMoves(self.library)
        self.offers = Offers(self.library, self.ahead, self.reading)  # its searches and draws
        self.notice: str | None = None  # something opened is not shown, and why (until a move)
        self.lone = Lone()  # lone suggestions taken by themselves (`take_lone`)

    # -- moves ----------------------------------------------------------------------------
    def edit(
        self, text: str, *, how: str = "typed", typed_in: str | None = None, at: str = ""
    ) -> None:
        """The writer's own edit: a branch from the longest common prefix (nothing lost).
        `how`: "alternative" when the writer branched at a token the model offered.
        `typed_in`, `at`: the story and node whose text the writer edited, where this tab
        may since have left it (another callback of the same script run, an import,
        opened another story first): the edit is then a branch saved in the story it was
        typed in, said in `notice`, the tab staying where it is. An edit never lands in a
        story it was not typed in."""
        text = without_surrogates(text)
        if typed_in is not None and typed_in != self.story_id:
            said = _saved_elsewhere(self.library, typed_in, at, text)
            self.notice = f"{self.notice} {said}" if self.notice else said
        elif text != self.text:
            node_id, cursor, made = new_id(), self.cursor, Provenance(how)
            stored = self.pending.stored_id
            edit = lambda loom: loom.at(stored(cursor)).edit(text, id=node_id, provenance=made)  # noqa: E731
            self._move(edit, node_id, Lone.armed)

    def accept(self, piece: Piece, shown: str | None, *, prefix_space: bool) -> None:
        """Take a suggestion as shown (maybe edited): a child of the node it was made for.

        A suggestion made for another node than the current one (a click on a button
        left from before the last move) is kept as a branch there, and nothing moves.
        """
        if piece.node_id != self.cursor:
            self.keep(piece, shown, prefix_space=prefix_space)
            return
        made = new_id()
        grow = piece.grower(shown, prefix_space, made, self.pending.stored_id)
        self._move(lambda loom: grow(loom, "accept"), made, Lone.armed)

    def keep(self, piece: Piece, shown: str | None, *, prefix_space: bool) -> None:
        """Keep a suggestion as a branch of the node it was made for; the cursor stays."""
        made, cursor = new_id(), self.cursor
        grow = piece.grower(shown, prefix_space, made, self.pending.stored_id)
        self._move(lambda loom: grow(loom, "keep").at(self.pending.stored_id(cursor)), made)

    def go(self, node_id: str) -> None:
        self._move(lambda loom: loom.go(self.pending.stored_id(node_id)), lone=Lone.held)

    def lone_chain(self) -> LoneChain | None:
        """The lone suggestions accepted by themselves that led to the cursor, if any."""
        return self.lone.chain_at(self.cursor) if self.loom else None

    def undo_target(self) -> str | None:
        """Where undo goes: the parent, or where a chain of lone accepts began."""
        chain = self.lone_chain()
        return chain.start if chain is not None else self.loom.undo_target()

    def undo(self) -> None:
        """To the parent: the story before its last piece; after lone suggestions accepted
        by themselves, to where the first was accepted (one step undoes them all)."""
        cursor, chain, stored = self.cursor, self.lone_chain(), self.pending.stored_id
        if chain is not None:
            self._move(lambda loom: loom.go(stored(chain.start)), lone=Lone.held)
            return
        self._move(lambda loom: loom.at(stored(cursor)).undo(), lone=Lone.held)

    def redo(self) -> None:
        """To the checked-out child: back along the branch this tab came from."""
        cursor = self.cursor
        self._move(lambda loom: loom.at(self.pending.stored_id(cursor)).redo(), lone=Lone.held)

    def sibling(self, step: int) -> None:
        cursor = self.cursor
        move = lambda loom: loom.at(self.pending.stored_id(cursor)).sibling(step)  # noqa: E731
        self._move(move, lone=Lone.held)

    def bookmark(self, node_id: str, on: bool) -> None:
        cursor, stored = self.cursor, self.pending.stored_id
        self._move(lambda loom: loom.bookmark(stored(node_id), on).at(stored(cursor)))

    @one_run_at_a_time
    def _move(
        self, move: Move, made: str | None = None, lone: Callable[[Lone], Lone] | None = None
    ) -> None:
        """Show `move` (which adds the node `made`, if any) at once, then save it (and any
        before it); the tab's lone-accept state becomes `lone`'s (`Lone.armed`: the writer
        acted; `Lone.held`: went back, deliberately). A move that would add a node is
        refused to a reader (said in `notice`); one naming a node this story lacks (a stale
        click) does nothing."""
        if made is not None and self.role == "reader":
            self.notice = READ_ONLY
            return
        self.lone = lone(self.lone) if lone is not None else self.lone
        if self.loom is None:
            return
        try:
            self.loom = move(self.loom)
        except NoSuchNode:
            return
        self.pending.add(move, made)
        self.notice = None
        self.offers.settle()
        self.refresh()

    # -- the story's title, settings and file ------------------------------------------
    def rename(self, story_id: str, title: str) -> None:
        """Give story `story_id` a title (the story whose title box it was typed in, which
        another callback of the same run may have left)."""
        title = self.library.rename(story_id, title)
        if story_id == self.story_id:
            self.title = title

    def set_settings(self, settings: StorySettings) -> None:
        """The story's settings from now on (its search's, steering and bans, one value),
        saved with the story when they changed (a reader's sliders are their own view
        only)."""
        record = settings.to_record(self.settings)
        changed = record != self.settings.record and self.story_id is not None
        kept = record if changed else self.settings.record
        self.settings = StorySettings(kept, settings.steering, settings.bans)
        if changed and self.role != "reader":
            self._save(lambda: self.store.save_settings(self.story_id, record))

    # -- what is offered here --------------------------------------------------------------
    @property
    def spot(self) -> Spot:
        """Where this tab is, for `offers`' searches and draws (the story must be open)."""
        bans = self.default_bans.joined(self.settings.bans)
        steering = self.settings.steering
        return Spot(self.story_id, self.loom, not self.pending, steering, bans)

    def retry(self) -> None:
        """'Suggest again': search once more (`Offers.retry`); a lone suggestion that search
        finds is taken by itself again (`take_lone`), even where the writer went back.
        Suggestions kept that it would only make again are shown as "same", not taken."""
        self.offers.retry()
        self.lone = self.lone.armed()

    def take_lone(self, piece: Piece, *, prefix_space: bool) -> bool:
        """Accept a lone suggestion by itself (LLooM's rule, `Shown.lone`), a few times in a
        row at most."""
        if not self.lone.may_take():
            return False
        before, start = self.lone, self.cursor
        self.accept(piece, None, prefix_space=prefix_space)
        self.lone = self.lone.took(before, start, self.cursor, piece.text)
        return True


def _saved_elsewhere(library: Library, story_id: str, node_id: str, text: str) -> str:
    """Save `text`, typed at `node_id` of story `story_id` (not the tab's now), as a branch
    there; what to tell the writer."""
    made = Provenance("typed")
    move = lambda loom: loom.at(node_id).edit(text, provenance=made)  # noqa: E731
    try:
        saved = library.save(lambda: library.store.update(story_id, move))
    except NoSuchNode:
        saved = None
    title = library.title(story_id) or "the story you were in"
    return (f"Your edit to “{title}” was saved there as a new branch; you are in the "
            "story you opened." if saved is not None else f"Your edit to “{title}” could "
            f"not be saved there ({library.save_error or 'its node is gone'}).")  # fmt: skip
