"""The loom and its store: a story as a tree of text nodes, and every story kept on disk.

`loom` holds the tree, the cursor and the pure moves over it; `store` keeps every story's
loom in SQLite (`store_file` the file and its connections, `store_rows` a loom's rows,
`store_errors` what can go wrong); `formats` is the one JSON export; `library` a tab's view
of the stories; `cli` the `python -m weave loom ...` command line. Nothing here searches,
knows a backend or draws.
"""
