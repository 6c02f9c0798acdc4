-- Group mapping at sign-in (issue 29): a team membership the identity provider's groups gave someone is
-- marked, so the next sign-in can take it away when the group goes, and never touches one an admin added
-- by hand (null: added by hand or by SCIM, as every membership before this migration was). Role
-- assignments need no column: user_roles.assigned_by already says who assigned them ('system:idp-groups').
alter table team_members add column added_by text;

-- migrate:down
alter table team_members drop column if exists added_by;
