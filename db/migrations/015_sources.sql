-- Where a corpus's documents come from (issue 45, item 3; issue 46's crawled sites): each document belongs to
-- one source, and a source is synced as a whole (a folder's re-ingest adds, updates and removes only its own
-- documents). `upload` is the one source of a corpus's API uploads; `folder` a folder `provenance ingest`
-- reads (location: its absolute path); `site` a crawled site (location: its start URL). A source's
-- settings (a crawl's bounds) are `options`, so a new kind needs no new column.
CREATE TABLE sources (
    id          text PRIMARY KEY,
    corpus      text NOT NULL,
    kind        text NOT NULL CONSTRAINT sources_kind_check CHECK (kind IN ('upload', 'folder', 'site')),
    location    text NOT NULL DEFAULT '',
    options     jsonb NOT NULL DEFAULT '{}'::jsonb,
    created_at  timestamptz NOT NULL DEFAULT now(),
    -- When its documents were last made what the source holds (NULL: never).
    synced_at   timestamptz,
    UNIQUE (corpus, kind, location)
);

-- The uploads already kept (014) belong to their corpus's upload source.
INSERT INTO sources (id, corpus, kind, location)
SELECT DISTINCT md5('upload:' || corpus), corpus, 'upload', '' FROM documents;

-- `path` is the document's name within its corpus, source-relative and unique in the corpus: a folder's file
-- at its relative path (so its passages stay `{file}#{slug}`), an upload under its random id
-- (`{id}/{file name}`), so that two uploads of one file name never share a passage id.
ALTER TABLE documents
    ADD COLUMN source_id text REFERENCES sources (id) ON DELETE CASCADE,
    ADD COLUMN path text;
UPDATE documents SET source_id = md5('upload:' || corpus),
    path = id || '/' || coalesce(nullif(regexp_replace(file_name, '^.*[\\/]', ''), ''), 'document');
ALTER TABLE documents ALTER COLUMN source_id SET NOT NULL, ALTER COLUMN path SET NOT NULL;
ALTER TABLE documents ADD CONSTRAINT documents_corpus_path_key UNIQUE (corpus, path);
CREATE INDEX documents_source_idx ON documents (source_id);
