-- Sign-in attempts in flight and usage records.

-- Between /v1/auth/login and /v1/auth/callback: the PKCE verifier, nonce and where to go afterwards,
-- keyed by a hash of the OAuth state (the state itself only ever lives in the browser's redirect).
-- In the database rather than a cookie so any serve process can complete a sign-in another started.
create table auth_login_states (
  state_hash text primary key,
  code_verifier text not null,
  nonce text not null,
  redirect_to text,
  created_at timestamptz not null default now(),
  expires_at timestamptz not null
);
create index auth_login_states_expires_idx on auth_login_states (expires_at);

-- One row per completed assistant message (written by the analytics job of agent turns).
create table usage_records (
  id uuid primary key default gen_random_uuid(),
  tenant_id uuid not null references tenants(id) on delete cascade,
  user_id uuid,
  session_id uuid,
  model text not null,
  provider text not null default '',
  tokens_input bigint not null default 0,
  tokens_output bigint not null default 0,
  tokens_reasoning bigint not null default 0,
  tokens_cache_read bigint not null default 0,
  tokens_cache_write bigint not null default 0,
  cost_usd numeric(16, 8) not null default 0,
  channel text not null default 'web',
  created_at timestamptz not null default now()
);
create index usage_records_tenant_time_idx on usage_records (tenant_id, created_at);
create index usage_records_tenant_user_time_idx on usage_records (tenant_id, user_id, created_at);

-- migrate:down
drop table if exists usage_records;
drop table if exists auth_login_states;
