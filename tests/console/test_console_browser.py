"""The console in a real browser: Debian's chromium, driven through its chromium-driver by Selenium (no browser is
downloaded), against a real loopback `serve --transport http` with the console on and calls made by the SDK's
client. One browser and one bridge for the module: starting chromium costs seconds.

What a person must see: a session appear on the open Sessions page after a call (live, by the event stream, without
reloading), a running call cancelled with the page's button ending in the client with the cancellation, a cell
that prints ``<script>`` shown as text, with the script never run, and an ``ask_tools`` call of a client without
elicitation approved from the Approvals page (the call completes) or denied there (it fails with the reason), and
a remote server signed in from the Servers page against the suite's OAuth server (its tools then listed there).
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException, TimeoutException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from mcp_codemode.console.launch import console_link
from tests.support import oauth_server, upstreams
from tests.support.backends import fail_unless, sandbox_settings
from tests.support.clients import (
    HttpServer,
    assert_no_orphans,
    free_port,
    http_client_for,
    require_bubblewrap,
    text_of,
)
from tests.support.patience import patient

pytestmark = [pytest.mark.anyio, pytest.mark.backend]
CHROMIUM, DRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
WAIT = patient(60.0)


@pytest.fixture(scope="module")
def oauth_url() -> Iterator[str]:
    """The SDK's authorization server and OAuth-only MCP server (tests/support/oauth_server.py)."""
    with oauth_server.running(free_port(), patience=patient(60)) as url:
        yield url


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, oauth_url: str) -> Iterator[HttpServer]:
    require_bubblewrap()
    folder = tmp_path_factory.mktemp("console-browser")
    config = upstreams.write_config(folder / "servers.json", upstreams.everything())
    servers = json.loads(config.read_text())["mcpServers"]  # and one that wants an OAuth sign-in
    config.write_text(json.dumps({"mcpServers": {**servers, "signed": {"type": "http", "url": oauth_url}}}))
    policy = folder / "codemode.toml"  # everything/echo waits for approval, in the console
    policy.write_text('[policy]\nask_tools = ["everything/echo"]\n', encoding="utf-8")
    with HttpServer(
        folder / "server.log", MCP_BRIDGE_CONSOLE="on", MCP_BRIDGE_AUDIT_LOG=str(folder / "audit.jsonl"),
        MCP_BRIDGE_DISCOVER="false", MCP_BRIDGE_INTERRUPT_GRACE="30", MCP_SERVERS_CONFIG=str(config),
        MCP_CODEMODE_SETTINGS=str(policy),
    ) as server:  # fmt: skip
        yield server
    assert_no_orphans()


@pytest.fixture(scope="module")
def browser(server: HttpServer) -> Iterator[webdriver.Chrome]:
    """Headless chromium, signed in to the console with a one-time link, as `mcp-codemode console` gets one."""
    found = Path(CHROMIUM).exists() and Path(DRIVER).exists() and shutil.which("chromedriver") is not None
    fail_unless(found, f"{CHROMIUM} and {DRIVER} are needed (scripts/setup.sh installs chromium chromium-driver)")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                     "--window-size=1280,900"):  # fmt: skip
        options.add_argument(argument)
    driver = webdriver.Chrome(options=options, service=Service(DRIVER))  # the driver given: nothing downloaded
    try:
        state = sandbox_settings().state_dir / "console" / f"{server.bridge_pid}.json"
        driver.get(console_link(json.loads(state.read_text(encoding="utf-8"))))
        assert driver.current_url.endswith("/console/sessions"), driver.current_url
        yield driver
    finally:
        driver.quit()


def _origin(server: HttpServer) -> str:
    return f"http://127.0.0.1:{server.port}"


def _waiting(driver: webdriver.Chrome) -> WebDriverWait[webdriver.Chrome]:
    """A wait that looks again when the live page swapped what it was reading (its main part is replaced whole)."""
    return WebDriverWait(driver, WAIT, ignored_exceptions=(StaleElementReferenceException,))


def _wait_for_text(driver: webdriver.Chrome, text: str) -> None:
    try:
        _waiting(driver).until(lambda d: text in d.find_element(By.TAG_NAME, "main").text)
    except TimeoutException:
        raise AssertionError(f"{text!r} never appeared; the page shows:\n{driver.page_source}") from None


async def test_the_open_sessions_page_shows_a_session_after_its_first_call(
    server: HttpServer, browser: webdriver.Chrome
) -> None:
    browser.get(_origin(server) + "/console/sessions")
    assert "notebook-7" not in browser.find_element(By.TAG_NAME, "main").text
    async with http_client_for(server.url) as client:
        await client.call_tool("run_python", {"code": "z = 1", "session": "notebook-7"})
    await anyio.to_thread.run_sync(_wait_for_text, browser, "notebook-7")  # not reloaded: the event stream did it
    row = _waiting(browser).until(
        lambda d: d.find_element(By.XPATH, "//tr[.//span[@class='session' and text()='notebook-7']]").text
    )
    assert "bubblewrap" in row and "running" in row
    assert re.search(r"\d+\.\d MiB", row), row  # its sandbox's memory, as its cgroup (or its processes) count it


