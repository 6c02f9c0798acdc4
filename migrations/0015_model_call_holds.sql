-- Every model call counted and capped (issue 24). A call in flight holds the most it may cost against
-- its caller's limits until its usage is recorded, so calls made at the same time cannot together spend
-- past a limit; the hold is released in the transaction that records the call. A hold whose call never
-- settled (its process died) stops counting when it expires.
create table model_call_holds (
  id uuid primary key,
  tenant_id uuid not null references tenants(id) on delete cascade,
  user_id uuid not null,
  -- What the per-request limit counts the call against: `session:<id>` (a turn of that session),
  -- `plan:<id>` (a plan's sessions share one budget); null outside any turn.
  budget_key text,
  amount_usd numeric(16, 8) not null,
  created_at timestamptz not null default now(),
  expires_at timestamptz not null
);
create index model_call_holds_user_idx on model_call_holds (tenant_id, user_id);
create index model_call_holds_budget_idx on model_call_holds (tenant_id, budget_key) where budget_key is not null;

-- A call the provider reported no usage for (or that was cut off before its report) is charged an
-- estimate: its input as counted by the gateway and its whole output limit. Marked, so reports can say so.
alter table usage_records add column estimated boolean not null default false;

-- What each user spent per calendar month (UTC), kept by the statement that writes a usage record: the
-- monthly limit is checked before every model call, and summing a busy user's month of records takes
-- ~10 ms at 20,000 calls (the spending benchmark) and grows with them.
create table usage_monthly (
  tenant_id uuid not null references tenants(id) on delete cascade,
  user_id uuid not null,
  month date not null,
  cost_usd numeric(20, 8) not null default 0,
  primary key (tenant_id, user_id, month)
);
insert into usage_monthly (tenant_id, user_id, month, cost_usd)
  select tenant_id, user_id, date_trunc('month', created_at at time zone 'UTC')::date, sum(cost_usd)
    from usage_records where user_id is not null group by 1, 2, 3;

-- What a turn (or a plan's sessions) has spent is read before every model call of that turn: by session.
-- Without it the sum scanned the tenant's records (the range of a turn's start is unknown when the
-- statement is planned): 4 ms at 40,000 records, growing with them; 0.1 ms with it.
create index usage_records_session_idx on usage_records (session_id, created_at) where session_id is not null;

-- The user's latest turn: what a model call that names no running session counts against.
create index agent_turns_user_idx on agent_turns (tenant_id, user_id, created_at desc);

-- migrate:down
drop index if exists agent_turns_user_idx;
drop index if exists usage_records_session_idx;
drop table if exists usage_monthly;
alter table usage_records drop column if exists estimated;
drop table if exists model_call_holds;
