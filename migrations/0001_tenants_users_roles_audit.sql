-- Tenants, users, roles with their permission documents, role assignments and the append-only audit log.
create extension if not exists vector;

create table tenants (
  id uuid primary key default gen_random_uuid(),
  slug text not null unique,
  name text not null,
  -- The identity provider's tenant id (e.g. Entra `tid`) this tenant is mapped to, if any.
  external_tenant_id text unique,
  settings jsonb not null default '{}'::jsonb,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now()
);

create table users (
  id uuid primary key default gen_random_uuid(),
  tenant_id uuid not null references tenants(id) on delete cascade,
  handle text not null,
  email text not null,
  display_name text not null default '',
  -- Subject claim at the identity provider; null for users created by `aws init` or `aws tenant seed`.
  external_subject text,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  unique (tenant_id, handle),
  unique (tenant_id, external_subject)
);
create unique index users_tenant_email_key on users (tenant_id, lower(email));

create table roles (
  id uuid primary key default gen_random_uuid(),
  tenant_id uuid not null references tenants(id) on delete cascade,
  name text not null,
  description text not null default '',
  permissions jsonb not null,
  is_system boolean not null default false,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  unique (tenant_id, name)
);

create table user_roles (
  tenant_id uuid not null references tenants(id) on delete cascade,
  user_id uuid not null references users(id) on delete cascade,
  role_id uuid not null references roles(id) on delete cascade,
  assigned_at timestamptz not null default now(),
  assigned_by text not null,
  primary key (user_id, role_id)
);
create index user_roles_role_idx on user_roles (role_id);

-- No foreign keys: the record of what happened outlives the users and tenants it mentions.
create table audit_log (
  id uuid primary key default gen_random_uuid(),
  ts timestamptz not null default clock_timestamp(),
  tenant_id uuid,
  user_id uuid,
  actor text not null,
  action text not null,
  target text not null default '',
  session_id uuid,
  channel text not null default '',
  duration_ms integer,
  details jsonb not null default '{}'::jsonb
);
create index audit_log_tenant_ts_idx on audit_log (tenant_id, ts desc, id desc);
create index audit_log_tenant_action_ts_idx on audit_log (tenant_id, action, ts desc);
create index audit_log_tenant_user_ts_idx on audit_log (tenant_id, user_id, ts desc);

-- Append-only: entries can be added, never changed or removed through the application's role.
create function audit_log_is_append_only() returns trigger language plpgsql as $$
begin
  raise exception 'audit_log is append-only';
end $$;
create trigger audit_log_no_update before update or delete on audit_log
  for each row execute function audit_log_is_append_only();

-- migrate:down
drop trigger if exists audit_log_no_update on audit_log;
drop function if exists audit_log_is_append_only();
drop table if exists audit_log;
drop table if exists user_roles;
drop table if exists roles;
drop table if exists users;
drop table if exists tenants;
