"""What the model reads of a server it could add: plain dicts, every third-party word made plain text first.

A registry entry's description, title, package names and URLs are written by whoever published it, and they reach
the model as data it reasons over. So each is stripped of what could pass for something else: control characters
(an ANSI escape that repaints a terminal), format characters (bidirectional overrides, zero-width joiners that hide
or reorder words), and line breaks (a description that starts a new "line" to pass as the bridge's own text or a
markdown heading); then it is clipped. A server the user's clients configure is shown by its file and what it runs
(secrets hidden as ``ServerConfig.target`` hides them), never by its environment values or header values.

"Already available" is decided by identity, never by likeness: the same registry name, the same package identifier
in a configured server's command line, or the same remote URL. A name that merely resembles a configured server's
(``filesystem`` and ``io.example/filesystem``, ``acme/fs`` and ``acrne/fs``) is said to resemble it, so the model and
the person see the difference instead of assuming it away.
"""

from __future__ import annotations

import difflib
import os
import re
import unicodedata
import urllib.parse
from collections.abc import Iterable, Sequence
from typing import Any

from ..model import ServerConfig
from .entries import ServerEntry

MAX_DESCRIPTION = 300
_SPACES = re.compile(r"\s+")


def plain(text: str, limit: int) -> str:
    """``text`` as one line of visible characters, at most ``limit`` long (an ellipsis says it was cut)."""
    kept = "".join(" " if ch.isspace() else ch for ch in text if unicodedata.category(ch)[0] != "C" or ch.isspace())
    kept = _SPACES.sub(" ", kept).strip()
    return kept if len(kept) <= limit else kept[: limit - 1].rstrip() + "…"


def public_url(url: str) -> str:
    """A URL without credentials, query or fragment: what can be shown of where a server is reached."""
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port else host
    return plain(urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, "", "")), 300)


def registry_candidate(entry: ServerEntry, found_in: str, available: str | None) -> dict[str, Any]:
    """One registry or catalog entry, as the model reads it."""
    runs: list[dict[str, str]] = []
    for package in entry.packages:
        runs.append({"package": plain(package.identifier, 200), "registry": plain(package.registry_type, 40),
                     "version": plain(package.version, 80), "transport": plain(package.transport, 40)})  # fmt: skip
    for remote in entry.remotes:
        runs.append({"url": public_url(remote.url), "transport": remote.transport})
    env = [need for package in entry.packages for need in package.environment]
    headers = [need for remote in entry.remotes for need in remote.headers]
    needs: dict[str, Any] = {}
    if env:
        needs["env"] = _names(need.name for need in env)
        required = _names(need.name for need in env if need.required)
        if required:
            needs["required_env"] = required
    if headers:
        needs["headers"] = _names(need.name for need in headers)
    if entry.secrets:
        needs["secrets"] = _names(entry.secrets)
    if entry.remotes:
        needs["sign_in"] = (
            "a token in a header (see headers)"
            if any(need.secret for need in headers)
            else "maybe: a remote server may ask for a sign-in (OAuth) when first used"
        )
    found: dict[str, Any] = {"name": entry.name}
    if entry.title:
        found["title"] = plain(entry.title, 100)
    found["description"] = plain(entry.description, MAX_DESCRIPTION)
    found["version"] = plain(entry.version, 80)
    found["found_in"] = found_in
    found["runs"] = runs
    found["needs"] = needs
    found["available"] = available
    if entry.status != "active":
        found["status"] = plain(entry.status, 40)
    return found


def configured_candidate(config: ServerConfig, why: str) -> dict[str, Any]:
    """A server one of the user's clients configures and this bridge does not run, as the model reads it."""
    runs = (
        {"command": plain(config.target, 300), "transport": "stdio"}
        if config.transport == "stdio"
        else {"url": public_url(config.url), "transport": config.transport}
    )
    needs: dict[str, Any] = {}
    if config.env:
        needs["env"] = _names(config.env)  # names only: the values are the user's secrets
    if config.headers:
        needs["headers"] = _names(config.headers)
    found: dict[str, Any] = {"name": config.name}
    if config.description:
        found["description"] = plain(config.description, MAX_DESCRIPTION)
    found["found_in"] = f"configured in {config.source}"
    found["runs"] = [runs]
    found["needs"] = needs
    found["available"] = None
    found["not_started"] = plain(why, 200)
    return found


def _names(names: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(plain(name, 100) for name in names))


def available_as(entry: ServerEntry, served: Sequence[ServerConfig]) -> str | None:
    """``mcp_<alias>`` of the served server that is this entry: same name, package or URL (never a similar one)."""
    urls = {_same_url(remote.url) for remote in entry.remotes}
    packages = [package.identifier for package in entry.packages if package.identifier]
    for config in served:
        if config.name == entry.name:
            return f"mcp_{config.alias}"
        if config.transport != "stdio":
            if _same_url(config.url) in urls:
                return f"mcp_{config.alias}"
            continue
        words = [config.command, *config.args]
        if any(_runs_package(word, identifier) for word in words for identifier in packages):
            return f"mcp_{config.alias}"
    return None


def resembles(name: str, others: Iterable[str]) -> list[str]:
    """Names among ``others`` that look like ``name`` (its last part compared too) without being it.

    Alike as ``suggest.close_matches`` says (difflib's ratio, 0.9 for the whole name, 0.85 for its last part), but
    with ``name``'s index built once instead of once per other name: that was most of a ``find_servers()`` call
    (about 8 of its 12 ms among the registry's 373 seed servers, ``benchmarks/registry_search.py``).
    """
    short = name.rsplit("/", 1)[-1].lower()
    whole, part = difflib.SequenceMatcher(None, "", name.lower()), difflib.SequenceMatcher(None, "", short)
    found = []
    for other in others:
        if other == name:
            continue
        other_short = other.rsplit("/", 1)[-1].lower()
        if (other_short == short or _alike(whole, other.lower(), 0.9)
                or (len(short) > 3 and _alike(part, other_short, 0.85))):  # fmt: skip
            found.append(other)
    return found


def _alike(matcher: difflib.SequenceMatcher[str], other: str, cutoff: float) -> bool:
    """``close_matches(word, [other], n=1, cutoff=cutoff)`` for the word ``matcher`` holds as its second sequence:
    difflib's own three tests, cheapest first."""
    matcher.set_seq1(other)
    return matcher.real_quick_ratio() >= cutoff and matcher.quick_ratio() >= cutoff and matcher.ratio() >= cutoff


def _same_url(url: str) -> str:
    parts = urllib.parse.urlsplit(url.strip())
    return urllib.parse.urlunsplit((parts.scheme.lower(), parts.netloc.lower(), parts.path.rstrip("/"), parts.query,
                                    ""))  # fmt: skip


def _runs_package(word: str, identifier: str) -> bool:
    """Whether one word of a command line runs the package ``identifier`` (npx/uvx forms, an installed path)."""
    if word == identifier or os.path.basename(word) == identifier:
        return True
    if word.startswith((identifier + "@", identifier + "==")):  # npx -y pkg@1.2.3, uvx pkg==1.2.3
        return True
    return f"/node_modules/{identifier}/" in word or f"/site-packages/{identifier.replace('-', '_')}/" in word
