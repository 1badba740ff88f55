#!/usr/bin/env bash
# Builds the repository's Dockerfile with Debian's own tools: no Docker
# engine, no registry. Used by tests/e2e/test_container.py and shown in
# docs/DEPLOY.md.
#
#   bash deploy/container/build-image.sh WORK_DIR [TAG]
#
# 1. debootstrap --variant=minbase bookworm: a base root filesystem from the
#    Debian mirror (PHASOR_DEBIAN_MIRROR, default http://deb.debian.org/debian),
#    with the apt/dpkg settings of the official images; cached as
#    WORK_DIR/bookworm-minbase.tar, so reruns skip it.
# 2. buildah (storage driver vfs, storage under WORK_DIR) commits it as
#    docker.io/library/debian:bookworm, and with the dpkg path excludes of the
#    official slim variant as docker.io/library/debian:bookworm-slim — the
#    names the Dockerfile's FROM lines resolve to, so --pull=never finds them.
# 3. buildah bud --isolation chroot --pull=never --format docker --layers
#    builds the Dockerfile as TAG (default localhost/phasor:test). Docker
#    format keeps the HEALTHCHECK (OCI image configs have no such field).
#    --layers caches each step in WORK_DIR, so a rerun repeats only what
#    changed (editing sources repeats the compile, not the apt installs);
#    the cache is bounded by PHASOR_CONTAINER_CACHE_GB (below).
#
# Root is needed (debootstrap, buildah's vfs storage, chroot isolation).
# Every buildah call goes through `bh`, which pins the storage to WORK_DIR:
# nothing touches /var/lib/containers.
set -euo pipefail

