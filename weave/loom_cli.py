"""`python -m weave loom ...`: the stories in the data folder, for scripts.

    loom list [--json]         [{"id", "title", "nodes", "updated"}...], last changed first
    loom show STORY_ID [--json]  {"id", "title", "cursor", "nodes": [{"id", "parent", "text",
                               "kind", "provenance"}...], "bookmarks": [...], "steering":
                               {"memory", "note", "note_depth", "lore": [...]}}; a node's text
                               is its own, its provenance `weave.loom.provenance`'s JSON
                               ({"how": "unknown"} for a node made before it was kept);
                               without --json an outline, indented where the story branches
    loom find TEXT [--json]    the nodes of every story where TEXT (case ignored) ends:
                               [{"story", "title", "node", "before", "match", "after"}...]
                               (`weave.loom.find`), at most --limit, latest story first
    loom export STORY_ID [--format lloom|openloom]
                               the whole loom as JSON on stdout (LLooM's, or Open Loom v2)
    loom import FILE [--format F]
                               a new story from a loom file (LLooM's or another tool's, see
                               `weave.interop`; detected unless F names it): its id on stdout,
                               the format found and what was kept aside on stderr (or one
                               error naming the file)
    loom give STORY_ID EMAIL   hand a story to the writer whose provider verified EMAIL
                               (the page's login); it leaves this machine's list. Where
                               several logins have that address, it refuses and lists
                               them (issuer and subject): then
    loom give STORY_ID --to ISSUER SUBJECT
                               hands it to that login (one that has logged in here)

The command line is the machine's local writer (`LOCAL_WRITER`): it sees the stories made
without a login. The store is the configured one (`[data] url` or `folder`; `LLOOM_DATABASE_URL`
and `LLOOM_DATA_DIR` override them).
This module owns these subcommands' arguments and output; the stories are
`weave.loom.store`'s, the files `weave.interop.files`', and `weave.cli` turns errors into
one line on stderr. It sits beside `weave.cli`, above the packages: it reads the settings
(`weave.config`), the logins (`weave.access`) and the files of `weave.interop`.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from weave.access import Login, writer_for
from weave.config import load_settings
from weave.interop.detect import CHOICES
from weave.interop.files import export_json, export_openloom, import_file
from weave.loom.find import MAX_FOUND
from weave.loom.formats import MAX_BYTES
from weave.loom.loom import Loom
from weave.loom.store import InvalidInput, LoomStore, SharedAddress
from weave.story.steering import steering_in

EXPORTS = ("lloom", "openloom")
MAX_LIMIT = 1000  # `loom find --limit`: the most nodes a script may ask for at once
MAX_INDENT = 16  # outline levels drawn as indentation; deeper lines say their level


def add_parser(commands: argparse._SubParsersAction) -> None:
    """The `loom` subcommand and its own subcommands."""
    loom = commands.add_parser("loom", help="list, show, find, export, import and give stories")
    actions = loom.add_subparsers(dest="loom_command", required=True)
    listing = actions.add_parser("list", help="the stories in the data folder")
    listing.add_argument("--json", action="store_true", help="print one JSON list")
    show = actions.add_parser("show", help="a story's nodes, cursor and bookmarks")
    show.add_argument("story_id")
    show.add_argument("--json", action="store_true", help="print one JSON object")
    found = actions.add_parser("find", help="the nodes of every story that hold some text")
    found.add_argument("text")
    found.add_argument("--json", action="store_true", help="print one JSON list")
    limit = f"the most nodes listed (1..{MAX_LIMIT:,}; default: {MAX_FOUND})"
    found.add_argument("--limit", type=int, default=MAX_FOUND, help=limit)
    export = actions.add_parser("export", help="a story's whole loom as JSON on stdout")
    export.add_argument("story_id")
    export.add_argument(
        "--format",
        choices=EXPORTS,
        default="lloom",
        help="lloom (LLooM's own, the default) or openloom (Open Loom v2)",
    )
    imported = actions.add_parser("import", help="a new story from a loom file")
    imported.add_argument("file", type=Path)
    imported.add_argument(
        "--format",
        choices=CHOICES,
        default=None,
        help="the file's format (by default it is detected)",
    )
    give = actions.add_parser("give", help="hand a story to a login (an e-mail address)")
    give.add_argument("story_id")
    give.add_argument("email", nargs="?", help="the login's verified address")
    give.add_argument("--to", nargs=2, metavar=("ISSUER", "SUBJECT"),
                      help="the login by provider and subject (an address shared)")  # fmt: skip


def run(args: argparse.Namespace) -> str:
    """What the subcommand prints. Raises `StoreError`, `ConfigError`, `OSError`, or
    `ValueError` for a story whose stored steering is unreadable."""
    store = LoomStore(load_settings().stories_at)
    if args.loom_command == "list":
        rows = [
            {"id": i.id, "title": i.title, "nodes": i.nodes, "updated": i.updated}
            for i in store.stories()
        ]
        if args.json:
            return json.dumps(rows, ensure_ascii=False, allow_nan=False)
        return "\n".join(f"{r['id']}  {r['nodes']:5d} nodes  {r['title']}" for r in rows)
    if args.loom_command == "show":
        loom = store.load(args.story_id)
        if args.json:
            shown = _shown(args.story_id, store.info(args.story_id).title, loom)
            shown["steering"] = steering_in(store.settings(args.story_id)).to_dict()
            return json.dumps(shown, ensure_ascii=False, allow_nan=False)
        return _outline(loom)
    if args.loom_command == "find":
        if not 1 <= args.limit <= MAX_LIMIT:
            raise ValueError(
                f"--limit must be a whole number in 1..{MAX_LIMIT:,}, not {args.limit}"
            )
        found = store.find(args.text, limit=args.limit)
        if args.json:
            return json.dumps([f.to_dict() for f in found], ensure_ascii=False, allow_nan=False)
        return "\n".join(f"{f.story_id} {f.node_id}  {f.title}: {f.snippet!r}" for f in found)
    if args.loom_command == "export":
        if args.format == "openloom":
            return export_openloom(store, args.story_id)
        return export_json(store, args.story_id)
    if args.loom_command == "give":
        return _give(store, args)
    story_id, imported = import_file(store, _read_export(args.file), str(args.file),
                                     format=args.format)  # fmt: skip
    print(imported.message(), file=sys.stderr)  # stdout holds the id alone, for scripts
    return story_id


def _give(store: LoomStore, args: argparse.Namespace) -> str:
    """`loom give`: to the one login with an address, or to a login by issuer and subject."""
    if (args.email is None) == (args.to is None):
        raise InvalidInput("loom give takes an e-mail address or --to ISSUER SUBJECT, one of them")
    if args.to is not None:
        issuer, subject = (part.strip() for part in args.to)
        if not issuer or not subject or any(c.isspace() for c in issuer):
            raise InvalidInput("--to takes an issuer (a URL, no spaces) and a subject")
        writer = Login(issuer, subject, "").writer
        store.give_to(args.story_id, writer)
        return f"{args.story_id} is now {writer}'s"
    email = writer_for(args.email)
    if email is None:
        raise InvalidInput(f"{args.email!r} is not an e-mail address; a login is named by one")
    try:
        owner = store.give(args.story_id, email)
    except SharedAddress as e:
        raise InvalidInput(
            f"{email} is the verified address of {len(e.logins)} logins: "
            f"{'; '.join(e.logins)}; give the story to one with --to ISSUER SUBJECT"
        ) from None
    return f"{args.story_id} is now {owner}'s"


def _read_export(path: Path) -> bytes:
    """The file's bytes, read no further than the cap (a device may never end)."""
    with open(path, "rb") as f:
        data = f.read(MAX_BYTES + 1)
    if len(data) > MAX_BYTES:
        raise InvalidInput(f"{path} is longer than {MAX_BYTES >> 20} MiB: not a loom file")
    return data


