"""deploy/kubernetes/smoke.sh checked without a cluster: bash parses it and shellcheck finds nothing.

The script is for a user's own cluster (no control plane runs here), so this proves only that it is well-formed
shell; its frame-speaking part is the same protocol the host's tests drive against real guests.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support.backends import fail_unless

pytestmark = pytest.mark.backend  # runs bash and shellcheck

SMOKE = Path(__file__).resolve().parents[2] / "deploy" / "kubernetes" / "smoke.sh"


def test_smoke_script_parses_with_bash_no_cluster_involved() -> None:
    done = subprocess.run(["bash", "-n", str(SMOKE)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr


def test_smoke_script_is_shellcheck_clean_no_cluster_involved() -> None:
    shellcheck = shutil.which("shellcheck")
    fail_unless(
        shellcheck is not None, "shellcheck is missing (scripts/setup.sh installs it: apt-get install shellcheck)"
    )
    assert shellcheck is not None
    done = subprocess.run([shellcheck, "--severity=style", str(SMOKE)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr


def test_smoke_script_is_executable() -> None:
    assert SMOKE.stat().st_mode & 0o111


# A stand-in for kubectl, answering the calls smoke.sh makes as a healthy cluster would, and running the real guest
# for `exec -i ... boot.py`: unsandboxed but in a network namespace of its own (unshare --net), so that the
# script's no-network check has something real to find. Claims live as files in $FAKE_STATE.
FAKE_KUBECTL = r"""#!/usr/bin/env python3
import os, sys
from pathlib import Path
state = Path(os.environ["FAKE_STATE"])
args = sys.argv[1:]
while "-n" in args:
    at = args.index("-n")
    del args[at : at + 2]
claims = sorted(p.name for p in state.glob("claim-*"))
if args[:1] == ["create"]:
    name = next(line.split()[1] for line in sys.stdin if line.strip().startswith("name:"))
    (state / f"claim-{name}").touch()
elif args[:1] == ["exec"]:
    command = args[args.index("--") + 1 :]
    if command[-2:-1] == [os.environ["FAKE_GUEST_BOOT_IN_POD"]]:
        guest = [command[0], *command[1:-2], os.environ["FAKE_GUEST_BOOT"], command[-1]]
        os.execvp("unshare", ["unshare", "--net", *guest])
    print({"dmesg": "[    0.000000] Starting gVisor...", "cat": "Linux version 4.4.0"}[command[0]])
elif args[:1] == ["delete"]:
    for claim in claims:
        (state / claim).unlink()
elif args[:2] == ["get", "sandboxclaims"]:
    print("\n".join(f"sandboxclaim.extensions.agents.x-k8s.io/{c[6:]}" for c in claims))
elif args[:2] == ["get", "sandboxclaim"]:
    print("sandbox-1", end="")
elif args[:3] == ["get", "sandbox", "sandbox-1"] or args[:3] == ["get", "pod", "pod-1"]:
    if not claims:
        sys.exit(1)
    if "-o" in args:
        print("pod-1", end="")
elif args[:2] == ["get", "service"]:
    print("192.0.2.1", end="")
elif args[:1] not in (["wait"], ["get"]):
    sys.exit(f"fake kubectl: unexpected {sys.argv[1:]}")
"""


def test_smoke_script_against_a_fake_kubectl_stand_in(tmp_path: Path) -> None:
    """The script's whole flow, with a stand-in for the cluster: the bash around the checks, not the cluster."""
    fail_unless(shutil.which("unshare") is not None, "unshare (util-linux) is missing")
    fake = tmp_path / "kubectl"
    fake.write_text(FAKE_KUBECTL)
    fake.chmod(0o755)
    guest_boot = Path(__file__).resolve().parents[2] / "src" / "mcp_codemode" / "guest" / "boot.py"
    env = {
        "PATH": os.environ["PATH"],
        "KUBECTL": str(fake),
        "FAKE_STATE": str(tmp_path),
        "FAKE_GUEST_BOOT": str(guest_boot),
        "FAKE_GUEST_BOOT_IN_POD": "/opt/mcp-codemode/boot.py",
    }
    done = subprocess.run(["bash", str(SMOKE)], capture_output=True, text=True, timeout=120, env=env)
    fail_unless("unshare failed" not in done.stderr, f"unshare --net is not allowed here: {done.stderr}")
    assert done.returncode == 0, done.stdout + done.stderr
    for check in ("ready in", "guest booted over pods/exec", "x + 1 gave '42'", "no network from the sandbox",
                  "gVisor present", "no claim, sandbox or pod left", "all checks passed"):  # fmt: skip
        assert check in done.stdout, done.stdout
    assert not list(tmp_path.glob("claim-*"))
