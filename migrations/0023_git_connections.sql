-- Git hosts' other credentials (issue 28). A host's service credential is a token (as before), a GitHub
-- App installation (its private key sealed in secret_sealed; short-lived installation tokens minted on
-- the control plane), or none, where every agent must act as its own user. Per-user connections: a person
-- connects their own account through the host's OAuth flow (the OAuth client below), and the agent acts
-- as them: `user_connections` off (the service credential only), optional (theirs when connected, else the
-- service credential) or required (theirs only).
alter table git_hosts
  add column credential_kind text not null default 'token' check (credential_kind in ('token', 'github_app', 'none')),
  -- GitHub App: {"appId": "...", "installationId": "...", "apiUrl": "https://api.github.com"}.
  add column app jsonb,
  -- OAuth client: {"clientId", "authorizeUrl", "tokenUrl", "userUrl", "scopes"}; its secret sealed apart.
  add column oauth jsonb,
  add column oauth_secret_sealed text,
  add column user_connections text not null default 'off' check (user_connections in ('off', 'optional', 'required'));
alter table git_hosts alter column secret_sealed drop not null;

-- A person's own account at a git host, reached through the host's OAuth flow. The tokens are sealed and
-- never leave the control plane; the git gateway adds them to that person's agents' requests.
create table git_connections (
  id uuid primary key default gen_random_uuid(),
  tenant_id uuid not null references tenants(id) on delete cascade,
  host_id uuid not null references git_hosts(id) on delete cascade,
  user_id uuid not null references users(id) on delete cascade,
  -- The account's name at the host (its user API's login or username), for people to recognise.
  account text not null default '',
  access_sealed text not null,
  refresh_sealed text,
  -- When the access token stops working (null: the host did not say); refreshed shortly before.
  expires_at timestamptz,
  scopes text not null default '',
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  unique (host_id, user_id)
);
create index git_connections_user on git_connections (tenant_id, user_id);

-- An OAuth authorization under way (ten minutes at most, used once): the state's hash, who started it,
-- and PKCE's verifier (sealed: it is half of what redeems the code).
create table git_oauth_states (
  state_hash text primary key,
  tenant_id uuid not null references tenants(id) on delete cascade,
  host_id uuid not null references git_hosts(id) on delete cascade,
  user_id uuid not null references users(id) on delete cascade,
  verifier_sealed text not null,
  expires_at timestamptz not null
);

-- migrate:down
drop table if exists git_oauth_states;
drop table if exists git_connections;
update git_hosts set secret_sealed = '' where secret_sealed is null;
alter table git_hosts alter column secret_sealed set not null;
alter table git_hosts drop column if exists user_connections, drop column if exists oauth_secret_sealed, drop column if exists oauth,
  drop column if exists app, drop column if exists credential_kind;
