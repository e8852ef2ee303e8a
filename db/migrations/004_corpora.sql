-- Named corpora side by side. Every passage belongs to one corpus, and corpus_state holds one row per
-- corpus instead of one for the whole database. What was there becomes the corpus "default" (what
-- `make run` serves); the column defaults keep it so for writers that don't name a corpus.
ALTER TABLE corpus_state DROP CONSTRAINT corpus_state_pkey;
ALTER TABLE corpus_state DROP COLUMN singleton;
ALTER TABLE corpus_state
    ADD COLUMN name text NOT NULL DEFAULT 'default' CONSTRAINT corpus_state_name_check
        CHECK (name ~ '^[a-z0-9][a-z0-9_-]{0,39}$'),
    -- The folder it was ingested from: ingesting another folder into it must be asked for (--replace).
    ADD COLUMN source_dir text,
    -- What the page says the corpus is, from the corpus folder itself (README.md, examples file, headings).
    ADD COLUMN title text NOT NULL DEFAULT '',
    ADD COLUMN description text NOT NULL DEFAULT '',
    ADD COLUMN examples jsonb NOT NULL DEFAULT '[]'::jsonb;
ALTER TABLE corpus_state ADD PRIMARY KEY (name);

-- Two corpora may hold the same file names, so a passage id is unique within its corpus only.
ALTER TABLE passages ADD COLUMN corpus text NOT NULL DEFAULT 'default';
ALTER TABLE passages DROP CONSTRAINT passages_pkey;
ALTER TABLE passages ADD PRIMARY KEY (corpus, id);
DROP INDEX passages_source_idx;
CREATE INDEX passages_corpus_source_idx ON passages (corpus, source);
