-- Where in its file a passage is, for paged sources (PDF): the pages it came from, first to last, counted
-- from 1 as a viewer's page box counts them. NULL for sources without pages (Markdown, text, HTML, Word).
-- A range rather than an array: a passage is one stretch of its document.
ALTER TABLE passages
    ADD COLUMN first_page integer,
    ADD COLUMN last_page integer,
    ADD CONSTRAINT passages_pages_check CHECK (
        (first_page IS NULL AND last_page IS NULL)
        OR (first_page >= 1 AND last_page >= first_page)
    );
