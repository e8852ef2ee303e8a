"""One typed settings object, read from the environment and validated once at start-up. Its settings are
grouped by the part of the service that reads them (`settings.database.timeout_s`, `settings.gate.threshold`);
each comes from the environment variable VARIABLES names (DB_TIMEOUT_S, GATE_THRESHOLD)."""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Literal

import msgspec

from provenance.errors import SettingsError

# The checkout (or image) root: db/, corpus/ and web/ sit beside api/, the folder this package is in.
REPO_ROOT = Path(__file__).resolve().parents[2]

ProfileName = Literal["local", "anthropic", "openai"]
RetrievalMode = Literal["vector", "hybrid"]
# The local verifier, and the local generator, each: hand-built features over the embedder, or the trained
# reader (generator) and cross-encoder (verifier).
LocalModels = Literal["features", "trained"]
# Who judges support and relevance: the rules alone, a model over an OpenAI-compatible server (JUDGE_BASE_URL),
# or Qwen2.5-Coder-1.5B that the service assembles and serves itself on loopback (`provenance.judges`).
JudgeName = Literal["rules", "openai", "anthropic", "local"]
# Whose relevance counts when a judge reads the claims (JUDGE_RELEVANCE): verifiers/judged.py.
JudgeRelevance = Literal["judge", "veto"]
# Where a model profile's claims come from (CLAIMS_FROM): the model's own call, which gives them with its
# verdicts, or the answer's sentences (the local decomposer), judged by the local verifier (and the reading
# judge, when JUDGE sets one) alone: one model call fewer.
ClaimsFrom = Literal["model", "sentences"]


METRICS_TOKEN_MIN_CHARS = 16


def _cores() -> int:
    # The cores this process may run on (a container's CPU set), not the host's count.
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 2


class ServerSettings(msgspec.Struct, frozen=True, kw_only=True):
    """The HTTP edge: where to listen, what a request may be, and admission to the pipeline."""

    host: str = "127.0.0.1"
    port: int = 8000
    log_level: str = "info"
    cors_origins: tuple[str, ...] = ()
    max_question_chars: int = 500
    request_max_body_bytes: int = 65_536
    request_read_timeout_s: float = 10.0
    # From a connection's opening (or a request's first byte on a kept-alive one) to the end of the
    # request's headers; past it the connection is closed (api/provenance/http/uvicorn_protocols.py).
    request_header_timeout_s: float = 10.0
    # Admission control for uncached /ask: pipelines run at once, questions allowed to wait, and how long.
    # Throughput stops growing at about one pipeline per core (docs/reliability.md, "Overload"); more at
    # once only makes each slower.
    ask_concurrency: int = msgspec.field(default_factory=_cores)
    ask_queue_max: int = 32
    ask_queue_timeout_s: float = 5.0


class DatabaseSettings(msgspec.Struct, frozen=True, kw_only=True):
    url: str | None = None
    schema: str = "public"
    pool_min: int = 1
    pool_max: int = 10
    timeout_s: float = 2.0


class EmbeddingSettings(msgspec.Struct, frozen=True, kw_only=True):
    model: str = "local/all-minilm-l6-v2-int8"
    threads: int = 2
    batch_size: int = 32
    # How long a question's embedding waits for other requests' to run with it in one batch (and repeated
    # texts within a request are embedded once). 0 turns both off: one model call per embedding, in turn.
    batch_wait_ms: float = 2.0


class IngestSettings(msgspec.Struct, frozen=True, kw_only=True):
    corpus_dir: Path = REPO_ROOT / "corpus"
    chunk_max_tokens: int = 256
    # Ingest workers inside `provenance serve`; 0 leaves the queue to `provenance worker`.
    workers: int = 1
    upload_max_file_bytes: int = 25_000_000
    upload_max_files: int = 20
    upload_max_request_bytes: int = 100_000_000


class SourcesSettings(msgspec.Struct, frozen=True, kw_only=True):
    """The site crawler's bounds (`provenance.sources`). Politeness is per host: at most `concurrency`
    requests at once, their starts at least `delay_s` apart (or robots.txt's Crawl-delay, if longer)."""

    max_pages: int = 2000
    max_depth: int = 10
    concurrency: int = 1
    delay_s: float = 1.0
    page_timeout_s: float = 20.0
    max_page_bytes: int = 5_000_000
    max_redirects: int = 5
    max_queries_per_path: int = 20
    # Private, loopback and link-local addresses are refused after resolution, so that a shared deployment
    # is not a way into its own network; tests and a crawl of an intranet on one's own machine allow them.
    allow_private: bool = False


