"""Which discovered upstream servers this bridge may run at all, whatever their config files say.

One rule today: no stdio server in a Kubernetes pod on the kubernetes backend. A stdio server is a process the
bridge starts beside itself; in the face's pod that is beside the service-account token that may create sandboxes,
exec into every session's guest and rewrite Leases, and beside every secret mounted there (the other upstream
servers' credentials among them). Anything such a server runs (an ``npx`` package, a tool that runs commands)
could act with those rights, so the bridge refuses it there and says how to run it instead: as an HTTP server of
its own, which holds only its own credentials.

What counts as "in a pod" is ``Settings.pod`` (a mounted service-account token, or ``KUBERNETES_SERVICE_HOST``). A
kubernetes backend driven by a kubeconfig on a laptop is not refused: its stdio servers run as the user, beside
credentials every other process of the user can read anyway. Other backends are not refused either: a bridge whose
sandboxes are local does not hold a Role over sandboxes (docs/kubernetes.md, "Upstream servers for a team").

Apart from discovery (``upstream/``, which never sees the settings) and applied by everything that turns a
discovery into servers: the command line for every command, and the bridge again at start and at each refresh.
"""

from __future__ import annotations

import dataclasses

from .settings import Settings
from .upstream.model import ConfigProblem, Discovery

TEAM_DOCS = 'docs/kubernetes.md, "Upstream servers for a team"'


def stdio_refusal(settings: Settings) -> str:
    """Why this bridge runs no stdio upstream server, or "" when it may."""
    if settings.runtime != "kubernetes" or not settings.pod:
        return ""
    return (
        f"it is a stdio server, which would run inside this pod ({settings.pod}), beside the face's "
        "service-account token and every secret mounted there, so whatever it runs could act with the face's "
        "rights; on the kubernetes backend the bridge starts no stdio server in a pod. Run it as an HTTP MCP "
        f"server of its own (a Deployment and a Service) and give its url instead ({TEAM_DOCS})"
    )


def admit(settings: Settings, discovery: Discovery) -> Discovery:
    """``discovery`` with the servers this bridge may not run moved to its problems, each naming why and the fix."""
    reason = stdio_refusal(settings)
    if not reason:
        return discovery
    refused = [server for server in discovery.servers if server.transport == "stdio"]
    if not refused:
        return discovery
    problems = [ConfigProblem(source=server.source, server=server.name, reason=reason) for server in refused]
    return dataclasses.replace(
        discovery,
        servers=tuple(server for server in discovery.servers if server.transport != "stdio"),
        problems=(*discovery.problems, *problems),
    )


def refused_names(settings: Settings, discovery: Discovery) -> tuple[str, ...]:
    """The servers of ``discovery`` that ``admit`` would refuse, for ``doctor``."""
    if not stdio_refusal(settings):
        return ()
    return tuple(server.name for server in discovery.servers if server.transport == "stdio")
