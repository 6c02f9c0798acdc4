-- The processes that host agent runtimes (issue 25), as they last reported themselves: how many runtimes
-- they can hold (from the host's memory), how many they hold and in which state, and the memory those
-- hold. Written by the host every few seconds while something changes; read by `aws runtime status` and
-- any process that is not the host. A row whose report is old belongs to a process that is gone.
create table runtime_hosts (
  hostname text not null,
  host_pid integer not null,
  capacity integer not null,
  resident integer not null default 0,
  frozen integer not null default 0,
  starting integer not null default 0,
  busy integer not null default 0,
  runtimes_memory_bytes bigint not null default 0,
  memory_total_bytes bigint not null,
  memory_available_bytes bigint not null,
  freezer text,
  started_at timestamptz not null default now(),
  reported_at timestamptz not null default now(),
  primary key (hostname, host_pid)
);

-- migrate:down
drop table if exists runtime_hosts;
