-- One row per sentence unit of a passage, decided once at ingest: its span (code-point offsets into
-- passages.text) and, when computed, its vector. Keyed by the segmenter's version and the embedding model,
-- so a change of either is a recompute, never a silent mix.
CREATE TABLE passage_sentences (
    corpus          text NOT NULL,
    passage_id      text NOT NULL,
    segmenter       text NOT NULL,
    ordinal         integer NOT NULL CHECK (ordinal >= 0),
    start_char      integer NOT NULL CHECK (start_char >= 0),
    end_char        integer NOT NULL CHECK (end_char > start_char),
    embedding_model text,
    embedding       vector(384),
    PRIMARY KEY (corpus, passage_id, segmenter, ordinal),
    FOREIGN KEY (corpus, passage_id) REFERENCES passages (corpus, id) ON DELETE CASCADE
);
