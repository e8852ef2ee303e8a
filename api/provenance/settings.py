"""One typed settings object, read from the environment and validated once at start-up."""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Literal

import msgspec

# The checkout (or image) root: db/, corpus/ and web/ sit beside api/, the folder this package is in.
REPO_ROOT = Path(__file__).resolve().parents[2]

Profile = Literal["local", "anthropic"]
RetrievalMode = Literal["vector", "hybrid"]
# The local verifier (and generator): hand-built features over the embedder, or the trained reader and verifier.
LocalModels = Literal["features", "trained"]


class SettingsError(ValueError):
    """A configuration value is missing or malformed; the message names the variable."""


def _cores() -> int:
    # The cores this process may run on (a container's CPU set), not the host's count.
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 2


class Settings(msgspec.Struct, frozen=True, kw_only=True):
    database_url: str | None = None
    db_schema: str = "public"
    data_dir: Path = REPO_ROOT / ".data"
    host: str = "127.0.0.1"
    port: int = 8000
    log_level: str = "info"
    profile: Profile = "local"
    local_models: LocalModels = "features"
    anthropic_api_key: str | None = None
    anthropic_base_url: str | None = None
    anthropic_model: str = "claude-haiku-4-5"
    anthropic_timeout_s: float = 20.0
    anthropic_max_retries: int = 2
    embed_model: str = "local/all-minilm-l6-v2-int8"
    embed_threads: int = 2
    embed_batch_size: int = 32
    # How long a question's embedding waits for other requests' to run with it in one batch (and repeated
    # texts within a request are embedded once). 0 turns both off: one model call per embedding, in turn.
    embed_batch_wait_ms: float = 2.0
    corpus_dir: Path = REPO_ROOT / "corpus"
    chunk_max_tokens: int = 256
    retrieval_k: int = 4
    retrieval_mode: RetrievalMode = "hybrid"
    hnsw_min_passages: int = 20_000
    gate_threshold: float = 0.70
    gate_min_claim: float = 0.40
    max_question_chars: int = 500
    turnstile_secret_key: str | None = None
    turnstile_site_key: str | None = None
    turnstile_verify_url: str = "https://challenges.cloudflare.com/turnstile/v0/siteverify"
    turnstile_timeout_s: float = 5.0
    rate_limit_per_hour: int = 60
    rate_limit_per_hour_api_key: int = 600
    trusted_proxies: tuple[str, ...] = ()
    cache_ttl_s: int = 86_400
    daily_budget_usd: float = 5.0
    cors_origins: tuple[str, ...] = ()
    request_max_body_bytes: int = 65_536
    request_read_timeout_s: float = 10.0
    # From a connection's opening (or a request's first byte on a kept-alive one) to the end of the
    # request's headers; past it the connection is closed (api/provenance/serving.py).
    request_header_timeout_s: float = 10.0
    # Admission control for uncached /ask: pipelines run at once, questions allowed to wait, and how long.
    # Throughput stops growing at about one pipeline per core (docs/reliability.md, "Overload"); more at
    # once only makes each slower.
    ask_concurrency: int = msgspec.field(default_factory=_cores)
    ask_queue_max: int = 32
    ask_queue_timeout_s: float = 5.0
    db_pool_min: int = 1
    db_pool_max: int = 10
    db_timeout_s: float = 2.0

    @property
    def pg_data_dir(self) -> Path:
        return self.data_dir / "pg"

    def with_overrides(self, **changes: object) -> Settings:
        return msgspec.structs.replace(self, **changes)


_FIELD_ENV = {name: name.upper() for name in Settings.__struct_fields__}


