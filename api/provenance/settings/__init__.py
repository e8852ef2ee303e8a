"""One typed settings object, read from the environment and validated once at start-up. Its settings are
grouped by the part of the service that reads them (`settings.database.timeout_s`, `settings.gate.threshold`);
each declares on its field (msgspec Meta) the environment variable it comes from (DB_TIMEOUT_S, GATE_THRESHOLD),
what it means and its bounds: VARIABLES, the README's table and the bounds checks are read from them."""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Annotated, ClassVar, get_args

import msgspec

from provenance.errors import SettingsError
from provenance.settings.groups import (
    REPO_ROOT,
    AnthropicSettings,
    Bounds,
    ClaimsFrom,
    ConversationSettings,
    DatabaseSettings,
    EmbeddingSettings,
    FeedbackSettings,
    GateSettings,
    GuardSettings,
    IngestSettings,
    JudgeName,
    JudgeRelevance,
    JudgeSettings,
    LocalModels,
    MetricsSettings,
    OpenAISettings,
    ProfileName,
    RetrievalMode,
    RetrievalSettings,
    ServerSettings,
    SourcesSettings,
    StreamedCallSettings,
    env,
)

__all__ = [
    "REPO_ROOT",
    "VARIABLES",
    "AnthropicSettings",
    "Bounds",
    "ClaimsFrom",
    "ConversationSettings",
    "DatabaseSettings",
    "EmbeddingSettings",
    "FeedbackSettings",
    "GateSettings",
    "GuardSettings",
    "IngestSettings",
    "JudgeName",
    "JudgeRelevance",
    "JudgeSettings",
    "LocalModels",
    "MetricsSettings",
    "OpenAISettings",
    "ProfileName",
    "RetrievalMode",
    "RetrievalSettings",
    "ServerSettings",
    "Settings",
    "SettingsError",
    "SourcesSettings",
    "StreamedCallSettings",
    "env",
    "load_settings",
]

METRICS_TOKEN_MIN_CHARS = 16


class Settings(msgspec.Struct, frozen=True, kw_only=True):
    """Every setting, grouped by the part of the service that reads it."""

    ENV_PREFIX: ClassVar[str] = ""

    profile: Annotated[
        ProfileName,
        env(
            "PROFILE",
            'model profile: `local`, `anthropic` or `openai` (chosen explicitly; see "Use your own model server")',
            shown_default="`anthropic` when `ANTHROPIC_API_KEY` is set, else `local`",
        ),
    ] = "local"
    # LOCAL_MODELS, the old single switch of the two local models, sets both (_local_models_alias).
    local_verifier: Annotated[
        LocalModels,
        env(
            "LOCAL_VERIFIER",
            "the local verifier every profile checks claims with: `features`, or `trained` for the trained "
            "cross-encoder (`docs/models.md`)",
        ),
    ] = "features"
    local_generator: Annotated[
        LocalModels,
        env(
            "LOCAL_GENERATOR",
            "the local profile's generator: `features` (extractive), or `trained` for the trained reader. "
            "(`LOCAL_MODELS`, their old single switch, still sets both)",
        ),
    ] = "features"
    claims_from: Annotated[
        ClaimsFrom,
        env(
            "CLAIMS_FROM",
            "where a model profile's claims come from: `model` (its own claims call, with its verdicts) or "
            "`sentences` (the answer's sentences, judged by the local verifier, and the judge when `JUDGE` is set, "
            "alone: one model call fewer). Part of the answer cache's key",
        ),
    ] = "model"
    data_dir: Annotated[Path, env("DATA_DIR", "where the embedded Postgres and the models' files are kept")] = (
        REPO_ROOT / ".data"
    )
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


class Variable(msgspec.Struct, frozen=True):
    """One environment variable, as its field declares it."""

    name: str
    group: str | None  # None for Settings itself
    field: str
    meta: msgspec.Meta
    default: object

    def bound_error(self, value: float) -> str | None:
        """The variable's bounds, from its Meta, as one line when `value` breaks them."""
        m = self.meta
        bracket = "[" if m.gt is None else "("
        lo, hi = (m.gt if m.ge is None else m.ge), m.le
        if (m.ge is None or value >= m.ge) and (m.gt is None or value > m.gt) and (hi is None or value <= hi):
            return None
        if hi is not None:
            return f"{self.name} must be within {bracket}{lo:g}, {hi:g}], got {value:g}"
        if m.gt == 0:
            return f"{self.name} must be positive, got {value:g}"
        if m.ge == 0:
            return f"{self.name} must not be negative, got {value:g}"
        return f"{self.name} must be at least {lo:g}, got {value:g}"

    @property
    def shown_default(self) -> str:
        """The default as the README's table states it."""
        d, extra = self.default, self.meta.extra or {}
        if "default" in extra:
            return str(extra["default"])
        if d is None or d == ():
            return "unset"
        if isinstance(d, bool):
            return f"`{str(d).lower()}`"
        if isinstance(d, Path):
            return f"`{d.relative_to(REPO_ROOT)}/`"
        return f"`{d:g}`" if isinstance(d, float) else f"`{d}`"


