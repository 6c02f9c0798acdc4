-- Idle runtimes paged out to swap (compressed, with zram): how many of a host's frozen runtimes hold
-- only a fraction of their memory now. Which mechanism pages them out, the host's swap and why paging is
-- off live in the report's limits (jsonb), as the other limits do.
alter table runtime_hosts add column paged_out integer not null default 0;
