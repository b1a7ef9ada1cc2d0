"""One browser sign-in to a remote server (OAuth 2.1 authorization code with PKCE), whoever hands the browser the
address and brings the code back: ``mcp-codemode login`` (a listener on loopback, ``cli/login.py``) or the web
console (its own callback route, ``console/oauth_routes.py``).

Why one function for both: the steps between "here is where the browser goes" and "the tokens are stored" are the
SDK's protocol plus what the bridge keeps beside it (the scope a server last wanted, the check that the server
asked for a sign-in at all), and two copies would drift. The sign-in connects as the bridge does
(``open_transport``) and lists the tools, so what it stores is proven to open the server.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable

from mcp import Client
from mcp.shared.auth import AuthorizationCodeResult

from ...errors import CodemodeError
from ..model import ServerConfig
from .launch import ServerLog
from .oauth import SigningIn, StoredSignIn, client_metadata
from .transport import open_transport

Show = Callable[[str], Awaitable[None]]  # takes the authorization address the browser must open
Code = Callable[[], Awaitable[AuthorizationCodeResult]]  # waits for the code the redirect brings back


async def authorize(config: ServerConfig, storage: StoredSignIn, redirect_uri: str, show: Show, code: Code) -> None:
    """Sign in to ``config``'s server, redirecting to ``redirect_uri``, and keep the tokens in ``storage``.

    The stored client is the caller's business (registered afresh, or one an admin registered for
    ``redirect_uri``). The old tokens are forgotten first: a sign-in asked for is done even when they still work.
    Raises ``CodemodeError`` naming the failure's cause, or saying that the server asked for no sign-in."""
    assert config.url is not None
    await storage.forget_tokens()
    auth = SigningIn(config.url, client_metadata(redirect_uri), storage, redirect_handler=show,
                     callback_handler=code, wanted=await storage.wanted_scope())  # fmt: skip
    try:
        async with contextlib.AsyncExitStack() as stack:
            transport = await open_transport(stack, config, ServerLog(config, None), start=0, call_timeout=60.0,
                                             setpriv=None, auth=auth)  # fmt: skip
            async with Client(transport, mode=config.protocol) as client:
                await client.list_tools()
    except CodemodeError:
        raise
    except Exception as exc:  # noqa: BLE001 - any failure of the flow is told as one, with its cause
        cause = innermost(exc)
        if isinstance(cause, CodemodeError):
            raise cause from None
        raise CodemodeError(f"signing in to {config.name} at {config.url} failed: {type(cause).__name__}: "
                            f"{cause!s:.300}", fix="check the server's url, then try again") from None  # fmt: skip
    await storage.want_scope(None)  # asked for, and granted or not: the server says again if it wants more
    if not await storage.signed_in():
        raise CodemodeError(f"{config.name} did not ask for a sign-in: its tools are listed without one",
                            fix="nothing to do: the bridge reaches it as it is")  # fmt: skip


def innermost(exc: BaseException) -> BaseException:
    """The first real failure inside the task groups the transport and the SDK wrap it in."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc
