-- Runner hosts (issue 26): machines running `aws runner` that host agents' runtimes for the control
-- plane. They are the operator's, not a tenant's: tokens and runners are appliance-wide. A user's runtime
-- is placed on one runner at a time (runtime_placements): the placement is a lease whose fence number
-- grows with every new placement, and every request a runner makes for a user must name the current one.
create table runner_tokens (
  id uuid primary key default gen_random_uuid(),
  name text not null,
  -- sha256 (hex) of the token; the token itself is shown once and never stored.
  token_hash text not null unique,
  created_by text,
  created_at timestamptz not null default now(),
  last_used_at timestamptz,
  revoked_at timestamptz
);

create table runners (
  id uuid primary key default gen_random_uuid(),
  name text not null unique,
  token_id uuid references runner_tokens(id) on delete set null,
  -- local: a serve's own runtimes; remote: an `aws runner` host.
  kind text not null default 'remote' check (kind in ('local', 'remote')),
  address text,
  labels jsonb not null default '{}',
  version text,
  capacity integer not null default 0,
  resident integer not null default 0,
  busy integer not null default 0,
  state text not null default 'active' check (state in ('active', 'draining', 'lost', 'offline')),
  shared_storage boolean not null default false,
  -- The control-plane process holding its channel, and where other control-plane processes reach it.
  serve_id text,
  relay_url text,
  registered_at timestamptz not null default now(),
  connected_at timestamptz,
  heartbeat_at timestamptz
);

create sequence runtime_placement_fence;

create table runtime_placements (
  user_id uuid primary key references users(id) on delete cascade,
  tenant_id uuid not null references tenants(id) on delete cascade,
  runner_id uuid not null references runners(id) on delete cascade,
  fence bigint not null,
  storage text not null check (storage in ('local', 'shared')),
  placed_at timestamptz not null default now()
);
create index runtime_placements_runner_idx on runtime_placements (runner_id);

-- migrate:down
drop table if exists runtime_placements;
drop sequence if exists runtime_placement_fence;
drop table if exists runners;
drop table if exists runner_tokens;