class RetrievalSettings(msgspec.Struct, frozen=True, kw_only=True):
    k: int = 4
    mode: RetrievalMode = "hybrid"
    hnsw_min_passages: int = 20_000


class GateSettings(msgspec.Struct, frozen=True, kw_only=True):
    """Two judgments, gated apart. Support: the mean claim's and the weakest claim's support. Relevance: the
    answer answers the question when its most relevant claim reaches `relevance`; between
    `relevance_uncertain` and that, whether it answers is uncertain (the refusal says so)."""

    threshold: float = 0.70
    min_claim: float = 0.40
    relevance: float = 0.70
    relevance_uncertain: float = 0.40


class GuardSettings(msgspec.Struct, frozen=True, kw_only=True):
    """The bot check, rate limits, answer cache and spend cap, in the order a request meets them."""

    turnstile_secret_key: str | None = None
    turnstile_site_key: str | None = None
    turnstile_verify_url: str = "https://challenges.cloudflare.com/turnstile/v0/siteverify"
    turnstile_timeout_s: float = 5.0
    rate_limit_per_hour: int = 60
    rate_limit_per_hour_api_key: int = 600
    trusted_proxies: tuple[str, ...] = ()
    cache_ttl_s: int = 86_400
    daily_budget_usd: float = 5.0


class MetricsSettings(msgspec.Struct, frozen=True, kw_only=True):
    """GET /metrics: on unless turned off; read from loopback (without TRUSTED_PROXIES) or with the token."""

    enabled: bool = True
    token: str | None = None


class FeedbackSettings(msgspec.Struct, frozen=True, kw_only=True):
    """Readers' "Was this right?" (POST /feedback): how long an answer can be rated, how often a client may
    rate, and the key that tells clients apart without keeping their addresses."""

    enabled: bool = True
    # Longer than the answer cache's TTL: an answer is rated when it is read, not when it was first computed.
    window_s: int = 7 * 86_400
    rate_limit_per_hour: int = 30
    # HMAC key for client identities; unset, one is made once and kept in the database (feedback_secret).
    hmac_key: str | None = None
    # How long served responses wait in memory before one batched write keeps them all.
    flush_ms: float = 500.0


class Bounds(msgspec.Struct, frozen=True, kw_only=True):
    """The bounds of one server's calls, in seconds (and its prompt pace, in tokens a second), as
    inference.streamed_calls applies them; declared here so that the config imports nothing that runs."""

    first_token_s: float = 10.0
    prompt_tokens_per_s: float = 20.0
    gap_s: float = 15.0
    ceiling_s: float = 300.0


class ConversationSettings(msgspec.Struct, frozen=True, kw_only=True):
    """Follow-up questions (POST /ask with `conversationId`): how long a conversation is kept after its last
    turn, how many turns it may have, and how long its turns wait in memory before one batched write."""

    ttl_s: int = 86_400
    max_turns: int = 20
    flush_ms: float = 200.0


def _bounds(calls: AnthropicSettings | OpenAISettings) -> Bounds:
    """A profile's streamed-call bounds, from its settings of the same names."""
    return Bounds(
        first_token_s=calls.first_token_s,
        prompt_tokens_per_s=calls.prompt_tokens_per_s,
        gap_s=calls.token_gap_s,
        ceiling_s=calls.timeout_s,
    )


class AnthropicSettings(msgspec.Struct, frozen=True, kw_only=True):
    api_key: str | None = None
    base_url: str | None = None
    model: str = "claude-haiku-4-5"
    # Calls stream, bounded on their progress (`provenance.inference.streamed_calls`): the first token within
    # `first_token_s` plus the prompt's tokens at `prompt_tokens_per_s`, no gap between tokens over
    # `token_gap_s`, and the whole call within `timeout_s`, however steadily it streams.
    timeout_s: float = 60.0
    first_token_s: float = 10.0
    prompt_tokens_per_s: float = 1000.0
    token_gap_s: float = 10.0
    max_retries: int = 2
    # The most tokens (by our tokenizer) of passages one call's prompt holds; 0: every passage whole.
    passage_tokens: int = 0

    @property
    def bounds(self) -> Bounds:
        return _bounds(self)


