"""Run the arm64 image as its container would run, check it over HTTP, and compare with x86_64.

`make smoke-arm64` (root; after `make image-arm64`). This sandbox refuses `podman run`, so the
image is run the way a runtime would, by hand: `buildah mount` gives its root file system, and
its entrypoint runs in a chroot as the image's non-root user, with the image's environment and
working directory, /proc and /dev mounted (not /sys: onnxruntime's CPU probe would read the
host's topology), a tmpfs /tmp and a host directory as the /var/lib/memoryd volume. QEMU's
binfmt entry runs the aarch64 binaries. One change to the image's settings: it listens on
127.0.0.1, not 0.0.0.0, because a chroot shares the host's network.

Then, as a user of the image would:
1. run the image's HEALTHCHECK command until it passes (time to healthy);
2. ingest a short conversation for two users, query each, and check the typed sections;
3. forget one user and check the receipt; the inspector page is served (from the wheel);
4. stop with SIGTERM: a complete shutdown ("memoryd stopped" in the log), then uvicorn re-raises
   the signal, so the process ends by SIGTERM (exit status 143 under Docker);
5. start again on the same volume: the other user is all there, the forgotten one is gone.

The same conversation and queries then go to an x86_64 daemon of this checkout (`.venv`,
`models/`): the labels of the turns and the top-ranked turns of each query are compared, and
each step's time is reported as aarch64 (emulated) / x86_64.

Parity of the models themselves (`scripts/parity_probe.py`, run with the image's venv and models
and with this checkout's): the int8 embeddings of the export's agreement sentences against the
fp32 model (sentence-transformers in `.build-venv`, on x86_64), which is the export's gate
(cosine >= 0.98) taken on aarch64, and the router's labels on the first ROUTE_LINES lines of the
corpus's dev split. The report goes to `build/arm64/smoke.json`, the daemons' logs beside it.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import httpx
import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))
from support.server import ServerProcess  # noqa: E402  (the e2e tests' real-server helper)

REPORT = REPO / "build" / "arm64" / "smoke.json"
READY_TIMEOUT_S = 600  # emulated start: the models load at ~1/100 of native speed
VOLUME = "/var/lib/memoryd"

CONVERSATION = [
    "Hi! I just moved to Rotterdam for a job at the port authority.",
    "My sister Ilse is visiting on the 14th, she is vegetarian.",
    "Remind me to book a table for two at a vegetarian place before Friday.",
    "When I ask for a recipe, always list the ingredients first and then the steps.",
    "Yesterday I cycled along the Maas and got caught in the rain.",
    "lol ok",
    "Actually Ilse now eats fish too, so pescatarian is fine.",
]
QUERIES = [
    "What does my sister eat?",
    "Where do I live and work?",
    "How should recipes be written for me?",
    "What do I need to book?",
]
KEEP, FORGET = "ana", "ben"
ROUTE_LINES = 120
FP32 = """
import json, sys
sys.path.insert(0, "scripts")
import export_models as em
from sentence_transformers import SentenceTransformer
model_dir, _ = em.locate_weights(em.SOURCE_PACKAGE)
texts = list(em.AGREEMENT_SENTENCES)
vectors = SentenceTransformer(str(model_dir), device="cpu").encode(texts, normalize_embeddings=True)
json.dump({"texts": texts, "vectors": vectors.tolist(), "gate": em.MIN_COSINE}, sys.stdout)
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run(*cmd: str) -> str:
    return subprocess.run(cmd, check=True, capture_output=True, text=True, cwd=REPO).stdout.strip()


STARTED: list[Daemon] = []


class Daemon:
    """One `memoryd serve` process: started by ``argv`` with ``env``, log kept in a file."""

    def __init__(self, argv: list[str], env: dict[str, str], port: int, log: Path) -> None:
        self.port, self.log_path = port, log
        self.started = time.monotonic()
        self.proc = subprocess.Popen(
            argv, env=env, stdout=log.open("ab"), stderr=subprocess.STDOUT, start_new_session=True
        )
        STARTED.append(self)

    def wait_healthy(self, probe: list[str], env: dict[str, str]) -> float:
        """Seconds until the HEALTHCHECK command and /readyz pass."""
        deadline = self.started + READY_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                sys.exit(f"the daemon exited with {self.proc.returncode}:\n{self.log_tail()}")
            passed = subprocess.run(probe, env=env, capture_output=True).returncode == 0
            if passed and self._ready():
                return time.monotonic() - self.started
            time.sleep(1)
        sys.exit(f"not healthy after {READY_TIMEOUT_S} s:\n{self.log_tail()}")

    def _ready(self) -> bool:
        with suppress(httpx.HTTPError):
            return httpx.get(f"http://127.0.0.1:{self.port}/readyz").status_code == 200
        return False

    def stop(self) -> int:
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(READY_TIMEOUT_S)

    def log_tail(self) -> str:
        return "".join(self.log_path.read_text(errors="replace").splitlines(True)[-30:])


def ok(r: httpx.Response) -> httpx.Response:
    """The reply, or an error that quotes what the daemon said."""
    if r.is_error:
        sys.exit(f"{r.request.method} {r.request.url} -> {r.status_code}: {r.text[:500]}")
    return r


def exercise(url: str, token: str) -> dict[str, Any]:
    """Ingest, query, forget over HTTP; the answers and how long each step took."""
    out: dict[str, Any] = {"labels": {}, "top": {}, "seconds": {}}
    headers = {"Authorization": f"Bearer {token}"}
    with httpx.Client(base_url=url, headers=headers, timeout=READY_TIMEOUT_S) as c:
        for user in (KEEP, FORGET):
            turns = [
                {"turn_id": f"{user}-{i}", "session_id": "s1", "role": "user", "text": text}
                for i, text in enumerate(CONVERSATION)
            ]
            start = time.monotonic()
            r = c.post(f"/v1/users/{user}/turns", json={"turns": turns})
            out["seconds"].setdefault("ingest 7 turns", time.monotonic() - start)
            ok(r)
            out["labels"][user] = [sorted(t["labels"]) for t in r.json()["turns"]]
        for query in QUERIES:
            start = time.monotonic()
            r = c.post(f"/v1/users/{KEEP}/query", json={"query": query, "k": 3})
            out["seconds"].setdefault("query", time.monotonic() - start)
            reply = ok(r).json()
            assert set(reply["sections"]) >= {"episodic", "semantic", "procedural"}, reply
            out["top"][query] = reply["turn_ids"][:3]
        out["counts"] = c.get(f"/v1/users/{KEEP}").json()["counts"]
        start = time.monotonic()
        r = c.delete(f"/v1/users/{FORGET}")
        out["seconds"]["forget"] = time.monotonic() - start
        out["receipt"] = ok(r).json()
        assert c.get(f"/v1/users/{FORGET}").status_code == 404
        # The inspector's files are package data: the installed wheel serves them.
        page, script = c.get("/ui/"), c.get("/ui/app.js")
        assert ok(page).headers["content-type"].startswith("text/html"), page.headers
        assert "frame-ancestors 'none'" in page.headers["content-security-policy"]
        out["inspector bytes"] = len(page.content) + len(ok(script).content)
    return out


def after_restart(url: str, token: str) -> dict[str, Any]:
    headers = {"Authorization": f"Bearer {token}"}
    with httpx.Client(base_url=url, headers=headers, timeout=READY_TIMEOUT_S) as c:
        kept = c.get(f"/v1/users/{KEEP}")
        return {
            "kept": kept.json()["counts"],
            "forgotten": c.get(f"/v1/users/{FORGET}").status_code,
        }


@contextmanager
def mounted_image(image: str) -> Iterator[tuple[Path, dict[str, Any]]]:
    """The image's root file system (buildah mount) and its config, removed afterwards."""
    ctr = run("buildah", "from", "--pull-never", image)
    try:
        root = Path(run("buildah", "mount", ctr))
        config = json.loads(run("buildah", "inspect", "--type", "image", image))
        yield root, config["Docker"]["config"]
    finally:
        subprocess.run(["buildah", "umount", ctr], capture_output=True)
        subprocess.run(["buildah", "rm", ctr], capture_output=True)


@contextmanager
def container_mounts(root: Path, volume: Path) -> Iterator[None]:
    """/proc, /dev, a tmpfs /tmp and the data volume, as a runtime would give them."""
    mounts = [
        (["-t", "proc", "proc"], root / "proc"),
        (["--bind", "/dev"], root / "dev"),
        (["-t", "tmpfs", "tmpfs"], root / "tmp"),
        (["--bind", str(volume)], root / VOLUME.lstrip("/")),
    ]
    done: list[Path] = []
    try:
        for args, target in mounts:
            target.mkdir(parents=True, exist_ok=True)
            subprocess.run(["mount", *args, str(target)], check=True)
            done.append(target)
        yield
    finally:
        for target in reversed(done):
            subprocess.run(["umount", "-l", str(target)], check=False)


