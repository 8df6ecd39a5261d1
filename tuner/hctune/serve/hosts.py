"""Which `Host` a request may name (against DNS rebinding): a page on an attacker's name whose
address is rebound to this server's is same-origin with itself, so its requests pass every
check of origin; only the Host it sends betrays it. `hctune serve` answers only the names it is
reached by: the address it listens on, `localhost` (and the loopback addresses) when that
address is a loopback one, any IP address when it listens on all of them (0.0.0.0 or ::), and
the names given with `serve --allowed-host NAME` (repeatable; `*` turns the check off, for a
reverse proxy that checks the name itself). Every other Host is a 421 before any work."""

from __future__ import annotations

import ipaddress

LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")


def _ip(text: str):
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        return None


def host_name(header: str) -> str:
    """The name of a Host header, without its port, lower case: `[::1]:8300` -> `::1`."""
    h = header.strip().lower()
    if h.startswith("["):
        return h[1:h.find("]")] if "]" in h else h
    if h.count(":") == 1:
        return h.split(":", 1)[0]
    return h


class Hosts:
    def __init__(self, bind_host: str, allowed=()):
        bind = host_name(bind_host) if not bind_host.startswith("[") else bind_host[1:-1]
        ip = _ip(bind)
        self.any = "*" in allowed
        self.any_ip = ip is not None and ip.is_unspecified      # 0.0.0.0, ::
        self.names = {bind, *(a.lower().rstrip(".") for a in allowed if a != "*")}
        if bind == "localhost" or (ip is not None and ip.is_loopback) or self.any_ip:
            self.names.update(LOOPBACK_NAMES)

    def ok(self, header: str | None) -> bool:
        if self.any:
            return True
        if not header:
            return False
        name = host_name(header)
        if name in self.names:
            return True
        return self.any_ip and _ip(name) is not None