def _shown(story_id: str, title: str, loom: Loom) -> dict:
    nodes = [
        {"id": n.id, "parent": n.parent, "text": n.text, "kind": n.kind,
         "provenance": {"how": "unknown"} if n.provenance is None else n.provenance.to_dict()}
        for n in loom.nodes.values()
    ]  # fmt: skip
    return {"id": story_id, "title": title, "cursor": loom.cursor, "nodes": nodes,
            "bookmarks": sorted(loom.bookmarks)}  # fmt: skip


def _outline(loom: Loom) -> str:
    """The tree, one node a line; '*' marks the cursor, '#' a bookmark. A node's only
    child stays in its column, drawn "↳" (it continues its parent); where a node branches
    its children are drawn one level in, "├─" and "└─" under it with "│" joining them, as
    tree(1) draws folders. A child never looks like a sibling. Never more than
    `MAX_INDENT` levels in (a deeper line says its level): the output grows with the
    nodes, not with their depth."""
    lines = []
    stack = [(loom.root, "", "", 0)]  # (node, guides before it, its connector, branch level)
    while stack:
        node_id, guides, connector, level = stack.pop()
        mark = ("*" if node_id == loom.cursor else " ") + (
            "#" if node_id in loom.bookmarks else " "
        )
        deep = f"({level}) " if level > MAX_INDENT else ""
        lines.append(f"{mark} {guides}{connector}{deep}{node_id} {loom.node(node_id).text!r}")
        children = loom.children(node_id)
        deeper = level < MAX_INDENT  # past it, lines stop moving right
        below = guides + ({"├─ ": "│  ", "└─ ": "   "}.get(connector, "") if deeper else "")
        if len(children) == 1:
            stack.append((children[0].id, below, "↳ ", level))
            continue
        inner = below + ("  " if deeper else "")
        for i, child in reversed(list(enumerate(children))):
            last = i == len(children) - 1
            stack.append((child.id, inner, "└─ " if last else "├─ ", level + 1))
    return "\n".join(lines)