async def test_a_running_call_is_cancelled_from_the_page_and_its_client_sees_it(
    server: HttpServer, browser: webdriver.Chrome
) -> None:
    browser.get(_origin(server) + "/console/calls")
    answers = []
    async with http_client_for(server.url) as client, anyio.create_task_group() as group:

        async def long_call() -> None:
            code = "import time\nfor _ in range(600):\n    time.sleep(0.1)"
            answers.append(await client.call_tool("run_python", {"code": code, "session": "stuck", "timeout": 100}))

        group.start_soon(long_call)

        def cancel() -> None:
            def click(driver: webdriver.Chrome) -> bool:  # looked for again if the live page replaced it meanwhile
                driver.find_element(By.XPATH, "//table//button[text()='Cancel']").click()
                return True

            _waiting(browser).until(click)
            _wait_for_text(browser, "cancelled")  # the call's own page, which the cancel leads to

        await anyio.to_thread.run_sync(cancel)
    (answer,) = answers
    assert answer.is_error and "cancelled from the web console" in text_of(answer), text_of(answer)


async def test_a_cell_that_prints_a_script_shows_it_as_text_and_never_runs_it(
    server: HttpServer, browser: webdriver.Chrome
) -> None:
    payload = "<script>document.title='pwned'</script><b>bold</b><img src=x onerror=\"document.title='pwned'\">"
    async with http_client_for(server.url) as client:
        await client.call_tool("run_python", {"code": f"print({payload!r})", "session": "hostile"})
    browser.get(_origin(server) + "/console/calls?session=hostile")
    browser.find_element(By.CSS_SELECTOR, "a.call").click()
    await anyio.to_thread.run_sync(_wait_for_text, browser, "Output, as the model saw it")
    output = browser.find_element(By.CSS_SELECTOR, "pre.output")
    assert payload in output.text  # the markup, as characters
    assert output.find_elements(By.XPATH, ".//*") == []  # and no element made of it
    assert "pwned" not in browser.title


ECHO = """
import mcp.runtime as runtime
try:
    print(await mcp_everything.echo(message=%r))
except runtime.ApprovalDenied as exc:
    print("ApprovalDenied:", exc.message)
"""


async def _echo_into(server: HttpServer, label: str, answers: list[str]) -> None:
    async with http_client_for(server.url) as client:
        answer = await client.call_tool("run_python", {"code": ECHO % label, "session": "asks", "timeout": 100})
    answers.append(text_of(answer))


async def test_an_approval_granted_on_the_page_lets_the_call_finish_and_a_denied_one_fails_with_the_reason(
    server: HttpServer, browser: webdriver.Chrome
) -> None:
    browser.get(_origin(server) + "/console/approvals")
    outcomes = {}
    for label, button in (("from-the-page", "Approve"), ("not-this-one", "Deny")):
        answers: list[str] = []
        async with anyio.create_task_group() as group:
            group.start_soon(_echo_into, server, label, answers)

            def answer(label: str = label, button: str = button) -> None:
                _wait_for_text(browser, label)  # the open page shows it by itself: the event stream

                def click(driver: webdriver.Chrome) -> bool:
                    found = f"//section[contains(., '{label}')]//button[text()='{button}']"
                    driver.find_element(By.XPATH, found).click()
                    return True

                _waiting(browser).until(click)

            await anyio.to_thread.run_sync(answer)
        outcomes[button] = answers[0]
    assert "from-the-page" in outcomes["Approve"] and "ApprovalDenied" not in outcomes["Approve"], outcomes
    assert "ApprovalDenied: not approved: everything/echo: denied in the console" in outcomes["Deny"], outcomes


async def test_a_remote_server_is_signed_in_from_the_servers_page_and_its_tools_are_listed_there(
    server: HttpServer, browser: webdriver.Chrome
) -> None:
    browser.get(_origin(server) + "/console/servers")
    row = "//tr[.//span[@class='server' and text()='signed']]"
    assert "not signed in" in browser.find_element(By.XPATH, row).text

    def sign_in() -> None:
        def click(driver: webdriver.Chrome) -> bool:  # looked for again if the live page replaced it meanwhile
            driver.find_element(By.XPATH, row + "//button[text()='Sign in']").click()
            return True

        _waiting(browser).until(click)
        # On to the authorization server, which consents at once, back to the callback, then to the Servers page,
        # where the console's cookie went along again (the page is not the sign-in form).
        _waiting(browser).until(lambda d: d.current_url.endswith("/console/servers") and "whoami" in d.find_element(
            By.XPATH, row).text)  # fmt: skip

    await anyio.to_thread.run_sync(sign_in)
    text = browser.find_element(By.XPATH, row).text
    assert "signed in" in text and "not signed in" not in text and "Sign in" not in text, text