class OpenAISettings(msgspec.Struct, frozen=True, kw_only=True):
    """Any server that speaks OpenAI's chat completions: Ollama, llama.cpp's server, vLLM, OpenAI itself."""

    # None is the SDK's default, OpenAI's own API.
    base_url: str | None = None
    # Local servers need none; the SDK insists on one, so the profile passes a placeholder.
    api_key: str | None = None
    model: str | None = None
    # Calls stream, bounded on their progress (`provenance.inference.streamed_calls`); the defaults are a small model on
    # a few CPU cores, which reads a prompt at a few tens of tokens a second and writes a few tokens a second.
    # The whole call: a ceiling, however steadily it streams.
    timeout_s: float = 300.0
    # The first token: within this floor plus the prompt's tokens at the prompt pace (or the pace the calls
    # measure, where slower).
    first_token_s: float = 15.0
    prompt_tokens_per_s: float = 20.0
    # The longest wait for the next token once the model writes.
    token_gap_s: float = 15.0
    # Retries are for calls that failed before their response began (a dropped connection, a 503): a call
    # that streamed tokens, or hit a bound, is never started again from zero.
    max_retries: int = 1
    # The most tokens (by our tokenizer) of passages one call's prompt holds: each passage is cut to its
    # sentences closest to the question, best first, to fit. A small model reads a long prompt slowly and
    # loses the thread in it. 0: every passage whole.
    passage_tokens: int = 512
    # The most tokens one call may write; 0 keeps each call's own limit (1024 for the answer, 1536 for the
    # claims). A small model on CPU writes a few tokens a second, and one that loops writes until this stops
    # it: a lower limit bounds how long a request can take, and a reply cut off by it is a model_error.
    max_output_tokens: int = 0
    # What the operator pays per million tokens at this server. Both 0 (a server on one's own machine):
    # the profile makes no paid calls and the spend cap holds nothing back.
    price_input_per_mtok: float = 0.0
    price_output_per_mtok: float = 0.0

    @property
    def priced(self) -> bool:
        return self.price_input_per_mtok > 0 or self.price_output_per_mtok > 0

    @property
    def bounds(self) -> Bounds:
        return _bounds(self)


class JudgeSettings(msgspec.Struct, frozen=True, kw_only=True):
    """The reading judge: a model, independent of the generator, that judges each claim's support and relevance
    over an OpenAI-compatible API (`provenance.judges`). Off (`rules`) by default."""

    name: JudgeName = "rules"
    base_url: str | None = None
    api_key: str | None = None
    model: str | None = None
    # One judgment is one output token; on two CPU cores the prompt takes a few seconds.
    timeout_s: float = 30.0
    max_retries: int = 1
    # The most passages one claim's support is judged against, best first by the rules' ranking.
    candidates: int = 2
    # `judge`: the judge's relevance verdict; `veto`: the higher of the judge's and the rules' unless the
    # judge says No (P(Yes) under one half), when the judge's stands (verifiers/judged.py).
    relevance: JudgeRelevance = "veto"
    price_input_per_mtok: float = 0.0
    price_output_per_mtok: float = 0.0
    # JUDGE=local: the llama.cpp server's threads and context.
    threads: int = 2
    ctx: int = 4096

    @property
    def enabled(self) -> bool:
        return self.name != "rules"

    @property
    def priced(self) -> bool:
        return self.price_input_per_mtok > 0 or self.price_output_per_mtok > 0


class Settings(msgspec.Struct, frozen=True, kw_only=True):
    """Every setting, grouped by the part of the service that reads it."""

    profile: ProfileName = "local"
    # The local verifier every profile scores claims with (LOCAL_VERIFIER) and the local profile's generator
    # (LOCAL_GENERATOR); LOCAL_MODELS, their old single switch, sets both.
    local_verifier: LocalModels = "features"
    local_generator: LocalModels = "features"
    claims_from: ClaimsFrom = "model"
    data_dir: Path = REPO_ROOT / ".data"
    server: ServerSettings = msgspec.field(default_factory=ServerSettings)
    database: DatabaseSettings = msgspec.field(default_factory=DatabaseSettings)
    embedding: EmbeddingSettings = msgspec.field(default_factory=EmbeddingSettings)
    ingest: IngestSettings = msgspec.field(default_factory=IngestSettings)
    sources: SourcesSettings = msgspec.field(default_factory=SourcesSettings)
    retrieval: RetrievalSettings = msgspec.field(default_factory=RetrievalSettings)
    gate: GateSettings = msgspec.field(default_factory=GateSettings)
    guards: GuardSettings = msgspec.field(default_factory=GuardSettings)
    metrics: MetricsSettings = msgspec.field(default_factory=MetricsSettings)
    feedback: FeedbackSettings = msgspec.field(default_factory=FeedbackSettings)
    conversation: ConversationSettings = msgspec.field(default_factory=ConversationSettings)
    anthropic: AnthropicSettings = msgspec.field(default_factory=AnthropicSettings)
    openai: OpenAISettings = msgspec.field(default_factory=OpenAISettings)
    judge: JudgeSettings = msgspec.field(default_factory=JudgeSettings)

    @property
    def pg_data_dir(self) -> Path:
        return self.data_dir / "pg"

    @property
    def profile_model(self) -> str:
        """The model the profile calls, as /healthz and the page name it; empty for the local profile, which
        calls none (its models are LOCAL_GENERATOR's and LOCAL_VERIFIER's)."""
        if self.profile == "anthropic":
            return self.anthropic.model
        if self.profile == "openai":
            return self.openai.model or ""
        return ""

    def with_overrides(self, **changes: object) -> Settings:
        """A copy with settings changed by their variables' names in lower case (`gate_threshold=0.5`,
        `db_schema="t"`), the names the README documents, whichever group each lives in."""
        top: dict[str, object] = {}
        grouped: dict[str, dict[str, object]] = {}
        if "local_models" in changes:
            # The old single switch, as LOCAL_MODELS is read: both local models at once.
            both = changes.pop("local_models")
            changes = {"local_verifier": both, "local_generator": both, **changes}
        for name, value in changes.items():
            if name not in _WHERE:
                raise TypeError(f"unknown setting {name!r}")
            group, field = _WHERE[name]
            if group is None:
                top[field] = value
            else:
                grouped.setdefault(group, {})[field] = value
        for group, fields in grouped.items():
            top[group] = msgspec.structs.replace(getattr(self, group), **fields)
        return msgspec.structs.replace(self, **top)


