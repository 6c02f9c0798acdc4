-- Memories that reach other people's agents (issue 24): what the screening found in a memory's text, and
-- whether its author released it.
--
-- signals: the instruction signals (memory-fns.ts instructionSignals) its normalised text tripped when it
-- was written; a quarantined memory with none waits for its author because the tenant holds every memory
-- an agent saves (settings.memory.agentSavesNeedRelease).
alter table memories add column signals text[] not null default '{}';
-- Set when its author releases it: the author vouched for it, so it reaches their own agent even when its
-- text reads like instructions (never another person's: recall screens those whatever their history).
alter table memories add column released_at timestamptz;

-- Memories saved before: the signals that quarantined them are in their creation's audit entry, their
-- release is an audit entry of its own.
update memories m
   set signals = array(select jsonb_array_elements_text(a.details -> 'signals'))
  from audit_log a
 where a.action = 'memory.create' and a.target = 'memory:' || m.id::text and jsonb_typeof(a.details -> 'signals') = 'array';
update memories m
   set released_at = r.ts
  from (select target, max(ts) as ts from audit_log where action = 'memory.release' group by target) r
 where r.target = 'memory:' || m.id::text;

-- migrate:down
alter table memories drop column if exists released_at;
alter table memories drop column if exists signals;