def image_command(root: Path, config: dict[str, Any], port: int) -> tuple[list[str], list[str]]:
    """The entrypoint and the HEALTHCHECK, each as a chroot command line for the image's
    user, environment and working directory."""
    env = [e for e in config["Env"] if not e.startswith(("MEMORYD_HOST=", "MEMORYD_PORT="))]
    env += ["MEMORYD_HOST=127.0.0.1", f"MEMORYD_PORT={port}", f"HOME={VOLUME}"]
    prefix = [
        "chroot", f"--userspec={config['User']}", str(root),
        "/usr/bin/env", "-i", "-C", config.get("WorkingDir") or "/", *env,
    ]  # fmt: skip
    test = config["Healthcheck"]["Test"]
    assert test[0] == "CMD", test
    return [*prefix, *config["Entrypoint"], *(config.get("Cmd") or [])], [*prefix, *test[1:]]


def smoke_image(image: str, work: Path, probe_in: Path) -> dict[str, Any]:
    volume = work / "volume"
    volume.mkdir()
    with mounted_image(image) as (root, config):
        uid, gid = (int(x) for x in config["User"].split(":"))
        os.chown(volume, uid, gid)
        volume.chmod(0o700)
        port = free_port()
        serve, probe = image_command(root, config, port)
        env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}
        url = f"http://127.0.0.1:{port}"
        with container_mounts(root, volume):
            first = Daemon(serve, env, port, work / "arm64.log")
            healthy = first.wait_healthy(probe, env)
            result = exercise(url, (volume / "token").read_text().strip())
            stop_start = time.monotonic()
            code = first.stop()
            result["seconds"]["stop (SIGTERM)"] = time.monotonic() - stop_start
            assert code == -signal.SIGTERM, (code, first.log_tail())
            assert "memoryd stopped" in first.log_path.read_text(), first.log_tail()
            second = Daemon(serve, env, port, work / "arm64.log")
            result["seconds"]["restart to healthy"] = second.wait_healthy(probe, env)
            restart = after_restart(url, (volume / "token").read_text().strip())
            assert restart == {"kept": result["counts"], "forgotten": 404}, restart
            result["restart"] = restart
            assert second.stop() == -signal.SIGTERM, second.log_tail()
            result["probe"] = probe_image(root, config, probe_in)
        result["seconds"]["start to healthy"] = healthy
        result["files"] = sorted(
            f"{p.relative_to(volume)} {p.stat().st_uid}:{oct(p.stat().st_mode & 0o777)}"
            for p in volume.rglob("*")
            if p.is_file()
        )[:5]
    return result


def smoke_host(work: Path) -> dict[str, Any]:
    """The same exercise on x86_64: this checkout's daemon, as the e2e tests start it."""
    start = time.monotonic()
    server = ServerProcess(work / "x86", REPO / "models")
    try:
        with server.client() as c:
            while c.get("/readyz").status_code != 200:
                time.sleep(0.2)
        healthy = time.monotonic() - start
        result = exercise(server.url, server.token)
        result["seconds"]["start to healthy"] = healthy
    finally:
        server.stop()
        (work / "x86.log").write_text("".join(server.log))
    return result


def probe_texts(work: Path) -> tuple[Path, dict[str, Any]]:
    """The probe's input file, and the export's agreement sentences with their fp32 embeddings
    and its gate (the least cosine the int8 model may give)."""
    fp32 = json.loads(run(str(REPO / ".build-venv" / "bin" / "python"), "-c", FP32))
    lines = []
    for path in sorted((REPO / "models" / "router_corpus" / "dev").glob("*.jsonl")):
        lines += [json.loads(line)["text"] for line in path.read_text().splitlines() if line]
    source = work / "probe-in.json"
    source.write_text(json.dumps({"embed": fp32["texts"], "route": lines[:ROUTE_LINES]}))
    return source, fp32


