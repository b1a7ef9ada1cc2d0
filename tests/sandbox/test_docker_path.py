"""The docker code path, run against podman's docker-compatible CLI (no Docker engine on our machines)."""

from __future__ import annotations

import asyncio
import shutil

import pytest

from mcp_codemode.runs.sessions import SessionManager
from mcp_codemode.sandbox.container import ContainerBackend
from tests.support.backends import fail_unless, require_usable, sandbox_settings
from tests.support.processes import our_containers, wait_until_gone

pytestmark = pytest.mark.backend


def test_docker_flags_run_a_real_session_through_a_docker_compatible_cli():
    podman = shutil.which("podman")
    fail_unless(podman is not None, "podman is missing (it stands in for the docker engine)")
    assert podman is not None
    settings = sandbox_settings(runtime="docker")
    backend = ContainerBackend(settings, "docker", binary=podman)
    require_usable(backend)
    assert backend.oci_runtime == "", "the docker path must not force podman's runc default"

    async def main() -> tuple[str | None, str | None]:
        async with SessionManager(backend, settings) as sessions:
            await sessions.execute("import os\nuid = os.getuid()")
            shown = await sessions.execute("uid")
            net = await sessions.execute(
                "import socket\ntry:\n    socket.socket()\nexcept OSError as e:\n    print(e.errno)"
            )
            return shown.value, net.stdout

    uid, errno_text = asyncio.run(main())
    assert uid == "65534"
    assert errno_text == "97\n"  # EAFNOSUPPORT from our seccomp profile
    assert wait_until_gone(our_containers) == []
