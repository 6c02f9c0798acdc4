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

-- The user's latest turn: what a model call that names no running session counts against.
create index agent_turns_user_idx on agent_turns (tenant_id, user_id, created_at desc);

-- migrate:down
drop index if exists agent_turns_user_idx;
alter table usage_records drop column if exists estimated;
drop table if exists model_call_holds;
