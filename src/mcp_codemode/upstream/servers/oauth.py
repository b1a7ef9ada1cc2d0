"""OAuth 2.1 sign-in to remote upstream servers (Streamable HTTP and SSE), with the MCP SDK's client support.

``mcp-codemode login SERVER`` runs the browser sign-in once (``login.py``): discovery of the authorization server,
dynamic client registration, PKCE, a redirect to a listener on loopback. What it gets is kept in the sign-in store
(``sign_ins.py``: a private file per server under ``<state_dir>/oauth/``, or a key of one Secret that replicas share):
the tokens and the registered client. The bridge then signs its requests with them and the SDK refreshes them, in
turns with the other bridges that share them (``StoredTokens``); they are never logged, never audited, and never
reach a sandbox: a server's error that quotes them is redacted (``StoredSecrets``). A server that wants sign-in and
has no tokens answers 401, and the call fails with ``ServerUnavailable`` naming the command to run. ``logout``
deletes the record.

A record is keyed by the server's name and URL together, so a config that points a name at another server does
not send it the first one's tokens.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import time
from collections.abc import AsyncGenerator, Generator
from typing import Any

import httpx2
from mcp.client.auth import OAuthClientProvider
from mcp.client.auth.utils import union_scopes
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientInformationFull, OAuthClientMetadata, OAuthToken

from ...errors import CodemodeError
from ..model import ServerConfig
from .sign_ins import Record, SignIn, SignInStore, same_tokens, sign_in_key

CLIENT_NAME = "mcp-codemode"


class SignInRequired(CodemodeError):
    """The server needs a sign-in the bridge cannot do on its own (no tokens, or they can no longer be refreshed)."""

    def __init__(self, server: str) -> None:
        super().__init__(
            f"it needs you to sign in: run `mcp-codemode login {server}` once (the bridge then uses and refreshes "
            "the tokens it stores)"
        )


class StoredSignIn(SignIn):
    """The SDK's ``TokenStorage`` on one server's sign-in record (tokens and the registered client), and what
    ``login`` keeps beside them; every write is a swap (``SignIn.change``), so writers on other replicas are not
    overwritten. A new token ends any refresh turn (``SignIn.take_turn``): it is the outcome others wait for."""

    async def get_tokens(self) -> OAuthToken | None:
        tokens = (await self.load()).get("tokens")
        if not isinstance(tokens, dict):
            return None
        return OAuthToken.model_validate({key: value for key, value in tokens.items() if key != "expires_at"})

    async def set_tokens(self, tokens: OAuthToken) -> None:
        # When the access token expires, as a time: ``expires_in`` alone means nothing once read back later.
        expires_at = time.time() + tokens.expires_in if tokens.expires_in is not None else None
        dumped = tokens.model_dump(mode="json", exclude_none=True) | {"expires_at": expires_at}
        await self.change(lambda record: record | {"tokens": dumped, "refreshing": None})

    def expires_at(self) -> float | None:
        """When the access token last read or written here expires (None: unknown, or never)."""
        tokens = self.record.get("tokens")
        when = tokens.get("expires_at") if isinstance(tokens, dict) else None
        return float(when) if isinstance(when, (int, float)) else None

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        client = (await self.load()).get("client")
        return OAuthClientInformationFull.model_validate(client) if isinstance(client, dict) else None

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        dumped = client_info.model_dump(mode="json", exclude_none=True)
        await self.change(lambda record: record | {"client": dumped})

    async def signed_in(self) -> bool:
        return isinstance((await self.load()).get("tokens"), dict)

    async def wanted_scope(self) -> str | None:
        """The scope a server asked for that the bridge could not sign in for by itself (a step-up: 403
        ``insufficient_scope``), for the next ``login`` to ask for with the rest."""
        wanted = (await self.load()).get("wanted_scope")
        return wanted if isinstance(wanted, str) and wanted else None

    async def want_scope(self, scope: str | None) -> None:
        await self.change(lambda record: record | {"wanted_scope": scope})

    async def configured_client(self) -> OAuthClientInformationFull | None:
        """The client id given with ``login --client-id`` (kept for the next sign-in), if that is what is stored."""
        data = await self.load()
        client = data.get("client")
        return OAuthClientInformationFull.model_validate(client) if data.get("configured") and client else None

    async def forget_tokens(self) -> None:
        """Before a new sign-in: the old tokens would be used instead of asking."""
        await self.change(lambda record: record | {"tokens": None, "refreshing": None})

    async def keep_client(self, client: OAuthClientInformationFull | None) -> None:
        """Store a configured client (None: forget the stored one, so the sign-in registers afresh)."""
        dumped = client.model_dump(mode="json", exclude_none=True) if client is not None else None
        await self.change(lambda record: record | {"client": dumped, "configured": client is not None})

    async def forget(self) -> bool:
        """``logout``: delete the record; whether there was one."""
        existed = bool(await self.load())
        await self.change(lambda record: None)
        return existed


def sign_in_of(config: ServerConfig, store: SignInStore) -> StoredSignIn:
    return StoredSignIn(store, sign_in_key(config))


class StoredSecrets:
    """The OAuth secrets stored for one server (tokens, the client's secret), for its redaction to hide.

    What the store holds is looked at again whenever it changed (``SignInStore.known``: a refresh replaces it), so a
    renewed token is hidden from the moment the SDK stores it, before any request is signed with it. Tokens seen
    before are still hidden: an error about a request signed with the old one can arrive after the refresh. The last
    ``KEPT`` values are kept.
    """

    KEPT = 64
    FIELDS = (("tokens", "access_token"), ("tokens", "refresh_token"), ("tokens", "id_token"),
              ("client", "client_secret"), ("client", "registration_access_token"))  # fmt: skip

    def __init__(self, store: SignInStore, key: str) -> None:
        self.store = store
        self.key = key
        self.last: Record | None = None
        self.seen: dict[str, None] = {}  # in the order first seen

    def __call__(self) -> tuple[str, ...]:
        data = self.store.known(self.key)
        if data is not None and data is not self.last:
            self.last = data
            for part, field in self.FIELDS:
                section = data.get(part)
                value = section.get(field) if isinstance(section, dict) else None
                if isinstance(value, str) and value:
                    self.seen.pop(value, None)
                    self.seen[value] = None
            for old in list(self.seen)[: -self.KEPT]:
                del self.seen[old]
        return tuple(self.seen)


def client_metadata(redirect_uri: str) -> OAuthClientMetadata:
    """What the bridge registers itself as: a public client (PKCE, no secret) that redirects to loopback."""
    return OAuthClientMetadata.model_validate(
        {
            "client_name": CLIENT_NAME,
            "redirect_uris": [redirect_uri],
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
            "token_endpoint_auth_method": "none",
        }
    )


class TokenRefused(CodemodeError):
    """A 401 answer to the ``Authorization`` header the server's config gives: that token is wrong or expired."""

    def __init__(self, source: str) -> None:
        super().__init__(f"it answered 401 Unauthorized to the Authorization header of its entry in {source}: "
                         "check that token (or remove the header and run `mcp-codemode login` to sign in)")  # fmt: skip


class SignInHint(httpx2.Auth):
    """For a remote server the bridge holds no tokens for: requests go as they are, and a 401 answer says what to
    do (the SDK would report it only as "Server returned an error response")."""

    def __init__(self, config: ServerConfig) -> None:
        self.config = config

    def auth_flow(self, request: httpx2.Request) -> Generator[httpx2.Request, httpx2.Response, None]:
        response = yield request
        if response.status_code == 401:
            if any(name.lower() == "authorization" for name in self.config.headers):
                raise TokenRefused(self.config.source)
            raise SignInRequired(self.config.name)


def configured_client(client_id: str, secret: str | None, redirect_uri: str) -> OAuthClientInformationFull:
    """A client registered with the provider by its admin (``login --client-id``): public with PKCE, or with a
    secret, sent as HTTP Basic authentication (the method every authorization server must support for a client
    with a password, RFC 6749 section 2.3.1; the conformance suite's pre-registration scenario offers no other)."""
    return OAuthClientInformationFull.model_validate(
        client_metadata(redirect_uri).model_dump(mode="json", exclude_none=True)
        | {
            "client_id": client_id,
            "client_secret": secret,
            "token_endpoint_auth_method": "client_secret_basic" if secret else "none",
        }
    )


async def bridge_auth(config: ServerConfig, store: SignInStore) -> httpx2.Auth | None:
    """How the bridge signs its requests to a remote server: with the tokens ``store`` holds for it, refreshed by
    the SDK in turns with the other bridges that share them; without, as they are (a 401 then says to sign in). It
    never starts a sign-in itself: a server that wants a new one gets ``SignInRequired``, whose message names the
    command."""
    if config.transport not in ("http", "sse") or config.url is None:
        return None
    storage = sign_in_of(config, store)
    if not await storage.signed_in():
        return SignInHint(config)
    client = storage.record.get("client") or {}
    redirect = next(iter(client.get("redirect_uris") or []), "http://127.0.0.1/callback")

    async def cannot_open(url: str) -> None:  # called with the scope the SDK chose (a step-up's union) in place
        await storage.want_scope(provider.context.client_metadata.scope)
        raise SignInRequired(config.name)

    async def cannot_wait() -> AuthorizationCodeResult:  # never reached; the SDK only insists that there is one
        raise SignInRequired(config.name)

    provider = StoredTokens(
        config.url, client_metadata(str(redirect)), storage, redirect_handler=cannot_open, callback_handler=cannot_wait
    )
    return provider


class SigningIn(OAuthClientProvider):
    """The SDK's provider for ``login``, asking also for the scope a server last wanted and the bridge could not
    sign in for (a step-up, SEP-2350): the SDK picks the scope from the first 401 of a fresh sign-in, which names
    only what listing tools needs, so the step-up would be asked for again on the next call."""

    def __init__(self, *args: Any, wanted: str | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.wanted = wanted

    async def _perform_authorization_code_grant(self) -> tuple[str, str]:
        self.context.client_metadata.scope = union_scopes(self.context.client_metadata.scope, self.wanted)
        return await super()._perform_authorization_code_grant()


class StoredTokens(OAuthClientProvider):
    """The SDK's provider on a shared sign-in: told when the stored access token expires, and refreshing it in turns
    with every other bridge that uses the same sign-in.

    Expiry: the SDK keeps only a relative lifetime, so a token read back hours later would be sent as it is, get a
    401, and start a sign-in the bridge cannot do (a token revoked before it expires still needs ``login`` again).

    Turns: the SDK reads the store once and refreshes from memory when its token expires. Two bridges sharing a
    sign-in hold the same token, which expires for both at once; each would refresh with the same refresh token, and
    a provider that rotates them honours it once (the other bridge's sign-in is lost; some providers revoke both).
    So before each request whose token has expired (``_take_turn``) this reads the store again: tokens someone else
    stored since are adopted, no refresh needed; else it takes the turn (``SignIn.take_turn``, waiting while another
    bridge holds it) and lets the SDK refresh, holding the turn, and this provider's other requests, until the
    answer is stored. A refresh that fails gives the turn back and adopts tokens stored meanwhile, if any.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.holder = secrets.token_hex(8)  # this provider's name on the turns it takes
        self._turns = asyncio.Lock()  # one request of this provider decides (and refreshes) at a time
        self._turn_held = False

    @property
    def sign_in(self) -> StoredSignIn | None:
        storage = self.context.storage
        return storage if isinstance(storage, StoredSignIn) else None

    async def _initialize(self) -> None:
        await super()._initialize()
        if self.sign_in is not None:
            self.context.token_expiry_time = self.sign_in.expires_at()

    async def _auth_flow(self, request: httpx2.Request) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
        await self._take_turn()
        flow = super()._auth_flow(request)
        try:
            outgoing = await flow.__anext__()
            while True:
                outgoing = await flow.asend((yield outgoing))
        except StopAsyncIteration:
            return
        finally:
            await flow.aclose()
            if self._turn_held:  # the flow ended before the refresh's answer (a network error, a cancel)
                await self._end_turn()

    async def _take_turn(self) -> None:
        """Adopt what another bridge stored, or hold the turn to refresh (and ``_turns``) until the SDK has."""
        sign_in = self.sign_in
        await self._turns.acquire()
        try:
            if sign_in is None:
                return
            if not self._initialized:
                await self._initialize()
            while not self.context.is_token_valid() and self.context.can_refresh_token():
                newer = await sign_in.take_turn(self._held(), self.holder)
                if newer is None:
                    self._turn_held = True
                    return
                self._adopt(newer)
        finally:
            if not self._turn_held:
                self._turns.release()

    async def _handle_refresh_response(self, response: httpx2.Response) -> bool:
        tried = self._held()
        refreshed = await super()._handle_refresh_response(response)  # stores the new tokens, ending the turn
        if not refreshed and self._turn_held and self.sign_in is not None:
            record = await self.sign_in.end_turn(self.holder)
            tokens = record.get("tokens")
            if isinstance(tokens, dict) and not same_tokens(tokens, tried):  # stored by another bridge meanwhile
                self._adopt(record)
                self._initialized = True
                refreshed = self.context.is_token_valid()
        self._release_turn()
        return refreshed

    async def _end_turn(self) -> None:
        try:
            if self.sign_in is not None:
                with contextlib.suppress(Exception):  # it lapses on its own; the flow's own error is what matters
                    await self.sign_in.end_turn(self.holder)
        finally:
            self._release_turn()

    def _release_turn(self) -> None:
        if self._turn_held:
            self._turn_held = False
            self._turns.release()

    def _held(self) -> dict[str, Any] | None:
        tokens = self.context.current_tokens
        return {"access_token": tokens.access_token, "refresh_token": tokens.refresh_token} if tokens else None

    def _adopt(self, record: Record) -> None:
        """Use the tokens of ``record`` (stored by another bridge, or a new sign-in; none: signed out)."""
        tokens = record.get("tokens")
        if isinstance(tokens, dict):
            fields = {key: value for key, value in tokens.items() if key != "expires_at"}
            self.context.current_tokens = OAuthToken.model_validate(fields)
            when = tokens.get("expires_at")
            self.context.token_expiry_time = float(when) if isinstance(when, int | float) else None
        else:
            self.context.clear_tokens()
