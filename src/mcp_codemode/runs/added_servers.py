"""Sandboxed code's ``add_server``, ``remove_server`` and ``added_servers`` requests, and whose added server is whose.

Adding a server puts a new program on the host, so the model only ever names a registry entry (and may pick the
alias of its proxy): the launch plan is derived from the entry (``upstream/registry/plans.py``), shown to the person
in full (``server_consent.py``), and only their answer to that very question, asked now, in this call, lets it in.
There is nothing for the model to replay: no token comes back to the code, the question is asked afresh each time,
and what is installed and started is the plan object the question was written from, whose digest the audit line and
the store record. A request carrying anything the bridge would derive itself (a command, arguments, environment,
a URL, headers) is refused rather than ignored, so a model that tries is told plainly.

Once consented, the package is installed pinned (``upstream/registry/installs.py``), the server is kept in its
principal's file (``upstream/registry/added.py``) and joins the hub beside the configured servers under a name of
its principal's own, so its proxy is usable in the same cell. Every principal sees only its own added servers:
``door`` turns the names a request carries into that principal's server, or answers as for a server that does not
exist, and ``visible`` filters the listings. Its secrets reach only the server's process: they are read from the
secret settings into its configuration, which the guest never sees, and the hub hides their values in every text
it passes on (``upstream/errors.py``, ``Redaction``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import hashlib
import logging
import shutil
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar, cast

import mcp_types as types

from ..errors import CodemodeError
from ..guest.protocol import ERROR_KIND_APPROVAL, ERROR_KIND_ARGUMENT, ERROR_KIND_MCP, ERROR_KIND_POLICY
from ..settings import Settings
from ..telemetry.logs import hide_in_logs
from ..upstream.config.secrets import SecretError, read_secret
from ..upstream.errors import HIDDEN, MIN_SECRET, UnknownServer
from ..upstream.model import ServerConfig
from ..upstream.registry.added import (
    ALIAS,
    LOCAL,
    MAX_ADDED,
    AddedServer,
    AddedStore,
    AddedStoreError,
    alias_of,
    default_name,
    now,
    owner_tag,
    secrets_of,
)
from ..upstream.registry.entries import NAME as ENTRY_NAME
from ..upstream.registry.installs import install
from ..upstream.registry.plans import CannotAdd, Kind, LaunchPlan, plan_for
from ..upstream.registry.source import EntrySource, ServerNotFound
from ..upstream.servers.redaction import secret_values
from .approvals import Approvals
from .audit import AuditLog
from .relay_params import Refusal, checked_text
from .relay_run import Run
from .server_consent import QuestionTooLong, consent_question

if TYPE_CHECKING:
    from ..guest.protocol import CallFrame
    from ..upstream.tools.directory import ToolDirectory

log = logging.getLogger(__name__)
T = TypeVar("T")
ADD_KEYS = frozenset({"type", "id", "op", "name", "version", "alias"})
# What the elicitation asks for beside the answer: nothing. Secrets come from the secret settings, never a form.
CONSENT_SCHEMA: dict[str, Any] = {"type": "object", "properties": {}}
ACCEPTED, APPROVED = "the person accepted it", "the person approved it in the console"


def _hidden(value: Any, secrets: list[str]) -> Any:
    if isinstance(value, str):
        for secret in secrets:
            value = value.replace(secret, HIDDEN)
        return value
    if isinstance(value, dict):
        return {key: _hidden(item, secrets) for key, item in value.items()}
    if isinstance(value, list):
        return [_hidden(item, secrets) for item in value]
    return value


class AddedServers:
    """Every principal's added servers on one bridge: the requests about them, and who may see which."""

    def __init__(self, settings: Settings, source: EntrySource) -> None:
        self.settings = settings
        self.source = source
        self.store = AddedStore(settings.state_dir / "added-servers")
        self.packages = settings.state_dir / "added-packages"
        self._servers: dict[str, AddedServer] = {}  # hub name -> server
        self._configs: dict[str, ServerConfig] = {}
        self._lock, self._installing = asyncio.Lock(), asyncio.Lock()
        self.directory: ToolDirectory | None = None
        self.audit = AuditLog(None)
        self.approvals: Callable[[], Approvals | None] = lambda: None
        self.configured: Callable[[], Sequence[ServerConfig]] = lambda: ()
        for _path, found in self.store.everyone():
            if isinstance(found, AddedStoreError):
                log.warning("%s; its servers are not started", found)
                continue
            for server in found:
                self._take(server, quiet=False)
        self.ops = {"add_server": self._add, "remove_server": self._remove, "added_servers": self._list}

    def _take(self, server: AddedServer, quiet: bool = True) -> bool:
        try:
            config = server.config(self.settings.secrets_dir)
        except SecretError as exc:
            if not quiet:
                log.warning("the added server %r is not started: it %s", server.hub_name, exc)
            return False
        hide_in_logs(secret_values(config))
        self._servers[server.hub_name] = server
        self._configs[server.hub_name] = config
        return True

    def configs(self) -> list[ServerConfig]:
        return list(self._configs.values())

    def is_added(self, name: str) -> bool:
        return name in self._servers

    def visible(self, owner: str, name: str) -> bool:
        """Whether ``owner`` may see and use the hub's server ``name``: a configured one, or one it added."""
        server = self._servers.get(name)
        return server is None or server.owner == owner

    def door(self, owner: str, message: CallFrame) -> CallFrame:
        """``message`` with its ``server`` turned into ``owner``'s added server it names (by name, alias or hub
        name); ``UnknownServer`` when it names only another principal's."""
        wanted = message.get("server")
        if not isinstance(wanted, str) or not self._servers:
            return message
        for name, server in self._servers.items():
            if server.owner == owner and wanted in (name, server.name, server.alias):
                return {**message, "server": name} if wanted != name else message
        assert self.directory is not None
        try:
            config = self.directory.hub.config(wanted)
        except UnknownServer:
            return message
        if not self.visible(owner, config.name):
            raise UnknownServer(wanted, ())
        return message

    def scrub(self, name: str, value: T) -> T:
        """An added server's answer with the values of the secrets it was given hidden: a server that echoes its
        environment (server-everything's ``get-env`` does) must not hand the code what it caused to be configured."""
        server, config = self._servers.get(name), self._configs.get(name)
        if server is None or config is None or not server.plan.secrets:
            return value
        given = {**config.env, **config.headers}
        values = [given[n] for n in server.plan.secrets if n in given]
        words = [word for value in values for word in value.split() if len(word) >= 8]  # a Bearer token alone too
        secrets = sorted({v for v in [*values, *words] if len(v) >= MIN_SECRET}, key=len, reverse=True)
        return cast("T", _hidden(value, secrets)) if secrets else value

    def only_visible(self, owner: str, page: dict[str, Any]) -> dict[str, Any]:
        """A search page without what another principal's added servers list (the index ranks every server)."""
        if not self._servers:
            return page
        kept = dict(page)
        for key in ("results", "unavailable", "also"):
            kept[key] = [hit for hit in page.get(key, []) if self.visible(owner, str(hit.get("server")))]
        kept["pending"] = [name for name in page.get("pending", []) if self.visible(owner, name)]
        kept["total"] = page.get("total", 0) - (len(page.get("results", [])) - len(kept["results"]))
        return kept

    async def handle(self, op: str, run: Run, message: CallFrame) -> Any:
        return await self.ops[op](run, message)

    # ------------------------------------------------------------------------------------------ requests

    async def _add(self, run: Run, message: CallFrame) -> dict[str, Any]:
        smuggled = sorted(str(key)[:40] for key in message if key not in ADD_KEYS)
        if smuggled:
            raise Refusal(ERROR_KIND_ARGUMENT, f"add_server() got {', '.join(smuggled)}, which it does not take: it "
                          "takes a registry entry's exact name, its version and the proxy's alias; the bridge derives "
                          "the command, its arguments, environment, URL and headers from the entry itself, and shows "
                          "them to the person who decides")  # fmt: skip
        name = checked_text(message.get("name"), "name", 200)
        version = message.get("version")
        if version is not None:
            version = checked_text(version, "version", 255)
        if not ENTRY_NAME.match(name):
            raise Refusal(ERROR_KIND_ARGUMENT, f"{name[:80]!r} is not a registry name: a reverse-DNS namespace, one "
                          "slash and a name, exactly as find_servers() returned it")  # fmt: skip
        refused = self.settings.add_servers.refusal(name, local=run.owner == LOCAL)
        if refused:
            self._audit(run, name, None, "", "refused", refused)
            raise Refusal(ERROR_KIND_POLICY, f"add_server({name!r}) is refused: {refused}", rule="add_servers")
        try:
            entry = await self.source.entry(name, version)
        except ServerNotFound as exc:
            raise Refusal(ERROR_KIND_ARGUMENT, str(exc)) from None
        if entry.name != name or (version is not None and entry.version != version):
            raise Refusal(ERROR_KIND_MCP, f"the registry answered {entry.name!r} {entry.version} when asked for "
                          f"{name!r}; nothing was added")  # fmt: skip
        try:
            plan = plan_for(entry, self._runnable())
        except CannotAdd as exc:
            raise Refusal(ERROR_KIND_MCP, str(exc)) from None
        # Only the file and the hub are changed under the lock: a person's answer or an install may take minutes, and
        # must not hold up other principals' adds; installs take turns (two adds of one package share its folder).
        server = self._new_server(run.owner, plan, message.get("alias"))
        if self._same_name(server):  # added before, exactly as it would be now: nothing to ask
            return self._entry(self._servers[server.hub_name])
        self._check_secrets(run.owner, plan)
        try:
            question = consent_question(server, entry.description, str(self.packages))
        except QuestionTooLong as exc:
            raise Refusal(ERROR_KIND_MCP, str(exc)) from None
        answer = await self._ask(run, server, question)
        self._audit(run, name, plan, question, answer)
        if answer not in (ACCEPTED, APPROVED):
            raise Refusal(ERROR_KIND_APPROVAL, f"not approved: adding {name!r}: {answer}", rule="add_server")
        if plan.kind != "remote":
            try:
                async with self._installing:
                    program = await install(plan, self.packages)
            except CannotAdd as exc:
                raise Refusal(ERROR_KIND_MCP, str(exc)) from None
            server = dataclasses.replace(server, program=program)
        server = dataclasses.replace(server, added_at=now())
        async with self._lock:
            if self._same_name(server):
                return self._entry(self._servers[server.hub_name])
            mine = self._load(run.owner)
            self.store.save(run.owner, [*mine, server])
            self._take(server)
            self._serve()
        return self._entry(server)

    def _same_name(self, server: AddedServer) -> bool:
        """Whether the principal already has this very server (True); a refusal when it has another by that name."""
        existing = self._servers.get(server.hub_name)
        if existing is None:
            return False
        if existing.digest == server.digest:
            return True
        raise Refusal(ERROR_KIND_ARGUMENT, f"you already added a server named {server.name!r} (from "
                      f"{existing.plan.entry} {existing.plan.entry_version}); remove_server({server.name!r}) first, "
                      "or pass another alias")  # fmt: skip

    async def _remove(self, run: Run, message: CallFrame) -> bool:
        wanted = checked_text(message.get("name"), "name", 200)
        async with self._lock:
            mine = self._load(run.owner)
            kept = [s for s in mine if wanted not in (s.name, s.alias, s.hub_name)]
            if len(kept) == len(mine):
                return False
            self.store.save(run.owner, kept)
            for server in mine:
                if server not in kept:
                    self._servers.pop(server.hub_name, None)
                    self._configs.pop(server.hub_name, None)
            self._serve()
        return True

    async def _list(self, run: Run, message: CallFrame) -> list[dict[str, Any]]:
        return [{**self._entry(s), "entry": s.plan.entry, "entry_version": s.plan.entry_version, "added_at":
                 s.added_at} for s in self._servers.values() if s.owner == run.owner]  # fmt: skip

    # ------------------------------------------------------------------------------------------ helpers

    def _runnable(self) -> list[Kind]:
        kinds: list[Kind] = ["pypi"]
        if shutil.which("npm") and shutil.which("node"):
            kinds.append("npm")
        return kinds

    def _new_server(self, owner: str, plan: LaunchPlan, alias: object) -> AddedServer:
        if alias is not None and (not isinstance(alias, str) or not ALIAS.match(alias)):
            raise Refusal(ERROR_KIND_ARGUMENT, "alias must be a Python identifier of at most 40 characters (the proxy "
                          "is then mcp_<alias>)")  # fmt: skip
        name = default_name(f"x/{alias}") if isinstance(alias, str) else default_name(plan.entry)
        server = AddedServer(name, alias or alias_of(name), owner, plan, plan.digest())
        assert self.directory is not None
        hub = self.directory.hub
        for taken in hub.names():
            if taken in self._servers:
                continue
            config = hub.config(taken)
            if server.alias == config.alias or server.name == config.name:
                raise Refusal(ERROR_KIND_ARGUMENT, f"a configured server is already called {config.name!r} "
                              f"(mcp_{config.alias}); pass alias='...' to add this one under another name")  # fmt: skip
        for other in self._servers.values():  # two of one principal's servers under one proxy: one hides the other
            if other.owner == owner and other.alias == server.alias and other.hub_name != server.hub_name:
                raise Refusal(ERROR_KIND_ARGUMENT, f"your added server {other.name!r} is already "
                              f"mcp_{other.alias}; pass alias='...' to add this one under another name")  # fmt: skip
        if sum(s.owner == owner for s in self._servers.values()) >= MAX_ADDED:
            raise Refusal(ERROR_KIND_POLICY, f"you already added {MAX_ADDED} servers; remove one first")
        return server

    def _check_secrets(self, owner: str, plan: LaunchPlan) -> None:
        where = name_in = ""
        if owner != LOCAL:  # a token principal's secrets are its own (added.py says why)
            name_in, where = f"{owner_tag(owner)}/", " provisioned for you"
        for name in plan.secrets:
            try:
                read_secret(secrets_of(self.settings.secrets_dir, owner), name, header=plan.kind == "remote")
            except SecretError:
                raise Refusal(ERROR_KIND_MCP, f"{plan.entry!r} needs the secret {name!r}, which the bridge's secret "
                              f"settings{where} do not hold; ask the person to put it in the file {name_in}{name} of "
                              "the bridge's secrets directory (MCP_BRIDGE_SECRETS_DIR), then call add_server again"
                              ) from None  # fmt: skip

    async def _ask(self, run: Run, server: AddedServer, question: str) -> str:
        """The person's answer: ``ACCEPTED``, ``APPROVED`` (in the console), or why it is no (declined, cancelled,
        denied in the console, nobody could be asked)."""
        elicit = run.caller.elicit
        approvals = self.approvals()
        if approvals is not None and approvals.answers_for(elicit is not None):
            with approvals.waiting(run.owner, run.session, run.call, server.plan.entry, "add_server",
                                   "runtime.add_server asks to add this server", question) as waiting:  # fmt: skip
                if run.caller.news is not None:
                    await run.caller.news(f"add_server {server.plan.entry}: waiting for approval in the web console")
                granted = await waiting.answer
            return APPROVED if granted else "the person denied it in the console"
        if elicit is None:
            return ("nobody could be asked: the client of this call cannot elicit, and no web console answers "
                    "(MCP_BRIDGE_CONSOLE, MCP_BRIDGE_APPROVALS)")  # fmt: skip
        try:
            answer = await elicit(types.ElicitRequestFormParams(message=question, requested_schema=CONSENT_SCHEMA))
        except asyncio.CancelledError:
            raise
        except CodemodeError as exc:
            return f"the client could not ask ({exc!s:.200})"
        except Exception as exc:  # noqa: BLE001 - the client failed to ask: not added, saying why
            return f"the client could not ask ({type(exc).__name__})"
        return ACCEPTED if answer.action == "accept" else f"the person {answer.action}d it".replace("ld it", "lled it")

    def _audit(self, run: Run, name: str, plan: LaunchPlan | None, question: str, answer: str,
               reason: str = "") -> None:  # fmt: skip
        line: dict[str, Any] = {
            "time": datetime.datetime.fromtimestamp(time.time(), datetime.UTC).isoformat(timespec="milliseconds"),
            "kind": "add_server", "call": run.call, "session": run.session, "owner": run.owner, "server": name,
            "outcome": "ok" if answer in (ACCEPTED, APPROVED) else "refused", "answer": answer,
        }  # fmt: skip
        if plan is not None:
            line.update(version=plan.entry_version, digest=plan.digest(), shown=question,
                        shown_sha256=hashlib.sha256(question.encode()).hexdigest())  # fmt: skip
        if reason:
            line["reason"] = reason
        self.audit.write(line)

    def _load(self, owner: str) -> list[AddedServer]:
        try:
            return self.store.load(owner)
        except AddedStoreError as exc:
            log.warning("%s", exc)
            raise Refusal(ERROR_KIND_MCP, "the bridge's file of your added servers is damaged, so nothing is changed; "
                          "the person can see why in the bridge's log") from None  # fmt: skip

    def _serve(self) -> None:
        assert self.directory is not None
        self.directory.reconfigure([*self.configured(), *self.configs()])

    def _entry(self, server: AddedServer) -> dict[str, Any]:
        config = self._configs.get(server.hub_name)
        versions = self.directory.versions if self.directory is not None else {}
        return {"name": server.hub_name, "alias": server.alias, "transport": config.transport if config else "stdio",
                "description": config.description if config else "",
                "version": versions.get(server.hub_name, 0)}  # fmt: skip
