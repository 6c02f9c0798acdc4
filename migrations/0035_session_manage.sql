-- Sessions people can manage and search (issue 39, items 1 and 2).
--
-- Pinned and archived are moments (null: not), so the list can say since when; neither touches
-- updated_at, which stays the session's last activity (the list's order).
alter table agent_sessions add column pinned_at timestamptz;
alter table agent_sessions add column archived_at timestamptz;
-- The last message of the session's transcript the search index holds (message ids ascend); null: the
-- transcript was never indexed (the index-sessions job fills those in).
alter table agent_sessions add column search_through text;

-- The list: a person's top-level sessions, pinned first, then most recently updated, paged by that key.
create index agent_sessions_list_idx on agent_sessions (tenant_id, owner_id, (pinned_at is not null), updated_at, id)
  where deleted_at is null and parent_id is null;
-- Titles are searched where they are kept, so a rename (or a session made by any path) is found at once.
create index agent_sessions_title_search_idx on agent_sessions using gin (to_tsvector('english', title))
  where deleted_at is null and parent_id is null;

-- The text of a session's prompts and answers as its transcript shows them (text parts only: no tool
-- input or output, no reasoning), one row per message. Rows go with their session (deleted in the
-- deletion's transaction; purged by the foreign key). Who may search them is read from agent_sessions at
-- query time (owner_id, deleted_at), never from here, so a claim or hand-over moves them with the session.
-- owner_id is a copy that picks a person's candidates fast (the recent-entries index is keyed by it),
-- refreshed at each index write; every result is checked against agent_sessions, so a stale copy can hide a
-- session's text from its new owner until its next turn ends, never show it to anyone else.
create table session_search_entries (
  tenant_id uuid not null references tenants(id) on delete cascade,
  session_id uuid not null references agent_sessions(id) on delete cascade,
  owner_id uuid not null,
  message_id text not null,
  role text not null check (role in ('user', 'assistant')),
  body text not null,
  tsv tsvector generated always as (to_tsvector('english', body)) stored,
  created_at timestamptz not null default now(),
  primary key (session_id, message_id)
);
create index session_search_entries_tsv_idx on session_search_entries using gin (tsv);
create index session_search_entries_tenant_idx on session_search_entries (tenant_id, session_id);
-- The most recent matches first: for a word in most of a person's messages the planner walks this until it
-- has the candidates to rank, instead of reading every match from the text index.
create index session_search_entries_recent_idx on session_search_entries (tenant_id, owner_id, created_at desc);

-- migrate:down
drop table if exists session_search_entries;
drop index if exists agent_sessions_title_search_idx;
drop index if exists agent_sessions_list_idx;
alter table agent_sessions drop column if exists search_through;
alter table agent_sessions drop column if exists archived_at;
alter table agent_sessions drop column if exists pinned_at;
