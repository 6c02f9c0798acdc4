-- Code hosts hand work to agents (issue 40), the run's half: one run per issue or pull request asked of
-- an agent, tied to the person's session and the branch the service chose; a follow-up comment on its
-- pull request finds it here and runs another turn in the same session, pushing to the same branch.
create table code_host_runs (
  id uuid primary key default gen_random_uuid(),
  tenant_id uuid not null references tenants(id) on delete cascade,
  host_id uuid not null references git_hosts(id) on delete cascade,
  user_id uuid not null references users(id) on delete cascade,
  session_id uuid references agent_sessions(id) on delete set null,
  repo text not null,
  project_id bigint,
  -- Where it was asked first (an issue, or a pull request the agent was asked to work on).
  target_type text not null check (target_type in ('issue', 'pull_request')),
  target_number integer not null,
  target_url text not null,
  branch text not null,
  base text not null,
  -- The pull/merge request the service opened (null until the first turn with changes).
  pr_number integer,
  pr_url text,
  head_sha text,
  status text not null default 'running' check (status in ('running', 'opened', 'no_changes', 'failed', 'refused')),
  last_turn_id uuid,
  last_delivery_row_id uuid,
  -- The delivery working on the run now (from its clone to its turn's end): another trigger on the same
  -- run waits for it, so two never clone, check out or push in the run's folder at once. Taken over when
  -- older than an hour (a worker that died with it).
  working_delivery_row_id uuid,
  working_since timestamptz,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  unique (host_id, repo, target_type, target_number)
);
create index code_host_runs_pr on code_host_runs (host_id, repo, pr_number) where pr_number is not null;
create index code_host_runs_session on code_host_runs (tenant_id, session_id);

-- The sessions list marks host-triggered sessions with the issue's link (read by session-manage.repo.ts).
alter table agent_sessions add column origin_url text, add column origin_label text;

-- migrate:down
alter table agent_sessions drop column if exists origin_label, drop column if exists origin_url;
drop table if exists code_host_runs;
