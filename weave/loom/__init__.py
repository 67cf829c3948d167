"""The loom and its store: a story as a tree of text nodes, and every story kept on disk.

`loom` holds the tree, the cursor and the pure moves over it; `store` keeps every story's
loom in SQLite or PostgreSQL (`store_file` the file and its connections, `store_pg` the
server, `store_rows` a loom's rows, `store_errors` what can go wrong); `formats` is the one
JSON export. This is the bottom package: nothing here reads another tool's file, checks a
story's settings, searches, knows a backend or draws (`weave.interop` reads and writes the
files, `weave.desk.library` is a tab's view of the stories).
"""