def probe_image(root: Path, config: dict[str, Any], source: Path) -> dict[str, Any]:
    """parity_probe.py with the image's venv and models, as the image's user."""
    shutil.copy(REPO / "scripts" / "parity_probe.py", root / "tmp" / "parity_probe.py")
    shutil.copy(source, root / "tmp" / "probe-in.json")
    env = [e for e in config["Env"] if e.startswith(("PATH=", "HF_HUB_OFFLINE="))]
    model_dir = next(e for e in config["Env"] if e.startswith("MEMORYD_MODEL_DIR=")).split("=")[1]
    subprocess.run(
        ["chroot", f"--userspec={config['User']}", str(root), "/usr/bin/env", "-i", *env,
         "python", "/tmp/parity_probe.py", model_dir, "/tmp/probe-in.json", "/tmp/probe-out.json"],
        check=True,
    )  # fmt: skip
    return dict(json.loads((root / "tmp" / "probe-out.json").read_text()))


def probe_host(source: Path, work: Path) -> dict[str, Any]:
    target = work / "probe-x86.json"
    python = str(REPO / ".venv" / "bin" / "python")
    run(
        python,
        str(REPO / "scripts" / "parity_probe.py"),
        str(REPO / "models"),
        str(source),
        str(target),
    )
    return dict(json.loads(target.read_text()))


def model_parity(arm: dict[str, Any], x86: dict[str, Any], fp32: dict[str, Any]) -> dict[str, Any]:
    def cosines(a: list[list[float]], b: list[list[float]]) -> list[float]:
        return [float(np.dot(u, v)) for u, v in zip(np.asarray(a), np.asarray(b), strict=True)]

    gate = cosines(arm["vectors"], fp32["vectors"])
    pairs = list(zip(arm["routes"], x86["routes"], strict=True))
    return {
        "encoder gate on aarch64 (int8 vs fp32, min cosine)": round(min(gate), 4),
        "encoder gate passes": min(gate) >= fp32["gate"],
        "encoder gate on x86_64 (min cosine)": round(
            min(cosines(x86["vectors"], fp32["vectors"])), 4
        ),
        "int8 aarch64 vs x86_64 (min / mean cosine)": [
            round(min(c := cosines(arm["vectors"], x86["vectors"])), 4),
            round(sum(c) / len(c), 4),
        ],
        "router labels agree": f"{sum(a['labels'] == b['labels'] for a, b in pairs)}/{len(pairs)}",
        "router confidence, largest change": round(
            max(abs(a["confidence"] - b["confidence"]) for a, b in pairs), 4
        ),
        "encoder p50 ms (aarch64 emulated / x86_64)": [
            round(arm["embed_ms_p50"], 1),
            round(x86["embed_ms_p50"], 2),
        ],
    }


def compare(arm: dict[str, Any], x86: dict[str, Any]) -> dict[str, Any]:
    pairs = list(zip(arm["labels"][KEEP], x86["labels"][KEEP], strict=True))
    return {
        "labels agree": f"{sum(a == b for a, b in pairs)}/{len(pairs)}",
        "top-3 agree": f"{sum(arm['top'][q] == x86['top'][q] for q in QUERIES)}/{len(QUERIES)}",
        "slowdown (aarch64 emulated / x86_64)": {
            step: round(arm["seconds"][step] / x86["seconds"][step], 1)
            for step in x86["seconds"]
            if step in arm["seconds"] and x86["seconds"][step] > 0
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--image", default=os.environ.get("ARM64_IMAGE", "localhost/memoryd:arm64"))
    args = parser.parse_args()
    if os.geteuid() != 0:
        sys.exit("smoke-arm64 mounts the image and runs a chroot: run it as root")
    work = Path(tempfile.mkdtemp(prefix="smoke-arm64-"))
    try:
        probe_in, fp32 = probe_texts(work)
        arm = smoke_image(args.image, work, probe_in)
        x86 = smoke_host(work)
        parity = compare(arm, x86) | model_parity(
            arm.pop("probe"), probe_host(probe_in, work), fp32
        )
        report = {"aarch64 (emulated)": arm, "x86_64": x86, "parity": parity}
    finally:
        for daemon in STARTED:  # a failed check leaves none running
            if daemon.proc.poll() is None:
                os.killpg(daemon.proc.pid, signal.SIGKILL)
                daemon.proc.wait()
        REPORT.parent.mkdir(parents=True, exist_ok=True)
        for log in work.glob("*.log"):  # the daemons' logs, kept beside the report
            shutil.copy(log, REPORT.parent / log.name)
        shutil.rmtree(work, ignore_errors=True)
    REPORT.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report["parity"], indent=2))
    print(f"report: {REPORT}")


if __name__ == "__main__":
    main()
