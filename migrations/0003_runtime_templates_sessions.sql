-- Model providers and the runtime configuration applied from them, session templates, agent sessions
-- and their turns, and the ledger that makes analytics written from the runtime's events exactly-once.

-- A tenant's model providers. API keys are sealed with AES-256-GCM (see src/lib/secret-box.ts); the
-- stored form names the key it was sealed with, so the encryption key can be rotated.
create table providers (
  id uuid primary key default gen_random_uuid(),
  tenant_id uuid not null references tenants(id) on delete cascade,
  name text not null,
  kind text not null check (kind in ('openai-compatible', 'openai', 'anthropic')),
  base_url text,
  api_key_sealed text,
  -- [{ id, name?, contextLimit?, outputLimit?, inputCostPerMTok?, outputCostPerMTok? }]
  models jsonb not null default '[]'::jsonb,
  enabled boolean not null default true,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  unique (tenant_id, name)
);

-- The tenant's chosen default model and what the last apply wrote to the runtime.
create table runtime_settings (
  tenant_id uuid primary key references tenants(id) on delete cascade,
  -- "<provider name>/<model id>"
  default_model text,
  -- { defaultModel, providers: [names] } as of the last apply; null until the first apply.
  applied jsonb,
  applied_at timestamptz,
  applied_by text,
  updated_at timestamptz not null default now()
);

-- Where the managed runtime that `aws serve` started listens, so `aws worker` and the CLI reach it.
create table runtime_endpoint (
  id smallint primary key default 1 check (id = 1),
  url text not null,
  password_sealed text not null,
  pid integer,
  started_at timestamptz not null default now()
);

create table templates (
  id uuid primary key default gen_random_uuid(),
  tenant_id uuid not null references tenants(id) on delete cascade,
  slug text not null,
  name text not null,
  system_prompt text not null default '',
  -- "<provider name>/<model id>" overriding the tenant's default model; null: no override.
  model text,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  unique (tenant_id, slug)
);

create table agent_sessions (
  id uuid primary key default gen_random_uuid(),
  tenant_id uuid not null references tenants(id) on delete cascade,
  owner_id uuid not null references users(id) on delete cascade,
  title text not null,
  template_slug text,
  -- Snapshot of the template at creation (SPEC.md rule 2); snapshot_at null = nothing snapshotted yet.
  system_prompt text,
  model text,
  snapshot_at timestamptz,
  -- The runtime's session id (ses_...), set by the first turn.
  upstream_id text unique,
  -- The agent's sandbox: passed to the runtime as ?directory=.
  directory text not null,
  channel text not null default 'web',
  -- sha256 of the browser-session id a demo-mode session was created under (SPEC.md sessions rule 1).
  browser_session text,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  -- Removed from the owner's index (SPEC.md rule 8); kept so a turn still running is accounted for.
  deleted_at timestamptz
);
create index agent_sessions_owner_idx on agent_sessions (tenant_id, owner_id, updated_at desc) where deleted_at is null;
create index agent_sessions_browser_idx on agent_sessions (tenant_id, browser_session) where browser_session is not null and deleted_at is null;

-- One row per accepted prompt. The agent-turn job works from it; message_id is the runtime message id
-- we assign up front, which is how a retried job knows whether the turn already reached the runtime.
create table agent_turns (
  id uuid primary key default gen_random_uuid(),
  tenant_id uuid not null references tenants(id) on delete cascade,
  session_id uuid not null references agent_sessions(id) on delete cascade,
  user_id uuid not null,
  message_id text not null unique,
  agent text,
  agent_profile_id text,
  -- Parts as sent to the runtime (text, and files as data: URLs).
  parts jsonb not null,
  status text not null default 'queued' check (status in ('queued', 'sending', 'sent', 'failed')),
  attempts integer not null default 0,
  error text,
  created_at timestamptz not null default now(),
  sent_at timestamptz
);
create index agent_turns_session_idx on agent_turns (session_id, created_at);

-- Facts taken from the runtime's event stream are recorded once, whichever process saw them first.
create table runtime_event_ledger (
  key text primary key,
  created_at timestamptz not null default now()
);

alter table usage_records add column message_id text;
create unique index usage_records_message_idx on usage_records (message_id) where message_id is not null;

-- migrate:down
drop index if exists usage_records_message_idx;
alter table usage_records drop column if exists message_id;
drop table if exists runtime_event_ledger;
drop table if exists agent_turns;
drop table if exists agent_sessions;
drop table if exists templates;
drop table if exists runtime_endpoint;
drop table if exists runtime_settings;
drop table if exists providers;
