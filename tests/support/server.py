"""A real `memoryd serve` process (end-to-end tests, `make bench`): free port, token, kill."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path

import httpx

STARTUP_TIMEOUT_S = 120


class ServerProcess:
    """Starts `python -m memoryd serve --port 0` and reads the bound port from its log."""

    def __init__(
        self, data_dir: Path, model_dir: Path, *extra: str, env: dict[str, str] | None = None
    ) -> None:
        self.data_dir = data_dir
        self.log: list[str] = []
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "memoryd",
                "serve",
                "--port",
                "0",
                "--data-dir",
                str(data_dir),
                "--model-dir",
                str(model_dir),
                *extra,
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,  # uvicorn's access log goes to stdout: keep it too
            text=True,
            env={**os.environ, "HF_HUB_OFFLINE": "1", **(env or {})},
        )
        self.port = self._wait_for_port()
        self._drainer = threading.Thread(target=self._drain, daemon=True)
        self._drainer.start()
        token_file = data_dir / "token"  # none when the daemon runs with auth.enabled = false
        self.token = token_file.read_text().strip() if token_file.exists() else None
        self.headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        self.url = f"http://127.0.0.1:{self.port}"

    def _wait_for_port(self) -> int:
        assert self.proc.stdout is not None
        timer = threading.Timer(STARTUP_TIMEOUT_S, self.proc.kill)
        timer.start()
        try:
            for line in self.proc.stdout:
                self.log.append(line)
                if m := re.search(r"running on http://127\.0\.0\.1:(\d+)", line):
                    return int(m.group(1))
        finally:
            timer.cancel()
        raise RuntimeError("memoryd did not start:\n" + "".join(self.log))

    def _drain(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.log.append(line)

    def client(self, timeout: float = 60) -> httpx.Client:
        return httpx.Client(base_url=self.url, headers=self.headers, timeout=timeout)

    def rss_mb(self) -> float:
        status = Path(f"/proc/{self.proc.pid}/status").read_text()
        match = re.search(r"VmRSS:\s+(\d+)", status)
        assert match is not None
        return int(match.group(1)) / 1024

    def _finish(self, timeout: float) -> int:
        code = self.proc.wait(timeout)
        self._drainer.join(10)
        assert self.proc.stdout is not None
        self.proc.stdout.close()
        return code

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self._finish(30)

    def stop(self) -> int:
        self.proc.send_signal(signal.SIGTERM)
        return self._finish(60)
