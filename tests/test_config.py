"""Settings: config.toml into dataclasses, unknown keys refused, the environment on top."""

from __future__ import annotations

import pytest

from backends import BackendError, choose_backend, create_backend
from weave.config import ConfigError, load_settings, settings_from_table


def test_shipped_config_loads_with_model_defaults():
    settings = load_settings(env={})
    assert settings.search.cutoff == 0.2  # LLooM's default, for large models
    assert settings.search_for("SmolLM2-135M-Instruct").cutoff == 0.1
    assert settings.search_for("some-70b").cutoff == 0.2
    assert len(settings.starting_stories) == 3
    assert choose_backend(settings, env={}).name == "mlx"


@pytest.mark.parametrize(
    "table, key",
    [
        ({"serch": {}}, "serch"),
        ({"search": {"cutof": 0.1}}, "cutof"),
        ({"mlx": {"modle": "x"}}, "modle"),
        ({"models": {"m": {"cutoff": 0.1, "depth": 3}}}, "depth"),
    ],
)
def test_unknown_keys_are_named(table, key):
    with pytest.raises(ConfigError, match=repr(key)):
        settings_from_table(table)


def test_bad_values_are_refused():
    with pytest.raises(ConfigError, match="cutoff"):
        settings_from_table({"search": {"cutoff": 3.0}})
    with pytest.raises(ConfigError, match="backend"):
        settings_from_table({"backend": {"name": "gpt"}})


def test_environment_overrides_in_one_place(tmp_path):
    env = {
        "LLAMA_API_URL": "http://127.0.0.1:9",
        "LLAMA_TIMEOUT": "7.5",
        "LLOOM_DATA_DIR": str(tmp_path),
        "LLOOM_KV_CACHE_MB": "64",
    }
    settings = load_settings(env=env)
    assert settings.llamacpp.url == "http://127.0.0.1:9"
    assert settings.llamacpp.timeout == 7.5
    assert settings.data_dir == tmp_path
    assert settings.mlx.kv_cache_mb == 64
    with pytest.raises(ConfigError, match="LLAMA_TIMEOUT"):
        load_settings(env={"LLAMA_TIMEOUT": "soon"})


def test_selection_order_and_no_silent_fallback():
    settings = load_settings(env={})
    both = {"LLAMA_API_URL": "http://a", "VLLM_API_URL": "http://b", "OPENAI_API_KEY": "k"}
    assert choose_backend(load_settings(env=both), env=both).name == "llamacpp"
    no_llama = {k: v for k, v in both.items() if k != "LLAMA_API_URL"}
    assert choose_backend(load_settings(env=no_llama), env=no_llama).name == "vllm"
    assert choose_backend(settings, env={"OPENAI_API_KEY": "k"}).name == "openai"
    forced = load_settings(env={"LLOOM_BACKEND": "openai"})
    with pytest.raises(BackendError, match="OPENAI_API_KEY"):
        create_backend(forced, env={})


def test_a_missing_model_folder_is_a_clear_error(tmp_path):
    settings = load_settings(env={"LLOOM_MODEL": str(tmp_path / "nothing-here")})
    with pytest.raises(BackendError, match="LLOOM_MODEL"):
        create_backend(settings, env={})


def test_the_sample_section_sets_ramify_defaults():
    from weave.ramify import RamifyParams

    assert load_settings(env={}).sample == RamifyParams()
    table = {"sample": {"n": 6, "temperature": 0.7, "min_p": 0.05, "max_tokens": 40}}
    assert settings_from_table(table).sample == RamifyParams(6, 0.7, 0.05, 40)
    with pytest.raises(ConfigError, match="'temp'"):
        settings_from_table({"sample": {"temp": 0.7}})
    with pytest.raises(ConfigError, match="min_p"):
        settings_from_table({"sample": {"min_p": 2.0}})
