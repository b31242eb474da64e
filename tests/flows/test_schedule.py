"""`sieve schedule` registers the nightly deployment with its cron on a real Prefect server."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_healthy(url: str, proc: subprocess.Popen[bytes], timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, "prefect server exited"
        try:
            if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    raise TimeoutError("prefect server did not start")


async def read_deployment(name: str):  # type: ignore[no-untyped-def]
    from prefect.client.orchestration import get_client

    async with get_client() as client:
        return await client.read_deployment_by_name(name)


@pytest.mark.integration  # 26 s
@pytest.mark.timeout(300)
def test_schedule_registers_a_cron_deployment(
    tmp_path: Path, tiny_model_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    port = free_port()
    api = f"http://127.0.0.1:{port}/api"
    env = {
        **os.environ,
        "PREFECT_HOME": str(tmp_path / "prefect"),
        "PREFECT_API_URL": api,
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    }
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "prefect",
            "server",
            "start",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
        ],
        env={k: v for k, v in env.items() if k != "PREFECT_API_URL"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    served = None
    try:
        wait_healthy(api, server)
        served = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "flows.cli",
                "schedule",
                "--cron",
                "0 2 * * *",
                "--model",
                str(tiny_model_dir),
                "--home",
                str(tmp_path / "home"),
            ],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        monkeypatch.setenv("PREFECT_API_URL", api)
        from prefect.settings import PREFECT_API_URL, temporary_settings

        deployment = None
        with temporary_settings({PREFECT_API_URL: api}):
            deadline = time.monotonic() + 120
            while deployment is None and time.monotonic() < deadline:
                assert served.poll() is None, served.stderr.read() if served.stderr else ""
                try:
                    deployment = asyncio.run(read_deployment("sieve-nightly/nightly"))
                except Exception:
                    time.sleep(1)
        assert deployment is not None
        crons = [s.schedule.cron for s in deployment.schedules]
        assert crons == ["0 2 * * *"]
        assert deployment.parameters["params"]["model"] == str(tiny_model_dir.resolve())
    finally:
        for proc in (served, server):
            if proc is not None:
                proc.terminate()
                try:
                    proc.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    proc.kill()


def test_schedule_without_a_server_is_one_line(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    result = subprocess.run(
        [sys.executable, "-m", "flows.cli", "schedule", "--cron", "0 2 * * *"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1
    assert result.stderr.strip().startswith("error: sieve schedule needs a Prefect server")
