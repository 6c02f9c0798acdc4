-- Personal access tokens (issue 29): a person's named, scoped, expiring credential for scripts and the
-- API. Only the SHA-256 of the token is kept (the value is shown once, when created); `prefix` is its
-- first characters, for people to recognise it in a list. The token's permissions are not stored: each
-- call takes the person's current roles and keeps only what the scopes name, so demotion narrows it.
create table personal_tokens (
  id uuid primary key default gen_random_uuid(),
  tenant_id uuid not null references tenants(id) on delete cascade,
  user_id uuid not null references users(id) on delete cascade,
  name text not null,
  token_hash text not null unique,
  prefix text not null,
  -- Any of read, sessions, memories, admin (checked by the service).
  scopes text[] not null,
  expires_at timestamptz not null,
  created_at timestamptz not null default now(),
  -- Who created it: `user:<id>` (the person) or `system:<name>` (the operator's CLI).
  created_by text not null,
  -- Written at most once a minute per token and process, not per request.
  last_used_at timestamptz,
  -- Requests counted in the hour `use_hour` (the summarised `token.use` audit entry is written for it
  -- once a later hour starts).
  use_hour timestamptz,
  use_count integer not null default 0,
  revoked_at timestamptz,
  revoked_by text
);
create index personal_tokens_user on personal_tokens (tenant_id, user_id);

-- migrate:down
drop table if exists personal_tokens;
