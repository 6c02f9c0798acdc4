-- Connectors (issue 37). Git push options (`git push -o`: GitLab's merge_request.*, ci.skip, ci.variable)
-- reach a host only when its admin allows them: `push_options` lists what may pass (an option's key, a
-- key prefix ending in `*`, or `key=value` exactly); empty, the default, refuses every push that carries
-- any.
alter table git_hosts add column push_options text[] not null default '{}';

-- migrate:down
alter table git_hosts drop column if exists push_options;
