import re
from pathlib import Path

import msgspec
import pytest

from provenance.errors import SettingsError
from provenance.settings import REPO_ROOT, VARIABLES, Settings, load_settings


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


def test_the_readme_table_names_real_variables() -> None:
    table = (REPO_ROOT / "README.md").read_text().split("| variable | default | meaning |")[1].split("\n\n")[0]
    named = set(re.findall(r"`([A-Z][A-Z0-9_]+)`", "\n".join(line.split("|")[1] for line in table.splitlines()[2:])))
    assert named and named <= set(VARIABLES)


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
