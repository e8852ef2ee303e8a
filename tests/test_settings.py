from pathlib import Path

import msgspec
import pytest

from provenance.errors import SettingsError
from provenance.settings import (
    DECLARED,
    REPO_ROOT,
    VARIABLES,
    AnthropicSettings,
    OpenAISettings,
    Settings,
    StreamedCallSettings,
    load_settings,
)
from provenance.settings.readme import readme_table, table_in


def test_defaults_choose_local_profile_without_a_key() -> None:
    s = load_settings({})
    assert s.profile == "local"
    assert s.retrieval.k == 4
    assert (s.gate.threshold, s.gate.min_claim) == (0.70, 0.40)
    assert (s.gate.relevance, s.gate.relevance_uncertain) == (0.70, 0.40)


def test_the_relevance_rule_reads_its_variables() -> None:
    s = load_settings({"GATE_RELEVANCE": "0.8", "GATE_RELEVANCE_UNCERTAIN": "0.3"})
    assert (s.gate.relevance, s.gate.relevance_uncertain) == (0.8, 0.3)
    o = Settings().with_overrides(gate_relevance=0.6, gate_relevance_uncertain=0.5)
    assert (o.gate.relevance, o.gate.relevance_uncertain, o.gate.threshold) == (0.6, 0.5, 0.70)


def test_a_key_selects_the_anthropic_profile() -> None:
    assert load_settings({"ANTHROPIC_API_KEY": "sk-test"}).profile == "anthropic"
    assert load_settings({"ANTHROPIC_API_KEY": "sk-test", "PROFILE": "local"}).profile == "local"


@pytest.mark.parametrize(
    ("env", "variable"),
    [
        ({"PORT": "eighty"}, "PORT"),
        ({"PORT": "70000"}, "PORT"),
        ({"GATE_THRESHOLD": "1.5"}, "GATE_THRESHOLD"),
        ({"GATE_RELEVANCE": "1.5"}, "GATE_RELEVANCE"),
        # The uncertain floor can't be above the relevance threshold.
        ({"GATE_RELEVANCE": "0.5", "GATE_RELEVANCE_UNCERTAIN": "0.6"}, "GATE_RELEVANCE_UNCERTAIN"),
        ({"RETRIEVAL_MODE": "magic"}, "RETRIEVAL_MODE"),
        ({"PROFILE": "anthropic"}, "ANTHROPIC_API_KEY"),
        ({"DATABASE_URL": "mysql://x"}, "DATABASE_URL"),
        ({"TRUSTED_PROXIES": "10.0.0.1,not-an-ip"}, "TRUSTED_PROXIES"),
        ({"DB_SCHEMA": "x; drop table"}, "DB_SCHEMA"),
    ],
)
def test_a_bad_value_names_its_variable(env: dict[str, str], variable: str) -> None:
    with pytest.raises(SettingsError, match=variable):
        load_settings(env)


def test_lists_and_paths_parse() -> None:
    s = load_settings(
        {
            "TRUSTED_PROXIES": "10.0.0.1, 10.1.0.0/16",
            "DATA_DIR": "/tmp/x",
            "CORS_ORIGINS": "https://a.example",
        }
    )
    assert s.guards.trusted_proxies == ("10.0.0.1", "10.1.0.0/16")
    assert s.data_dir == Path("/tmp/x")
    assert s.server.cors_origins == ("https://a.example",)


def test_every_setting_has_one_variable() -> None:
    fields: set[tuple[str | None, str]] = set()
    for f in msgspec.structs.fields(Settings):
        if isinstance(f.type, type) and issubclass(f.type, msgspec.Struct):
            fields |= {(f.name, g.name) for g in msgspec.structs.fields(f.type)}
        else:
            fields.add((None, f.name))
    assert len(set(VARIABLES.values())) == len(VARIABLES)
    assert set(VARIABLES.values()) == fields


def test_the_readme_table_is_what_the_fields_generate() -> None:
    # `make settings-table` rewrites it; a field's variable, default or help changed without it fails here.
    readme = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    assert table_in(readme) == readme_table()
    assert readme_table().count("\n| `") == len(VARIABLES)


def test_the_readme_table_states_defaults_as_an_operator_writes_them() -> None:
    rows = {line.split(" | ")[0].strip("| `"): line.split(" | ")[1] for line in readme_table().splitlines()[2:]}
    assert rows["DB_TIMEOUT_S"] == "`2`" and rows["GATE_THRESHOLD"] == "`0.7`"
    assert rows["SOURCES_ALLOW_PRIVATE"] == "`false`" and rows["CORPUS_DIR"] == "`corpus/`"
    assert rows["OPENAI_MODEL"] == "unset" and rows["ASK_CONCURRENCY"] == "cores"


