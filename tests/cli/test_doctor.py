"""`doctor`'s warnings about weak setups: each rule on its own (pure logic), then the real command on this machine.

The machine-level cases change one real thing (a world-readable config file holding a token, a world-writable
state directory, extra container arguments) and read `doctor --json` (run by the CLI's ``main`` in this process:
tests/support/cli_here.py), so the facts it gathers are checked too, not only the rules.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mcp_codemode.cli.doctor import finding, probes, render_text, sessions
from mcp_codemode.cli.weak_setups import SetupFacts, findings, for_user, render
from mcp_codemode.mounts import Mount, SharedPlace
from mcp_codemode.sandbox.bubblewrap import BubblewrapBackend
from mcp_codemode.settings import Settings
from tests.support.backends import fail_unless, require_usable, sandbox_settings
from tests.support.cli_here import cli_here

STRONG = SetupFacts(
    backend="bubblewrap",
    running_as_root=True,
    cgroup_mode="v1",
    cgroup_memory=True,
    cgroup_pids=True,
    cgroup_cpu=True,
    swap_accounting=True,
    oci_runtime="runc",
    gvisor_installed=False,
    docker_userns=None,
    setpriv=True,
    cpus=1.0,
    container_args=(),
    http_host="127.0.0.1",
    http_tokens=0,
    allowed_origins=(),
    audit_log_on=True,
    policy_narrows=True,
    servers=2,
    readable_secret_configs=(),
    state_dir_problem="",
    allow_self_server=False,
)


def topics(facts: SetupFacts) -> dict[str, str]:
    return {finding.topic: finding.level for finding in findings(facts)}


SHARED = SharedPlace(Mount(Path("/srv/repo"), "/mnt/repo", True), ("git",), Path("/srv/repo"), "its cwd", False)


def test_a_strong_setup_has_nothing_to_say():
    assert findings(STRONG) == []
    assert render([]) == ["no weak spots found in this setup"]


@pytest.mark.parametrize(
    ("change", "topic", "level"),
    [
        ({"cgroup_memory": False}, "no-cgroups", "warn"),
        ({"cgroup_pids": False}, "no-cgroups", "warn"),
        ({"swap_accounting": False}, "no-swap-accounting", "warn"),
        ({"backend": "podman", "running_as_root": False}, "rootless-cgroup-v1", "warn"),
        ({"cpus": None}, "cpu-quota", "info"),
        ({"backend": "docker", "docker_userns": False}, "docker-no-userns", "warn"),
        ({"backend": "podman", "container_args": ("--privileged",)}, "container-args", "warn"),
        ({"backend": "podman", "gvisor_installed": True}, "gvisor", "info"),
        ({"setpriv": False}, "no-setpriv", "warn"),
        ({"http_host": "0.0.0.0"}, "http-exposed", "warn"),
        ({"allowed_origins": ("*",)}, "origins-wildcard", "warn"),
        ({"readable_secret_configs": ("/etc/mcp.json",)}, "config-readable", "warn"),
        ({"state_dir_problem": "/x is writable by other users"}, "state-dir", "warn"),
        ({"audit_log_on": False}, "audit-off", "warn"),
        ({"policy_narrows": False}, "no-policy", "info"),
        ({"allow_self_server": True}, "self-server", "info"),
        ({"mounts": (Mount(Path("/srv/out"), "/mnt/out", True),)}, "mount-rw", "warn"),
        ({"mount_problems": (("uid 65534 cannot read /srv", "chmod o+rx /srv"),)}, "mount-access", "warn"),
        ({"shared_mounts": (SHARED, dataclasses.replace(SHARED, accepted=True))}, "mount-shared", "warn"),
        ({"config_in_mounts": ("/srv/p/.mcp.json lies in a writable mount",)}, "mount-config", "warn"),
        ({"backend": "kubernetes", "kube_runtime_class": "none"}, "kube-no-gvisor", "warn"),
        ({"shares_sessions": True}, "state-per-replica", "warn"),
        ({"pod": "a service-account token is mounted", "refused_stdio": ("git",)}, "stdio-in-pod", "warn"),
    ],
)
def test_each_weak_spot_is_named_with_its_level(change: dict[str, Any], topic: str, level: str):
    found = topics(dataclasses.replace(STRONG, **change))
    assert found == {topic: level}


def test_replicas_that_keep_sign_ins_and_saved_tools_in_the_cluster_have_nothing_to_say_about_them():
    assert findings(dataclasses.replace(STRONG, shares_sessions=True, shared_state="kubernetes")) == []


def test_weak_spots_that_do_not_apply_to_the_backend_stay_quiet():
    # rootless cgroup v1 matters to containers only; bubblewrap as a user gets the rlimit finding instead
    assert "rootless-cgroup-v1" not in topics(dataclasses.replace(STRONG, running_as_root=False))
    # gVisor already in use: nothing to suggest
    assert "gvisor" not in topics(dataclasses.replace(STRONG, backend="podman", gvisor_installed=True,
                                                      oci_runtime="/usr/bin/runsc"))  # fmt: skip
    # a docker engine that remaps root, or one that could not be asked, is not called unsafe
    assert "docker-no-userns" not in topics(dataclasses.replace(STRONG, backend="docker", docker_userns=True))
    assert "docker-no-userns" not in topics(dataclasses.replace(STRONG, backend="docker", docker_userns=None))
    # no servers configured: nothing for a policy to narrow
    assert "no-policy" not in topics(dataclasses.replace(STRONG, servers=0, policy_narrows=False))
    # a read-only mount the sandbox can use is what the user asked for: nothing to say
    assert findings(dataclasses.replace(STRONG, mounts=(Mount(Path("/srv/data"), "/mnt/data", False),))) == []
    # cluster sandboxes under gVisor (or another runtime class the face requires) are what the manifests promise
    assert findings(dataclasses.replace(STRONG, backend="kubernetes")) == []
    assert findings(dataclasses.replace(STRONG, backend="kubernetes", kube_runtime_class="kata")) == []
    # tokens make a non-loopback address fine
    assert "http-exposed" not in topics(dataclasses.replace(STRONG, http_host="0.0.0.0", http_tokens=1))


def test_a_config_file_in_a_writable_mount_is_said_to_run_at_the_next_start_or_within_seconds():
    planted = ("/srv/p/.mcp.json lies in the writable mount /srv/p (/mnt/p)",)
    [later] = findings(dataclasses.replace(STRONG, config_in_mounts=planted))
    assert later.message.startswith(planted[0]) and later.message.endswith("runs on the host at its next start")
    assert "--no-discover" in later.fix and ":ro" in later.fix
    [now] = findings(dataclasses.replace(STRONG, config_in_mounts=planted, config_refresh=True))
    assert "within seconds" in now.message and now.message.endswith("the bridge runs no code until this is fixed")


def test_the_text_puts_warnings_before_hints_and_gives_each_a_fix():
    weak = dataclasses.replace(STRONG, cpus=None, setpriv=False)
    lines = render([dataclasses.asdict(finding) for finding in findings(weak)])
    assert lines[0].startswith("warn") and "setpriv" in lines[0]
    assert lines[1].strip().startswith("fix: apt-get install util-linux")
    assert lines[2].startswith("info") and "CPU quota" in lines[2]


def test_fixes_that_need_root_get_sudo_for_an_ordinary_user():
    assert for_user("apt-get install util-linux", running_as_root=False) == "sudo apt-get install util-linux"
    assert for_user("apt-get install util-linux", running_as_root=True) == "apt-get install util-linux"
    fix = "allow unprivileged user namespaces: sysctl -w kernel.unprivileged_userns_clone=1"
    assert "sudo sysctl -w" in for_user(fix, running_as_root=False)
    assert for_user("sudo apt-get install x", running_as_root=False) == "sudo apt-get install x"
    assert for_user("mcp-codemode image build --tag x", running_as_root=False) == "mcp-codemode image build --tag x"


# ---------------------------------------------------------------------------------- the real command


@pytest.fixture
def scratch() -> Iterator[Path]:
    base = Path(tempfile.mkdtemp(prefix="mcp-codemode-doctor-"))
    try:
        yield base
    finally:
        shutil.rmtree(base, ignore_errors=True)


def doctor(scratch: Path, *args: str, **env: str) -> dict[str, Any]:
    """`doctor --json` with a clean environment: only what the test sets, a private HOME and state dir."""
    home = scratch / "home"
    home.mkdir(exist_ok=True)
    state = scratch / "state"
    base_env = {"PATH": os.environ["PATH"], "HOME": str(home), "MCP_BRIDGE_STATE_DIR": str(state)}
    if "PYTHONPATH" in os.environ:  # the source tree under test, when it is not the one installed
        base_env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    done = cli_here({**base_env, **env}, "doctor", "--json", "--no-discover", *args)
    assert done.returncode == 0, done.stderr
    report: dict[str, Any] = json.loads(done.stdout)
    return report


def found_topics(report: dict[str, Any]) -> dict[str, str]:
    return {item["topic"]: item["message"] for item in report["warnings"]}


@pytest.mark.backend
def test_doctor_warns_about_a_config_file_that_every_user_can_read_with_a_literal_token(scratch: Path):
    config = scratch / "mcp.json"
    entry = {"command": "/bin/true", "env": {"API_TOKEN": "ghp_literal_secret_1234"}}
    config.write_text(json.dumps({"mcpServers": {"gh": entry}}))
    config.chmod(0o644)
    found = found_topics(doctor(scratch, "--config", str(config)))
    assert str(config) in found["config-readable"]
    assert "ghp_literal_secret_1234" not in json.dumps(found), "the warning must not quote the secret"
    config.chmod(0o600)
    assert "config-readable" not in found_topics(doctor(scratch, "--config", str(config)))
    # a value taken from the environment (${VAR}) is not in the file, so a readable file is fine
    config.write_text(json.dumps({"mcpServers": {"gh": {"command": "/bin/true", "env": {"API_TOKEN": "${TOK}"}}}}))
    config.chmod(0o644)
    assert "config-readable" not in found_topics(doctor(scratch, "--config", str(config), TOK="from-the-env-9876"))


@pytest.mark.backend
def test_doctor_refuses_an_unknown_bridge_variable_instead_of_ignoring_it(scratch: Path):
    """``MCP_BRIDGE_ASK_TOOLS`` is no setting: doctor (like every command) says so rather than report a setup that
    runs every tool unasked."""
    home = scratch / "home"
    home.mkdir()
    env = {"PATH": os.environ["PATH"], "HOME": str(home), "MCP_BRIDGE_ASK_TOOLS": "*/delete_*"}
    if "PYTHONPATH" in os.environ:
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    done = cli_here(env, "doctor", "--no-discover")
    assert done.returncode != 0
    assert "MCP_BRIDGE_ASK_TOOLS (ask_tools is part of the policy" in done.stderr, done.stderr


@pytest.mark.backend
def test_doctor_warns_about_a_state_directory_others_can_write(scratch: Path):
    state = scratch / "state"
    state.mkdir()
    state.chmod(0o777)
    assert "writable by other users" in found_topics(doctor(scratch))["state-dir"]
    state.chmod(0o711)
    assert "state-dir" not in found_topics(doctor(scratch))


@pytest.mark.backend
def test_doctor_warns_about_extra_container_arguments_and_wildcard_origins(scratch: Path):
    report = doctor(scratch, MCP_BRIDGE_RUNTIME="podman", MCP_BRIDGE_CONTAINER_ARGS="--cap-add SYS_ADMIN",
                    MCP_BRIDGE_ALLOWED_ORIGINS="*")  # fmt: skip
    found = found_topics(report)
    if report["selected"]["backend"] == "podman":
        assert "--cap-add SYS_ADMIN" in found["container-args"]
    assert "any origin" in found["origins-wildcard"]


@pytest.mark.backend
def test_doctor_lists_the_mounts_and_warns_about_a_writable_one_and_one_the_sandbox_cannot_use(scratch: Path):
    readable, private = scratch / "readable", scratch / "private"
    scratch.chmod(0o755)  # bubblewrap's sandbox uid must pass through it to reach a mount
    readable.mkdir()
    readable.chmod(0o755)
    private.mkdir()
    private.chmod(0o500)  # no write for anyone but root, whom the sandbox never is
    mounts = f"{readable}:/mnt/data,{private}:/workspace/out:rw"
    report = doctor(scratch, MCP_BRIDGE_MOUNTS=mounts)
    assert report["mounts"] == [
        {"host": str(readable), "target": "/mnt/data", "mode": "ro"},
        {"host": str(private), "target": "/workspace/out", "mode": "rw"},
    ]
    rw = [item for item in report["warnings"] if item["topic"] == "mount-rw"]
    assert len(rw) == 1 and str(private) in rw[0]["message"] and "lands on the host" in rw[0]["message"]
    if report["selected"]["backend"] is not None:
        access = [item["message"] for item in report["warnings"] if item["topic"] == "mount-access"]
        assert len(access) == 1 and f"permission on {private} (mode 0500" in access[0], report["warnings"]
        limits = report["backends"][report["selected"]["backend"]]["limits"]
        assert {"/mnt/data": "ro", "/workspace/out": "rw"}.items() <= {x["name"]: x["value"] for x in limits}.items()
    assert not [item for item in doctor(scratch)["warnings"] if item["topic"].startswith("mount-")]


@pytest.mark.backend
def test_doctor_names_each_writable_mount_a_server_works_in_refused_or_accepted(scratch: Path):
    refused, accepted = scratch / "refused", scratch / "accepted"
    refused.mkdir()
    accepted.mkdir()
    servers = {
        "git": {"command": "mcp-server-git", "args": ["--repository", str(accepted)]},
        "files": {"command": "x", "cwd": str(refused)},
    }
    (scratch / "servers.json").write_text(json.dumps({"mcpServers": servers}))
    report = doctor(
        scratch,
        MCP_SERVERS_CONFIG=str(scratch / "servers.json"),
        MCP_BRIDGE_MOUNTS=f"{refused}:/mnt/refused:rw,{accepted}:/mnt/accepted:rw",
        MCP_BRIDGE_MOUNTS_SHARED=str(accepted),
    )
    shared = [item for item in report["warnings"] if item["topic"] == "mount-shared"]
    assert [item["message"].split(" writable at ")[0] for item in shared] == [
        f"MCP_BRIDGE_MOUNTS mounts {refused}",
        f"MCP_BRIDGE_MOUNTS mounts {accepted}",
    ], report["warnings"]
    assert f"where the upstream server 'files' works on the host (its cwd {refused})" in shared[0]["message"]
    assert shared[0]["message"].endswith("the bridge runs no code until this is fixed")
    assert shared[1]["message"].endswith("accepted in MCP_BRIDGE_MOUNTS_SHARED, so the bridge runs code with it")
    assert all("MCP_BRIDGE_MOUNTS_SHARED" in item["fix"] and "/.git:/mnt/" in item["fix"] for item in shared)


@pytest.mark.backend
def test_doctor_text_lists_the_weak_spots(scratch: Path):
    env = {"PATH": os.environ["PATH"], "HOME": str(scratch), "MCP_BRIDGE_STATE_DIR": str(scratch / "state")}
    done = cli_here({**env, "MCP_BRIDGE_ALLOWED_ORIGINS": "*"}, "doctor", "--no-discover")
    assert done.returncode == 0, done.stderr
    assert "weak spots:" in done.stdout
    assert "warn  allowed_origins accepts any origin" in done.stdout


@pytest.mark.backend
def test_doctor_warns_when_the_audit_log_is_off_and_hints_at_a_policy_until_one_narrows(scratch: Path):
    config = scratch / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {"tools": {"command": "/bin/true"}}}))
    config.chmod(0o600)
    found = found_topics(doctor(scratch, "--config", str(config), MCP_BRIDGE_AUDIT_LOG="off"))
    assert "audit log is off" in found["audit-off"]
    assert "1 configured server" in found["no-policy"]
    settings = scratch / "settings.toml"
    settings.write_text('[policy]\ndeny_tools = ["tools/delete_*"]\n')
    found = found_topics(doctor(scratch, "--config", str(config), MCP_CODEMODE_SETTINGS=str(settings)))
    assert "no-policy" not in found and "audit-off" not in found
    # caps alone narrow nothing: every tool is still callable
    settings.write_text("[policy]\nmax_calls_per_run = 10\n")
    found = found_topics(doctor(scratch, "--config", str(config), MCP_CODEMODE_SETTINGS=str(settings)))
    assert "no-policy" in found


@pytest.mark.backend
def test_doctor_gives_a_0700_state_directory_of_its_own_the_search_bits_and_bubblewrap_runs(scratch: Path):
    require_usable(BubblewrapBackend(sandbox_settings()))
    scratch.chmod(0o711)
    state = scratch / "state"
    state.mkdir(mode=0o700)
    state.chmod(0o700)
    report = doctor(scratch)
    assert report["backends"]["bubblewrap"]["usable"], report["backends"]["bubblewrap"]
    assert report["selected"]["backend"] == "bubblewrap" and "passed over" not in report["selected"]["reason"]
    assert stat.S_IMODE(state.stat().st_mode) == 0o711
    assert "state-dir" not in found_topics(report)


@pytest.mark.backend
def test_doctor_names_a_state_directory_of_another_user_that_keeps_the_sandbox_out(scratch: Path):
    fail_unless(os.geteuid() == 0, "only root can give a state directory to another user")
    scratch.chmod(0o711)
    state = scratch / "state"
    state.mkdir(mode=0o700)
    os.chown(state, 65533, 65533)
    state.chmod(0o700)
    report = doctor(scratch)
    warning = found_topics(report)["state-dir"]
    assert "belongs to uid 65533" in warning and f"its owner must run `chmod o+x {state}`" in warning, warning
    bubblewrap = report["backends"]["bubblewrap"]
    assert not bubblewrap["usable"] and f"cannot pass through {state} (mode 0700" in bubblewrap["reason"], bubblewrap
    if report["selected"]["backend"] is not None:
        assert "passed over bubblewrap: uid 65534 cannot pass through" in report["selected"]["reason"], report
    assert stat.S_IMODE(state.stat().st_mode) == 0o700, "not the bridge's directory: its mode is left alone"


def test_doctor_names_the_probe_endpoints_and_why_a_face_without_a_backend_would_not_be_ready() -> None:
    settings = sandbox_settings(http_host="::", http_port=9000)
    found = probes(settings, {"backend": None, "reason": "no backend can run here; install bubblewrap"})
    assert found == {
        "liveness": "http://127.0.0.1:9000/healthz",  # every address is listened on: this machine's is one
        "readiness": "http://127.0.0.1:9000/readyz",
        "ready_now": False,
        "reason": "no-sandbox-backend",
        "detail": "no backend can run here; install bubblewrap",
    }
    report = {"platform": "Linux", "bridge_python": "3.11", "running_as_root": False, "cgroups": {"detail": "v2"},
              "selected": {"backend": None, "reason": "none"}, "sandbox_python": None, "image": "i", "state_dir": "s",
              "mounts": [], "warnings": [], "backends": {}, "probes": found}  # fmt: skip
    assert "ready now: no, no-sandbox-backend: no backend can run here)" in render_text(report)
    assert (
        probes(sandbox_settings(http_host="::1"), {"backend": "bubblewrap"})["liveness"] == "http://[::1]:8765/healthz"
    )


def test_doctor_names_where_find_servers_looks_and_each_bad_catalog_entry(tmp_path: Path) -> None:
    catalog = tmp_path / "catalog.json"
    catalog.write_text(json.dumps([{"name": "io.example/ok", "description": "Fine.", "version": "1.0.0"},
                                   {"name": "bad", "description": "No namespace.", "version": "1.0.0"}]))  # fmt: skip
    found = finding(sandbox_settings(registries=("https://r.example",), registry_catalog=(catalog,)))
    assert found["registries"] == ["https://r.example"] and found["catalogs"][0]["servers"] == 1
    (problem,) = found["catalogs"][0]["problems"]
    assert problem.startswith(f"the catalog {catalog}, entry [1]:")
    text = render_text({"platform": "Linux", "bridge_python": "3.11", "running_as_root": False,
                        "cgroups": {"detail": "v2"}, "selected": {"backend": None, "reason": "none"},
                        "sandbox_python": None, "image": "i", "state_dir": "s", "mounts": [], "warnings": [],
                        "backends": {}, "probes": probes(sandbox_settings(), {"backend": "bubblewrap"}),
                        "find_servers": found})  # fmt: skip
    assert f"find servers:    registry https://r.example; catalog {catalog} (1 server)" in text
    assert f"                 [!] {problem}" in text


def test_doctor_says_the_session_cap_and_how_it_was_reached() -> None:
    """Computed from the memory unless set; and what would stop that many sessions first is said beside it."""
    computed = sessions(Settings.load(env={}), "bubblewrap")
    assert "a 1/4 share of" in computed["why"] and "per idle session on bubblewrap" in computed["why"]
    assert computed["cap"] == Settings.load(env={}).max_sessions and computed["per_session_bytes"] > 0
    explicit = sessions(Settings.load(env={"MCP_BRIDGE_MAX_SESSIONS": "40"}), "bubblewrap")
    assert explicit["why"] == "40 (set by MCP_BRIDGE_MAX_SESSIONS)" and explicit["per_session_bytes"] is None
    text = render_text({"platform": "Linux", "bridge_python": "3.11", "running_as_root": False,
                        "cgroups": {"detail": "v2"}, "selected": {"backend": None, "reason": "none"},
                        "sandbox_python": None, "image": "i", "state_dir": "s", "mounts": [], "warnings": [],
                        "backends": {}, "probes": probes(sandbox_settings(), {"backend": "bubblewrap"}),
                        "sessions": {**explicit, "problems": ["too few open files"]}})  # fmt: skip
    assert "sessions:        at most 40 (set by MCP_BRIDGE_MAX_SESSIONS)" in text and "[!] too few open files" in text
