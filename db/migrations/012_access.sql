-- Who may read what (issue 45). A key has a role: `admin` may do everything; a `reader` or `editor` key reads
-- the public corpora and, of the private ones, those it is granted, and writes only where its grant says
-- `editor`. Keys made before this become readers, which is what they could do: ask and give feedback.
ALTER TABLE api_keys ADD COLUMN role text NOT NULL DEFAULT 'reader'
    CONSTRAINT api_keys_role_check CHECK (role IN ('reader', 'editor', 'admin'));

-- A corpus as it was created (`provenance corpora create`, POST /corpora), before or after it holds
-- documents. A corpus without a row here is public: that is what `provenance ingest` has always made.
-- A row outlives a removed corpus's passages only until the corpus is removed (provenance.access.store).
CREATE TABLE corpus_access (
    name        text PRIMARY KEY CONSTRAINT corpus_access_name_check CHECK (name ~ '^[a-z0-9][a-z0-9_-]{0,39}$'),
    visibility  text NOT NULL DEFAULT 'public' CONSTRAINT corpus_access_visibility_check
        CHECK (visibility IN ('public', 'private')),
    title       text NOT NULL DEFAULT '',
    created_at  timestamptz NOT NULL DEFAULT now()
);
-- Every request reads the private names (what the client may not see), so they have an index of their own.
CREATE INDEX corpus_access_private_idx ON corpus_access (name) WHERE visibility = 'private';

-- One key's right on one corpus. A grant names no key but its own: a revoked key's grants stay, unused.
CREATE TABLE key_grants (
    key_name    text NOT NULL REFERENCES api_keys (name) ON DELETE CASCADE,
    corpus      text NOT NULL,
    role        text NOT NULL CONSTRAINT key_grants_role_check CHECK (role IN ('reader', 'editor')),
    granted_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (key_name, corpus)
);
