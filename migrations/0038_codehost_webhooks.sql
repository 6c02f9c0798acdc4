-- Code hosts hand work to agents (issue 40), the intake's half: each git host may take webhooks from its
-- host (GitHub, GitLab or Gitea: `kind`), authenticated with a secret the service generates and shows
-- once (sealed here), at a URL naming a random id rather than the tenant or the host. A comment starting
-- with `mention`, or the label `trigger_label`, on a repository matching `webhook_repos`, asks for a run.
alter table git_hosts
  add column kind text check (kind in ('github', 'gitlab', 'gitea')),
  add column webhook_id text unique,
  add column webhook_secret_sealed text,
  add column webhook_enabled boolean not null default false,
  add column mention text not null default '@agent',
  add column trigger_label text not null default 'agent',
  -- Repository patterns (git-fns.ts repoMatches): empty lets none trigger.
  add column webhook_repos text[] not null default '{}';

-- Every delivery received (kept DELIVERY_KEEP_DAYS): the replay guard (one row per host and delivery id,
-- whichever serve took it first) and the admin's log of outcomes.
create table code_host_deliveries (
  id uuid primary key default gen_random_uuid(),
  tenant_id uuid not null references tenants(id) on delete cascade,
  host_id uuid not null references git_hosts(id) on delete cascade,
  delivery_id text not null,
  event text not null,
  outcome text not null check (outcome in ('queued', 'ignored', 'refused', 'test')),
  reason text,
  repo text,
  target_type text check (target_type in ('issue', 'pull_request')),
  target_number integer,
  target_url text,
  actor_login text,
  user_id uuid references users(id) on delete set null,
  replays integer not null default 0,
  received_at timestamptz not null default now(),
  unique (host_id, delivery_id)
);
create index code_host_deliveries_recent on code_host_deliveries (tenant_id, host_id, received_at desc);
-- The rate limit counts queued runs per repository and person in a window.
create index code_host_deliveries_rate on code_host_deliveries (host_id, repo, user_id, received_at) where outcome = 'queued';

-- agents.code_host: the system roles that run agents hold it (as agents.terminal, 0034); custom roles as they are.
update roles
   set permissions = jsonb_set(permissions, '{agents,code_host}', 'true'::jsonb, true), updated_at = now()
 where is_system and name in ('owner', 'admin', 'member')
   and permissions ? 'agents';

-- migrate:down
update roles set permissions = permissions #- '{agents,code_host}', updated_at = now() where permissions->'agents' ? 'code_host';
drop table if exists code_host_deliveries;
alter table git_hosts drop column if exists webhook_repos, drop column if exists trigger_label, drop column if exists mention,
  drop column if exists webhook_enabled, drop column if exists webhook_secret_sealed, drop column if exists webhook_id, drop column if exists kind;
