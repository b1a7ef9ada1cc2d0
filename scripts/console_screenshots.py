"""Take the screenshots of docs/console.md: a real bridge with its console on, a few calls, Debian's chromium.

Usage: .venv/bin/python scripts/console_screenshots.py [OUT_DIR]  (default docs/images). Needs bubblewrap, chromium
and chromium-driver (scripts/setup.sh installs them). It starts `mcp-codemode serve --transport http` on a free
loopback port in a temporary state directory, makes the calls an agent might, and saves one PNG per page.
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


async def long_call(url: str) -> None:
    async with httpx2.AsyncClient(timeout=120) as http, Client(streamable_http_client(url, http_client=http)) as client:
        await client.call_tool("run_python", {"code": "import time\ntime.sleep(20)", "session": "scratch"})


def main() -> None:
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "docs/images")
    out.mkdir(parents=True, exist_ok=True)
    base = Path(tempfile.mkdtemp(prefix="mcp-codemode-shots-"))
    base.chmod(0o711)
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("MCP_BRIDGE_")}
    env |= {"MCP_BRIDGE_CONSOLE": "on", "MCP_BRIDGE_STATE_DIR": str(base / "state"), "MCP_BRIDGE_DISCOVER": "false",
            "MCP_BRIDGE_RUNTIME": "bubblewrap"}  # fmt: skip
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
        while not driver.find_elements(By.XPATH, "//table//button[text()='Cancel']"):  # the page follows, live
            time.sleep(0.2)
        time.sleep(2)
        driver.save_screenshot(str(out / "console-calls.png"))
        running.wait()
        driver.get(origin + "/calls?session=analysis")
        driver.find_elements(By.CSS_SELECTOR, "a.call")[0].click()
        driver.save_screenshot(str(out / "console-call.png"))
        driver.get(origin + "/doctor")
        driver.save_screenshot(str(out / "console-doctor.png"))
    finally:
        if driver is not None:
            driver.quit()
        server.terminate()
        server.wait(30)
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--long"]:
        asyncio.run(long_call(sys.argv[2]))
    else:
        main()
