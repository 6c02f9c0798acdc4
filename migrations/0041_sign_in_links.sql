-- One-time sign-in links (`aws user sign-in-link`): a way into the dashboard for a tenant's owner or
-- admin without an identity provider (the first hour in a container). Only a hash of the link's token is
-- kept: the token itself is printed once to the terminal that ran the command. A link is used once
-- (used_at) and lives minutes (expires_at); a removed user's links go with them.
create table auth_sign_in_links (
  id uuid primary key default gen_random_uuid(),
  tenant_id uuid not null references tenants(id) on delete cascade,
  user_id uuid not null references users(id) on delete cascade,
  token_hash text not null unique,
  created_by text not null,
  created_at timestamptz not null default now(),
  expires_at timestamptz not null,
  used_at timestamptz,
  -- The sign-in it began (auth_sign_ins has no row for it before use; kept for the audit trail).
  sign_in_id uuid
);
create index auth_sign_in_links_tenant_user_idx on auth_sign_in_links (tenant_id, user_id);
create index auth_sign_in_links_expires_idx on auth_sign_in_links (expires_at);

-- migrate:down
drop table if exists auth_sign_in_links;
