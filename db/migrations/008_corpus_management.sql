-- Corpora a user can manage (issue 34).
--
-- The answer cache says which corpus each answer is from, so removing a corpus removes its cached answers
-- and nothing else. Its key is a hash, so the corpus is taken from the cached response itself; a row whose
-- response doesn't name it (none should) stays NULL and simply expires.
ALTER TABLE answer_cache ADD COLUMN corpus text;
UPDATE answer_cache SET corpus = response->>'corpus';
CREATE INDEX answer_cache_corpus_idx ON answer_cache (corpus);

-- An ingest writes here, batch by batch, and the corpus switches over in one final transaction that moves
-- the rows into passages and passage_sentences. Nothing here is ever served. A row whose `embedding` is
-- NULL is a passage whose stored vector is still right (its content and model are unchanged): only where
-- it now stands is staged. An interrupted ingest finds its rows here and embeds only what is missing.
CREATE TABLE staged_passages (
    corpus          text NOT NULL,
    id              text NOT NULL,
    source          text NOT NULL,
    heading         text NOT NULL,
    position        integer NOT NULL,
    text            text NOT NULL,
    token_count     integer NOT NULL CHECK (token_count >= 0),
    content_hash    text NOT NULL,
    first_page      integer,
    last_page       integer,
    embedding       vector(384),
    embedding_model text NOT NULL,
    -- Whether this passage's sentences are staged too (for segmenter `sentences_segmenter`).
    sentences_segmenter text,
    staged_at       timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (corpus, id)
);

CREATE TABLE staged_sentences (
    corpus          text NOT NULL,
    passage_id      text NOT NULL,
    segmenter       text NOT NULL,
    ordinal         integer NOT NULL CHECK (ordinal >= 0),
    start_char      integer NOT NULL CHECK (start_char >= 0),
    end_char        integer NOT NULL CHECK (end_char > start_char),
    embedding_model text NOT NULL,
    embedding       vector(384) NOT NULL,
    PRIMARY KEY (corpus, passage_id, segmenter, ordinal),
    FOREIGN KEY (corpus, passage_id) REFERENCES staged_passages (corpus, id) ON DELETE CASCADE
);

-- Vectors of single words, for the verifier's soft term matching ("age" answers "how old"): computed at
-- ingest for the words the passages use, and read at start-up instead of embedding the corpus's vocabulary
-- again. A word's vector depends on the model alone, so the table is shared by every corpus.
CREATE TABLE word_vectors (
    embedding_model text NOT NULL,
    word            text NOT NULL,
    embedding       vector(384) NOT NULL,
    PRIMARY KEY (embedding_model, word)
);