def _declared(cls: type[msgspec.Struct], group: str | None) -> Iterator[Variable]:
    prefix = getattr(cls, "ENV_PREFIX", "")
    defaults = cls() if group is not None else None
    for f in msgspec.structs.fields(cls):
        metas = [m for m in get_args(f.type)[1:] if isinstance(m, msgspec.Meta)]
        if metas:
            default = getattr(defaults, f.name) if defaults is not None else f.default
            yield Variable(prefix + (metas[0].extra or {})["env"], group, f.name, metas[0], default)
        elif group is None and isinstance(f.type, type) and issubclass(f.type, msgspec.Struct):
            yield from _declared(f.type, f.name)


# Every environment variable, in the order their fields are declared. Deployments and the README know the
# variables by these names; a field need not repeat its group's.
DECLARED: tuple[Variable, ...] = tuple(_declared(Settings, None))
VARIABLES: dict[str, tuple[str | None, str]] = {v.name: (v.group, v.field) for v in DECLARED}
# with_overrides' names: the variables in lower case.
_WHERE = {var.lower(): where for var, where in VARIABLES.items()}


def load_settings(environ: Mapping[str, str] | None = None) -> Settings:
    """Build Settings from environment variables; a bad value raises SettingsError naming the variable."""
    source = os.environ if environ is None else environ
    top: dict[str, object] = {}
    grouped: dict[str, dict[str, object]] = {}
    for var in DECLARED:
        raw = source.get(var.name)
        if raw is None or raw.strip() == "":
            continue
        value = _coerce(var.name, raw, var.default)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and (error := var.bound_error(value)):
            raise SettingsError(error)
        (top if var.group is None else grouped.setdefault(var.group, {}))[var.field] = value
    top.setdefault("profile", "anthropic" if grouped.get("anthropic", {}).get("api_key") else "local")
    _local_models_alias(source, top)
    try:
        settings = msgspec.convert({**top, **grouped}, Settings, strict=False)
    except msgspec.ValidationError as exc:
        raise SettingsError(_explain(str(exc))) from None
    _validate(settings)
    return settings


# LOCAL_MODELS once chose the local verifier and the local generator together; it still sets both, unless
# the new variables say otherwise, which they must not contradict.
LOCAL_MODELS_ALIAS = "LOCAL_MODELS"


def _local_models_alias(source: Mapping[str, str], top: dict[str, object]) -> None:
    raw = (source.get(LOCAL_MODELS_ALIAS) or "").strip()
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
    """What the fields' bounds can't say: rules across fields, and the values a bound can't describe (each
    field's own bounds are checked as it is read, from its Meta)."""
    for ok, message in _cross_checks(s):
        if not ok:
            raise SettingsError(message)
    _validate_servers(s)
    _validate_addresses(s)


def _cross_checks(s: Settings) -> list[tuple[bool, str]]:
    budgets = [
        (f"{p.ENV_PREFIX}PASSAGE_TOKENS", p.passage_tokens, "no budget: every passage whole")
        for p in (s.openai, s.anthropic)
    ] + [("OPENAI_MAX_OUTPUT_TOKENS", s.openai.max_output_tokens, "each call's own limit")]
    return [
        (s.database.pool_max >= s.database.pool_min, "DB_POOL_MIN/DB_POOL_MAX are inconsistent"),
        (
            s.database.schema.replace("_", "").isalnum(),
            f"DB_SCHEMA must be a plain identifier, got {s.database.schema!r}",
        ),
        (
            s.gate.relevance_uncertain <= s.gate.relevance,
            f"GATE_RELEVANCE_UNCERTAIN must be within [0, GATE_RELEVANCE], got {s.gate.relevance_uncertain}",
        ),
        *((tokens == 0 or tokens >= 32, f"{name} must be 0 ({zero}) or at least 32") for name, tokens, zero in budgets),
        (
            s.feedback.hmac_key is None or len(s.feedback.hmac_key) >= FEEDBACK_HMAC_KEY_MIN_CHARS,
            f"FEEDBACK_HMAC_KEY must be at least {FEEDBACK_HMAC_KEY_MIN_CHARS} characters",
        ),
    ]


FEEDBACK_HMAC_KEY_MIN_CHARS = 16


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
