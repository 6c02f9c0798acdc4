-- Skill versions reviewed one by one (issue 24): a new version of a promoted skill waits beside the
-- promoted one (the skill stays promoted and agents keep loading the promoted version) until a reviewer
-- promotes or rejects it; the screening's flags are kept with the version they were found in.
--
-- status: `proposed` (waiting for review), `promoted` (what agents load, at most one per skill),
-- `retired` (promoted once and replaced, a draft a newer draft replaced, or its skill deprecated),
-- `rejected` (a reviewer said no).
alter table skill_versions add column status text not null default 'proposed' check (status in ('proposed', 'promoted', 'retired', 'rejected'));
-- [{ line, text, reason }]: lines of the SKILL.md a reviewer reads before promoting it.
alter table skill_versions add column flags jsonb not null default '[]';
-- Who promoted or rejected it (the audit form of the actor: user:<id>, system:cli) and when.
alter table skill_versions add column reviewed_by text;
alter table skill_versions add column reviewed_at timestamptz;

-- Versions as they stand: the promoted one of a live skill; the newest of a skill waiting for review;
-- every other one retired.
update skill_versions v
   set status = case
         when s.status <> 'deprecated' and s.promoted_version = v.version then 'promoted'
         when s.status = 'proposed' and v.version = s.version then 'proposed'
         else 'retired'
       end
  from skills s
 where s.id = v.skill_id;
-- A promoted skill whose newer version waited was set back to `proposed`: it is promoted, and the new
-- version waits beside the promoted one.
update skills set status = 'promoted' where status = 'proposed' and promoted_version is not null;

create unique index skill_versions_one_promoted_idx on skill_versions (skill_id) where status = 'promoted';

-- migrate:down
drop index if exists skill_versions_one_promoted_idx;
update skills s set status = 'proposed'
 where s.status = 'promoted' and exists (select 1 from skill_versions v where v.skill_id = s.id and v.status = 'proposed' and v.version > coalesce(s.promoted_version, 0));
alter table skill_versions drop column if exists reviewed_at;
alter table skill_versions drop column if exists reviewed_by;
alter table skill_versions drop column if exists flags;
alter table skill_versions drop column if exists status;
