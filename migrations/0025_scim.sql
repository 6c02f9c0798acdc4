-- SCIM 2.0 provisioning (issue 29): an identity provider (Entra ID, Okta) creates, updates, deactivates and
-- deletes a tenant's users and its teams (SCIM groups), authenticated by the tenant's SCIM tokens.

-- Deactivated users keep their account, roles and data but cannot authenticate (null: active). SCIM's
-- externalId is the provider's own key for the person (in Entra often the object id), not the OIDC
-- subject (external_subject, which Entra derives per application): kept apart.
alter table users
  add column deactivated_at timestamptz,
  add column scim_external_id text,
  -- Set once the identity provider has created or taken over the account through SCIM.
  add column scim_managed boolean not null default false,
  add column given_name text not null default '',
  add column family_name text not null default '';
create unique index users_tenant_scim_external_id_key on users (tenant_id, scim_external_id) where scim_external_id is not null;

alter table teams add column scim_external_id text;
create unique index teams_tenant_scim_external_id_key on teams (tenant_id, scim_external_id) where scim_external_id is not null;

-- A tenant's SCIM bearer tokens, by name (an identity provider each, or old and new while rotating).
-- Only the sha256 is kept; the token is shown once.
create table scim_tokens (
  id uuid primary key default gen_random_uuid(),
  tenant_id uuid not null references tenants(id) on delete cascade,
  name text not null,
  token_hash text not null unique,
  created_by text not null,
  created_at timestamptz not null default now(),
  last_used_at timestamptz,
  unique (tenant_id, name)
);

-- migrate:down
drop table if exists scim_tokens;
drop index if exists teams_tenant_scim_external_id_key;
alter table teams drop column if exists scim_external_id;
drop index if exists users_tenant_scim_external_id_key;
alter table users drop column if exists family_name, drop column if exists given_name, drop column if exists scim_managed,
  drop column if exists scim_external_id, drop column if exists deactivated_at;
