-- A person's data on request (issue 29): erasing a person keeps their audit entries with the person
-- pseudonymised. audit_log stays append-only for everything else: an update passes only inside a
-- transaction that declared an erasure (set_config('agentws.audit_erasure', 'on', true)) and only
-- changes the columns that can name a person (user_id, actor, target, details); deletes stay refused
-- by the existing trigger. This guards against the application's mistakes, not against a database role
-- that could drop triggers anyway.
create function audit_log_pseudonymise_only() returns trigger language plpgsql as $$
begin
  if coalesce(current_setting('agentws.audit_erasure', true), '') = 'on'
     and new.id = old.id and new.ts = old.ts
     and new.tenant_id is not distinct from old.tenant_id and new.action = old.action
     and new.session_id is not distinct from old.session_id and new.channel = old.channel
     and new.duration_ms is not distinct from old.duration_ms then
    return new;
  end if;
  raise exception 'audit_log is append-only';
end $$;

-- The update half of the original trigger moves to the function above; deletes keep theirs.
drop trigger if exists audit_log_no_update on audit_log;
create trigger audit_log_no_update before delete on audit_log
  for each row execute function audit_log_is_append_only();
create trigger audit_log_update_only_to_pseudonymise before update on audit_log
  for each row execute function audit_log_pseudonymise_only();

-- migrate:down
drop trigger if exists audit_log_update_only_to_pseudonymise on audit_log;
drop trigger if exists audit_log_no_update on audit_log;
create trigger audit_log_no_update before update or delete on audit_log
  for each row execute function audit_log_is_append_only();
drop function if exists audit_log_pseudonymise_only();
