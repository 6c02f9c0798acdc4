-- Long-term memories (issue 13): teams for `team` visibility, memories with their full-text vector and
-- their embedding, each tenant's embedder, and the tenant-visible record of API-started jobs.

-- Teams inside a tenant; a user is in zero or more teams. `team` memories are seen by users who share a
-- team with the author (and hold memory.read_team).
create table teams (
  id uuid primary key default gen_random_uuid(),
  tenant_id uuid not null references tenants(id) on delete cascade,
  name text not null,
  created_at timestamptz not null default now(),
  unique (tenant_id, name),
  unique (tenant_id, id)
);

create table team_members (
  tenant_id uuid not null,
  team_id uuid not null,
  user_id uuid not null references users(id) on delete cascade,
  added_at timestamptz not null default now(),
  primary key (team_id, user_id),
  -- A member belongs to the team's tenant: the composite key makes a cross-tenant row impossible.
  foreign key (tenant_id, team_id) references teams (tenant_id, id) on delete cascade
);
create index team_members_user_idx on team_members (tenant_id, user_id);

-- A tenant's embedder: an embeddings model on one of its providers. `model_key` names the vector space
-- ("<provider id>/<model>/<dimensions>"): vectors of different keys never meet in one comparison, and
-- each key gets its own partial HNSW index over memories.embedding (created when a key is first set).
create table memory_embedders (
  tenant_id uuid primary key references tenants(id) on delete cascade,
  provider_id uuid not null references providers(id) on delete cascade,
  model text not null,
  dimensions integer not null check (dimensions between 1 and 16000),
  model_key text not null,
  updated_by text not null,
  updated_at timestamptz not null default now()
);

create table memories (
  id uuid primary key default gen_random_uuid(),
  tenant_id uuid not null references tenants(id) on delete cascade,
  -- The author: their memory is always theirs to see.
  user_id uuid not null references users(id) on delete cascade,
  kind text not null check (kind in ('fact', 'preference', 'event', 'skill-note')),
  content text not null,
  visibility text not null default 'private' check (visibility in ('private', 'team', 'org')),
  -- `quarantined`: saved by the agent and reading like instructions; never injected until released.
  status text not null default 'active' check (status in ('active', 'quarantined')),
  source text not null default 'api' check (source in ('api', 'agent')),
  -- Provenance of memories the agent saved.
  session_id uuid references agent_sessions(id) on delete set null,
  message_id text,
  search tsvector generated always as (to_tsvector('english', content)) stored,
  -- Untyped: vectors of several models (dimensions) coexist; model_key says whose this one is.
  embedding vector,
  embedding_model text,
  embedded_at timestamptz,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now()
);
create index memories_tenant_user_idx on memories (tenant_id, user_id, created_at desc);
create index memories_tenant_visibility_idx on memories (tenant_id, visibility, created_at desc);
create index memories_search_idx on memories using gin (search);
-- What the backfill looks for: memories whose embedding is missing or of another model.
create index memories_unembedded_idx on memories (tenant_id, created_at) where embedding is null;

-- Jobs started through the API (`POST /v1/jobs`), as the tenant sees them. The queue (pg-boss) runs
-- them; this row is written in the transaction that enqueues the job and updated as it runs.
create table tenant_jobs (
  id uuid primary key default gen_random_uuid(),
  tenant_id uuid not null references tenants(id) on delete cascade,
  kind text not null,
  status text not null default 'queued' check (status in ('queued', 'running', 'completed', 'failed')),
  payload jsonb not null default '{}'::jsonb,
  result jsonb,
  error text,
  created_by text not null,
  created_at timestamptz not null default now(),
  started_at timestamptz,
  finished_at timestamptz
);
create index tenant_jobs_tenant_idx on tenant_jobs (tenant_id, created_at desc);

-- migrate:down
drop table if exists tenant_jobs;
drop table if exists memories;
drop table if exists memory_embedders;
drop table if exists team_members;
drop table if exists teams;
