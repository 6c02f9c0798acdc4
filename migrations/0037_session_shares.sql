-- Sessions shared read-only and handed over (issue 39). A share lets one person, or the members of one
-- team, of the session's own tenant read the session: `live` (they follow its stream as it happens) or
-- `as_of_now` (the transcript as it was when shared, kept here, nothing later). Revoked shares stay as
-- the record of who could read what, and when that ended.
create table session_shares (
  id uuid primary key default gen_random_uuid(),
  tenant_id uuid not null references tenants(id) on delete cascade,
  session_id uuid not null references agent_sessions(id) on delete cascade,
  user_id uuid references users(id) on delete cascade,
  team_id uuid,
  mode text not null check (mode in ('live', 'as_of_now')),
  -- as_of_now: the transcript at the moment of sharing (what the viewer sees, whatever happens later).
  transcript jsonb,
  created_by uuid not null,
  created_at timestamptz not null default now(),
  revoked_at timestamptz,
  revoked_by text,
  -- One person or one team, never both.
  check ((user_id is null) <> (team_id is null)),
  -- A team share's team is of the share's tenant: the composite key makes a cross-tenant row impossible.
  foreign key (tenant_id, team_id) references teams (tenant_id, id) on delete cascade
);
-- At most one share in force per session and person, and per session and team (a new one replaces it).
create unique index session_shares_user_key on session_shares (session_id, user_id) where revoked_at is null and user_id is not null;
create unique index session_shares_team_key on session_shares (session_id, team_id) where revoked_at is null and team_id is not null;
create index session_shares_viewer_idx on session_shares (tenant_id, user_id) where revoked_at is null;
create index session_shares_team_idx on session_shares (tenant_id, team_id) where revoked_at is null;

-- A session passed from one person to another of the same tenant. The earlier conversation ran in the
-- previous owner's runtime, which the new owner's agent must not reach: the service keeps it here, shows
-- it before the new messages, and hands it to the new owner's agent with their first turn.
create table session_handovers (
  id uuid primary key default gen_random_uuid(),
  tenant_id uuid not null references tenants(id) on delete cascade,
  session_id uuid not null references agent_sessions(id) on delete cascade,
  from_user_id uuid references users(id) on delete set null,
  to_user_id uuid references users(id) on delete set null,
  transcript jsonb not null,
  -- Where the previous owner's files were copied in the new owner's workspace (null: nothing copied).
  folder text,
  files jsonb not null default '{}'::jsonb,
  created_at timestamptz not null default clock_timestamp()
);
create index session_handovers_session_idx on session_handovers (tenant_id, session_id, created_at desc);

-- migrate:down
drop table if exists session_handovers;
drop table if exists session_shares;
