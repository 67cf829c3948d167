"""`BackendError`: the one failure a backend raises, as one line with no credential in it.

A backend that cannot answer says which backend, where it looked and what to check; the
page and the command line catch it once and show it (the story kept). The message often
quotes a server, so it is redacted here (`weave.redaction`), in the one place every
backend's error is made. A caller that no longer wants an answer is not a failure: that is
`backends.base.Cancelled`, beside the `cancellable` hint that promises it.
"""

from __future__ import annotations

from weave.redaction import redacted


class BackendError(RuntimeError):
    """A backend could not answer: names the backend, where it looked, and what to check.

    The message often quotes a server, which may echo a request's credentials: anything
    that looks like one is redacted here, so no error shown or logged can carry a key.
    It is one line: a server's text may hold many (an HTML page, an echoed request), and
    every run of whitespace becomes one space (after redaction, whose patterns end at a
    line's end).
    """

    def __init__(self, message: str, *, backend: str, url: str | None = None):
        self.backend = backend
        self.url = url
        where = f" at {url}" if url else ""
        super().__init__(" ".join(redacted(f"{backend}{where}: {message}").split()))
