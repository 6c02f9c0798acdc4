-- One sandboxed agent runtime per user (the containment issue). A row says where a user's runtime
-- listens while it runs: the Unix socket bound into its sandbox, the password of its API (sealed), the
-- serve process hosting it and the runtime's own pid. Every process of the appliance on this host reaches
-- a runtime through its row; the hosting serve deletes the row when the runtime stops. The password
-- only opens that user's runtime, which knows only that user's sessions.
create table agent_runtimes (
  user_id uuid primary key references users(id) on delete cascade,
  tenant_id uuid not null references tenants(id) on delete cascade,
  host_pid integer not null,
  pid integer,
  socket_path text not null,
  password_sealed text not null,
  -- Whether the runtime runs inside the OS sandbox (false only with AGENTWS_RUNTIME_SANDBOX=off).
  sandboxed boolean not null,
  -- sha256 of the configuration last written to it (no secrets in it: provider keys stay in the gateway).
  config_fingerprint text,
  started_at timestamptz not null default now(),
  last_used_at timestamptz not null default now()
);
create index agent_runtimes_tenant_idx on agent_runtimes (tenant_id);

-- The single shared runtime is gone: nothing reads its record any more.
drop table if exists runtime_endpoint;

-- migrate:down
drop table if exists agent_runtimes;
create table if not exists runtime_endpoint (
  id smallint primary key default 1 check (id = 1),
  url text not null,
  password_sealed text not null,
  pid integer,
  started_at timestamptz not null default now()
);
