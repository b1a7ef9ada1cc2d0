"""The bodies of the one-shot commands that reach servers or sandboxes: ``search`` and ``run``.

Why a module apart from ``cli.py``: these print results and choose exit statuses (``run`` follows shell
habits: 0 success, 1 the code raised, 124 timeout, 125 the bridge could not run the code), while ``cli.py``
parses arguments and builds what they need; each body here receives settings and discovery already built.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TextIO

from ..errors import CodemodeError, SettingsError
from ..runs.bridge import Bridge, RunRequest
from ..runs.relay_params import MAX_QUERY
from ..sandbox.results import ExecutionResult
from ..sandbox.select import choose_backend
from ..session_keys import SessionKey
from ..settings import Settings
from ..upstream.model import Discovery
from ..upstream.tools import catalog
from ..upstream.tools.directory import ToolDirectory
from ..upstream.tools.listing import SearchPage
from .exits import EXIT_OK, EXIT_RAISED, EXIT_TIMEOUT


async def search(settings: Settings, discovery: Discovery, args: argparse.Namespace) -> int:
    """``mcp-codemode search``: rank every configured server's tools, waiting for the listings it lacks.

    No sandbox is involved. Servers whose listing is not in the catalog cache (or is stale) are started and
    listed first, so a first search is complete and the next one, from the cache, starts no server at all.
    Status 0 when something matched (a tool, or a prompt or resource), 1 when nothing did (as grep).
    """
    query = " ".join(args.query).strip()
    if not query:
        raise SettingsError("the query is empty; say what you want to do, as in: mcp-codemode search 'read a file'")
    if len(query) > MAX_QUERY:
        raise SettingsError(f"the query is {len(query):,} characters long; at most {MAX_QUERY:,} are accepted")
    async with ToolDirectory(discovery.servers, settings) as directory:
        refused = directory.refused.get(args.server) if args.server else None
        if refused is not None:
            raise SettingsError(f"--server {args.server}: the policy refuses that server, so it is not searched: "
                                f"{refused[1].reason} ({settings.policy.where})")  # fmt: skip
        page = await directory.search(query, limit=args.limit, offset=args.offset, server=args.server, wait=None)
    if args.json:
        print(json.dumps(page.reply(args.detail), indent=2, ensure_ascii=False))
    else:
        print(_search_text(page, args.detail, len(discovery.servers)))
    return EXIT_OK if page.total or page.also else EXIT_RAISED


def _search_text(page: SearchPage, detail: catalog.Detail, configured: int) -> str:
    lines: list[str] = []
    if not configured:
        lines.append("No MCP servers are configured, so there is nothing to search. Add some to a client's config")
        lines.append("(see docs/configuration.md) or pass --config FILE.")
    elif not page.total:
        lines.append(f"No tool matches {page.query!r} (searched {page.searched} tools).")
        lines.append("Try other words (what the tool does: 'list files', 'current time'), or see what is configured")
        lines.append("with `mcp-codemode servers`.")
    elif not page.hits:
        lines.append(f"{page.total} matches for {page.query!r}; none from offset {page.offset}: lower --offset")
    else:
        first, last = page.offset + 1, page.offset + len(page.hits)
        shown = f"{len(page.hits)} of {page.total}" if page.offset == 0 else f"{first}-{last} of {page.total}"
        lines.append(f"{shown} {'match' if page.total == 1 else 'matches'} for {page.query!r}")
        width = max(len(f"{hit.score:.2f}") for hit in page.hits)
        for hit in page.hits:
            required = ", ".join(catalog.required_parameters(hit.tool))
            line = f"  {hit.score:>{width}.2f}  {hit.server}.{hit.alias}({required})"
            summary = catalog.first_line(hit.tool.description)
            if summary and detail != "name":
                line += f" — {summary}"
            lines.append(line)
            if detail in ("full", "stub"):
                doc = catalog.tool_doc(hit.server, hit.tool, hit.alias, detail)
                text = doc["stub"] if detail == "stub" else json.dumps(doc, indent=2, ensure_ascii=False)
                lines += [("      " + row).rstrip() for row in str(text).splitlines()] + [""]
        if page.offset + len(page.hits) < page.total:
            lines.append(f"More with --offset {page.offset + len(page.hits)}.")
    if page.also:
        lines.append("Also (prompts and resources):")
        for extra in page.also:
            summary = catalog.first_line(extra.description)
            lines.append(
                f"  {extra.score:.2f}  {extra.kind} {extra.server}/{extra.name}" + (f" — {summary}" if summary else "")
            )
            lines.append(f"        {extra.use()}")
    if page.pending:
        lines.append(f"Not searched yet (still starting): {', '.join(page.pending)}; search again in a moment.")
    for server, reason in page.unavailable:
        lines.append(f"Not searched: {server} is unavailable: {reason}")
    return "\n".join(lines)


def read_cells(args: argparse.Namespace) -> list[str]:
    cells = list(args.codes or [])
    if args.file == "-":
        cells.append(sys.stdin.read())
    elif args.file:
        try:
            cells.append(Path(args.file).read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError) as exc:
            raise CodemodeError(
                f"cannot read {args.file}: {exc}",
                fix="give a UTF-8 file you can read, - for standard input, or -c CODE",
            ) from None
    if not cells:
        raise CodemodeError("nothing to run: give code with -c CODE, a FILE, or - to read standard input")
    return cells


async def run_cells(
    settings: Settings, discovery: Discovery, cells: list[str], timeout: float | None, session: str
) -> int:
    choice = choose_backend(settings)  # before anything starts: no backend means exit 125 with every reason
    # One session for the life of this process: pooled workers would only be started to be closed unused (the
    # pool keeps two and refills the one taken), three sandboxes for the one the cells run in.
    # No console either: nothing serves one here, so an ask_tools call must not wait on it (the client only).
    settings = settings.replace(warm_pool=0, console=False, approvals="")
    streams: dict[str, TextIO] = {"stdout": sys.stdout, "stderr": sys.stderr}
    shown = {"stdout": 0, "stderr": 0}

    def echo(stream: str, text: str) -> None:
        streams[stream].write(text)
        streams[stream].flush()
        shown[stream] += len(text)

    async with Bridge(settings, discovery, choice) as bridge:  # logs the choice (a warning if auto passed one over)
        for code in cells:
            shown.update(stdout=0, stderr=0)
            request = RunRequest(code, timeout=timeout)
            result = await bridge.run(request, SessionKey.cli(session), on_output=echo)
            # Output was streamed live; only a truncation marker and the kept tail are still unprinted.
            echo("stdout", result.stdout[shown["stdout"] :])
            echo("stderr", result.stderr[shown["stderr"] :])
            status = _report(result)
            if status != EXIT_OK:
                return status
    return EXIT_OK


def _report(result: ExecutionResult) -> int:
    """Print what the live stream could not: truncation tails, the last value, the error, notices."""
    if result.value is not None:
        print(result.value, flush=True)
    if result.error is not None:
        sys.stderr.write(result.error.traceback or f"{result.error.type}: {result.error.message}\n")
    if result.notice:
        print(f"mcp-codemode: {result.notice}", file=sys.stderr)
    if result.images:
        print(
            f"mcp-codemode: {len(result.images)} image(s) not shown: `run` prints text only; an MCP client of "
            "`serve` receives them",
            file=sys.stderr,
        )
    if result.status == "ok":
        return EXIT_OK
    if result.status == "timeout":
        return EXIT_TIMEOUT
    return EXIT_RAISED
