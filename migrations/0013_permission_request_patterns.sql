-- What a pending permission request asks for, beyond its name: the runtime's patterns (the command, the
-- paths). The dashboard pins pending requests above the composer and must show them again after a page
-- reload, from the database rather than from a stream it may have missed (issue 16).
alter table runtime_permission_requests add column patterns jsonb not null default '[]';

-- migrate:down
alter table runtime_permission_requests drop column if exists patterns;
