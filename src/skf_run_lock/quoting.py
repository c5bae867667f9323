"""Text a message may carry safely: a value quoted so that a command runs as printed in
a POSIX shell, and an address shown without its credentials (no message shows a
secret)."""

from __future__ import annotations


def _quoted(text: str) -> str:
    """``text`` as a POSIX shell takes it literally."""
    from shlex import quote

    return quote(text)


def _shown_address(address: str) -> str:
    """``address`` as a message may show it: what stands before an ``@`` is left out."""
    scheme, sep, rest = address.partition("://")
    if "@" not in rest:
        return address
    return f"{scheme}{sep}<credentials left out>@{rest.rpartition('@')[2]}"
