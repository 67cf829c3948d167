"""Which Host names the page answers: this machine's, and those the settings allow.

Any web page a writer visits can point a name of its own at 127.0.0.1 (DNS rebinding)
and then read and change the loopback page as if it were its own: the browser sees one
site. What it cannot change is the Host header, which names the attacker's name. So the
page serves a request only when its Host is a loopback name (`localhost`, 127.x.x.x,
`[::1]`) or one `[sharing] allowed_hosts` in config.toml lists, as Jupyter does. The
port is not part of the decision. This module decides, purely; `page.hosts` puts the
decision in front of every request the page's server gets.
"""

from __future__ import annotations

import ipaddress
import re

HOST_NAME = re.compile(r"(?!-)[a-z0-9-]{1,63}(?<!-)(\.(?!-)[a-z0-9-]{1,63}(?<!-))*")


def host_name(header: str) -> str | None:
    """The name a Host header gives (lower case, no port, no final dot, an IPv6 address
    without its brackets), or None for a header that is not one."""
    header = header.strip()
    if header.startswith("["):
        address, bracket, rest = header[1:].partition("]")
        if not bracket or (rest and not rest.startswith(":")) or ":" not in address:
            return None
        name, port = address, rest[1:]
    else:
        name, _, port = header.partition(":")
    if port and not port.isdigit():
        return None
    return checked(name)


def checked(name: str) -> str | None:
    """`name` as a host name or an IP address (lower case, no final dot), or None."""
    name = name.strip().lower().removesuffix(".")
    try:
        return str(ipaddress.ip_address(name))
    except ValueError:
        pass
    return name if len(name) <= 253 and HOST_NAME.fullmatch(name) else None


def is_loopback_name(name: str) -> bool:
    """Whether `name` (as `host_name` gives it) always means this machine."""
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def allowed(header: str | None, extra: frozenset[str] = frozenset()) -> bool:
    """Whether a request whose Host header is `header` is served: a loopback name, or
    one of `extra` (names as `checked` gives them). No header, or a malformed one, is not."""
    name = host_name(header) if header is not None else None
    return name is not None and (is_loopback_name(name) or name in extra)
