-- Orchestration (issue 14): a task planned into a dependency graph of subtasks, each run as its own turn in
-- a child session of the user's session, then a synthesis turn in that session.

create table orchestration_plans (
  id uuid primary key default gen_random_uuid(),
  tenant_id uuid not null references tenants(id) on delete cascade,
  user_id uuid not null references users(id) on delete cascade,
  parent_session_id uuid not null references agent_sessions(id) on delete cascade,
  -- The planning job POST /v1/orchestrate answered with: the job creates the plan once, whatever retries.
  job_id uuid not null unique,
  task_description text not null,
  max_subtasks integer not null check (max_subtasks between 1 and 10),
  status text not null default 'planning' check (status in ('planning', 'executing', 'synthesizing', 'completed', 'failed')),
  error text,
  -- USD the whole plan may spend (the user's per-request limit, or what is left of the monthly one); null: no limit.
  budget_usd numeric(16, 8),
  -- Why the plan stopped running subtasks early (budget, cancel); the synthesis says so.
  stop_reason text,
  planning_session_id uuid references agent_sessions(id) on delete set null,
  planning_attempts integer not null default 0,
  planning_turn_id uuid references agent_turns(id) on delete set null,
  synthesis_turn_id uuid references agent_turns(id) on delete set null,
  cancelled_at timestamptz,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  finished_at timestamptz
);
create index orchestration_plans_user_idx on orchestration_plans (tenant_id, user_id, created_at desc);
create index orchestration_plans_tenant_idx on orchestration_plans (tenant_id, created_at desc);
create index orchestration_plans_active_idx on orchestration_plans (tenant_id, parent_session_id) where status in ('planning', 'executing', 'synthesizing');

create table orchestration_subtasks (
  plan_id uuid not null references orchestration_plans(id) on delete cascade,
  tenant_id uuid not null references tenants(id) on delete cascade,
  idx integer not null check (idx >= 0),
  description text not null,
  dependencies integer[] not null default '{}',
  status text not null default 'pending' check (status in ('pending', 'running', 'completed', 'failed')),
  -- Attempts started (each in a fresh child session); the current one's session and turn.
  attempt integer not null default 0,
  session_id uuid references agent_sessions(id) on delete set null,
  turn_id uuid references agent_turns(id) on delete set null,
  result text,
  error text,
  started_at timestamptz,
  completed_at timestamptz,
  -- The last runtime event of the current attempt's session (a stalled subtask has none for long).
  last_event_at timestamptz,
  primary key (plan_id, idx)
);
-- Every attempt at a subtask, each in its own child session (the subtask row points at the current one).
create table orchestration_attempts (
  plan_id uuid not null,
  tenant_id uuid not null references tenants(id) on delete cascade,
  idx integer not null,
  attempt integer not null,
  session_id uuid not null references agent_sessions(id) on delete cascade,
  started_at timestamptz not null default now(),
  ended_at timestamptz,
  error text,
  primary key (plan_id, idx, attempt),
  foreign key (plan_id, idx) references orchestration_subtasks (plan_id, idx) on delete cascade
);
create index orchestration_subtasks_running_idx on orchestration_subtasks (tenant_id, plan_id) where status = 'running';
create index orchestration_subtasks_session_idx on orchestration_subtasks (session_id) where session_id is not null;

-- Child sessions: the planning turn's and each subtask attempt's, in the owner's runtime with the
-- parent's runtime session as their parent. Not listed among the user's sessions; readable by the owner.
alter table agent_sessions add column parent_id uuid references agent_sessions(id) on delete cascade;
alter table agent_sessions add column plan_id uuid references orchestration_plans(id) on delete cascade;
create index agent_sessions_parent_idx on agent_sessions (parent_id) where parent_id is not null;

-- Extra tool switches of a turn (the planning turn changes nothing; subtasks start no subagents).
alter table agent_turns add column tools jsonb;

-- migrate:down
alter table agent_turns drop column if exists tools;
drop index if exists agent_sessions_parent_idx;
alter table agent_sessions drop column if exists plan_id;
alter table agent_sessions drop column if exists parent_id;
drop table if exists orchestration_attempts;
drop table if exists orchestration_subtasks;
drop table if exists orchestration_plans;
