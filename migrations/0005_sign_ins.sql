-- Sign-ins: one row per completed browser sign-in. Every token issued for it (the access and refresh
-- tokens of the callback, and each access token refresh hands out) carries its id as the `sid` claim
-- and its time as `auth_time`, so a chain of refreshes ends 7 days after the sign-in, and signing out
-- (or removing the user) revokes every token of it at once.
create table auth_sign_ins (
  id uuid primary key default gen_random_uuid(),
  tenant_id uuid not null references tenants(id) on delete cascade,
  user_id uuid not null references users(id) on delete cascade,
  auth_time timestamptz not null,
  -- auth_time + the refresh-token lifetime: nothing of this sign-in is accepted after it.
  expires_at timestamptz not null,
  revoked_at timestamptz,
  revoked_reason text,
  created_at timestamptz not null default now()
);
create index auth_sign_ins_tenant_user_idx on auth_sign_ins (tenant_id, user_id);
create index auth_sign_ins_expires_idx on auth_sign_ins (expires_at);

-- migrate:down
drop table if exists auth_sign_ins;