# Each environment variable and where its value lives: (group, field), group None for Settings itself.
# Deployments and the README know the variables by these names; a field need not repeat its group's.
VARIABLES: dict[str, tuple[str | None, str]] = {
    "PROFILE": (None, "profile"),
    "LOCAL_VERIFIER": (None, "local_verifier"),
    "LOCAL_GENERATOR": (None, "local_generator"),
    "CLAIMS_FROM": (None, "claims_from"),
    "DATA_DIR": (None, "data_dir"),
    "HOST": ("server", "host"),
    "PORT": ("server", "port"),
    "LOG_LEVEL": ("server", "log_level"),
    "CORS_ORIGINS": ("server", "cors_origins"),
    "MAX_QUESTION_CHARS": ("server", "max_question_chars"),
    "REQUEST_MAX_BODY_BYTES": ("server", "request_max_body_bytes"),
    "REQUEST_READ_TIMEOUT_S": ("server", "request_read_timeout_s"),
    "REQUEST_HEADER_TIMEOUT_S": ("server", "request_header_timeout_s"),
    "ASK_CONCURRENCY": ("server", "ask_concurrency"),
    "ASK_QUEUE_MAX": ("server", "ask_queue_max"),
    "ASK_QUEUE_TIMEOUT_S": ("server", "ask_queue_timeout_s"),
    "DATABASE_URL": ("database", "url"),
    "DB_SCHEMA": ("database", "schema"),
    "DB_POOL_MIN": ("database", "pool_min"),
    "DB_POOL_MAX": ("database", "pool_max"),
    "DB_TIMEOUT_S": ("database", "timeout_s"),
    "EMBED_MODEL": ("embedding", "model"),
    "EMBED_THREADS": ("embedding", "threads"),
    "EMBED_BATCH_SIZE": ("embedding", "batch_size"),
    "EMBED_BATCH_WAIT_MS": ("embedding", "batch_wait_ms"),
    "CORPUS_DIR": ("ingest", "corpus_dir"),
    "CHUNK_MAX_TOKENS": ("ingest", "chunk_max_tokens"),
    "SOURCES_MAX_PAGES": ("sources", "max_pages"),
    "SOURCES_MAX_DEPTH": ("sources", "max_depth"),
    "SOURCES_CONCURRENCY": ("sources", "concurrency"),
    "SOURCES_DELAY_S": ("sources", "delay_s"),
    "SOURCES_PAGE_TIMEOUT_S": ("sources", "page_timeout_s"),
    "SOURCES_MAX_PAGE_BYTES": ("sources", "max_page_bytes"),
    "SOURCES_MAX_REDIRECTS": ("sources", "max_redirects"),
    "SOURCES_MAX_QUERIES_PER_PATH": ("sources", "max_queries_per_path"),
    "SOURCES_ALLOW_PRIVATE": ("sources", "allow_private"),
    "RETRIEVAL_K": ("retrieval", "k"),
    "RETRIEVAL_MODE": ("retrieval", "mode"),
    "HNSW_MIN_PASSAGES": ("retrieval", "hnsw_min_passages"),
    "INGEST_WORKERS": ("ingest", "workers"),
    "UPLOAD_MAX_FILE_BYTES": ("ingest", "upload_max_file_bytes"),
    "UPLOAD_MAX_FILES": ("ingest", "upload_max_files"),
    "UPLOAD_MAX_REQUEST_BYTES": ("ingest", "upload_max_request_bytes"),
    "GATE_THRESHOLD": ("gate", "threshold"),
    "GATE_MIN_CLAIM": ("gate", "min_claim"),
    "GATE_RELEVANCE": ("gate", "relevance"),
    "GATE_RELEVANCE_UNCERTAIN": ("gate", "relevance_uncertain"),
    "TURNSTILE_SECRET_KEY": ("guards", "turnstile_secret_key"),
    "TURNSTILE_SITE_KEY": ("guards", "turnstile_site_key"),
    "TURNSTILE_VERIFY_URL": ("guards", "turnstile_verify_url"),
    "TURNSTILE_TIMEOUT_S": ("guards", "turnstile_timeout_s"),
    "RATE_LIMIT_PER_HOUR": ("guards", "rate_limit_per_hour"),
    "RATE_LIMIT_PER_HOUR_API_KEY": ("guards", "rate_limit_per_hour_api_key"),
    "TRUSTED_PROXIES": ("guards", "trusted_proxies"),
    "CACHE_TTL_S": ("guards", "cache_ttl_s"),
    "DAILY_BUDGET_USD": ("guards", "daily_budget_usd"),
    "METRICS_ENABLED": ("metrics", "enabled"),
    "METRICS_TOKEN": ("metrics", "token"),
    "FEEDBACK_ENABLED": ("feedback", "enabled"),
    "FEEDBACK_WINDOW_S": ("feedback", "window_s"),
    "FEEDBACK_RATE_LIMIT_PER_HOUR": ("feedback", "rate_limit_per_hour"),
    "FEEDBACK_HMAC_KEY": ("feedback", "hmac_key"),
    "FEEDBACK_FLUSH_MS": ("feedback", "flush_ms"),
    "CONVERSATION_TTL_S": ("conversation", "ttl_s"),
    "CONVERSATION_MAX_TURNS": ("conversation", "max_turns"),
    "CONVERSATION_FLUSH_MS": ("conversation", "flush_ms"),
    "ANTHROPIC_API_KEY": ("anthropic", "api_key"),
    "ANTHROPIC_BASE_URL": ("anthropic", "base_url"),
    "ANTHROPIC_MODEL": ("anthropic", "model"),
    "ANTHROPIC_TIMEOUT_S": ("anthropic", "timeout_s"),
    "ANTHROPIC_MAX_RETRIES": ("anthropic", "max_retries"),
    "ANTHROPIC_FIRST_TOKEN_S": ("anthropic", "first_token_s"),
    "ANTHROPIC_PROMPT_TOKENS_PER_S": ("anthropic", "prompt_tokens_per_s"),
    "ANTHROPIC_TOKEN_GAP_S": ("anthropic", "token_gap_s"),
    "ANTHROPIC_PASSAGE_TOKENS": ("anthropic", "passage_tokens"),
    "OPENAI_BASE_URL": ("openai", "base_url"),
    "OPENAI_API_KEY": ("openai", "api_key"),
    "OPENAI_MODEL": ("openai", "model"),
    "OPENAI_TIMEOUT_S": ("openai", "timeout_s"),
    "OPENAI_MAX_RETRIES": ("openai", "max_retries"),
    "OPENAI_FIRST_TOKEN_S": ("openai", "first_token_s"),
    "OPENAI_PROMPT_TOKENS_PER_S": ("openai", "prompt_tokens_per_s"),
    "OPENAI_TOKEN_GAP_S": ("openai", "token_gap_s"),
    "OPENAI_PASSAGE_TOKENS": ("openai", "passage_tokens"),
    "OPENAI_MAX_OUTPUT_TOKENS": ("openai", "max_output_tokens"),
    "OPENAI_PRICE_INPUT_PER_MTOK": ("openai", "price_input_per_mtok"),
    "OPENAI_PRICE_OUTPUT_PER_MTOK": ("openai", "price_output_per_mtok"),
    "JUDGE": ("judge", "name"),
    "JUDGE_BASE_URL": ("judge", "base_url"),
    "JUDGE_API_KEY": ("judge", "api_key"),
    "JUDGE_MODEL": ("judge", "model"),
    "JUDGE_TIMEOUT_S": ("judge", "timeout_s"),
    "JUDGE_MAX_RETRIES": ("judge", "max_retries"),
    "JUDGE_CANDIDATES": ("judge", "candidates"),
    "JUDGE_RELEVANCE": ("judge", "relevance"),
    "JUDGE_PRICE_INPUT_PER_MTOK": ("judge", "price_input_per_mtok"),
    "JUDGE_PRICE_OUTPUT_PER_MTOK": ("judge", "price_output_per_mtok"),
    "JUDGE_THREADS": ("judge", "threads"),
    "JUDGE_CTX": ("judge", "ctx"),
}
# with_overrides' names: the variables in lower case.
_WHERE = {var.lower(): where for var, where in VARIABLES.items()}


