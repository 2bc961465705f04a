#!/usr/bin/env bash
# Build a small local python image for the docker sandbox without any image registry: a Debian
# "minbase" tree made by debootstrap (python3, plus passwd for useradd), piped into
# `docker import`. Cached by tag: nothing is done when the tag already exists.
#
#   bash scripts/build_docker_image.sh [TAG]      # default TAG: deepgym/python:3-bookworm
#
# Needs root, debootstrap and a running Docker engine. DEBOOTSTRAP_MIRROR picks the Debian
# mirror (default: debootstrap's own); DEEPGYM_IMAGE_SUITE the release (default: bookworm).
set -euo pipefail

TAG=${1:-${DEEPGYM_DOCKER_IMAGE:-deepgym/python:3-bookworm}}
SUITE=${DEEPGYM_IMAGE_SUITE:-bookworm}
log() { printf '\033[1m[docker-image]\033[0m %s\n' "$*"; }

if docker image inspect "$TAG" >/dev/null 2>&1; then
  log "$TAG exists; nothing to do"
  exit 0
fi
command -v debootstrap >/dev/null 2>&1 || { log "debootstrap is missing (apt-get install debootstrap)"; exit 1; }
[ "$(id -u)" = 0 ] || { log "debootstrap needs root"; exit 1; }

root=$(mktemp -d /var/tmp/deepgym-rootfs-XXXXXX)
trap 'rm -rf "$root"' EXIT
start=$(date +%s)
log "debootstrap $SUITE (minbase + python3) into $root"
# shellcheck disable=SC2086 # the mirror is optional: an empty word must vanish
debootstrap --variant=minbase --include=python3,passwd "$SUITE" "$root" ${DEBOOTSTRAP_MIRROR:-} \
  >"$root.log" 2>&1 || { tail -20 "$root.log"; rm -f "$root.log"; exit 1; }
rm -f "$root.log"
# Leave out what an image never needs: apt's caches and lists, docs, man pages.
rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/* \
  "$root"/usr/share/doc/* "$root"/usr/share/man/* "$root"/usr/share/locale/*
log "docker import as $TAG"
# An imported image has no ENV at all: without PATH, `python3` is not found by exec.
tar -C "$root" -c . | docker import \
  -c 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  -c 'ENV LANG=C.UTF-8' -c 'CMD ["python3"]' - "$TAG" >/dev/null
docker run --rm --network none "$TAG" python3 -c 'import sys; print("python", sys.version.split()[0])'
log "built $TAG in $(( $(date +%s) - start ))s"
