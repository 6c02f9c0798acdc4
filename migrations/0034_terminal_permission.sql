-- The workspace terminal (issue 38): a permission of its own, agents.terminal. The system roles' documents
-- are written when a tenant is made (permissions.ts systemRolePermissions): those already stored get it
-- here, as a new tenant's would (owner, admin and member hold it; viewer does not). Custom roles are left
-- as they are: whoever manages roles grants it to them.
update roles
   set permissions = jsonb_set(permissions, '{agents,terminal}', 'true'::jsonb, true), updated_at = now()
 where is_system and name in ('owner', 'admin', 'member')
   and permissions ? 'agents';

-- migrate:down
update roles
   set permissions = permissions #- '{agents,terminal}', updated_at = now()
 where permissions->'agents' ? 'terminal';
