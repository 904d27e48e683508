"""Where the sidecar is: the same order in every toolgate client."""

from __future__ import annotations

import os
from typing import NamedTuple, Optional
from urllib.parse import quote, urlsplit

#: The socket injected sidecars serve agents on.
DEFAULT_SOCKET = "/var/run/toolgate/toolgate.sock"
#: The sidecar's loopback port, when nothing else names it.
DEFAULT_URL = "http://127.0.0.1:8181"
#: The environment variable naming the sidecar (injected Pods carry it).
ENV_URL = "TOOLGATE_URL"


class Endpoint(NamedTuple):
    """Where requests go.

    scheme is "http", "https" or "unix"; for unix, socket is the path and
    host/port are unused; prefix is the URL path before /v1/evaluate.
    """

    scheme: str
    host: str
    port: Optional[int]
    socket: str
    prefix: str

    def __str__(self) -> str:
        if self.scheme == "unix":
            return "unix://" + self.socket
        host = "[" + self.host + "]" if ":" in self.host else self.host
        port = "" if self.port is None else ":" + str(self.port)
        return self.scheme + "://" + host + port + self.prefix


def discover(explicit: Optional[str]) -> Endpoint:
    """The explicit URL, else TOOLGATE_URL, else the socket when it exists,
    else http://127.0.0.1:8181. An empty explicit URL or variable counts as
    unset, as in the Go client."""
    if explicit is not None and not isinstance(explicit, str):
        raise TypeError("toolgate: Client(url=...) must be a str or None, not %s" % type(explicit).__name__)
    if explicit:
        return parse_url("Client(url=...)", explicit)
    env = os.environ.get(ENV_URL, "")
    if env:
        return parse_url(ENV_URL, env)
    if os.path.exists(DEFAULT_SOCKET):
        return Endpoint("unix", "", None, DEFAULT_SOCKET, "")
    return parse_url("the default URL", DEFAULT_URL)


def parse_url(setting: str, raw: str) -> Endpoint:
    """Reads unix:///abs/path.sock, unix:/abs/path.sock or
    http(s)://host[:port][/prefix]; setting names where raw came from in
    the error."""
    if raw.startswith("unix:"):
        path = raw[len("unix://"):] if raw.startswith("unix://") else raw[len("unix:"):]
        if not path.startswith("/"):
            raise ValueError(
                "toolgate: %s %r: a socket path must be absolute, as in unix:///var/run/toolgate/toolgate.sock"
                % (setting, raw)
            )
        return Endpoint("unix", "", None, path, "")
    try:
        u = urlsplit(raw)
        port = u.port  # raises ValueError on a port that is not a number in range
    except ValueError as e:
        raise ValueError("toolgate: %s %r is not a URL: %s" % (setting, raw, e)) from None
    if u.scheme not in ("http", "https"):
        raise ValueError(
            "toolgate: %s %r: want unix:///path/to.sock or http://host:port" % (setting, raw)
        )
    if not u.hostname:
        raise ValueError("toolgate: %s %r has no host: want http://host:port" % (setting, raw))
    if u.query or u.fragment or u.username is not None or raw.endswith(("?", "#")):
        raise ValueError(
            "toolgate: %s %r: a sidecar URL has no user, query or fragment" % (setting, raw)
        )
    if any(c.isspace() for c in raw):
        raise ValueError("toolgate: %s %r contains white space" % (setting, raw))
    # The prefix goes into every request line as it is: percent-encode
    # what is not ASCII, keep what is already encoded.
    prefix = quote(u.path.rstrip("/"), safe="/%:@!$&'()*+,;=-._~")
    return Endpoint(u.scheme, u.hostname, port, "", prefix)
