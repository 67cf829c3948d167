"""One tab's place in a story's loom, without Streamlit: a story id, a cursor, its moves.

A `Workspace` is a cursor over the loom `weave.loom.store` keeps (no history of its own):
every move is one `LoomStore.update`, and `refresh` rereads the loom on every rerun, so
other tabs' nodes appear. A write that fails stays pending: the move is shown at once,
`save_error` says it is not saved, and it is saved at the next change or rerun with the
node ids it was shown with. Where another tab saved a node of the same text at the same
place meanwhile, the store keeps theirs and our id stands for it in the moves still
pending. A tab does not leave a story while moves of it are unsaved. Lone suggestions
accepted by themselves in a row are one `LoneChain`: one undo takes them all back; with
how many were taken it is the tab's one `Lone` value. The story's steering
(`weave.story.steering`) and bans (`weave.story.bans`) are kept in its settings record
(so exported and imported with it) and go with `spot`. A story another writer shared
with this one to read (`role`) is moved about and bookmarked, never added to: a move that
would add a node is refused here, saying why.
Streamlit may start a tab's next script run while the last one is still inside a slow
save, so the moves and the reads that replace the loom hold the tab's lock: one run's
move waits for the other's save, and the pending moves are saved once each, in order.
What a node offers is `weave.desk.offers`'; the list of stories, and
importing and exporting them, `weave.desk.library`'s.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import partial, wraps
from threading import RLock

from weave.desk.library import Library
from weave.desk.lookahead import LookAhead
from weave.desk.offers import Offers
from weave.desk.reading import Reading
from weave.desk.spot import Piece, Spot
from weave.interop.foreign import kept_aside
from weave.loom.formats import without_surrogates
from weave.loom.loom import Loom, NoSuchNode, new_id
from weave.loom.provenance import Provenance, taken
from weave.loom.store import LoomStore, StoreError, StoryNotFound
from weave.story.bans import Bans, bans_in, with_bans
from weave.story.steering import Steering, steering_in, with_steering

AUTO_ACCEPTS = 8  # lone suggestions accepted in a row before the writer is asked again
READ_ONLY = ("This story was shared with you to read: you can move about it and bookmark it, "
             "not add to it (its owner can let you co-write).")  # fmt: skip

Move = Callable[[Loom], Loom]


def one_run_at_a_time(method):
    """Hold the tab's lock through `method`: two overlapping script runs of one tab
    neither save a pending move twice nor take one from under the other."""

    @wraps(method)
    def held(self, *args, **kwargs):
        with self._lock:
            return method(self, *args, **kwargs)

    return held


@dataclass(frozen=True)
class Pending:
    """A move shown but not saved yet, and the id of the node it adds (if it adds one)."""

    move: Move
    made: str | None = None


@dataclass(frozen=True)
class LoneChain:
    """Lone suggestions accepted by themselves one after another: from `start` to `end`."""

    start: str  # the node the first was accepted at: one undo goes back there
    end: str
    texts: tuple[str, ...]  # what each appended, in order


@dataclass(frozen=True)
class Lone:
    """A tab's lone-accept state, one value: how many lone suggestions were accepted by
    themselves in a row (`taken`: at AUTO_ACCEPTS none is, until the writer acts) and the
    last `chain` they made. A move returns it to `armed` (the writer acted: lone ones may
    be taken again) or `held` (a deliberate place: none is taken by itself there)."""

    taken: int = 0
    chain: LoneChain | None = None

    def armed(self) -> Lone:
        return replace(self, taken=0)

    def held(self) -> Lone:
        return replace(self, taken=AUTO_ACCEPTS)


class Workspace:
    """This tab's cursor in one story of `store`: its moves, its `offers` there, and its
    `library` of other stories. A failure to save is kept in `save_error`, never raised."""

    def __init__(self, store: LoomStore) -> None:
        self._lock = RLock()  # see `one_run_at_a_time`
        self.library = Library(store)
        self._save = self.library.save
        self.story_id: str | None = None
        self.loom: Loom | None = None  # as last read from the store, pending moves applied
        self.title = ""
        self.role = "owner"  # this writer's in the story: "owner", "co-writer" or "reader"
        self.ahead = LookAhead(0)  # this tab's look-ahead; its rows are the page's setting
        self.reading = Reading()  # this tab's long story read in the background
        self.default_bans = Bans()  # config.toml's [bans], beside the story's own (the page's)
        self._clear()

    @property
    def store(self) -> LoomStore:
        return self.library.store

    @property
    def save_error(self) -> str | None:  # what failed last in the store (None once one works)
        return self.library.save_error

    def _clear(self) -> None:
        self.settings: dict = {}
        self.steering = Steering()  # the story's memory, note and lorebook
        self.bans = Bans()  # the story's bans, bias and repetition guard
        self.pending: list[Pending] = []  # moves shown but not yet saved
        self._stand_ins: dict[str, str] = {}  # our unsaved node id -> the stored node kept
        self.offers = Offers(self.library, self.ahead, self.reading)  # its searches and draws
        self.notice: str | None = None  # something opened is not shown, and why (until a move)
        self.lone = Lone()  # lone suggestions taken by themselves (`take_lone`)

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
        """Read the loom as stored now (other tabs' nodes too), keeping this tab's cursor."""
        if self.story_id is None:
            return
        if self.pending:
            self._flush()
            return
        try:  # a read that works does not clear `save_error`: it says what failed last
            stored = self.store.load(self.story_id)
            settings = self.store.settings(self.story_id)  # another tab may have steered
            title = self.store.info(self.story_id).title  # renamed, or its opening rewritten
        except StoreError as e:
            self.library.failed(e, reading=True)
            return
        self.loom = stored.at(self.cursor) if self.cursor in stored.nodes else stored
        self.title = title
        self._take_settings(settings)

    # -- opening and closing ------------------------------------------------------------
    @one_run_at_a_time
    def start(self, text: str) -> bool:
        """A new story holding `text`; False (`save_error` says why) where it cannot be made."""
        if not self._may_leave():
            return False
        typed = Provenance("typed")
        made = self._save(lambda: self.store.create(without_surrogates(text), provenance=typed))
        if made is None:
            return False
        self._clear()
        self.story_id, self.loom = made
        self.title, self.role = self.library.title(self.story_id), "owner"
        return True

    @one_run_at_a_time
    def open(self, story_id: str, node_id: str | None = None, *, notice: str | None = None) -> bool:
        """Reopen a story at `node_id` (else where it was left); False where it is not here.
        `notice`: what to say once it is open (an import's, `Library.import_file`)."""
        if not self._may_leave():
            return False
        try:
            loom = self.store.load(story_id)
        except StoryNotFound:  # purged, or never here: the page says so, nothing failed
            return False
        except StoreError as e:
            self.library.failed(e, reading=True)
            return False
        self._clear()
        self.story_id = story_id
        self.loom = loom.at(node_id) if node_id in loom.nodes else loom
        info = self.library.save(lambda: self.store.info(story_id), reading=True)
        self.title, self.role = (info.title, info.role) if info else ("", "owner")
        settings = self.library.save(lambda: self.store.settings(story_id), reading=True)
        self._take_settings(settings or {})
        self.lone = self.lone.held()  # reopening changes nothing by itself
        self.notice = notice or self.notice
        return True

    @one_run_at_a_time
    def close(self) -> None:
        """Back to the start page; the story stays saved (this tab stays while its moves
        cannot be saved: `save_error`)."""
        if not self._may_leave():
            return
        self._clear()
        self.story_id, self.loom, self.title, self.role = None, None, "", "owner"

    def _may_leave(self) -> bool:
        """Save the pending moves; False (and why, in `save_error`) while any are unsaved."""
        self._flush()
        if self.pending:
            self.library.save_error = (
                f"{len(self.pending)} change(s) to this story are not saved yet "
                f"({self.save_error}); the story stays open until they are"
            )
        return not self.pending

    def _id(self, node_id: str) -> str:
        """The stored node that `node_id` stands for (itself, unless another tab saved the
        same text first)."""
        return self._stand_ins.get(node_id, node_id)

    # -- moves ----------------------------------------------------------------------------
    def edit(self, text: str, *, how: str = "typed") -> None:
        """The writer's own edit: a branch from the longest common prefix (nothing lost).
        `how`: "alternative" when the writer branched at a token the model offered."""
        text = without_surrogates(text)
        if text != self.text and self._may_add():
            node_id, cursor, made = new_id(), self.cursor, Provenance(how)
            self._move(
                lambda loom: loom.at(self._id(cursor)).edit(text, id=node_id, provenance=made),
                node_id,
            )
            self.lone = self.lone.armed()

    def edit_typed(self, story_id: str, node_id: str, text: str) -> None:
        """The writer's edit typed in story `story_id` at `node_id`: `edit` while this tab
        is in that story; else (another callback of the same script run, an import, opened
        another story first) a branch saved in the story it was typed in, said in `notice`,
        the tab staying where it is. An edit never lands in a story it was not typed in."""
        if story_id == self.story_id:
            self.edit(text)
            return
        text, made = without_surrogates(text), Provenance("typed")
        move = lambda loom: loom.at(node_id).edit(text, provenance=made)  # noqa: E731
        try:
            saved = self._save(lambda: self.store.update(story_id, move))
        except NoSuchNode:
            saved = None
        title = self.library.title(story_id) or "the story you were in"
        said = (f"Your edit to “{title}” was saved there as a new branch; you are in the "
                "story you opened." if saved is not None else f"Your edit to “{title}” could "
                f"not be saved there ({self.save_error or 'its node is gone'}).")  # fmt: skip
        self.notice = f"{self.notice} {said}" if self.notice else said

    def accept(self, piece: Piece, shown: str | None, *, prefix_space: bool) -> None:
        """Take a suggestion as shown (maybe edited): a child of the node it was made for.

        A suggestion made for another node than the current one (a click on a button
        left from before the last move) is kept as a branch there, and nothing moves.
        """
        if piece.node_id != self.cursor:
            self.keep(piece, shown, prefix_space=prefix_space)
            return
        if not self._may_add():
            return
        grow, made = self._grower(piece, shown, prefix_space=prefix_space)
        self._move(lambda loom: grow(loom, "accept"), made)
        self.lone = self.lone.armed()

    def keep(self, piece: Piece, shown: str | None, *, prefix_space: bool) -> None:
        """Keep a suggestion as a branch of the node it was made for; the cursor stays."""
        if not self._may_add():
            return
        grow, made = self._grower(piece, shown, prefix_space=prefix_space)
        cursor = self.cursor
        self._move(lambda loom: grow(loom, "keep").at(self._id(cursor)), made)

    def _grower(
        self, piece: Piece, shown: str | None, *, prefix_space: bool
    ) -> tuple[Callable[[Loom, str], Loom], str]:
        """How to grow `piece` (as shown) at its node, and the id of the node it adds."""
        text = piece.text_as(None if shown is None else without_surrogates(shown), prefix_space)
        exact = text == piece.text and piece.exact
        made, ids = new_id(), {"token_ids": piece.token_ids, "model": piece.model}
        node = {"id": made, "kind": piece.kind, "params": piece.params, "score": piece.score}
        node |= ids if exact else {}
        at = piece.node_id
        return lambda loom, how: getattr(loom.at(self._id(at)), how)(
            text, **node, provenance=taken(piece.provenance, how, changed=text != piece.text)
        ), made

    def _may_add(self) -> bool:
        """Whether this tab may add to its story; a reader is told why not (`notice`)."""
        if self.role == "reader":
            self.notice = READ_ONLY
            return False
        return True

    def go(self, node_id: str) -> None:
        self._navigate(lambda loom: loom.go(self._id(node_id)))

    def lone_chain(self) -> LoneChain | None:
        """The lone suggestions accepted by themselves that led to the cursor, if any."""
        chain = self.lone.chain
        return chain if chain is not None and self.loom and chain.end == self.cursor else None

    def undo_target(self) -> str | None:
        """Where undo goes: the parent, or where a chain of lone accepts began."""
        chain = self.lone_chain()
        return chain.start if chain is not None else self.loom.undo_target()

    def undo(self) -> None:
        """To the parent: the story before its last piece; after lone suggestions accepted
        by themselves, to where the first was accepted (one step undoes them all)."""
        cursor, chain = self.cursor, self.lone_chain()
        if chain is not None:
            self._navigate(lambda loom: loom.go(self._id(chain.start)))
            return
        self._navigate(lambda loom: loom.at(self._id(cursor)).undo())

    def redo(self) -> None:
        """To the checked-out child: back along the branch this tab came from."""
        cursor = self.cursor
        self._navigate(lambda loom: loom.at(self._id(cursor)).redo())

    def sibling(self, step: int) -> None:
        cursor = self.cursor
        self._navigate(lambda loom: loom.at(self._id(cursor)).sibling(step))

    def bookmark(self, node_id: str, on: bool) -> None:
        cursor = self.cursor
        self._move(lambda loom: loom.bookmark(self._id(node_id), on).at(self._id(cursor)))

    def _navigate(self, move: Move) -> None:
        self._move(move)
        self.lone = self.lone.held()  # going back is deliberate: no lone accept undoes it

    @one_run_at_a_time
    def _move(self, move: Move, made: str | None = None) -> None:
        """Show `move` (which adds the node `made`, if any) at once, then save it (and any
        before it). A move naming a node this story lacks (a stale click) does nothing."""
        if self.loom is None:
            return
        try:
            self.loom = move(self.loom)
        except NoSuchNode:
            return
        self.pending.append(Pending(move, made))
        self.notice = None
        self.offers.settle()
        self._flush()

    def _flush(self) -> None:
        """Save the pending moves in order; those that fail stay, and are shown. A move the
        stored loom cannot take (it names a node the store lacks) is dropped, and said.
        Called only with the tab's lock held (from `_move`, `refresh` and the leaving)."""
        while self.pending:
            pending = self.pending[0]
            try:
                saved = self._save(partial(self.store.update, self.story_id, pending.move))
            except (NoSuchNode, ValueError) as e:
                self.notice = f"A change could not be saved and was dropped: {e}."
                last = len(self.pending) == 1
                saved = self._save(lambda: self.store.load(self.story_id)) if last else None
            else:
                if saved is None:
                    return
                self._stand_in(pending.made, saved)
            self.pending.pop(0)
            if not self.pending and saved is not None:
                cursor = self._id(self.cursor)
                self.loom = saved.at(cursor) if cursor in saved.nodes else saved

    def _stand_in(self, made: str | None, saved: Loom) -> None:
        """When the node a saved move added is not in the store (another tab had saved the
        same text there first, and the store kept theirs), ours stands for theirs."""
        if made is None or made in saved.nodes or made not in self.loom.nodes:
            return
        ours = self.loom.nodes[made]
        theirs = saved.child_with_text(self._id(ours.parent), ours.text)
        if theirs is not None:
            self._stand_ins[made] = theirs.id

    # -- the story's title, settings and file ------------------------------------------
    def rename(self, story_id: str, title: str) -> None:
        """Give story `story_id` a title (the story whose title box it was typed in, which
        another callback of the same run may have left)."""
        title = self.library.rename(story_id, title)
        if story_id == self.story_id:
            self.title = title

    def remember_settings(self, settings: dict) -> None:
        """Save the story's search settings when they changed (its steering stays)."""
        settings = with_bans(with_steering(settings, self.steering), self.bans)
        settings |= kept_aside(self.settings)
        if settings != self.settings and self.story_id is not None:
            self.settings = dict(settings)
            if self.role != "reader":  # a reader's sliders are their own view only
                self._save(lambda: self.store.save_settings(self.story_id, settings))

    def _take_settings(self, settings: dict) -> None:
        """The story's settings as stored, its steering among them."""
        self.settings = settings
        try:
            self.steering = steering_in(settings)
        except ValueError as e:  # a store edited by hand: the story opens, unsteered
            self.notice = f"This story's memory, note and lorebook cannot be read ({e})."
        try:
            saved = bans_in(settings)
        except ValueError as e:  # likewise: the story opens without bans
            self.bans = Bans()
            self.notice = f"This story's bans cannot be read ({e})."
            return
        self.bans = saved.bans
        if saved.left_out:  # saved before patterns ran on RE2: the others apply
            self.notice = (
                f"A saved ban pattern cannot run and is left out: {'; '.join(saved.left_out)}. "
                "The story's other bans apply; the pattern goes when the bans are next saved."
            )

    def set_steering(self, steering: Steering) -> None:
        """The story's memory, note and lorebook from now on, saved with the story."""
        self.steering = steering
        self.remember_settings(self.settings)

    def set_bans(self, bans: Bans) -> None:
        """The story's bans, bias and repetition guard from now on, saved with the story."""
        self.bans = bans
        self.remember_settings(self.settings)

    # -- what is offered here --------------------------------------------------------------
    @property
    def spot(self) -> Spot:
        """Where this tab is, for `offers`' searches and draws (the story must be open)."""
        bans = self.default_bans.joined(self.bans)
        return Spot(self.story_id, self.loom, not self.pending, self.steering, bans)

    def retry(self) -> None:
        """'Suggest again': search once more (`Offers.retry`); a lone suggestion that search
        finds is taken by itself again (`take_lone`), even where the writer went back.
        Suggestions kept that it would only make again are shown as "same", not taken."""
        self.offers.retry()
        self.lone = self.lone.armed()

    def take_lone(self, piece: Piece, *, prefix_space: bool) -> bool:
        """Accept a lone suggestion by itself (LLooM's rule, `Shown.lone`), a few times in a
        row at most."""
        if self.lone.taken >= AUTO_ACCEPTS:
            return False
        taken, chain, start = self.lone.taken + 1, self.lone_chain(), self.cursor
        self.accept(piece, None, prefix_space=prefix_space)
        self.lone = replace(self.lone, taken=taken)
        if self.cursor != start:
            first, texts = (chain.start, chain.texts) if chain else (start, ())
            self.lone = Lone(taken, LoneChain(first, self.cursor, (*texts, piece.text)))
        return True
