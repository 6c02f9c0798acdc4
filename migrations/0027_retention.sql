-- Retention (issue 29): a tenant's periods live in tenants.settings.retention; the daily job removes what
-- is older. audit_log stays append-only except for that job: a delete passes only inside a transaction
-- that declared which tenant's entries it removes and before when (set_config('agentws.audit_retention_tenant',
-- ..., true) and set_config('agentws.audit_retention_before', ..., true)), and only for entries of that tenant
-- written before then. Updates keep failing here (0028 lets an erasure's pseudonymisation through).
create or replace function audit_log_is_append_only() returns trigger language plpgsql as $$
declare
  before_ts text := coalesce(current_setting('agentws.audit_retention_before', true), '');
  tenant text := coalesce(current_setting('agentws.audit_retention_tenant', true), '');
begin
  if tg_op = 'DELETE' and before_ts <> '' and tenant <> ''
     and old.tenant_id::text = tenant and old.ts < before_ts::timestamptz then
    return old;
  end if;
  raise exception 'audit_log is append-only';
end $$;

-- The job looks for the oldest sessions by last activity, tenant by tenant.
create index if not exists agent_sessions_tenant_updated_idx on agent_sessions (tenant_id, updated_at);
create index if not exists trajectories_tenant_time_idx on trajectories (tenant_id, created_at);

-- migrate:down
drop index if exists trajectories_tenant_time_idx;
drop index if exists agent_sessions_tenant_updated_idx;
create or replace function audit_log_is_append_only() returns trigger language plpgsql as $$
begin
  raise exception 'audit_log is append-only';
end $$;
