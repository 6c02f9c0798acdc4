#!/bin/sh
# The app image's entrypoint (under tini). `serve` (the default command): on the first start, set the
# appliance up (`aws init`: config with fresh secrets in the data volume, migrations, the first tenant and
# its owner, AGENTWS_OPERATOR_EMAIL); on every start, apply pending migrations; then exec `aws serve`.
# Anything else runs as `aws <args>` (e.g. `runtime probe`).
#
# The first owner cannot be raced: the owner is whoever the operator names in AGENTWS_OPERATOR_EMAIL
# before the service answers anything. No sign-in can create or take the tenant: demo mode is off,
# tenants are not provisioned at sign-in (AGENTWS_AUTO_PROVISION_TENANTS stays false), and a sign-in is
# linked to the owner's account only when the identity provider vouches for that email. Until an identity
# provider is configured, the owner's way in is the service API key (it acts as the operator) and
# `aws` commands run in the container (system actor, audited).
set -eu
app=/app/bin/run.js
config=${AGENTWS_CONFIG:-/var/lib/agentws/config.env}

# The sandbox needs the container's /proc unmasked (compose.yaml); that is safe only when the container
# has its own user namespace, or its root could write the host's /proc/sys. A compose tool that dropped
# userns_mode (podman-compose < 1.0.6) would weaken the host silently: refuse instead, and say why.
if [ "$(tr -s ' ' </proc/self/uid_map)" = " 0 0 4294967295" ] && ! grep -q ' /proc/sys ' /proc/self/mounts \
   && [ "${AGENTWS_CONTAINER_HOST_USERNS:-}" != accept ]; then
  echo "agentws: this container's /proc is unmasked but it runs in the host's user namespace, so its root could change the host's kernel settings: run it with its own user namespace (podman: --userns=auto, compose: userns_mode: auto; podman-compose before 1.0.6: PODMAN_USERNS=auto in its environment), or set AGENTWS_CONTAINER_HOST_USERNS=accept to run anyway" >&2
  exit 65
fi

if [ "${1:-serve}" != serve ]; then exec node "$app" "$@"; fi

# A database that is still starting (compose starts both at once) is waited for, up to a minute.
retry() {
  n=0
  until "$@"; do
    n=$((n + 1))
    if [ "$n" -ge 30 ]; then echo "agentws: giving up after $n attempts: $*" >&2; return 1; fi
    sleep 2
  done
}

# `aws init` writes the config first: an attempt that then failed (the database not up yet) left it, and
# the next one keeps its secrets with --force and repeats only what is missing.
first_init() {
  force=
  if [ -s "$config" ]; then force=--force; fi
  # Only the URL goes to init when one is set (empty: the embedded database in the data volume).
  node "$app" init --yes $force --config "$config" \
    --data-dir "${AGENTWS_DATA_DIR:-/var/lib/agentws}" \
    ${DATABASE_URL:+--database-url "$DATABASE_URL"} \
    --host "${AGENTWS_HOST:-0.0.0.0}" --port "${AGENTWS_PORT:-8080}" \
    --public-url "${AGENTWS_PUBLIC_URL:-http://localhost:${AGENTWS_PORT:-8080}}" \
    --no-demo \
    --tenant-name "${AGENTWS_TENANT_NAME:-Default}" \
    --owner-email "$AGENTWS_OPERATOR_EMAIL" >&2
}

# The marker is written after init succeeded: an init cut short (the database not up yet) is run again,
# with --force, which keeps the secrets it wrote and repeats only what is missing.
marker=$(dirname "$config")/.agentws-initialized
if [ ! -e "$marker" ]; then
  if [ -z "${AGENTWS_OPERATOR_EMAIL:-}" ]; then
    echo "agentws: first start: set AGENTWS_OPERATOR_EMAIL to the email of the first owner (compose.yaml: the app's environment); nothing was set up" >&2
    exit 64
  fi
  echo "agentws: first start: setting up $config (tenant \"${AGENTWS_TENANT_NAME:-Default}\", owner $AGENTWS_OPERATOR_EMAIL)" >&2
  retry first_init
  : >"$marker"
  echo "agentws: the service API key (it acts as the owner) is in $config: podman exec <container> node /app/bin/run.js config show --show-secrets" >&2
fi

retry node "$app" migrate >&2
exec node "$app" serve
