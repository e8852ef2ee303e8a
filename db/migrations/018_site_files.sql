-- A crawled site's robots.txt and sitemaps as the last sync read them (issue 46): their validators, so that a
-- re-sync asks for them conditionally as it asks for every page, and their body, which a 304 reads again.
CREATE TABLE site_files (
    source_id     text NOT NULL REFERENCES sources (id) ON DELETE CASCADE,
    url           text NOT NULL,
    etag          text,
    last_modified text,
    body          bytea NOT NULL,
    synced_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (source_id, url)
);
