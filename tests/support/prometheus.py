"""A real Prometheus server (Debian's ``prometheus`` package, installed by scripts/setup.sh) on a free loopback port,
scraping what a test names, and its HTTP API: the targets' health and instant queries.

Started with its storage in the test's temporary directory and stopped (SIGTERM, then SIGKILL) when the test is
done. A missing binary fails the test under CI=true and skips it elsewhere, naming the setup script.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from .backends import fail_unless
from .clients import free_port
from .patience import patient

_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback: never through a proxy
START_DEADLINE = 120.0  # hang guards (scaled by patience), not speed checks
SCRAPE_DEADLINE = 120.0


Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def samples_of(exposition: bytes) -> Samples:
    """Every sample of a /metrics answer, read by prometheus_client's own parser: (name, sorted labels) -> value."""
    found: Samples = {}
    for family in text_string_to_metric_families(exposition.decode()):
        for sample in family.samples:
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


def get(url: str, headers: dict[str, str] | None = None) -> tuple[int, bytes]:
    """A GET on loopback: its status and body, an HTTP error's too."""
    try:
        with _DIRECT.open(urllib.request.Request(url, headers=headers or {}), timeout=30) as answer:
            return answer.status, answer.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def prometheus_binary() -> str:
    found = shutil.which("prometheus")
    fail_unless(found is not None, "Prometheus is not installed (Debian's prometheus package); run scripts/setup.sh")
    assert found is not None
    return found


def scrape_config(jobs: dict[str, dict[str, Any]]) -> str:
    """A prometheus.yml scraping each job every second: ``jobs`` maps a job's name to its own settings (targets,
    ``authorization``); JSON is YAML, so no YAML library is needed."""
    scrape = [{"job_name": name, "scrape_interval": "1s", "scrape_timeout": "1s", "metrics_path": "/metrics", **job}
              for name, job in jobs.items()]  # fmt: skip
    return json.dumps({"global": {"scrape_interval": "1s"}, "scrape_configs": scrape}, indent=2)


class Prometheus:
    """One Prometheus process and its API at ``url``."""

    def __init__(self, url: str, process: subprocess.Popen[bytes], log: Path) -> None:
        self.url = url
        self.process = process
        self.log = log

    def api(self, path: str, **params: str) -> Any:
        query = urllib.parse.urlencode(params)
        with _DIRECT.open(f"{self.url}{path}?{query}", timeout=30) as answer:
            body = json.loads(answer.read())
        assert body["status"] == "success", body
        return body["data"]

    def targets(self) -> dict[str, dict[str, Any]]:
        """Each active target by its job: health ("up", "down", "unknown"), lastError, lastScrape."""
        return {target["labels"]["job"]: target for target in self.api("/api/v1/targets")["activeTargets"]}

    def wait_for(self, condition: Callable[[dict[str, dict[str, Any]]], bool], what: str) -> dict[str, Any]:
        """Poll the targets until ``condition`` holds of them (a scrape happened); a hang guard, not a timing test."""
        deadline = time.monotonic() + patient(SCRAPE_DEADLINE)
        targets: dict[str, dict[str, Any]] = {}
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError):
                targets = self.targets()
                if condition(targets):
                    return targets
            time.sleep(0.2)
        raise AssertionError(f"Prometheus never saw {what}; its targets: {targets}\n{self.log.read_text()[-3000:]}")

    def query(self, promql: str) -> dict[tuple[tuple[str, str], ...], float]:
        """An instant query's vector: each series' labels (without __name__) -> its value."""
        data = self.api("/api/v1/query", query=promql)
        assert data["resultType"] == "vector", data
        return {tuple(sorted((k, v) for k, v in item["metric"].items() if k != "__name__")): float(item["value"][1])
                for item in data["result"]}  # fmt: skip

    def value(self, promql: str) -> float:
        """The one value of a query that must have exactly one series."""
        found = self.query(promql)
        assert len(found) == 1, (promql, found)
        return next(iter(found.values()))


@contextlib.contextmanager
def prometheus(directory: Path, config: str) -> Iterator[Prometheus]:
    """Prometheus with ``config`` on a free 127.0.0.1 port, its data and log under ``directory``."""
    binary = prometheus_binary()
    (directory / "prometheus.yml").write_text(config)
    log = directory / "prometheus.log"
    port = free_port()
    command = [binary, f"--config.file={directory / 'prometheus.yml'}", f"--web.listen-address=127.0.0.1:{port}",
               f"--storage.tsdb.path={directory / 'data'}", "--log.level=warn"]  # fmt: skip
    with log.open("ab") as errlog:
        process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=errlog, stderr=subprocess.STDOUT)
    server = Prometheus(f"http://127.0.0.1:{port}", process, log)
    try:
        deadline = time.monotonic() + patient(START_DEADLINE)
        while True:
            assert process.poll() is None, f"Prometheus exited: {log.read_text()[-3000:]}"
            with contextlib.suppress(OSError), _DIRECT.open(f"{server.url}/-/ready", timeout=5) as ready:
                if ready.status == 200:
                    break
            assert time.monotonic() < deadline, f"Prometheus did not start: {log.read_text()[-3000:]}"
            time.sleep(0.1)
        yield server
    finally:
        process.terminate()
        try:
            process.wait(timeout=patient(30))
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=30)
