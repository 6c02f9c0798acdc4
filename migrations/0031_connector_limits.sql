-- Connectors (issue 37). Git push options (`git push -o`: GitLab's merge_request.*, ci.skip, ci.variable)
-- reach a host only when its admin allows them: `push_options` lists what may pass (an option's key, a
-- key prefix ending in `*`, or `key=value` exactly); empty, the default, refuses every push that carries
-- any.
alter table git_hosts add column push_options text[] not null default '{}';

-- A per-user connection's refresh is claimed, not locked across the call to the host: the claim (a lease
-- with an expiry, so a process that died mid-refresh does not hold it for ever) keeps one refresh at a
-- time per connection (hosts rotate refresh tokens: two refreshes with one token break the connection),
-- and other callers wait for its outcome. A refresh that failed is recorded with the host's reason, so
-- the person is told why their agent fell back to the service credential (or was refused), and the host
-- is not asked again before a retry interval.
alter table git_connections
  add column refresh_lease text,
  add column refresh_lease_until timestamptz,
  add column refresh_failed_at timestamptz,
  add column refresh_error text;

-- migrate:down
alter table git_connections drop column if exists refresh_error, drop column if exists refresh_failed_at,
  drop column if exists refresh_lease_until, drop column if exists refresh_lease;
alter table git_hosts drop column if exists push_options;
