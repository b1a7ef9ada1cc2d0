"""OAuth 2.1 sign-in to remote upstream servers (Streamable HTTP and SSE), with the MCP SDK's client support.

``mcp-codemode login SERVER`` runs the browser sign-in once (``login.py``): discovery of the authorization server,
dynamic client registration, PKCE, a redirect to a listener on loopback. What it gets is kept here, one file per
server in ``<state_dir>/oauth/`` (directory 0700, file 0600, replaced atomically): the tokens and the registered
client. The bridge then signs its requests with them and the SDK refreshes them; they are never logged, never
audited, and never reach a sandbox: a server's error that quotes them is redacted (``StoredSecrets``). A server
that wants sign-in and has no tokens answers 401, and the call fails with ``ServerUnavailable`` naming the command
to run. ``logout`` deletes the file.

The file is keyed by the server's name and URL together, so a config that points a name at another server does
not send it the first one's tokens.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import time
from collections.abc import Generator
from pathlib import Path
from typing import Any

import httpx2
from mcp.client.auth import OAuthClientProvider
from mcp.client.auth.utils import union_scopes
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientInformationFull, OAuthClientMetadata, OAuthToken

from ..state_files import make_private_dir
from .model import ServerConfig

CLIENT_NAME = "mcp-codemode"


class SignInRequired(Exception):
    """The server needs a sign-in the bridge cannot do on its own (no tokens, or they can no longer be refreshed)."""

    def __init__(self, server: str) -> None:
        super().__init__(
            f"it needs you to sign in: run `mcp-codemode login {server}` once (the bridge then uses and refreshes "
            "the tokens it stores)"
        )


def token_path(state_dir: Path, config: ServerConfig) -> Path:
    """Where one server's tokens are kept: its name (readable) and a digest of name and URL (unambiguous)."""
    digest = hashlib.sha256(f"{config.name}\0{config.url}".encode()).hexdigest()[:16]
    readable = re.sub(r"[^A-Za-z0-9_.-]", "_", config.name)[:40]
    return state_dir / "oauth" / f"{readable}-{digest}.json"


class TokenFile:
    """The SDK's ``TokenStorage`` on one private file: tokens and the registered client, written atomically."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def _read(self) -> dict[str, Any]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def _write(self, key: str, value: dict[str, Any]) -> None:
        self._replace({key: value})

    def _replace(self, values: dict[str, Any]) -> None:
        data = {key: value for key, value in (self._read() | values).items() if value is not None}
        make_private_dir(self.path.parent)  # and the state directory, 0711 whatever the umask
        partial = self.path.with_name(self.path.name + ".partial")
        fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            json.dump(data, out)
        os.replace(partial, self.path)

    async def get_tokens(self) -> OAuthToken | None:
        tokens = self._read().get("tokens")
        if not isinstance(tokens, dict):
            return None
        return OAuthToken.model_validate({key: value for key, value in tokens.items() if key != "expires_at"})

    async def set_tokens(self, tokens: OAuthToken) -> None:
        # When the access token expires, as a time: ``expires_in`` alone means nothing once read back later.
        expires_at = time.time() + tokens.expires_in if tokens.expires_in is not None else None
        self._write("tokens", tokens.model_dump(mode="json", exclude_none=True) | {"expires_at": expires_at})

    def expires_at(self) -> float | None:
        tokens = self._read().get("tokens")
        when = tokens.get("expires_at") if isinstance(tokens, dict) else None
        return float(when) if isinstance(when, (int, float)) else None

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        client = self._read().get("client")
        return OAuthClientInformationFull.model_validate(client) if isinstance(client, dict) else None

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self._write("client", client_info.model_dump(mode="json", exclude_none=True))

    def signed_in(self) -> bool:
        return isinstance(self._read().get("tokens"), dict)

    def wanted_scope(self) -> str | None:
        """The scope a server asked for that the bridge could not sign in for by itself (a step-up: 403
        ``insufficient_scope``), for the next ``login`` to ask for with the rest."""
        wanted = self._read().get("wanted_scope")
        return wanted if isinstance(wanted, str) and wanted else None

    def want_scope(self, scope: str | None) -> None:
        self._replace({"wanted_scope": scope})

    def configured_client(self) -> OAuthClientInformationFull | None:
        """The client id given with ``login --client-id`` (kept for the next sign-in), if that is what is stored."""
        data = self._read()
        client = data.get("client")
        return OAuthClientInformationFull.model_validate(client) if data.get("configured") and client else None

    def forget_tokens(self) -> None:
        """Before a new sign-in: the old tokens would be used instead of asking."""
        self._replace({"tokens": None})

    def keep_client(self, client: OAuthClientInformationFull | None) -> None:
        """Store a configured client (None: forget the stored one, so the sign-in registers afresh)."""
        dumped = client.model_dump(mode="json", exclude_none=True) if client is not None else None
        self._replace({"client": dumped, "configured": client is not None})


class StoredSecrets:
    """The OAuth secrets stored for one server (tokens, the client's secret), for its redaction to hide.

    The store is read again whenever it changed (a refresh replaces it), so a renewed token is hidden from the
    moment the SDK stores it, before any request is signed with it. Tokens seen before are still hidden: an error
    about a request signed with the old one can arrive after the refresh. The last ``KEPT`` values are kept.
    """

    KEPT = 64
    FIELDS = (("tokens", "access_token"), ("tokens", "refresh_token"), ("tokens", "id_token"),
              ("client", "client_secret"), ("client", "registration_access_token"))  # fmt: skip

    def __init__(self, path: Path) -> None:
        self.file = TokenFile(path)
        self.stamp: tuple[int, int, int] | None = None
        self.seen: dict[str, None] = {}  # in the order first seen

    def __call__(self) -> tuple[str, ...]:
        try:
            info = self.file.path.stat()
        except OSError:
            return tuple(self.seen)
        stamp = (info.st_ino, info.st_size, info.st_mtime_ns)
        if stamp != self.stamp:
            self.stamp = stamp
            data = self.file._read()
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


class TokenRefused(Exception):
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


def bridge_auth(config: ServerConfig, state_dir: Path) -> httpx2.Auth | None:
    """How the bridge signs its requests to a remote server: with the tokens it holds for it, refreshed by the SDK;
    without, as they are (a 401 then says to sign in). It never starts a sign-in itself: a server that wants a new
    one gets ``SignInRequired``, whose message names the command."""
    if config.transport not in ("http", "sse") or config.url is None:
        return None
    storage = TokenFile(token_path(state_dir, config))
    if not storage.signed_in():
        return SignInHint(config)
    client = storage._read().get("client") or {}
    redirect = next(iter(client.get("redirect_uris") or []), "http://127.0.0.1/callback")

    async def cannot_open(url: str) -> None:  # called with the scope the SDK chose (a step-up's union) in place
        storage.want_scope(provider.context.client_metadata.scope)
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
    """The SDK's provider, told when the stored access token expires: it refreshes a token it knows has expired,
    but keeps only a relative lifetime, so a token read back hours later would be sent as it is, get a 401, and
    start a sign-in the bridge cannot do. (A token revoked before it expires still needs ``login`` again.)"""

    async def _initialize(self) -> None:
        await super()._initialize()
        storage = self.context.storage
        if isinstance(storage, TokenFile):
            self.context.token_expiry_time = storage.expires_at()