def load_settings(environ: Mapping[str, str] | None = None) -> Settings:
    """Build Settings from environment variables; a bad value raises SettingsError naming the variable."""
    env = os.environ if environ is None else environ
    defaults = Settings()
    top: dict[str, object] = {}
    grouped: dict[str, dict[str, object]] = {}
    for var, (group, field) in VARIABLES.items():
        raw = env.get(var)
        if raw is None or raw.strip() == "":
            continue
        default = getattr(defaults if group is None else getattr(defaults, group), field)
        (top if group is None else grouped.setdefault(group, {}))[field] = _coerce(var, raw, default)
    top.setdefault("profile", "anthropic" if grouped.get("anthropic", {}).get("api_key") else "local")
    _local_models_alias(env, top)
    try:
        settings = msgspec.convert({**top, **grouped}, Settings, strict=False)
    except msgspec.ValidationError as exc:
        raise SettingsError(_explain(str(exc))) from None
    _validate(settings)
    return settings


# LOCAL_MODELS once chose the local verifier and the local generator together; it still sets both, unless
# the new variables say otherwise, which they must not contradict.
LOCAL_MODELS_ALIAS = "LOCAL_MODELS"


def _local_models_alias(env: Mapping[str, str], top: dict[str, object]) -> None:
    raw = (env.get(LOCAL_MODELS_ALIAS) or "").strip()
    if not raw:
        return
    if raw not in ("features", "trained"):
        raise SettingsError(
            f"LOCAL_MODELS must be features or trained, got {raw!r} "
            "(it sets both LOCAL_VERIFIER and LOCAL_GENERATOR; set those instead)"
        )
    for field, var in (("local_verifier", "LOCAL_VERIFIER"), ("local_generator", "LOCAL_GENERATOR")):
        if field in top and top[field] != raw:
            raise SettingsError(f"LOCAL_MODELS={raw} contradicts {var}={top[field]}; set only {var}")
        top[field] = raw


