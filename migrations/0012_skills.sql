-- Learned skills (issue 15): every finished turn recorded as a trajectory; similar successful ones turned
-- into a proposed skill (SKILL.md) by the tenant's model; promoted skills written where every runtime of
-- the tenant loads them.

create table skills (
  id uuid primary key default gen_random_uuid(),
  tenant_id uuid not null references tenants(id) on delete cascade,
  -- The Agent Skills name (lower-case words joined by '-', 1-64): also its directory name.
  name text not null,
  description text not null,
  -- Of the latest version: `proposed` until a person promotes it.
  status text not null default 'proposed' check (status in ('proposed', 'promoted', 'deprecated')),
  -- The latest version, and the one agents load (null: none promoted, or deprecated).
  version integer not null default 1,
  promoted_version integer,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  promoted_at timestamptz,
  deprecated_at timestamptz,
  unique (tenant_id, name),
  unique (tenant_id, id)
);

-- Every version of a skill, with the trajectories it was learnt from.
create table skill_versions (
  skill_id uuid not null references skills(id) on delete cascade,
  tenant_id uuid not null references tenants(id) on delete cascade,
  version integer not null,
  description text not null,
  content text not null,
  source_trajectories uuid[] not null,
  created_at timestamptz not null default now(),
  primary key (skill_id, version)
);

create table trajectories (
  id uuid primary key default gen_random_uuid(),
  tenant_id uuid not null references tenants(id) on delete cascade,
  user_id uuid not null references users(id) on delete cascade,
  session_id uuid not null references agent_sessions(id) on delete cascade,
  -- The runtime's id of the turn's user message: one trajectory per turn, whatever retries.
  message_id text not null,
  request text not null,
  answer text not null,
  -- The abstract tool sequence (`bash:npm test`, `edit:src/**/*.ts`, ...), its 3-grams, and the
  -- request's lexical signature (words): what similarity is judged on.
  tools text[] not null,
  tool_grams text[] not null,
  words text[] not null,
  embedding vector,
  embedding_model text,
  outcome text not null check (outcome in ('success', 'error', 'rejected', 'redone', 'discarded')),
  cost_usd numeric(16, 8) not null default 0,
  -- The skill learnt from it or covering it; the proposal job writing one from it.
  skill_id uuid references skills(id) on delete set null,
  proposal_job uuid,
  created_at timestamptz not null default now(),
  unique (tenant_id, message_id)
);
-- Candidates of a new trajectory share a tool 3-gram with it (a Jaccard >= 0.5 needs one).
create index trajectories_grams_idx on trajectories using gin (tool_grams) where outcome = 'success';
create index trajectories_session_idx on trajectories (tenant_id, session_id, created_at desc);

-- Each time an agent loaded a promoted skill (the runtime's `skill` tool), once per tool call.
create table skill_loads (
  tenant_id uuid not null references tenants(id) on delete cascade,
  call_id text not null,
  skill_id uuid not null references skills(id) on delete cascade,
  session_id uuid,
  loaded_at timestamptz not null default now(),
  primary key (tenant_id, call_id)
);
create index skill_loads_skill_idx on skill_loads (skill_id, loaded_at);

-- migrate:down
drop table if exists skill_loads;
drop table if exists trajectories;
drop table if exists skill_versions;
drop table if exists skills;
