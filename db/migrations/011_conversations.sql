-- Follow-up questions (issue 44): a conversation and its turns, each turn an /ask response of its own.
--
-- The owner is the client as POST /feedback knows it: an HMAC of its API key's name or of its address,
-- never the address. The corpus is kept as plain text, as feedback keeps it: a conversation is pinned to
-- the corpus its first turn asked, and a corpus removed later only makes its follow-ups refuse.
-- Written in batches, off the request path (provenance.conversations.log.TurnLog); rows past expires_at are
-- never read, and swept occasionally as the guards' dead rows are.
CREATE TABLE conversations (
    id          text PRIMARY KEY,
    owner_hash  text NOT NULL,
    corpus      text NOT NULL,
    created_at  timestamptz NOT NULL,
    expires_at  timestamptz NOT NULL
);
CREATE INDEX conversations_expires_idx ON conversations (expires_at);

-- One row per turn, numbered from 1. A refused or blocked turn keeps no answer text, as its response doesn't.
-- `passage_ids`: the passages the turn's answer cited, carried into the next turn's candidates.
CREATE TABLE conversation_turns (
    conversation_id      text NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    turn                 integer NOT NULL CHECK (turn >= 1),
    request_id           text NOT NULL,
    question             text NOT NULL,
    standalone_question  text NOT NULL,
    status               text NOT NULL CHECK (status IN ('answered', 'refused', 'blocked')),
    reason               text,
    answer               text,
    citations            jsonb NOT NULL DEFAULT '[]',
    passage_ids          text[] NOT NULL DEFAULT '{}',
    created_at           timestamptz NOT NULL,
    PRIMARY KEY (conversation_id, turn),
    CONSTRAINT conversation_turns_answer_only_when_answered CHECK (status = 'answered' OR answer IS NULL)
);
