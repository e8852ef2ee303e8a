-- Answer cache: full AskResponse documents, keyed by normalised question + corpus version + settings hash.
CREATE TABLE answer_cache (
    cache_key   text PRIMARY KEY,
    question    text NOT NULL,
    response    jsonb NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    expires_at  timestamptz NOT NULL
);
CREATE INDEX answer_cache_expires_idx ON answer_cache (expires_at);

-- Hourly fixed-window counters per client (an IP or an API key name).
CREATE TABLE rate_limits (
    client_key    text NOT NULL,
    window_start  timestamptz NOT NULL,
    count         integer NOT NULL,
    PRIMARY KEY (client_key, window_start)
);

-- Daily spend: `spent_usd` is settled cost, `reserved_usd` is estimates held by calls in flight.
CREATE TABLE spend_ledger (
    day           date PRIMARY KEY,
    spent_usd     numeric(12, 6) NOT NULL DEFAULT 0,
    reserved_usd  numeric(12, 6) NOT NULL DEFAULT 0,
    calls         integer NOT NULL DEFAULT 0,
    updated_at    timestamptz NOT NULL DEFAULT now()
);

-- API keys for clients without a browser; only a SHA-256 of the key is kept.
CREATE TABLE api_keys (
    name        text PRIMARY KEY,
    key_hash    text NOT NULL UNIQUE,
    created_at  timestamptz NOT NULL DEFAULT now(),
    revoked_at  timestamptz
);
