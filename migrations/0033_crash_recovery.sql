-- Crashes and restarts that lose nothing (issue 37).
--
-- A turn's send attempt names the process making it (attempt_worker: host, boot, pid and start time) and
-- when it passed its last check before handing the turn to the runtime (handing_at). A process that
-- starts finds the attempts of workers that died (on its host) and sends their turns again at once,
-- instead of waiting for the job queue's expiry; an attempt that a newer one overtook stops at that check,
-- so a turn still reaches its runtime once.
alter table agent_turns add column attempt_worker text;
alter table agent_turns add column handing_at timestamptz;
-- Turns run in the order their session accepted them: a turn with an earlier one still to be handed over
-- (queued, being sent, or sent and not yet stored by the runtime: handing_at still set) waits without a job
-- (parked) until that one is; then it is queued again.
alter table agent_turns add column parked_at timestamptz;
create index agent_turns_pending_idx on agent_turns (session_id, created_at) where status in ('queued', 'sending', 'sent');
-- How the turn ended on its session's stream (the events as published, with their ids): a client that
-- resumes with an older Last-Event-ID on a serve that never saw them (restarted since) still gets them.
alter table agent_turns add column end_events jsonb;
-- The answer as it streamed (text parts of the runtime's assistant messages), saved while it streams: a
-- runtime that dies mid-answer never stored it, and the person had seen it.
alter table agent_turns add column partial jsonb;

-- Every model call in flight holds a row now, also a user's without cost limits (their row holds nothing
-- they are limited by), with what its record needs: a call whose process died before it settled is
-- recorded at the gateway's estimate when the service comes back, instead of not at all.
alter table model_call_holds add column provider text;
alter table model_call_holds add column model text;
alter table model_call_holds add column session_id uuid;
alter table model_call_holds add column channel text;
alter table model_call_holds add column tokens_input bigint;
alter table model_call_holds add column tokens_output bigint;
-- The process that forwards the call (the same identity as attempt_worker).
alter table model_call_holds add column holder text;

-- migrate:down
alter table model_call_holds drop column if exists holder;
alter table model_call_holds drop column if exists tokens_output;
alter table model_call_holds drop column if exists tokens_input;
alter table model_call_holds drop column if exists channel;
alter table model_call_holds drop column if exists session_id;
alter table model_call_holds drop column if exists model;
alter table model_call_holds drop column if exists provider;
alter table agent_turns drop column if exists partial;
alter table agent_turns drop column if exists end_events;
drop index if exists agent_turns_pending_idx;
alter table agent_turns drop column if exists parked_at;
alter table agent_turns drop column if exists handing_at;
alter table agent_turns drop column if exists attempt_worker;
