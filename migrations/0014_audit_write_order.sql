-- Audit entries in the order they were written, also when two share a timestamp. The embedded database
-- (PGlite) keeps time to the millisecond, so the entries of one transaction (a tenant's owner created,
-- then given the owner role) often share their `ts`, and ordering them by their random ids put them in
-- any order: `aws audit tail` could print a role assigned before the user existed. `seq` counts entries
-- as they are inserted (existing ones numbered in the order they are stored) and breaks such ties.
alter table audit_log add column seq bigint generated always as identity;
drop index if exists audit_log_tenant_ts_idx;
create index audit_log_tenant_ts_idx on audit_log (tenant_id, ts desc, seq desc);

-- migrate:down
drop index if exists audit_log_tenant_ts_idx;
create index audit_log_tenant_ts_idx on audit_log (tenant_id, ts desc, id desc);
alter table audit_log drop column if exists seq;