def _coerce(var: str, raw: str, default: object) -> object:
    text = raw.strip()
    if isinstance(default, bool):
        if text.lower() in {"1", "true", "yes", "on"}:
            return True
        if text.lower() in {"0", "false", "no", "off"}:
            return False
        raise SettingsError(f"{var} must be true or false, got {raw!r}")
    if isinstance(default, int):
        try:
            return int(text)
        except ValueError:
            raise SettingsError(f"{var} must be an integer, got {raw!r}") from None
    if isinstance(default, float):
        try:
            return float(text)
        except ValueError:
            raise SettingsError(f"{var} must be a number, got {raw!r}") from None
    if isinstance(default, tuple):
        return tuple(part.strip() for part in text.split(",") if part.strip())
    if isinstance(default, Path):
        return Path(text).expanduser()
    return text


def _explain(message: str) -> str:
    # msgspec says "... at `$.gate.threshold`"; name the environment variable instead.
    for var, (group, field) in VARIABLES.items():
        if f"$.{field if group is None else f'{group}.{field}'}`" in message:
            return f"{var}: {message.split(' - at ')[0]}"
    return message


def _validate(s: Settings) -> None:
    checks = [*_service_checks(s), *_model_checks(s), *_feedback_checks(s.feedback), *_conversation_checks(s)]
    for ok, message in checks:
        if not ok:
            raise SettingsError(message)
    _validate_servers(s)
    _validate_addresses(s)


