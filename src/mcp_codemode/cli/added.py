"""``mcp-codemode added``: the person's own view of the servers code added with their consent, and their removal.

The bridge keeps added servers in its state directory, per principal (``upstream/registry/added.py``), never in a
client's config file, so this is where the person sees and removes them without asking the model: ``list`` names
each principal's servers, what runs and what it was consented to; ``remove NAME`` forgets one (a running bridge stops
it at its next start; ``runtime.remove_server`` in a cell stops it at once). A damaged file is named and left alone.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from typing import TextIO

from ..errors import CodemodeError
from ..runs.server_consent import run_lines
from ..settings import Settings
from ..upstream.model import Discovery, ServerConfig
from ..upstream.registry.added import AddedServer, AddedStore, AddedStoreError
from .exits import EXIT_OK


def with_added(settings: Settings, discovery: Discovery) -> Discovery:
    """``discovery`` and every principal's added remote servers, which ``login`` signs in to like configured ones (by
    their name, ``weather@local``); a secret header that is missing does not matter to signing in."""
    added: list[ServerConfig] = []
    for _path, servers in AddedStore(settings.state_dir / "added-servers").everyone():
        for server in servers if isinstance(servers, list) else []:
            if server.plan.kind == "remote":
                plain = dataclasses.replace(server, plan=dataclasses.replace(server.plan, secrets=()))
                added.append(plain.config(None))
    return dataclasses.replace(discovery, servers=(*discovery.servers, *added))


def added_command(settings: Settings, args: argparse.Namespace, out: TextIO) -> int:
    store = AddedStore(settings.state_dir / "added-servers")
    if args.added_command == "remove":
        mine = store.load(args.principal)
        kept = [s for s in mine if args.name not in (s.name, s.alias, s.hub_name)]
        if len(kept) == len(mine):
            raise CodemodeError(f"{args.principal} added no server called {args.name!r}",
                                fix="`mcp-codemode added list` shows the names and principals")  # fmt: skip
        store.save(args.principal, kept)
        print(f"Removed {args.name} of {args.principal}; a running bridge stops it when it starts again.", file=out)
        return EXIT_OK
    found: list[AddedServer] = []
    for path, servers in store.everyone():
        if isinstance(servers, AddedStoreError):
            print(f"{path}: {servers}", file=out)
            continue
        found += servers
    if args.json:
        print(json.dumps([{"principal": s.owner, "name": s.hub_name, "alias": s.alias, "entry": s.plan.entry,
                           "entry_version": s.plan.entry_version, "added_at": s.added_at, "digest": s.digest,
                           "plan": s.plan.as_json()} for s in found], indent=2), file=out)  # fmt: skip
        return EXIT_OK
    if not found:
        print("No server was added (code adds one with runtime.add_server, once you consent).", file=out)
    for server in found:
        print(f"{server.hub_name} (mcp_{server.alias}): {server.plan.entry} {server.plan.entry_version}, added "
              f"{server.added_at} by {server.owner}, consent code {server.digest[:16]}", file=out)  # fmt: skip
        for line in run_lines(server.plan, str(settings.state_dir / "added-packages"), server.owner):
            print(f"  {line}", file=out)
    return EXIT_OK
