-- A served response's envelope is kept as text, cast to jsonb where it is read (issue 48).
--
-- The envelope (request id, total time, the door's stages: 010_response_bodies.sql) is written for every
-- response served, cached ones included, on the cores that serve them, and read only when a reader rates an
-- answer or an operator looks. As jsonb each row's was parsed and converted on the write; as text it is
-- copied. recent_responses reads it as before, so rating and exports see the same documents.

DROP VIEW recent_responses;
ALTER TABLE served_responses ALTER COLUMN envelope TYPE text USING envelope::text;

-- As in 010_response_bodies.sql (one table in FROM, the bodies in scalar subqueries, so that the view stays
-- updatable in its plain columns), with the envelope cast where it is merged.
CREATE VIEW recent_responses AS
SELECT r.request_id, r.question, r.corpus, r.corpus_version, r.status, r.reason, r.cached,
       (SELECT b.settings FROM response_bodies b WHERE b.digest = r.body_digest) AS settings,
       (SELECT (b.body || (e.envelope - 'stages'))
                   || jsonb_build_object('stages', (b.body -> 'stages') || coalesce(e.envelope -> 'stages', '{}'))
        FROM response_bodies b, LATERAL (SELECT r.envelope::jsonb AS envelope) e
        WHERE b.digest = r.body_digest) AS response,
       r.served_at
FROM served_responses r;
