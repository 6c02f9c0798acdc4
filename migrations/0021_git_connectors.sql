-- Git hosts (issue 28): a tenant's git servers (smart HTTP) that agents reach through the git gateway on
-- the gateway host. The service credential is sealed (secret-box) and never leaves the control plane;
-- the sandbox's git config only maps the host's URL to the gateway. `access` says which roles and teams
-- reach which repositories: [{"who": "role:member" | "team:backend" | "*", "repos": ["org/*", ...]}].
create table git_hosts (
  id uuid primary key default gen_random_uuid(),
  tenant_id uuid not null references tenants(id) on delete cascade,
  -- The name in the gateway's path (/git/<name>/...): a slug, unique in the tenant.
  name text not null,
  -- Where the host's repositories are (http or https, no credentials, no query): <base>/<owner>/<repo>.
  base_url text not null,
  -- Basic authentication: this user name (x-access-token when empty) and the sealed token or password.
  username text not null default '',
  secret_sealed text not null,
  access jsonb not null default '[]',
  -- Refs agents may never update (exact names or patterns ending in *); the host's default branch (its
  -- HEAD) too when protect_default.
  protected_refs text[] not null default '{refs/heads/main,refs/heads/master}',
  protect_default boolean not null default true,
  -- Agents push only below this branch prefix; {handle} is the user's handle.
  branch_prefix text not null default 'agent/{handle}/',
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  unique (tenant_id, name)
);

-- migrate:down
drop table if exists git_hosts;
