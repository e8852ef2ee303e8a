"""The settings' groups, one per part of the service that reads them, each field declaring its environment
variable (after the group's ENV_PREFIX), what it means and its bounds, with `env`."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal

import msgspec

# The checkout (or image) root: db/, corpus/ and web/ sit beside api/, the folder this package is in.
REPO_ROOT = Path(__file__).resolve().parents[3]

ProfileName = Literal["local", "anthropic", "openai"]
RetrievalMode = Literal["vector", "hybrid"]
# The local verifier, and the local generator, each: hand-built features over the embedder, or the trained
# reader (generator) and cross-encoder (verifier).
LocalModels = Literal["features", "trained"]
# Who judges support and relevance: the rules alone, a model over an OpenAI-compatible server (JUDGE_BASE_URL),
# or Qwen2.5-Coder-1.5B that the service assembles and serves itself on loopback (`provenance.claims.judge`),
# or a Claude model other than the writer on Anthropic's API.
JudgeName = Literal["rules", "openai", "anthropic", "local"]
# Whose relevance counts when a judge reads the claims (JUDGE_RELEVANCE): claims/verdict.py.
JudgeRelevance = Literal["judge", "veto", "firm"]
# Where a model profile's claims come from (CLAIMS_FROM): the model's own call, which gives them with its
# verdicts, or the answer's sentences (the local decomposer), judged by the local verifier (and the reading
# judge, when JUDGE sets one) alone: one model call fewer.
ClaimsFrom = Literal["model", "sentences"]


def _cores() -> int:
    # The cores this process may run on (a container's CPU set), not the host's count.
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 2


def env(name: str, help: str, *, shown_default: str | None = None, **bounds: Any) -> msgspec.Meta:
    """A field's environment variable (after its group's ENV_PREFIX), what it means, and its bounds (msgspec's
    gt, ge, lt, le, checked by load_settings); `shown_default` is how the README states a default that isn't a
    plain value."""
    extra: dict[str, str] = {"env": name} | ({"default": shown_default} if shown_default else {})
    meta: msgspec.Meta = msgspec.Meta(description=help, extra=extra, **bounds)
    return meta


class ServerSettings(msgspec.Struct, frozen=True, kw_only=True):
    """The HTTP edge: where to listen, what a request may be, and admission to the pipeline."""

    ENV_PREFIX: ClassVar[str] = ""

    host: Annotated[str, env("HOST", "the address to serve on")] = "127.0.0.1"
    port: Annotated[
        int, env("PORT", "the port to serve on; 0: any free port, which `provenance serve` prints", ge=0, le=65535)
    ] = 8000
    log_level: Annotated[
        str,
        env(
            "LOG_LEVEL",
            "JSON logs on stderr; `info` logs every request, `debug` also each outgoing HTTP call",
            shown_default="`info` (`warning` under `make run`)",
        ),
    ] = "info"
    cors_origins: Annotated[tuple[str, ...], env("CORS_ORIGINS", "origins allowed to call the API from a browser")] = ()
    max_question_chars: Annotated[int, env("MAX_QUESTION_CHARS", "the longest question accepted", ge=1)] = 500
    request_max_body_bytes: Annotated[int, env("REQUEST_MAX_BODY_BYTES", "the largest JSON body", ge=1)] = 65_536
    request_read_timeout_s: Annotated[
        float, env("REQUEST_READ_TIMEOUT_S", "how long a request's body may take to arrive", gt=0)
    ] = 10.0
    # From a connection's opening (or a request's first byte on a kept-alive one) to the end of the
    # request's headers; past it the connection is closed (api/provenance/http/uvicorn_protocols.py).
    request_header_timeout_s: Annotated[
        float, env("REQUEST_HEADER_TIMEOUT_S", "how long a request's headers may take to arrive", gt=0)
    ] = 10.0
    # uvicorn's own default is 5 s. Behind a proxy or load balancer that keeps idle upstream connections
    # longer than this, a request it sends just as the server closes one fails (a 502); set it above theirs.
    keep_alive_s: Annotated[
        int, env("KEEP_ALIVE_S", "seconds an idle kept-alive connection stays open; above a proxy's idle timeout", ge=1)
    ] = 5
    # Admission control for uncached /ask: pipelines run at once, questions allowed to wait, and how long.
    # Throughput stops growing at about one pipeline per core (docs/reliability.md, "Overload"); more at
    # once only makes each slower.
    ask_concurrency: Annotated[
        int, env("ASK_CONCURRENCY", "uncached questions answered at once", shown_default="cores", ge=1)
    ] = msgspec.field(default_factory=_cores)
    ask_queue_max: Annotated[int, env("ASK_QUEUE_MAX", "how many more questions may wait for one", ge=0)] = 32
    ask_queue_timeout_s: Annotated[
        float, env("ASK_QUEUE_TIMEOUT_S", "how long a question may wait before `503 overloaded`", gt=0)
    ] = 5.0


class DatabaseSettings(msgspec.Struct, frozen=True, kw_only=True):
    ENV_PREFIX: ClassVar[str] = ""

    url: Annotated[
        str | None,
        env("DATABASE_URL", "a Postgres with pgvector", shown_default="unset: embedded Postgres in `.data/pg`"),
    ] = None
    schema: Annotated[str, env("DB_SCHEMA", "the schema the tables live in (a plain identifier)")] = "public"
    pool_min: Annotated[int, env("DB_POOL_MIN", "connections the pool keeps open", ge=1)] = 1
    pool_max: Annotated[int, env("DB_POOL_MAX", "the most connections the pool opens", ge=1)] = 10
    timeout_s: Annotated[float, env("DB_TIMEOUT_S", "the longest one statement may take", gt=0)] = 2.0


class EmbeddingSettings(msgspec.Struct, frozen=True, kw_only=True):
    ENV_PREFIX: ClassVar[str] = "EMBED_"

    model: Annotated[str, env("MODEL", "see [Embedding models](#embedding-models)")] = "local/all-minilm-l6-v2-int8"
    threads: Annotated[int, env("THREADS", "the embedding model's threads", ge=1)] = 2
    batch_size: Annotated[int, env("BATCH_SIZE", "the most texts embedded in one model call", ge=1)] = 32
    # How long a question's embedding waits for other requests' to run with it in one batch (and repeated
    # texts within a request are embedded once). 0 turns both off: one model call per embedding, in turn.
    batch_wait_ms: Annotated[
        float,
        env(
            "BATCH_WAIT_MS",
            "how long a question's embedding waits for concurrent requests' to run with it in one batch (and "
            "each request embeds its question once, for every stage); `0` turns both off",
            ge=0,
        ),
    ] = 2.0


class IngestSettings(msgspec.Struct, frozen=True, kw_only=True):
    ENV_PREFIX: ClassVar[str] = ""

    corpus_dir: Annotated[Path, env("CORPUS_DIR", "what `make run` ingests, as the corpus `default`")] = (
        REPO_ROOT / "corpus"
    )
    chunk_max_tokens: Annotated[int, env("CHUNK_MAX_TOKENS", "the longest passage, in tokens", ge=32)] = 256
    workers: Annotated[
        int,
        env(
            "INGEST_WORKERS",
            "ingest workers inside `provenance serve`, taking upload jobs from the queue in Postgres; `0` turns "
            "them off (`provenance worker` takes them)",
            ge=0,
        ),
    ] = 1
    # Every core by default: the threads run INGEST_NICE below the API's, so a question takes a core from them
    # at once, and a job takes what questions leave (issue 45, docs/benchmarks.md).
    threads: Annotated[
        int,
        env(
            "INGEST_THREADS",
            "each in-server ingest worker's embedding threads, each with a model of its own, below `/ask` on the "
            "CPU (INGEST_NICE): a job takes the cores questions leave",
            shown_default="cores",
            ge=1,
        ),
    ] = msgspec.field(default_factory=_cores)
    nice: Annotated[
        int,
        env(
            "INGEST_NICE",
            "how far below `/ask` ingest runs on the CPU (a nice increment, 0-19): an in-server worker's embedding "
            "thread, and the whole `provenance worker` process; `0` runs them as the API runs",
            ge=0,
            le=19,
        ),
    ] = 10
    upload_max_file_bytes: Annotated[
        int, env("UPLOAD_MAX_FILE_BYTES", "an uploaded file's limit: a larger one fails in its job", ge=1)
    ] = 25_000_000
    upload_max_files: Annotated[int, env("UPLOAD_MAX_FILES", "the most files in one upload, else `413`", ge=1)] = 20
    upload_max_request_bytes: Annotated[
        int, env("UPLOAD_MAX_REQUEST_BYTES", "the most bytes in one upload request, else `413`", ge=1)
    ] = 100_000_000
    upload_max_expanded_bytes: Annotated[
        int,
        env(
            "UPLOAD_MAX_EXPANDED_BYTES",
            "what one uploaded file may inflate to (a DOCX's members, a PDF's streams): past it the file fails",
            ge=1,
        ),
    ] = 200_000_000
    upload_max_ratio: Annotated[
        int, env("UPLOAD_MAX_RATIO", "how many times its own size an uploaded file may inflate to", ge=1)
    ] = 100
    upload_max_pdf_pages: Annotated[
        int, env("UPLOAD_MAX_PDF_PAGES", "the most pages an uploaded PDF may have", ge=1)
    ] = 2000
    upload_rate_per_hour: Annotated[
        int, env("UPLOAD_RATE_PER_HOUR", "uploads per API key per UTC hour, else `429` (`0`: no limit)", ge=0)
    ] = 60
    corpus_max_passages: Annotated[
        int,
        env(
            "CORPUS_MAX_PASSAGES",
            "passages one corpus may hold: an upload that would pass it fails its new documents with the reason",
            ge=1,
        ),
    ] = 200_000


class SourcesSettings(msgspec.Struct, frozen=True, kw_only=True):
    """The site crawler's bounds (`provenance.sources`). Politeness is per host: at most `concurrency`
    requests at once, their starts at least `delay_s` apart (or robots.txt's Crawl-delay, if longer)."""

    ENV_PREFIX: ClassVar[str] = "SOURCES_"

    max_pages: Annotated[
        int, env("MAX_PAGES", "pages fetched per sync of a site (see [docs/crawling.md](docs/crawling.md))", ge=1)
    ] = 2000
    max_depth: Annotated[int, env("MAX_DEPTH", "link hops from the start URL", ge=0)] = 10
    concurrency: Annotated[int, env("CONCURRENCY", "requests at once to one host (1 or 2)", ge=1, le=2)] = 1
    delay_s: Annotated[
        float,
        env(
            "DELAY_S",
            "the least time between two requests' starts to one host (robots.txt's `Crawl-delay` wins when longer)",
            ge=0,
        ),
    ] = 1.0
    page_timeout_s: Annotated[
        float, env("PAGE_TIMEOUT_S", "one page's whole fetch, headers to last byte (a slow drip fails at it)", gt=0)
    ] = 20.0
    max_page_bytes: Annotated[int, env("MAX_PAGE_BYTES", "a page's largest body", ge=1)] = 5_000_000
    max_redirects: Annotated[int, env("MAX_REDIRECTS", "same-origin redirects followed per page", ge=0, le=20)] = 5
    max_queries_per_path: Annotated[
        int,
        env("MAX_QUERIES_PER_PATH", "distinct query strings crawled per path (calendars, faceted search)", ge=1),
    ] = 20
    # Private, loopback and link-local addresses are refused after resolution, so that a shared deployment
    # is not a way into its own network; tests and a crawl of an intranet on one's own machine allow them.
    allow_private: Annotated[
        bool,
        env(
            "ALLOW_PRIVATE",
            "fetch private, loopback and link-local addresses (checked on the resolved IP); leave off on a shared "
            "deployment, so the crawler is no way into its own network",
        ),
    ] = False


class RetrievalSettings(msgspec.Struct, frozen=True, kw_only=True):
    ENV_PREFIX: ClassVar[str] = ""

    k: Annotated[int, env("RETRIEVAL_K", "the passages retrieved (top-k)", ge=1, le=50)] = 4
    mode: Annotated[
        RetrievalMode, env("RETRIEVAL_MODE", "`vector` or `hybrid` (vector + full-text, their scores fused)")
    ] = "hybrid"
    hnsw_min_passages: Annotated[
        int, env("HNSW_MIN_PASSAGES", "from how many passages a corpus's vector search uses the HNSW index")
    ] = 20_000


class GateSettings(msgspec.Struct, frozen=True, kw_only=True):
    """Two judgments, gated apart. Support: the mean claim's and the weakest claim's support. Relevance: the
    answer answers the question when its most relevant claim reaches `relevance`; between
    `relevance_uncertain` and that, whether it answers is uncertain (the refusal says so)."""

    ENV_PREFIX: ClassVar[str] = "GATE_"

    threshold: Annotated[float, env("THRESHOLD", "the support the mean claim must reach", ge=0, le=1)] = 0.70
    min_claim: Annotated[float, env("MIN_CLAIM", "the support the weakest claim must reach", ge=0, le=1)] = 0.40
    relevance: Annotated[float, env("RELEVANCE", "the relevance the most relevant claim must reach", ge=0, le=1)] = 0.70
    relevance_uncertain: Annotated[
        float,
        env(
            "RELEVANCE_UNCERTAIN",
            "from here up to `GATE_RELEVANCE`, the refusal says relevance was uncertain (at most `GATE_RELEVANCE`)",
            ge=0,
            le=1,
        ),
    ] = 0.40


class GuardSettings(msgspec.Struct, frozen=True, kw_only=True):
    """The bot check, rate limits, answer cache and spend cap, in the order a request meets them."""

    ENV_PREFIX: ClassVar[str] = ""

    turnstile_secret_key: Annotated[
        str | None,
        env(
            "TURNSTILE_SECRET_KEY",
            "Cloudflare Turnstile's secret, verified server-side, failing closed",
            shown_default="unset: bot check skipped (and shown as skipped)",
        ),
    ] = None
    turnstile_site_key: Annotated[
        str | None, env("TURNSTILE_SITE_KEY", "Cloudflare Turnstile's site key, for the page")
    ] = None
    turnstile_verify_url: Annotated[str, env("TURNSTILE_VERIFY_URL", "where tokens are verified")] = (
        "https://challenges.cloudflare.com/turnstile/v0/siteverify"
    )
    turnstile_timeout_s: Annotated[float, env("TURNSTILE_TIMEOUT_S", "the longest verification", gt=0)] = 5.0
    rate_limit_per_hour: Annotated[
        int,
        env(
            "RATE_LIMIT_PER_HOUR",
            "new questions per UTC hour per client IP (cached answers don't count; a request that fails on our "
            "side is given back); `0` turns it off",
            ge=0,
        ),
    ] = 60
    rate_limit_per_hour_api_key: Annotated[int, env("RATE_LIMIT_PER_HOUR_API_KEY", "the same, per API key", ge=0)] = 600
    trusted_proxies: Annotated[
        tuple[str, ...], env("TRUSTED_PROXIES", "addresses or CIDR networks whose `X-Forwarded-For` is believed")
    ] = ()
    cache_ttl_s: Annotated[
        int,
        env("CACHE_TTL_S", "answer cache lifetime (answered and refused alike; never blocked); `0` turns it off", ge=0),
    ] = 86_400
    daily_budget_usd: Annotated[
        float, env("DAILY_BUDGET_USD", "daily spend cap for paid model calls; `0` allows none", ge=0)
    ] = 5.0


class MetricsSettings(msgspec.Struct, frozen=True, kw_only=True):
    """GET /metrics: on unless turned off; read from loopback (without TRUSTED_PROXIES) or with the token."""

    ENV_PREFIX: ClassVar[str] = "METRICS_"

    enabled: Annotated[
        bool,
        env(
            "ENABLED",
            "`GET /metrics` for Prometheus (see [Metrics](#metrics)); `false` removes it and counts nothing per "
            "request",
        ),
    ] = True
    token: Annotated[
        str | None,
        env(
            "TOKEN",
            "a bearer token (16 characters or more) that opens `/metrics` from anywhere; the only way in when "
            "`TRUSTED_PROXIES` is set",
        ),
    ] = None


class FeedbackSettings(msgspec.Struct, frozen=True, kw_only=True):
    """Readers' "Was this right?" (POST /feedback): how long an answer can be rated, how often a client may
    rate, and the key that tells clients apart without keeping their addresses."""

    ENV_PREFIX: ClassVar[str] = "FEEDBACK_"

    enabled: Annotated[bool, env("ENABLED", 'readers\' "Was this right?" (`POST /feedback`)')] = True
    # Longer than the answer cache's TTL: an answer is rated when it is read, not when it was first computed.
    window_s: Annotated[int, env("WINDOW_S", "how long after it was served an answer can be rated", ge=1)] = 7 * 86_400
    rate_limit_per_hour: Annotated[int, env("RATE_LIMIT_PER_HOUR", "ratings per hour per client", ge=0)] = 30
    # Unset, one is made once and kept in the database (feedback_secret).
    hmac_key: Annotated[
        str | None,
        env(
            "HMAC_KEY",
            "the key (16 characters or more) that tells clients apart without keeping their addresses",
            shown_default="unset: made once and kept in the database",
        ),
    ] = None
    flush_ms: Annotated[
        float,
        env("FLUSH_MS", "how long served responses wait in memory before one batched write", gt=0, le=60_000),
    ] = 500.0


class ConversationSettings(msgspec.Struct, frozen=True, kw_only=True):
    """Follow-up questions (POST /ask with `conversationId`): how long a conversation is kept after its last
    turn, how many turns it may have, and how long its turns wait in memory before one batched write."""

    ENV_PREFIX: ClassVar[str] = "CONVERSATION_"

    ttl_s: Annotated[int, env("TTL_S", "how long a conversation is kept after its last turn", ge=1)] = 86_400
    max_turns: Annotated[int, env("MAX_TURNS", "the most turns one conversation may have", ge=1)] = 20
    flush_ms: Annotated[
        float, env("FLUSH_MS", "how long turns wait in memory before one batched write", gt=0, le=60_000)
    ] = 200.0


class Bounds(msgspec.Struct, frozen=True, kw_only=True):
    """The bounds of one server's calls, in seconds (and its prompt pace, in tokens a second), as
    inference.streamed_calls applies them; declared here so that the config imports nothing that runs."""

    first_token_s: float = 10.0
    prompt_tokens_per_s: float = 20.0
    gap_s: float = 15.0
    ceiling_s: float = 300.0


# A model profile's streamed calls (`provenance.inference.streamed_calls`), the same settings for each profile
# under its own prefix and with its own defaults.
CallTimeout = Annotated[
    float,
    env(
        "TIMEOUT_S",
        "the ceiling on one model call, however steadily it streams. A bound hit ends the request `blocked` with "
        "`model_error`, its detail naming the bound (see [Timeouts on progress](#timeouts-on-progress))",
        gt=0,
    ),
]
CallFirstToken = Annotated[
    float,
    env(
        "FIRST_TOKEN_S",
        "the first token is due within this plus the prompt's tokens (twice) at the same profile's "
        "`PROMPT_TOKENS_PER_S`",
        gt=0,
    ),
]
CallPromptPace = Annotated[
    float,
    env("PROMPT_TOKENS_PER_S", "the server's prompt speed (or the slower speed the calls measure)", gt=0),
]
CallTokenGap = Annotated[float, env("TOKEN_GAP_S", "the longest wait for the next token once the model writes", gt=0)]
CallRetries = Annotated[
    int,
    env(
        "MAX_RETRIES",
        "retries only for a call that failed before its response began (a dropped connection, a 5xx), never one "
        "that streamed tokens or hit a bound",
        ge=0,
        le=5,
    ),
]
CallPassageTokens = Annotated[
    int,
    env(
        "PASSAGE_TOKENS",
        "the most tokens (by our tokenizer) of passages in one call's prompt: past it each passage is cut to its "
        "sentences closest to the question, every passage kept by its id; only the prompt is cut, every check "
        "reads the passages whole. `0`: no budget, else at least 32",
        ge=0,
    ),
]


class StreamedCallSettings(msgspec.Struct, frozen=True, kw_only=True):
    """What the two model profiles share: their streamed calls' bounds, retries and prompt budget. Each
    profile gives its defaults (a hosted model's or a small local model's) and its variables' prefix."""

    ENV_PREFIX: ClassVar[str]

    timeout_s: CallTimeout
    first_token_s: CallFirstToken
    prompt_tokens_per_s: CallPromptPace
    token_gap_s: CallTokenGap
    max_retries: CallRetries
    passage_tokens: CallPassageTokens

    @property
    def bounds(self) -> Bounds:
        """The calls' bounds, from the settings of the same names."""
        return Bounds(
            first_token_s=self.first_token_s,
            prompt_tokens_per_s=self.prompt_tokens_per_s,
            gap_s=self.token_gap_s,
            ceiling_s=self.timeout_s,
        )


class AnthropicSettings(StreamedCallSettings, frozen=True, kw_only=True):
    ENV_PREFIX: ClassVar[str] = "ANTHROPIC_"

    api_key: Annotated[str | None, env("API_KEY", "the hosted profile's key")] = None
    base_url: Annotated[str | None, env("BASE_URL", "another address for Anthropic's API")] = None
    model: Annotated[str, env("MODEL", "the hosted profile's model")] = "claude-haiku-4-5"
    timeout_s: CallTimeout = 60.0
    first_token_s: CallFirstToken = 10.0
    prompt_tokens_per_s: CallPromptPace = 1000.0
    token_gap_s: CallTokenGap = 10.0
    max_retries: CallRetries = 2
    passage_tokens: CallPassageTokens = 0


class OpenAISettings(StreamedCallSettings, frozen=True, kw_only=True):
    """Any server that speaks OpenAI's chat completions: Ollama, llama.cpp's server, vLLM, OpenAI itself.
    The defaults are a small model on a few CPU cores, which reads a prompt at a few tens of tokens a second
    and writes a few tokens a second."""

    ENV_PREFIX: ClassVar[str] = "OPENAI_"

    # None is the SDK's default, OpenAI's own API.
    base_url: Annotated[
        str | None,
        env(
            "BASE_URL",
            "the `openai` profile's server (e.g. `http://127.0.0.1:11434/v1`; unset is OpenAI's own API); "
            "`PROFILE=openai` needs it or a key",
        ),
    ] = None
    # Local servers need none; the SDK insists on one, so the profile passes a placeholder.
    api_key: Annotated[
        str | None, env("API_KEY", "sent as the bearer token; local servers need none (a placeholder is sent)")
    ] = None
    model: Annotated[str | None, env("MODEL", "the model name the server knows; `PROFILE=openai` needs it")] = None
    timeout_s: CallTimeout = 300.0
    first_token_s: CallFirstToken = 15.0
    prompt_tokens_per_s: CallPromptPace = 20.0
    token_gap_s: CallTokenGap = 15.0
    max_retries: CallRetries = 1
    passage_tokens: CallPassageTokens = 512
    # A small model on CPU writes a few tokens a second, and one that loops writes until this stops it.
    max_output_tokens: Annotated[
        int,
        env(
            "MAX_OUTPUT_TOKENS",
            "the most tokens one call may write (`0`: each call's own, 1024 for the answer, 1536 for the claims; "
            "else at least 32): bounds how long a slow local model can take; a claims reply cut off by it is a "
            "`model_error`, an answer cut off by it is checked as its complete sentences",
            ge=0,
        ),
    ] = 0
    # Both 0 (a server on one's own machine): the profile makes no paid calls and the spend cap holds nothing back.
    price_input_per_mtok: Annotated[
        float, env("PRICE_INPUT_PER_MTOK", "what the server charges per million input tokens, for the spend cap", ge=0)
    ] = 0.0
    price_output_per_mtok: Annotated[
        float, env("PRICE_OUTPUT_PER_MTOK", "the same per million output tokens; both `0`: no paid calls", ge=0)
    ] = 0.0

    @property
    def priced(self) -> bool:
        return self.price_input_per_mtok > 0 or self.price_output_per_mtok > 0


class JudgeSettings(msgspec.Struct, frozen=True, kw_only=True):
    """The reading judge: a model, independent of the generator, that judges each claim's support and relevance
    over an OpenAI-compatible API or Anthropic's (`provenance.claims.judge`). Off (`rules`) by default."""

    ENV_PREFIX: ClassVar[str] = "JUDGE"

    name: Annotated[
        JudgeName,
        env(
            "",
            "who judges each claim's support and relevance: `rules` (the local verifier alone), `openai` (a model "
            "at `JUDGE_BASE_URL`), `anthropic` (a Claude model other than the writer, on Anthropic's API with "
            "`ANTHROPIC_API_KEY`: same provider, different model), or `local` (Qwen2.5-Coder-1.5B served by the "
            "service itself; see "
            "[The reading judge](#the-reading-judge))",
        ),
    ] = "rules"
    base_url: Annotated[str | None, env("_BASE_URL", "the judge's OpenAI-compatible server")] = None
    api_key: Annotated[str | None, env("_API_KEY", "the judge server's key (local servers need none)")] = None
    model: Annotated[
        str | None,
        env(
            "_MODEL",
            "the model name the judge's server knows; `JUDGE=anthropic`: `claude-sonnet-4-6` by default "
            "(`claude-haiku-4-5` when that is `ANTHROPIC_MODEL`), never the writer's own model, and the key and "
            "server default to `ANTHROPIC_API_KEY` and `ANTHROPIC_BASE_URL`",
        ),
    ] = None
    # One judgment is one output token; on two CPU cores the prompt takes a few seconds.
    timeout_s: Annotated[
        float, env("_TIMEOUT_S", "per judgment; a judge that fails ends the request `blocked` with `judge_error`", gt=0)
    ] = 30.0
    max_retries: Annotated[int, env("_MAX_RETRIES", "retries of one judgment", ge=0, le=5)] = 1
    candidates: Annotated[
        int,
        env(
            "_CANDIDATES",
            "the most passages one claim's support is judged against, best first by the rules",
            ge=1,
            le=8,
        ),
    ] = 2
    # `veto`: the higher of the judge's and the rules' unless the judge says No (P(Yes) under one half), when
    # the judge's stands; `firm` (the default, evals/judge-firm/): the same, with the writer's own verdict among
    # the rules' and only a firm No standing (claims/verdict.py FIRM_NO).
    relevance: Annotated[
        JudgeRelevance,
        env(
            "_RELEVANCE",
            "whose relevance counts: `judge` (the judge's verdict), `veto` (the higher of the judge's and the "
            "rules', unless the judge says No, when the judge's stands) or `firm` (the higher of the judge's, the "
            "rules' and the writer's own, unless the judge says a firm No: P(Yes) at most 0.2)",
        ),
    ] = "firm"
    price_input_per_mtok: Annotated[
        float,
        env(
            "_PRICE_INPUT_PER_MTOK",
            "what the judge's server charges per million input tokens; `JUDGE=anthropic` is charged at its "
            "model's list price unless these are set (a model missing from the list at the dearest listed price)",
            ge=0,
        ),
    ] = 0.0
    price_output_per_mtok: Annotated[
        float, env("_PRICE_OUTPUT_PER_MTOK", "the same per million output tokens", ge=0)
    ] = 0.0
    threads: Annotated[int, env("_THREADS", "`JUDGE=local`: the model server's threads", ge=1)] = 2
    ctx: Annotated[int, env("_CTX", "`JUDGE=local`: the model server's context, in tokens", ge=512)] = 4096

    @property
    def enabled(self) -> bool:
        return self.name != "rules"

    @property
    def priced(self) -> bool:
        return self.price_input_per_mtok > 0 or self.price_output_per_mtok > 0
