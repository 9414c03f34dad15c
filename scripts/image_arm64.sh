#!/bin/sh
# Build Dockerfile.arm64 for linux/arm64 on an x86_64 machine without Docker: QEMU user
# emulation (binfmt), a Debian bookworm arm64 base made with debootstrap, and buildah.
#
#   scripts/image_arm64.sh binfmt   register qemu-aarch64 with the kernel (idempotent)
#   scripts/image_arm64.sh base     the base image localhost/memoryd-base:bookworm-arm64, from a
#                                   cached debootstrap root ($ARM64_CACHE/base.tar)
#   scripts/image_arm64.sh build    `buildah bud` on that base -> localhost/memoryd:arm64
#   scripts/image_arm64.sh units    systemd-analyze verify + security on config/memoryd.service
#                                   inside a container of that image (systemd from Debian)
# (`make image-arm64` runs the first three in turn; `make smoke-arm64` runs units.)
#
# ARM64_MODELS=host (the default here) gives the build this checkout's models/ (`make models`)
# as the named context `host-models`; ARM64_MODELS=build exports and trains them on arm64 as a
# native arm64 build does, which under QEMU takes hours (torch at ~1/100 of native speed).
#
# Needs root and, from Debian: qemu-user-static, debootstrap, buildah (installed when missing).
# The registry's python:3.11-slim cannot always be pulled; the Debian base stands in for it
# (Dockerfile.arm64 takes PYTHON_IMAGE): Debian's python3 3.11 with python-is-python3, so
# `python` runs it as in the python image. The host's CA bundle is bind-mounted over the base's
# for the build's RUN steps (pip and apt behind a TLS-inspecting proxy), never copied in.
set -eu

CACHE=${ARM64_CACHE:-${HOME}/.cache/memoryd-arm64}
BASE_IMAGE=${ARM64_BASE_IMAGE:-localhost/memoryd-base:bookworm-arm64}
IMAGE=${ARM64_IMAGE:-localhost/memoryd:arm64}
MODELS_FROM=${ARM64_MODELS:-host}
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
CA_BUNDLE=/etc/ssl/certs/ca-certificates.crt
BINFMT=/proc/sys/fs/binfmt_misc

say() { printf '%s image-arm64: %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

need_packages() {
    missing=""
    command -v qemu-aarch64-static >/dev/null || missing="$missing qemu-user-static"
    command -v debootstrap >/dev/null || missing="$missing debootstrap"
    command -v buildah >/dev/null || missing="$missing buildah"
    if [ -n "$missing" ]; then
        say "installing$missing from Debian"
        apt-get update -q >/dev/null
        # shellcheck disable=SC2086
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $missing >/dev/null
    fi
}

binfmt() {
    need_packages
    [ -e "$BINFMT/register" ] || mount -t binfmt_misc binfmt_misc "$BINFMT"
    if [ ! -e "$BINFMT/qemu-aarch64" ]; then
        # The line Debian's package installs for systemd-binfmt; flag F opens the interpreter
        # now, so it also runs inside chroots that lack it.
        cat /usr/lib/binfmt.d/qemu-aarch64.conf >"$BINFMT/register"
        say "registered qemu-aarch64 with binfmt_misc"
    fi
    [ "$(cat "$BINFMT/status")" = enabled ] || { say "binfmt_misc is disabled"; exit 1; }
}

base_tar() {
    tar="$CACHE/base.tar"
    if [ -s "$tar" ]; then
        say "base root cached: $tar"
        return
    fi
    mkdir -p "$CACHE"
    root="$CACHE/rootfs.tmp"
    rm -rf "$root"
    say "debootstrap bookworm arm64 into $root (a few minutes)"
    debootstrap --arch=arm64 --variant=minbase \
        --include=python3,python3-venv,python3-pip,python-is-python3,ca-certificates \
        bookworm "$root" "$MIRROR" >"$CACHE/debootstrap.log"
    chroot "$root" /bin/sh -c 'apt-get clean && rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin'
    tar -C "$root" --numeric-owner -cf "$tar.tmp" .
    mv "$tar.tmp" "$tar"
    rm -rf "$root"
    say "base root: $tar ($(du -h "$tar" | cut -f1))"
}

base() {
    binfmt
    base_tar
    if buildah inspect --type image "$BASE_IMAGE" >/dev/null 2>&1; then
        say "base image present: $BASE_IMAGE"
        return
    fi
    ctr=$(buildah from --arch arm64 --os linux scratch)
    buildah add --quiet "$ctr" "$CACHE/base.tar" /
    buildah config --arch arm64 --os linux --env LANG=C.UTF-8 \
        --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
        --cmd python3 "$ctr"
    buildah commit --quiet --rm "$ctr" "$BASE_IMAGE" >/dev/null
    say "base image: $BASE_IMAGE"
}

build() {
    buildah inspect --type image "$BASE_IMAGE" >/dev/null 2>&1 || { say "no $BASE_IMAGE: run base"; exit 1; }
    say "buildah bud Dockerfile.arm64 -> $IMAGE, models from $MODELS_FROM (emulated: slow)"
    start=$(date +%s)
    # The RUN steps see the host's /sys (buildah mounts it whatever --volume says), where
    # onnxruntime's CPU probe reads an x86_64 topology under QEMU and dies with SIGSEGV at
    # import: the runtime stage's import check leaves it out, and the smoke test runs it.
    # --format docker: the OCI format has no HEALTHCHECK, and the smoke test runs it. No
    # --layers: buildah 1.28 cannot bind-mount a cached stage (RUN --mount from=wheels).
    buildah bud --isolation chroot --platform linux/arm64 --format docker \
        --build-arg "PYTHON_IMAGE=$BASE_IMAGE" --build-arg "MODELS_FROM=$MODELS_FROM" \
        --build-context host-models=models \
        --build-arg "IMPORT_CHECK=hnswlib ladybug tokenizers memoryd" \
        --volume "$CA_BUNDLE:$CA_BUNDLE:ro" \
        -f Dockerfile.arm64 -t "$IMAGE" .
    say "built $IMAGE in $(( $(date +%s) - start )) s"
    buildah images --format '{{.Name}}:{{.Tag}} {{.Size}}' | grep -e memoryd >&2 || true
}

units() {
    ctr=$(buildah from --pull-never "$IMAGE")
    trap 'buildah rm "$ctr" >/dev/null' EXIT
    say "installing systemd in a container of $IMAGE (emulated)"
    buildah run --isolation chroot --user root --volume "$CA_BUNDLE:$CA_BUNDLE:ro" "$ctr" -- \
        sh -c 'apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive \
            apt-get install -y -q --no-install-recommends systemd >/dev/null'
    buildah copy --quiet "$ctr" config/memoryd.service /etc/systemd/system/memoryd.service
    # verify: the unit's ExecStart (/opt/memoryd/venv/bin/memoryd) exists in this root.
    buildah run --isolation chroot --user root "$ctr" -- sh -c '
        systemd-analyze verify /etc/systemd/system/memoryd.service || exit 1
        echo "verify: clean"
        systemd-analyze security --offline=true --no-pager /etc/systemd/system/memoryd.service |
            tail -1'
}

case "${1:-}" in
    binfmt) binfmt ;;
    base) base ;;
    build) build ;;
    units) units ;;
    *) echo "usage: $0 binfmt|base|build|units" >&2; exit 2 ;;
esac
