-- Messaging gateways (bot_chat, team_chat), pairing codes and the chat users paired through them.

create table gateways (
  id uuid primary key default gen_random_uuid(),
  tenant_id uuid not null references tenants(id) on delete cascade,
  kind text not null check (kind in ('bot_chat', 'team_chat')),
  bot_username text not null,
  bot_id text not null,
  -- Sealed with AES-256-GCM (src/lib/secret-box.ts); never returned or logged.
  bot_token_sealed text not null,
  webhook_url text not null default '',
  webhook_secret_sealed text,
  enabled boolean not null default true,
  -- The service user paired chat users act as (agents.create, no admin rights): owns their sessions.
  service_user_id uuid not null references users(id),
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now()
);
create index gateways_tenant_idx on gateways (tenant_id, created_at);

create table pairing_codes (
  id uuid primary key default gen_random_uuid(),
  gateway_id uuid not null references gateways(id) on delete cascade,
  code text not null,
  external_user_id text not null,
  external_user_name text not null default '',
  platform_display_name text not null default '',
  chat_id text not null,
  expires_at timestamptz not null,
  created_at timestamptz not null default now(),
  consumed_at timestamptz,
  -- When the code was last sent to the user: a user writing again gets it again, at most once a minute.
  last_sent_at timestamptz,
  -- Denied (DELETE .../pairing-codes/:code): kept so the once-per-10-minutes rule still sees it.
  denied_at timestamptz
);
-- A code names one pending request across all gateways (`aws pair approve <code>` needs no gateway).
create unique index pairing_codes_open_code_idx on pairing_codes (code) where consumed_at is null and denied_at is null;
create index pairing_codes_gateway_idx on pairing_codes (gateway_id, external_user_id, created_at desc);

create table paired_users (
  id uuid primary key default gen_random_uuid(),
  gateway_id uuid not null references gateways(id) on delete cascade,
  external_user_id text not null,
  external_user_name text not null default '',
  platform_display_name text not null default '',
  chat_id text not null,
  -- The agent session this chat user talks to (created at the first message after pairing).
  session_id uuid references agent_sessions(id) on delete set null,
  paired_at timestamptz not null default now(),
  approved_by text not null,
  unique (gateway_id, external_user_id)
);

-- migrate:down
drop table if exists paired_users;
drop table if exists pairing_codes;
drop table if exists gateways;
