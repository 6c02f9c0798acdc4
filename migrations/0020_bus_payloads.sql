-- Event bus payloads too large for NOTIFY (8000 bytes): a session event carrying a tool's output, fanned
-- out to every serve (issue 26). The notification carries the row's id; rows are read once by each
-- listening process and pruned after a few minutes. Unlogged: they are in flight, not records.
create unlogged table bus_payloads (
  id bigserial primary key,
  payload text not null,
  created_at timestamptz not null default now()
);

-- migrate:down
drop table if exists bus_payloads;