def load_settings(environ: Mapping[str, str] | None = None) -> Settings:
    """Build Settings from environment variables; a bad value raises SettingsError naming the variable."""
    env = os.environ if environ is None else environ
    values: dict[str, object] = {}
    defaults = Settings()
    for field, var in _FIELD_ENV.items():
        raw = env.get(var)
        if raw is None or raw.strip() == "":
            continue
        default = getattr(defaults, field)
        values[field] = _coerce(var, raw, default)
    if "profile" not in values:
        values["profile"] = "anthropic" if values.get("anthropic_api_key") else "local"
    try:
        settings = msgspec.convert(values, Settings, strict=False)
    except msgspec.ValidationError as exc:
        raise SettingsError(_explain(str(exc))) from None
    _validate(settings)
    return settings


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
    # msgspec says "... at `$.retrieval_mode`"; name the environment variable instead.
    for field, var in _FIELD_ENV.items():
        if f"$.{field}`" in message:
            return f"{var}: {message.split(' - at ')[0]}"
    return message


def _validate(s: Settings) -> None:
    checks: list[tuple[bool, str]] = [
        (1 <= s.port <= 65535, f"PORT must be between 1 and 65535, got {s.port}"),
        (1 <= s.retrieval_k <= 50, f"RETRIEVAL_K must be between 1 and 50, got {s.retrieval_k}"),
        (0.0 <= s.gate_threshold <= 1.0, f"GATE_THRESHOLD must be within [0, 1], got {s.gate_threshold}"),
        (0.0 <= s.gate_min_claim <= 1.0, f"GATE_MIN_CLAIM must be within [0, 1], got {s.gate_min_claim}"),
        (s.max_question_chars > 0, "MAX_QUESTION_CHARS must be positive"),
        (s.embed_threads >= 1, "EMBED_THREADS must be at least 1"),
        (s.embed_batch_size >= 1, "EMBED_BATCH_SIZE must be at least 1"),
        (s.embed_batch_wait_ms >= 0, "EMBED_BATCH_WAIT_MS must not be negative"),
        (s.chunk_max_tokens >= 32, "CHUNK_MAX_TOKENS must be at least 32"),
        (s.rate_limit_per_hour >= 0, "RATE_LIMIT_PER_HOUR must not be negative"),
        (s.rate_limit_per_hour_api_key >= 0, "RATE_LIMIT_PER_HOUR_API_KEY must not be negative"),
        (s.cache_ttl_s >= 0, "CACHE_TTL_S must not be negative"),
        (s.daily_budget_usd >= 0, "DAILY_BUDGET_USD must not be negative"),
        (s.anthropic_timeout_s > 0, "ANTHROPIC_TIMEOUT_S must be positive"),
        (0 <= s.anthropic_max_retries <= 5, "ANTHROPIC_MAX_RETRIES must be between 0 and 5"),
        (s.db_pool_min >= 1 and s.db_pool_max >= s.db_pool_min, "DB_POOL_MIN/DB_POOL_MAX are inconsistent"),
        (s.ask_concurrency >= 1, "ASK_CONCURRENCY must be at least 1"),
        (s.ask_queue_max >= 0, "ASK_QUEUE_MAX must not be negative"),
        (s.ask_queue_timeout_s > 0, "ASK_QUEUE_TIMEOUT_S must be positive"),
        (s.request_header_timeout_s > 0, "REQUEST_HEADER_TIMEOUT_S must be positive"),
        (
            s.db_schema.replace("_", "").isalnum(),
            f"DB_SCHEMA must be a plain identifier, got {s.db_schema!r}",
        ),
    ]
    for ok, message in checks:
        if not ok:
            raise SettingsError(message)
    if s.profile == "anthropic" and not s.anthropic_api_key:
        raise SettingsError("PROFILE=anthropic needs ANTHROPIC_API_KEY")
    if s.database_url is not None and not s.database_url.startswith(("postgres://", "postgresql://")):
        raise SettingsError("DATABASE_URL must start with postgres:// or postgresql://")
    for proxy in s.trusted_proxies:
        try:
            ipaddress.ip_network(proxy, strict=False)
        except ValueError:
            raise SettingsError(f"TRUSTED_PROXIES has an invalid address or network: {proxy!r}") from None
