-- SCIM tokens expire (issue 37 finding 4): a token acting for a tenant's identity provider is renewed by
-- an owner (`aws scim token create` with its name) within its lifetime, like a personal access token.
-- Tokens made before this migration never expired: they keep the default lifetime (180 days) from
-- their creation, but at least 30 days from the upgrade, so an identity provider's provisioning does not
-- stop the day of the upgrade and an owner has time to rotate them.
alter table scim_tokens add column expires_at timestamptz;
update scim_tokens set expires_at = greatest(created_at + interval '180 days', now() + interval '30 days');
alter table scim_tokens alter column expires_at set not null;

-- migrate:down
alter table scim_tokens drop column if exists expires_at;