def _service_checks(s: Settings) -> list[tuple[bool, str]]:
    """The bounds of the service's own settings: server, database, embedding, ingest, retrieval, gate, guards."""
    server, db, embedding, guards = s.server, s.database, s.embedding, s.guards
    return [
        (1 <= server.port <= 65535, f"PORT must be between 1 and 65535, got {server.port}"),
        (server.max_question_chars > 0, "MAX_QUESTION_CHARS must be positive"),
        (server.ask_concurrency >= 1, "ASK_CONCURRENCY must be at least 1"),
        (server.ask_queue_max >= 0, "ASK_QUEUE_MAX must not be negative"),
        (server.ask_queue_timeout_s > 0, "ASK_QUEUE_TIMEOUT_S must be positive"),
        (server.request_header_timeout_s > 0, "REQUEST_HEADER_TIMEOUT_S must be positive"),
        (db.pool_min >= 1 and db.pool_max >= db.pool_min, "DB_POOL_MIN/DB_POOL_MAX are inconsistent"),
        (db.schema.replace("_", "").isalnum(), f"DB_SCHEMA must be a plain identifier, got {db.schema!r}"),
        (embedding.threads >= 1, "EMBED_THREADS must be at least 1"),
        (embedding.batch_size >= 1, "EMBED_BATCH_SIZE must be at least 1"),
        (embedding.batch_wait_ms >= 0, "EMBED_BATCH_WAIT_MS must not be negative"),
        (s.ingest.chunk_max_tokens >= 32, "CHUNK_MAX_TOKENS must be at least 32"),
        (s.sources.max_pages >= 1, "SOURCES_MAX_PAGES must be at least 1"),
        (s.sources.max_depth >= 0, "SOURCES_MAX_DEPTH must not be negative"),
        (1 <= s.sources.concurrency <= 2, "SOURCES_CONCURRENCY must be 1 or 2 (requests at once to one host)"),
        (s.sources.delay_s >= 0, "SOURCES_DELAY_S must not be negative"),
        (s.sources.page_timeout_s > 0, "SOURCES_PAGE_TIMEOUT_S must be positive"),
        (s.sources.max_page_bytes >= 1, "SOURCES_MAX_PAGE_BYTES must be positive"),
        (0 <= s.sources.max_redirects <= 20, "SOURCES_MAX_REDIRECTS must be between 0 and 20"),
        (s.sources.max_queries_per_path >= 1, "SOURCES_MAX_QUERIES_PER_PATH must be at least 1"),
        (1 <= s.retrieval.k <= 50, f"RETRIEVAL_K must be between 1 and 50, got {s.retrieval.k}"),
        (0.0 <= s.gate.threshold <= 1.0, f"GATE_THRESHOLD must be within [0, 1], got {s.gate.threshold}"),
        (0.0 <= s.gate.min_claim <= 1.0, f"GATE_MIN_CLAIM must be within [0, 1], got {s.gate.min_claim}"),
        (0.0 <= s.gate.relevance <= 1.0, f"GATE_RELEVANCE must be within [0, 1], got {s.gate.relevance}"),
        (
            0.0 <= s.gate.relevance_uncertain <= s.gate.relevance,
            f"GATE_RELEVANCE_UNCERTAIN must be within [0, GATE_RELEVANCE], got {s.gate.relevance_uncertain}",
        ),
        (guards.rate_limit_per_hour >= 0, "RATE_LIMIT_PER_HOUR must not be negative"),
        (guards.rate_limit_per_hour_api_key >= 0, "RATE_LIMIT_PER_HOUR_API_KEY must not be negative"),
        (guards.cache_ttl_s >= 0, "CACHE_TTL_S must not be negative"),
        (guards.daily_budget_usd >= 0, "DAILY_BUDGET_USD must not be negative"),
    ]


def _model_checks(s: Settings) -> list[tuple[bool, str]]:
    """The bounds of the model servers' settings: the two profiles' calls and the judge's."""
    return [
        (s.anthropic.timeout_s > 0, "ANTHROPIC_TIMEOUT_S must be positive"),
        (0 <= s.anthropic.max_retries <= 5, "ANTHROPIC_MAX_RETRIES must be between 0 and 5"),
        (s.openai.timeout_s > 0, "OPENAI_TIMEOUT_S must be positive"),
        (0 <= s.openai.max_retries <= 5, "OPENAI_MAX_RETRIES must be between 0 and 5"),
        *_stream_checks("OPENAI", s.openai.first_token_s, s.openai.prompt_tokens_per_s, s.openai.token_gap_s),
        *_stream_checks(
            "ANTHROPIC", s.anthropic.first_token_s, s.anthropic.prompt_tokens_per_s, s.anthropic.token_gap_s
        ),
        (
            s.openai.passage_tokens == 0 or s.openai.passage_tokens >= 32,
            "OPENAI_PASSAGE_TOKENS must be 0 (no budget: every passage whole) or at least 32",
        ),
        (
            s.anthropic.passage_tokens == 0 or s.anthropic.passage_tokens >= 32,
            "ANTHROPIC_PASSAGE_TOKENS must be 0 (no budget: every passage whole) or at least 32",
        ),
        (
            s.openai.max_output_tokens == 0 or s.openai.max_output_tokens >= 32,
            "OPENAI_MAX_OUTPUT_TOKENS must be 0 (each call's own limit) or at least 32",
        ),
        (s.openai.price_input_per_mtok >= 0, "OPENAI_PRICE_INPUT_PER_MTOK must not be negative"),
        (s.openai.price_output_per_mtok >= 0, "OPENAI_PRICE_OUTPUT_PER_MTOK must not be negative"),
        (s.judge.timeout_s > 0, "JUDGE_TIMEOUT_S must be positive"),
        (0 <= s.judge.max_retries <= 5, "JUDGE_MAX_RETRIES must be between 0 and 5"),
        (1 <= s.judge.candidates <= 8, "JUDGE_CANDIDATES must be between 1 and 8"),
        (s.judge.price_input_per_mtok >= 0, "JUDGE_PRICE_INPUT_PER_MTOK must not be negative"),
        (s.judge.price_output_per_mtok >= 0, "JUDGE_PRICE_OUTPUT_PER_MTOK must not be negative"),
        (s.judge.threads >= 1, "JUDGE_THREADS must be at least 1"),
        (s.judge.ctx >= 512, "JUDGE_CTX must be at least 512"),
    ]


