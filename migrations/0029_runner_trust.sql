-- Runner hosts trusted no further than the operator says (issue 37).
--
-- A runner's capacity is what the runner says; the operator caps it per token: each runner registered
-- with the token is placed at most this many runtimes, whatever it reports. Tokens made before this get
-- a ceiling no lower than what their runners report now (nothing that works today stops working).
alter table runner_tokens add column max_capacity integer not null default 100 check (max_capacity >= 0 and max_capacity <= 100000);
update runner_tokens t set max_capacity = greatest(100, coalesce((select max(r.capacity) from runners r where r.token_id = t.id), 0));

-- What the runner itself last reported (capacity is then capped at the ceiling), and when a jump in it
-- (over the ceiling, or a large change) was last logged and audited: once, not every heartbeat.
alter table runners add column reported_capacity integer;
alter table runners add column capacity_noted_at timestamptz;

-- Which copy of a user's files is the current one: the fence of the placement under which it was made
-- current (a fresh workspace, a drain's copy); a placement that keeps the files where they are (sticky,
-- back on the same runner, between runners sharing storage) keeps it. A runner starts a runtime only on
-- the copy marked with it, and sets any other copy aside: an older copy is never used silently.
-- Placements made before this get 0: their copies (unmarked on their runners) are where they are, while
-- an unmarked copy found by a placement that made its own copy current since is an older one.
alter table runtime_placements add column files_fence bigint;
update runtime_placements set files_fence = 0;
alter table runtime_placements alter column files_fence set not null;
-- A user moved by a drain with their files and conversation (their copy on the new runner is the one
-- they had): told once, on the stream of their next turn.
alter table runtime_placements add column moved_intact boolean not null default false;

-- A session whose runtime session was started anew on another runner host (the host holding its
-- earlier turns and files was lost): the transcript says where the earlier turns went, at the point
-- where the new runtime session begins, instead of showing them missing without a word.
create table session_moves (
  id uuid primary key default gen_random_uuid(),
  tenant_id uuid not null references tenants(id) on delete cascade,
  session_id uuid not null references agent_sessions(id) on delete cascade,
  -- The runtime session the earlier turns are in (on the host that was lost), and the message id of
  -- the first prompt sent to the new one (the notice sits just before it).
  previous_upstream_id text not null,
  before_message_id text not null,
  -- How many turns had been handed to the earlier runtime session.
  turns integer not null default 0,
  at timestamptz not null default now()
);
create index session_moves_session_idx on session_moves (tenant_id, session_id, at);

-- migrate:down
drop table if exists session_moves;
alter table runtime_placements drop column if exists moved_intact;
alter table runtime_placements drop column if exists files_fence;
alter table runners drop column if exists capacity_noted_at;
alter table runners drop column if exists reported_capacity;
alter table runner_tokens drop column if exists max_capacity;
