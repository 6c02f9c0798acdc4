-- MCP connectors (issue 28): a tenant's remote MCP servers (Streamable HTTP) that agents reach through the
-- gateway host (/mcp/connectors/<name>). The credential is sealed (secret-box) and added by the control
-- plane to each forwarded request; runtimes only know the gateway's address. `access` says which roles
-- may use the server and which of its tools: [{"role": "member", "tools": "*" | ["search", ...]}].
create table mcp_servers (
  id uuid primary key default gen_random_uuid(),
  tenant_id uuid not null references tenants(id) on delete cascade,
  -- The name in the runtime's configuration (tools are <name>_<tool>) and in the gateway's path.
  name text not null,
  -- The server's Streamable HTTP endpoint (http or https, no user info, no fragment).
  url text not null,
  -- none: no credential; bearer: Authorization: Bearer <secret>; header: <auth_header>: <secret>.
  auth_kind text not null default 'none' check (auth_kind in ('none', 'bearer', 'header')),
  auth_header text,
  secret_sealed text,
  access jsonb not null default '[]',
  enabled boolean not null default true,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  unique (tenant_id, name),
  check ((auth_kind = 'none') = (secret_sealed is null)),
  check ((auth_kind = 'header') = (auth_header is not null))
);

-- migrate:down
drop table if exists mcp_servers;