def _validate_servers(s: Settings) -> None:
    """What the chosen profile and judge need, and the metrics token."""
    if s.profile == "anthropic" and not s.anthropic.api_key:
        raise SettingsError("PROFILE=anthropic needs ANTHROPIC_API_KEY")
    token = s.metrics.token
    if token is not None and (len(token) < METRICS_TOKEN_MIN_CHARS or any(c.isspace() for c in token)):
        # A short token could be guessed from the outside; one with spaces could never be sent in a header.
        raise SettingsError(f"METRICS_TOKEN must be at least {METRICS_TOKEN_MIN_CHARS} characters, without spaces")
    if s.profile == "openai":
        if not s.openai.model:
            raise SettingsError("PROFILE=openai needs OPENAI_MODEL (the name the server knows the model by)")
        if not s.openai.base_url and not s.openai.api_key:
            # Without a URL the SDK calls OpenAI's own API, which needs a key.
            raise SettingsError("PROFILE=openai needs OPENAI_BASE_URL (your server) or OPENAI_API_KEY (OpenAI's API)")
        if s.openai.base_url and not s.openai.base_url.startswith(("http://", "https://")):
            raise SettingsError(f"OPENAI_BASE_URL must start with http:// or https://, got {s.openai.base_url!r}")
    if s.judge.name == "openai":
        if not s.judge.model:
            raise SettingsError("JUDGE=openai needs JUDGE_MODEL (the name the judge's server knows the model by)")
        if not s.judge.base_url and not s.judge.api_key:
            raise SettingsError("JUDGE=openai needs JUDGE_BASE_URL (your server) or JUDGE_API_KEY (OpenAI's API)")
    if s.judge.base_url and not s.judge.base_url.startswith(("http://", "https://")):
        raise SettingsError(f"JUDGE_BASE_URL must start with http:// or https://, got {s.judge.base_url!r}")


def _validate_addresses(s: Settings) -> None:
    db, guards = s.database, s.guards
    if db.url is not None and not db.url.startswith(("postgres://", "postgresql://")):
        raise SettingsError("DATABASE_URL must start with postgres:// or postgresql://")
    for proxy in guards.trusted_proxies:
        try:
            ipaddress.ip_network(proxy, strict=False)
        except ValueError:
            raise SettingsError(f"TRUSTED_PROXIES has an invalid address or network: {proxy!r}") from None


def _stream_checks(prefix: str, first_token_s: float, tokens_per_s: float, gap_s: float) -> list[tuple[bool, str]]:
    return [
        (first_token_s > 0, f"{prefix}_FIRST_TOKEN_S must be positive"),
        (tokens_per_s > 0, f"{prefix}_PROMPT_TOKENS_PER_S must be positive"),
        (gap_s > 0, f"{prefix}_TOKEN_GAP_S must be positive"),
    ]


FEEDBACK_HMAC_KEY_MIN_CHARS = 16


def _conversation_checks(s: Settings) -> list[tuple[bool, str]]:
    c = s.conversation
    return [
        (c.ttl_s > 0, "CONVERSATION_TTL_S must be positive"),
        (c.max_turns >= 1, "CONVERSATION_MAX_TURNS must be at least 1"),
        (0 < c.flush_ms <= 60_000, "CONVERSATION_FLUSH_MS must be within (0, 60000]"),
    ]


def _feedback_checks(f: FeedbackSettings) -> list[tuple[bool, str]]:
    return [
        (f.window_s > 0, "FEEDBACK_WINDOW_S must be positive"),
        (f.rate_limit_per_hour >= 0, "FEEDBACK_RATE_LIMIT_PER_HOUR must not be negative"),
        (0 < f.flush_ms <= 60_000, "FEEDBACK_FLUSH_MS must be within (0, 60000]"),
        (
            f.hmac_key is None or len(f.hmac_key) >= FEEDBACK_HMAC_KEY_MIN_CHARS,
            f"FEEDBACK_HMAC_KEY must be at least {FEEDBACK_HMAC_KEY_MIN_CHARS} characters",
        ),
    ]
