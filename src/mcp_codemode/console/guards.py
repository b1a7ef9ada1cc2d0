"""Which requests the console answers at all: the Host and Origin checks that come before any sign-in.

Why they are needed beside the cookie: on loopback, a web page of any site could make the browser reach the console
under a name of its own that resolves to 127.0.0.1 (DNS rebinding): the cookie would not go with it, but the
sign-in page and the launcher's endpoint would answer. So on loopback the Host must be a loopback name. And a page
of another site may post forms to the console with the browser's cookie... except that the cookie is
SameSite=Strict, every action carries a CSRF token, and ``origin_ok`` refuses a foreign Origin besides.
"""

from __future__ import annotations

from ..face.addresses import is_loopback


def host_ok(host: str, loopback: bool) -> bool:
    """Whether the Host header may reach a console bound on loopback (``loopback``) or elsewhere.

    Beyond loopback the console needs a token to sign in, and a rebound name gets no cookie, so any Host will do.
    """
    if not loopback:
        return bool(host)
    name = host[: host.index("]") + 1] if host.startswith("[") and "]" in host else host.rsplit(":", 1)[0]
    return bool(name) and is_loopback(name)


def origin_ok(origin: str | None, host: str, allowed: tuple[str, ...], *, required: bool) -> bool:
    """Whether a request's Origin is the console's own (or one the operator allowed); ``required``: an action,
    which a browser always sends with an Origin, so one without it is not a browser's form and is refused."""
    if origin is None:
        return not required
    return origin in (f"http://{host}", f"https://{host}") or origin in allowed