if (($# < 1 || $# > 2)); then
  echo "usage: $0 WORK_DIR [TAG]" >&2
  exit 2
fi
mkdir -p "$1"
work="$(cd "$1" && pwd)"
tag="${2:-localhost/phasor:test}"
source_dir="$(cd "$(dirname "$0")/../.." && pwd)"
mirror="${PHASOR_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
base_tar="$work/bookworm-minbase.tar"
full=docker.io/library/debian:bookworm
slim=docker.io/library/debian:bookworm-slim

for tool in debootstrap buildah; do
  command -v "$tool" >/dev/null || {
    echo "$0: $tool not found (bash deploy/install-deps.sh --test)" >&2
    exit 1
  }
done

bh() {
  buildah --root "$work/storage" --runroot "$work/run" \
    --storage-driver vfs "$@"
}
say() { echo "build-image: $* ($SECONDS s)"; }

# ---- 1. the base root filesystem ---------------------------------------
if [[ ! -s "$base_tar" ]]; then
  rootfs="$work/rootfs.tmp"
  rm -rf "$rootfs"
  say "debootstrap --variant=minbase bookworm from $mirror"
  debootstrap --variant=minbase bookworm "$rootfs" "$mirror" >"$work/debootstrap.log"
  # The official images' apt sources (deb822, with updates and security).
  rm -f "$rootfs/etc/apt/sources.list"
  cat >"$rootfs/etc/apt/sources.list.d/debian.sources" <<'SOURCES'
Types: deb
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://deb.debian.org/debian-security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SOURCES
  # What the official images configure for container builds (debuerreotype's
  # debuerreotype-minimizing-config): no service starts during installs, no
  # apt caches or translations left in layers, no fsync per package.
  printf '#!/bin/sh\nexit 101\n' >"$rootfs/usr/sbin/policy-rc.d"
  chmod 0755 "$rootfs/usr/sbin/policy-rc.d"
  echo force-unsafe-io >"$rootfs/etc/dpkg/dpkg.cfg.d/docker-apt-speedup"
  cat >"$rootfs/etc/apt/apt.conf.d/docker-clean" <<'CLEAN'
DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
APT::Update::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
Dir::Cache::pkgcache "";
Dir::Cache::srcpkgcache "";
CLEAN
  echo 'Acquire::Languages "none";' >"$rootfs/etc/apt/apt.conf.d/docker-no-languages"
  echo 'Apt::AutoRemove::SuggestsImportant "false";' \
    >"$rootfs/etc/apt/apt.conf.d/docker-autoremove-suggests"
  rm -rf "$rootfs"/var/cache/apt/*.bin "$rootfs"/var/cache/apt/archives/*.deb \
    "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/log/*.log "$rootfs"/var/log/apt/*
  # A container runtime provides /dev, /proc, /sys, /run; the archive holds
  # none of their contents.
  tar --numeric-owner --xattrs -C "$rootfs" \
    --exclude='./dev/*' --exclude='./proc/*' --exclude='./sys/*' \
    --exclude='./run/*' --exclude='./tmp/*' \
    -cf "$base_tar.tmp" .
  mv "$base_tar.tmp" "$base_tar"
  rm -rf "$rootfs"
  say "base root filesystem cached in $base_tar"
  # A new base invalidates the images made from the old one.
  bh rmi --force "$slim" "$full" >/dev/null 2>&1 || true
fi

# ---- 2. debian:bookworm and debian:bookworm-slim -------------------------
if ! bh inspect --type image "$full" >/dev/null 2>&1; then
  container="$(bh from scratch)"
  bh add "$container" "$base_tar" / >/dev/null
  bh config --cmd /bin/bash \
    --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    "$container"
  bh commit --rm --format docker "$container" "$full" >/dev/null
  say "committed $full"
fi
if ! bh inspect --type image "$slim" >/dev/null 2>&1; then
  container="$(bh from --pull=never "$full")"
  root="$(bh mount "$container")"
  # The slim variant (debuerreotype-slimify, with its .slimify-excludes and
  # .slimify-includes): dpkg stops installing documentation, man pages and
  # translations — what matters here, since the runtime stage installs
  # gRPC, protobuf and Abseil into it — and the copies already present go.
  {
    echo "# Slim image: no documentation, manuals or translations are installed."
    for path in /usr/share/doc/ /usr/share/groff/ /usr/share/info/ \
        /usr/share/linda/ /usr/share/lintian/overrides/ \
        /usr/share/locale/ /usr/share/man/; do
      echo "path-exclude ${path}*"
    done
    for path in '/usr/share/doc/*/copyright' /usr/share/locale/locale.alias \
        /usr/share/locale/languages /usr/share/locale/all_languages \
        '/usr/share/locale/currency/*' '/usr/share/locale/l10n/*'; do
      echo "path-include $path"
    done
  } >"$root/etc/dpkg/dpkg.cfg.d/docker"
  find "$root/usr/share/doc" -mindepth 1 -not -type d -not -name copyright -delete
  find "$root/usr/share/doc" -mindepth 1 -type d -empty -delete
  find "$root/usr/share/locale" -mindepth 1 -maxdepth 1 \
    -not -name locale.alias -not -name languages -not -name all_languages \
    -not -name currency -not -name l10n -exec rm -rf {} +
  rm -rf "$root"/usr/share/{groff,info,linda,lintian/overrides,man}/*
  bh umount "$container" >/dev/null
  bh commit --rm --format docker "$container" "$slim" >/dev/null
  say "committed $slim"
fi

# ---- 3. the Dockerfile ----------------------------------------------------
# The layer cache is the untagged intermediate images (vfs keeps each layer
# as a full copy: about 6 GB for one build). Each rebuild with changed
# sources adds its compile layers, so past PHASOR_CONTAINER_CACHE_GB
# (default 16) the cache is dropped (the next build repeats the package
# installs; the debootstrap archive stays).
cache_gb="${PHASOR_CONTAINER_CACHE_GB:-16}"
used_gb="$(du -s --block-size=1G "$work/storage" | cut -f1)"
if ((used_gb > cache_gb)); then
  say "layer cache ${used_gb} GB > ${cache_gb} GB: dropping it"
  bh rmi --all --force >/dev/null
  exec bash "$0" "$@"
fi
say "buildah bud $tag"
bh bud --isolation chroot --pull=never --format docker --layers \
  --tag "$tag" --file "$source_dir/Dockerfile" "$source_dir"
say "built $tag"
