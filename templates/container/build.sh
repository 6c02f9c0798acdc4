#!/usr/bin/env bash
# templates/container/build.sh - build the appliance's container images from Debian's packages only.
#
# Nothing is pulled from a container registry: the base image is a Debian bookworm root filesystem made
# with debootstrap and imported into podman; the app and PostgreSQL images are built on it with
# podman build (buildah). Images:
#   localhost/agentws-debian:bookworm     the base (debootstrap --variant=minbase, ca-certificates)
#   localhost/agentws:latest              the app (Containerfile): Node.js 24, bubblewrap, socat, ripgrep, git
#   localhost/agentws-postgres:15         PostgreSQL 15 with pgvector (Containerfile.postgres)
#
# Usage: bash templates/container/build.sh [--rebuild-base] [--no-host-cas] [--only app|postgres]
# Environment:
#   AGENTWS_IMAGE_WORKDIR   where the rootfs, the build context and logs go (default /var/tmp/agentws-image);
#                           never inside the repository
#   DEBIAN_MIRROR           Debian mirror for debootstrap (default: this host's apt source, else deb.debian.org)
#   AGENTWS_IMAGE_TAG       tag of the app image (default latest)
# The certificate authorities this host added itself (/usr/local/share/ca-certificates/*.crt, e.g. a
# company's TLS-inspecting proxy) go into the base image, so the build (npm, apt) and the service (model
# providers) trust what the host trusts; --no-host-cas leaves them out.
# Needs root and Debian's podman, buildah and debootstrap: apt-get install -y podman buildah debootstrap
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
work=${AGENTWS_IMAGE_WORKDIR:-/var/tmp/agentws-image}
tag=${AGENTWS_IMAGE_TAG:-latest}
base=localhost/agentws-debian:bookworm
rebuild_base=0
host_cas=1
only=
while [[ $# -gt 0 ]]; do
  case $1 in
    --rebuild-base) rebuild_base=1 ;;
    --no-host-cas) host_cas=0 ;;
    --only) only=${2:?--only app|postgres}; shift ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    *) echo "unknown option: $1" >&2; exit 2 ;;
  esac
  shift
done