@pytest.mark.parametrize(
    ("env", "message"),
    [
        # Timeouts and sizes are positive: a negative DB_TIMEOUT_S was accepted once.
        ({"DB_TIMEOUT_S": "-1"}, "DB_TIMEOUT_S must be positive, got -1"),
        ({"DB_TIMEOUT_S": "0"}, "DB_TIMEOUT_S must be positive, got 0"),
        ({"REQUEST_READ_TIMEOUT_S": "-0.5"}, "REQUEST_READ_TIMEOUT_S must be positive, got -0.5"),
        ({"TURNSTILE_TIMEOUT_S": "0"}, "TURNSTILE_TIMEOUT_S must be positive, got 0"),
        ({"UPLOAD_MAX_FILE_BYTES": "0"}, "UPLOAD_MAX_FILE_BYTES must be at least 1, got 0"),
        ({"PORT": "70000"}, "PORT must be within [0, 65535], got 70000"),
        ({"SOURCES_CONCURRENCY": "3"}, "SOURCES_CONCURRENCY must be within [1, 2], got 3"),
        ({"FEEDBACK_FLUSH_MS": "0"}, "FEEDBACK_FLUSH_MS must be within (0, 60000], got 0"),
        ({"ASK_QUEUE_MAX": "-1"}, "ASK_QUEUE_MAX must not be negative, got -1"),
        ({"JUDGE_CTX": "511"}, "JUDGE_CTX must be at least 512, got 511"),
        ({"ANTHROPIC_TOKEN_GAP_S": "0"}, "ANTHROPIC_TOKEN_GAP_S must be positive, got 0"),
        # What a bound can't say stays a rule of its own: 0, or a budget of at least 32.
        ({"OPENAI_PASSAGE_TOKENS": "8"}, "OPENAI_PASSAGE_TOKENS must be 0 (no budget: every passage whole)"),
        ({"ANTHROPIC_PASSAGE_TOKENS": "-8"}, "ANTHROPIC_PASSAGE_TOKENS must not be negative, got -8"),
        ({"DB_POOL_MIN": "5", "DB_POOL_MAX": "2"}, "DB_POOL_MIN/DB_POOL_MAX are inconsistent"),
    ],
)
def test_a_value_out_of_bounds_is_one_line_naming_its_variable(env: dict[str, str], message: str) -> None:
    with pytest.raises(SettingsError) as caught:
        load_settings(env)
    assert str(caught.value).startswith(message) and "\n" not in str(caught.value)


def _bounded() -> list[tuple[str, float, float]]:
    """Every variable with a bound, with the last value inside it and the first outside (the low end)."""
    cases = []
    for v in DECLARED:
        low, exclusive = (v.meta.ge, False) if v.meta.ge is not None else (v.meta.gt, True)
        if low is not None:
            step = 0.5 if isinstance(v.default, float) else 1
            cases.append((v.name, low + step if exclusive else low, low if exclusive else low - step))
    return cases


@pytest.mark.parametrize(("variable", "inside", "outside"), _bounded())
def test_every_bound_declared_on_a_field_is_checked(variable: str, inside: float, outside: float) -> None:
    # GATE_RELEVANCE at its floor needs the uncertain floor below it (a rule across the two).
    alongside = {"GATE_RELEVANCE_UNCERTAIN": "0"} if variable == "GATE_RELEVANCE" else {}
    load_settings({variable: str(inside), **alongside})
    with pytest.raises(SettingsError, match=rf"^{variable} must "):
        load_settings({variable: str(outside)})


def test_the_two_profiles_streamed_calls_share_one_base() -> None:
    shared = {f.name for f in msgspec.structs.fields(StreamedCallSettings)}
    assert {"timeout_s", "first_token_s", "prompt_tokens_per_s", "token_gap_s", "max_retries"} <= shared
    for profile, prefix in ((AnthropicSettings, "ANTHROPIC_"), (OpenAISettings, "OPENAI_")):
        assert issubclass(profile, StreamedCallSettings)
        names = {v.name for v in DECLARED if v.group == profile.__name__.removesuffix("Settings").lower()}
        assert {prefix + field.upper() for field in shared} <= names
    s = load_settings({"OPENAI_TOKEN_GAP_S": "7", "ANTHROPIC_TIMEOUT_S": "9"})
    assert (s.openai.bounds.gap_s, s.anthropic.bounds.ceiling_s) == (7.0, 9.0)
    assert (s.openai.bounds.ceiling_s, s.anthropic.bounds.gap_s) == (300.0, 10.0)  # each keeps its own defaults


def test_a_bad_value_in_a_group_names_its_variable() -> None:
    with pytest.raises(SettingsError, match=r"^RETRIEVAL_MODE: "):
        load_settings({"RETRIEVAL_MODE": "magic"})
    with pytest.raises(SettingsError, match="DB_TIMEOUT_S"):
        load_settings({"DB_TIMEOUT_S": "soon"})


def test_overrides_take_the_variables_names() -> None:
    s = Settings().with_overrides(gate_threshold=0.5, db_schema="t_x", retrieval_k=2, profile="anthropic")
    assert (s.gate.threshold, s.gate.min_claim) == (0.5, 0.40)
    assert (s.database.schema, s.retrieval.k, s.profile) == ("t_x", 2, "anthropic")
    assert s.with_overrides(retrieval_k=3).gate == s.gate  # the other settings are kept
    with pytest.raises(TypeError, match="gate_treshold"):
        Settings().with_overrides(gate_treshold=0.5)
