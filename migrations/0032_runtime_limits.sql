-- One agent cannot take the host from everyone else (issue 37). Each runtime runs in cgroups with a
-- memory and a process limit and an equal CPU weight, and each person's files are measured against a
-- workspace quota. What the hosts report:
--
-- runtime_hosts gains which limits hold on that host and why not the others (`limits`, as the host's
-- status gives it), and the data directory's filesystem (size and free space). Runner hosts report
-- there too (hostname `runner <name>`, host_pid 0), through the control plane that syncs them.
alter table runtime_hosts add column limits jsonb;
alter table runtime_hosts add column disk_total_bytes bigint;
alter table runtime_hosts add column disk_free_bytes bigint;

-- runtime_usage: each person's runtime against its limits, as its host last read it: memory and processes
-- while it runs, the disk their files take (kept after the runtime stops: the files stay). Turns are
-- refused while disk_bytes is past the person's quota (the quota is measured: README, "Workspace quota").
-- The tenant is always the user's own (never what a runner says).
create table runtime_usage (
  user_id uuid primary key references users(id) on delete cascade,
  tenant_id uuid not null references tenants(id) on delete cascade,
  -- The host that read it: a serve's hostname, or `runner <name>`.
  host text not null,
  running boolean not null default false,
  memory_bytes bigint,
  memory_max_bytes bigint,
  pids integer,
  pids_max integer,
  disk_bytes bigint,
  disk_quota_bytes bigint,
  disk_measured_at timestamptz,
  oom_kills integer not null default 0,
  pids_refused integer not null default 0,
  updated_at timestamptz not null default now()
);
create index runtime_usage_tenant_idx on runtime_usage (tenant_id);

-- migrate:down
drop table if exists runtime_usage;
alter table runtime_hosts drop column if exists disk_free_bytes;
alter table runtime_hosts drop column if exists disk_total_bytes;
alter table runtime_hosts drop column if exists limits;
