"""A tab's desk: its place in a story, and what each node offers the writer.

`session.Workspace` is a tab's cursor over the loom and its moves (saved through
`pending`; the lone rule's state `lone`'s, the story's settings one `settings` value);
`offers.Offers` runs and keeps a node's searches, draws and alternatives; `lookahead`
makes the searches a writer is likely to ask for next while they read, and `reading`
reads a long story apart, both as a `background.Job`; `library.Library` is a tab's view of
the stories, importing and exporting them.
"""
