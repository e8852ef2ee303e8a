-- Lexemes so common in a corpus that ranking every passage holding one costs retrieval more than it tells
-- (issue 34): hybrid search ORs the question's lexemes, and full-text ranking grew with the passages that
-- share any one of them (uncached p50 751 ms at 100k passages against 137 ms at 2k). A lexeme in more than
-- 2,000 of a corpus's passages (`store.COMMON_LEXEME_PASSAGES`) is listed here and left out of the text
-- query; a smaller corpus has none, so its retrieval is what it was. Refreshed at every corpus switch.
CREATE TABLE common_lexemes (
    corpus   text NOT NULL,
    lexeme   text NOT NULL,
    passages integer NOT NULL,
    PRIMARY KEY (corpus, lexeme)
);

-- The corpora already ingested, counted once.
DO $$
DECLARE
    c record;
BEGIN
    FOR c IN SELECT corpus FROM passages GROUP BY corpus HAVING count(*) > 2000 LOOP
        INSERT INTO common_lexemes (corpus, lexeme, passages)
        SELECT c.corpus, word, ndoc
        FROM ts_stat(format('SELECT tsv FROM passages WHERE corpus = %L', c.corpus))
        WHERE ndoc > 2000;
    END LOOP;
END
$$;
