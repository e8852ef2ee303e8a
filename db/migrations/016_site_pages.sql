-- A crawled site's pages (issue 46): what the last sync kept of each URL, so that the next one asks for it
-- conditionally (ETag, Last-Modified), knows an unchanged body by its hash, and goes on through its links on a
-- 304. `document_id` is the document holding the page's text (NULL for a URL that names another as its
-- rel=canonical); `anchors` its headings' ids, for a citation's #fragment.
CREATE TABLE site_pages (
    source_id   text NOT NULL REFERENCES sources (id) ON DELETE CASCADE,
    url         text NOT NULL,
    document_id text,
    known       jsonb NOT NULL,
    anchors     jsonb NOT NULL DEFAULT '{}'::jsonb,
    synced_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (source_id, url)
);
