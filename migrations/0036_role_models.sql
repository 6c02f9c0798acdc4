-- Model per session and per turn (issue 39).
-- A role's model allow-list is a member of its permission document, models.allowed: "*" (every enabled
-- model), or "<provider>/<model id>" and "<provider>/*" references. Roles stored before it existed keep
-- every model, as a new tenant's owner, admin and member roles get (permissions.ts); the viewer role
-- runs no agent and gets none.
update roles
   set permissions = jsonb_set(permissions, '{models}', case when is_system and name = 'viewer' then '{"allowed": []}'::jsonb else '{"allowed": "*"}'::jsonb end, true),
       updated_at = now()
 where not (permissions ? 'models');

-- The model a person chose for a session ("<provider>/<model id>"; null: the template's, else the tenant's
-- default), apart from the template's snapshot in `model`.
alter table agent_sessions add column chosen_model text;
-- The model a person chose for one turn only (null: the session's).
alter table agent_turns add column model text;

-- migrate:down
alter table agent_turns drop column model;
alter table agent_sessions drop column chosen_model;
update roles set permissions = permissions - 'models', updated_at = now() where permissions ? 'models';
