from pathlib import Path

import pytest

from provenance.settings import SettingsError, load_settings


def test_defaults_choose_local_profile_without_a_key() -> None:
    s = load_settings({})
    assert s.profile == "local"
    assert s.retrieval_k == 4
    assert (s.gate_threshold, s.gate_min_claim) == (0.70, 0.40)


def test_a_key_selects_the_anthropic_profile() -> None:
    assert load_settings({"ANTHROPIC_API_KEY": "sk-test"}).profile == "anthropic"
    assert load_settings({"ANTHROPIC_API_KEY": "sk-test", "PROFILE": "local"}).profile == "local"


@pytest.mark.parametrize(
    ("env", "variable"),
    [
        ({"PORT": "eighty"}, "PORT"),
        ({"PORT": "70000"}, "PORT"),
        ({"GATE_THRESHOLD": "1.5"}, "GATE_THRESHOLD"),
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
    assert s.trusted_proxies == ("10.0.0.1", "10.1.0.0/16")
    assert s.data_dir == Path("/tmp/x")
    assert s.cors_origins == ("https://a.example",)
