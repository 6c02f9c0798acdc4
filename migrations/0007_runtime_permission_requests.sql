-- Tool permission requests the agent runtime is waiting on (its permission.asked events), per session.
-- A reply is checked against this record: the runtime's own list of pending requests cannot be relied
-- on (opencode 1.18.33 answers 400 to it while any request has an unset metadata field, as webfetch,
-- glob and grep requests do). Rows go when the request is answered.

create table runtime_permission_requests (
  -- The runtime's request id (per_...).
  id text primary key,
  tenant_id uuid not null references tenants(id) on delete cascade,
  session_id uuid not null references agent_sessions(id) on delete cascade,
  -- What it asks for: the runtime's permission name (bash, edit, webfetch, external_directory, ...).
  permission text not null,
  asked_at timestamptz not null default now()
);
create index runtime_permission_requests_session_idx on runtime_permission_requests (tenant_id, session_id, asked_at);
create index runtime_permission_requests_asked_idx on runtime_permission_requests (asked_at);

-- migrate:down
drop table if exists runtime_permission_requests;
