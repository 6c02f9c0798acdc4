-- A turn handed to its runtime ('sent') now also records how it ended (issue 26): 'done' when the
-- runtime reported its session idle, 'lost' when the runtime (or its host, or its runner) went away first.
-- A lost turn is reported on its session's stream as session.error, once.
alter table agent_turns drop constraint if exists agent_turns_status_check;
alter table agent_turns add constraint agent_turns_status_check check (status in ('queued', 'sending', 'sent', 'done', 'lost', 'failed'));
create index agent_turns_in_flight_idx on agent_turns (session_id) where status = 'sent';

-- migrate:down
drop index if exists agent_turns_in_flight_idx;
update agent_turns set status = 'sent' where status = 'done';
update agent_turns set status = 'failed' where status = 'lost';
alter table agent_turns drop constraint if exists agent_turns_status_check;
alter table agent_turns add constraint agent_turns_status_check check (status in ('queued', 'sending', 'sent', 'failed'));
