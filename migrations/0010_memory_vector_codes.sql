-- Vector search over memories by binary codes and re-ranking (issue 13, its performance targets).
--
-- Each embedding gets its binary code (one bit per dimension, its sign: pgvector's binary_quantize), 1/32
-- of the vector's size. A search short-lists the memories whose codes are nearest the query's (Hamming
-- distance), then ranks the short list by the exact cosine distance of the stored vectors
-- (src/core/memories/memories.repo.ts, search).
--
-- Why not the per-model HNSW indexes of 0009: a viewer sees 10-45 % of a tenant's memories (visibility),
-- so an HNSW scan filters most of what it visits away. On the memories benchmark (100,000 memories,
-- 1536 dimensions) it found 34-77 % of the true ten nearest, over full vectors or over codes, and came
-- back short under a 5 % filter even with iterative scans; at 1536 dimensions its index is 800 MB per
-- 100,000 memories. The codes of the memories a viewer may see are read instead from the two covering
-- indexes below (index-only scans, ~330 bytes an entry): exact over the visible set, so a filter never
-- comes back short, and nothing approximate decides what a viewer is shown.
alter table memories add column embedding_bits bit varying generated always as (binary_quantize(embedding)) stored;

-- The codes by author (a viewer's own memories, their teammates' team and org ones) ...
create index memories_codes_author_idx on memories (tenant_id, embedding_model, user_id, visibility)
  include (id, kind, status, embedding_bits) where embedding_bits is not null;
-- ... and by visibility (every org memory of the tenant, for those who read the whole organisation).
create index memories_codes_visibility_idx on memories (tenant_id, embedding_model, visibility)
  include (id, user_id, kind, status, embedding_bits) where embedding_bits is not null;

-- Index-only scans read the heap for pages the visibility map does not mark all-visible, which only
-- VACUUM does: vacuum memories after 1,000 + 1 % new rows, not the default 20 %, so the codes of recent
-- memories are read from the index too.
alter table memories set (autovacuum_vacuum_insert_scale_factor = 0.01);
-- Vectors stay in the row (a 1536-dimension vector is 6 KB: a row fits a page) rather than in TOAST
-- chunks: the re-ranking reads each short-listed vector with one page read instead of an index lookup
-- and four chunks.
alter table memories alter column embedding set storage main;

-- The per-model HNSW indexes of 0009 (memories_embedding_<hash>) are not used any more.
do $$
declare r record;
begin
  for r in select indexname from pg_indexes where tablename = 'memories' and indexname like 'memories\_embedding\_%' loop
    execute format('drop index %I', r.indexname);
  end loop;
end $$;

-- migrate:down
do $$
declare r record;
begin
  for r in select model_key, dimensions from memory_embedders where dimensions <= 4000 loop
    execute format('create index if not exists %I on memories using hnsw ((embedding::%s(%s)) %s) where embedding_model = %L',
      'memories_embedding_' || substr(encode(sha256(convert_to(r.model_key, 'UTF8')), 'hex'), 1, 16),
      case when r.dimensions > 2000 then 'halfvec' else 'vector' end, r.dimensions,
      case when r.dimensions > 2000 then 'halfvec_cosine_ops' else 'vector_cosine_ops' end, r.model_key);
  end loop;
end $$;
alter table memories alter column embedding set storage external;
alter table memories reset (autovacuum_vacuum_insert_scale_factor);
drop index if exists memories_codes_visibility_idx;
drop index if exists memories_codes_author_idx;
alter table memories drop column if exists embedding_bits;