log() { printf '==> %s\n' "$*" >&2; }
die() { printf '==> ERROR: %s\n' "$*" >&2; exit 1; }
[[ $(id -u) == 0 ]] || die "run as root (rootful podman; debootstrap needs root)"
for c in podman debootstrap git; do command -v "$c" >/dev/null || die "$c is missing: apt-get install -y podman buildah debootstrap git"; done
case $work in "$repo"|"$repo"/*) die "AGENTWS_IMAGE_WORKDIR must be outside the repository ($repo)" ;; esac
mkdir -p "$work"

# Hosts where podman's defaults do not fit (checked, not assumed): root without CAP_SYS_RESOURCE cannot
# raise rlimits to podman's default nofile/nproc, and crun refuses hybrid cgroups (v1 with a v2 hierarchy
# holding controllers) where runc copes. Both are answered with a containers.conf in the work dir, used
# through CONTAINERS_CONF by this script and by whoever sources $work/podman.env: the host's own
# configuration is left alone.
host_conf=$work/containers.conf
: >"$host_conf"
caps=$(awk '/^CapEff/ {print $2}' /proc/self/status)
if (( (16#$caps >> 24 & 1) == 0 )); then
  # 20000 stays under the hard limits seen here (nofile 20000); plenty for serve and its runtimes.
  hn=$(ulimit -Hn); hu=$(ulimit -Hu); [[ $hu == unlimited ]] && hu=20000; (( hu > 20000 )) && hu=20000; (( hn > 20000 )) && hn=20000
  printf '[containers]\ndefault_ulimits = ["nofile=%s:%s", "nproc=%s:%s"]\n' "$hn" "$hn" "$hu" "$hu" >>"$host_conf"
  log "root lacks CAP_SYS_RESOURCE here: containers get nofile=$hn nproc=$hu (in $host_conf)"
fi
if [[ $(stat -fc %T /sys/fs/cgroup) != cgroup2fs && -n $(cat /sys/fs/cgroup/unified/cgroup.controllers 2>/dev/null) ]] && command -v runc >/dev/null; then
  printf '[engine]\nruntime = "runc"\n' >>"$host_conf"
  log "hybrid cgroups with controllers on the v2 hierarchy: using runc (crun refuses them) (in $host_conf)"
elif [[ $(stat -fc %T /sys/fs/cgroup) != cgroup2fs && -n $(cat /sys/fs/cgroup/unified/cgroup.controllers 2>/dev/null) ]]; then
  die "hybrid cgroups with controllers on the v2 hierarchy: crun refuses them; apt-get install -y runc"
fi
if [[ -s $host_conf ]]; then
  export CONTAINERS_CONF=$host_conf
  printf 'export CONTAINERS_CONF=%q\n' "$host_conf" >"$work/podman.env"
else
  : >"$work/podman.env"
fi

# --- the base image: debootstrap --------------------------------------------------------------------
mirror=${DEBIAN_MIRROR:-}
if [[ -z $mirror ]]; then
  mirror=$(awk 'tolower($1) == "uris:" {print $2; exit} $1 == "deb" {print ($2 ~ /^\[/ ? $3 : $2); exit}' /etc/apt/sources.list.d/*.sources /etc/apt/sources.list 2>/dev/null | grep -E '^https?://.*/debian/?$' | head -n1 || true)
  mirror=${mirror:-http://deb.debian.org/debian}
fi
if [[ $rebuild_base == 1 ]] || ! podman image exists "$base"; then
  t0=$SECONDS
  rootfs=$work/rootfs
  rm -rf "$rootfs"
  log "debootstrap bookworm (minbase) from $mirror into $rootfs"
  debootstrap --variant=minbase --include=ca-certificates bookworm "$rootfs" "$mirror" >"$work/debootstrap.log" 2>&1 \
    || { tail -20 "$work/debootstrap.log" >&2; die "debootstrap failed (log: $work/debootstrap.log)"; }
  # The image's apt sources: bookworm and its security updates, so `apt-get upgrade` in a rebuild patches it.
  cat >"$rootfs/etc/apt/sources.list" <<SRC
deb ${mirror%/} bookworm main
deb ${mirror%/} bookworm-updates main
deb http://deb.debian.org/debian-security bookworm-security main
SRC
  # Smaller layers: no documentation, no package caches (apt-get clean after every install).
  printf 'path-exclude /usr/share/doc/*\npath-exclude /usr/share/man/*\npath-exclude /usr/share/info/*\npath-include /usr/share/doc/*/copyright\n' >"$rootfs/etc/dpkg/dpkg.cfg.d/01-nodoc"
  printf 'APT::Install-Recommends "false";\nAPT::Install-Suggests "false";\n' >"$rootfs/etc/apt/apt.conf.d/01-norecommends"
  if [[ $host_cas == 1 ]] && compgen -G '/usr/local/share/ca-certificates/*.crt' >/dev/null; then
    log "adding this host's own CAs to the image: $(cd /usr/local/share/ca-certificates && echo *.crt)"
    cp /usr/local/share/ca-certificates/*.crt "$rootfs/usr/local/share/ca-certificates/"
    chroot "$rootfs" update-ca-certificates >/dev/null
  fi
  chroot "$rootfs" apt-get clean
  rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/*.bin "$rootfs"/tmp/* "$rootfs"/var/log/*.log
  log "importing the rootfs as $base"
  tar -C "$rootfs" --numeric-owner -c . | podman import --change 'CMD ["/bin/bash"]' --change 'ENV LANG=C.UTF-8' - "$base" >/dev/null
  rm -rf "$rootfs"
  log "base image built in $((SECONDS - t0)) s"
else
  log "base image $base exists (--rebuild-base to make it again)"
fi

# --- the build context: the checkout's files (tracked and new, not ignored), no node_modules or dist ---
ctx=$work/context
rm -rf "$ctx"; mkdir -p "$ctx"
(cd "$repo" && git ls-files -z --cached --others --exclude-standard | while IFS= read -r -d '' f; do if [[ -e $f ]]; then printf '%s\0' "$f"; fi; done | tar --null -T - -cf -) | tar -C "$ctx" -xf -

build() { # build NAME FILE TAG
  local t0=$SECONDS
  log "podman build $3 (-f $2; log: $work/build-$1.log)"
  # --format docker: the OCI format has no HEALTHCHECK, and /readyz is the image's health check.
  podman build --format docker --build-arg "BASE_IMAGE=$base" -f "$2" -t "$3" "$ctx" >"$work/build-$1.log" 2>&1 \
    || { tail -30 "$work/build-$1.log" >&2; die "building $3 failed (log: $work/build-$1.log)"; }
  log "$3 built in $((SECONDS - t0)) s"
}
[[ $only == postgres ]] || build app "$here/Containerfile" "localhost/agentws:$tag"
[[ $only == app ]] || build postgres "$here/Containerfile.postgres" localhost/agentws-postgres:15
podman images --format '{{.Repository}}:{{.Tag}} {{.Size}}' | grep -E '^localhost/agentws' >&2 || true
