"""Settings: config.toml into dataclasses, unknown keys refused, the environment on top."""

from __future__ import annotations

import re
import time
from dataclasses import fields
from pathlib import Path

import pytest

from backends import BackendError, choose_backend, create_backend
from weave.backend_settings import LlamaCppSettings, MLXSettings, OpenAISettings, VLLMSettings
from weave.bounds import bound_of
from weave.config import MAX_SETTINGS_BYTES, ConfigError, load_settings, settings_from_table
from weave.search.params import SearchParams
from weave.search.ramify import RamifyParams


def test_shipped_config_loads_with_the_relative_rule_for_every_model():
    settings = load_settings(env={})
    assert settings.search == SearchParams()  # config.toml says what the code does
    assert (settings.search.rule, settings.search.cutoff) == ("relative", 0.05)
    # the rule adapts to each model: no model needs a section of its own
    assert settings.search_for("SmolLM2-135M-Instruct") == settings.search
    assert settings.search_for("some-70b") == settings.search
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


def test_a_database_url_keeps_the_stories_and_its_password_is_never_shown(tmp_path):
    url = "postgresql://lloom:hunter2@db.example.org/lloom"
    assert load_settings(env={"LLOOM_DATA_DIR": str(tmp_path)}).stories_at == tmp_path
    settings = load_settings(env={"LLOOM_DATA_DIR": str(tmp_path), "LLOOM_DATABASE_URL": url})
    assert settings.stories_at == url and "hunter2" not in repr(settings)
    assert settings_from_table({"data": {"url": url}}).stories_at == url
    for where, given in (("LLOOM_DATABASE_URL", {"LLOOM_DATABASE_URL": "mysql://u:hunter2@h/d"}),
                         ("[data] url", None)):  # fmt: skip
        with pytest.raises(ConfigError, match=re.escape(where) + ".* is not a database URL") as e:
            if given:
                load_settings(env=given)
            else:
                settings_from_table({"data": {"url": "sqlite://u:hunter2@h/d"}})
        assert "hunter2" not in str(e.value) and "postgresql://" in str(e.value)


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


def refused(tmp_path, text: str) -> tuple[Path, str]:
    """A config.toml holding `text`, and the `ConfigError` message loading it raises."""
    path = tmp_path / "config.toml"
    path.write_text(text)
    with pytest.raises(ConfigError) as error:
        load_settings(path, env={})
    return path, str(error.value)


@pytest.mark.parametrize(
    "text, where, expected",
    [
        ("[models]\nfoo = 1\n", "[models]", "foo = 1 should be a table"),
        ("search = 1\n", "", "search = 1 should be a table"),
        ("[data]\nfolder = 5\n", "[data] folder", "expected text, got 5"),
        ('[data]\nfolder = "a\\u0000b"\n', "[data] folder", "a NUL character cannot be"),
        ('[mlx]\nmodel = "a\\u0000b"\n', "[mlx] model", "a NUL character cannot be"),
        ('[mlx]\nkv_cache_mb = "x"\n', "[mlx] kv_cache_mb", "expected a whole number, got 'x'"),
        ("[mlx]\nkv_cache_mb = 1.5\n", "[mlx] kv_cache_mb", "expected a whole number, got 1.5"),
        ("[mlx]\nprefill_chunk = 0\n", "[mlx] prefill_chunk", "whole number in 1..65536 tokens"),
        ("[mlx]\nprefill_chunk = -4\n", "[mlx] prefill_chunk", "in 1..65536 tokens, not -4"),
        ("[mlx]\nbatch_window_ms = -1\n", "[mlx] batch_window_ms", "in 0..200 ms, not -1.0"),
        ('[models."m"]\ncutoff = "abc"\n', "[models.'m'] cutoff", "expected a number, got 'abc'"),
        ("[models.m]\ncutoff = 3.0\n", "[models.'m'] cutoff", "must be in 0..1, not 3.0"),
        ("[search]\nauto_stop = 1\n", "[search] auto_stop", "expected true or false, got 1"),
        ("[search]\nmax_depth = true\n", "[search] max_depth", "expected a whole number, got True"),
        ("[search]\nuse_chains = 1\n", "[search] use_chains", "expected true or false"),
        ("[backend]\nname = 3\n", "[backend] name", "expected text, got 3"),
        ("[stories]\nstarting = [1]\n", "[stories] starting", "expected a list of text"),
        ("[llamacpp]\ntimeout = 0\n", "[llamacpp] timeout", "must be in 0.1..3600 s, not 0.0"),
        ("[vllm]\ntimeout = inf\n", "[vllm] timeout", "must be in 0.1..3600 s, not inf"),
        ("[openai]\ntimeout = nan\n", "[openai] timeout", "must be in 0.1..3600 s, not nan"),
        ('[openai]\ntimeout = "60"\n', "[openai] timeout", "expected a number, got '60'"),
        ('[sample]\nseed = "x"\n', "[sample] seed", "expected a whole number, got 'x'"),
        ("[sample]\ntemperature = nan\n", "[sample] temperature", "must be in 0..2, not nan"),
    ],
)
def test_a_value_of_the_wrong_type_names_key_file_and_type(tmp_path, text, where, expected):
    path, message = refused(tmp_path, text)
    assert message.startswith(f"{path} {where}".strip()) and expected in message, message


@pytest.mark.parametrize(
    "variable, value",
    [
        ("LLAMA_TIMEOUT", "inf"),
        ("LLAMA_TIMEOUT", "0"),
        ("VLLM_TIMEOUT", "-3"),
        ("VLLM_TIMEOUT", "nan"),
        ("OPENAI_TIMEOUT", "1e999"),
        ("OPENAI_TIMEOUT", "soon"),
        ("LLOOM_KV_CACHE_MB", "-1"),
        ("LLAMA_TIMEOUT", "1e10"),  # once an OverflowError deep in a request
        ("VLLM_TIMEOUT", "1e10"),
        ("OPENAI_TIMEOUT", "1e12"),
        ("LLOOM_KV_CACHE_MB", str(2**62)),
        ("OPENAI_ENDPOINT", "x"),
    ],
)
def test_an_unusable_environment_value_names_the_variable(variable, value):
    with pytest.raises(ConfigError, match=f"^{variable}"):
        load_settings(env={variable: value})


def test_timeouts_come_from_the_environment_for_every_remote_backend():
    env = {"LLAMA_TIMEOUT": "2.5", "VLLM_TIMEOUT": "3", "OPENAI_TIMEOUT": "4"}
    settings = load_settings(env=env)
    assert (settings.llamacpp.timeout, settings.vllm.timeout, settings.openai.timeout) == (
        2.5,
        3.0,
        4.0,
    )


def test_a_settings_file_that_is_not_utf8_is_named(tmp_path):
    path = tmp_path / "config.toml"
    path.write_bytes("[search]\n# caf\xe9\ncutoff = 0.2\n".encode("latin-1"))
    with pytest.raises(ConfigError, match=f"^{path} is not UTF-8"):
        load_settings(path, env={})


WITH_SECTION = settings_from_table({"models": {"SmolLM2-135M-Instruct": {"cutoff": 0.1}}})


@pytest.mark.parametrize(
    "served_as",
    [
        "SmolLM2-135M-Instruct",
        "smollm2-135m-instruct",
        "SmolLM2-135M-Instruct.Q4_1.gguf",  # llama-server's model_path, last part
        "/models/SmolLM2-135M-Instruct-Q4_K_M.gguf",
        "HuggingFaceTB/SmolLM2-135M-Instruct",  # vLLM's served name
        "SmolLM2-135M-Instruct-f16",
        "SmolLM2-135M-Instruct-4bit",
    ],
)
def test_a_model_section_applies_to_the_names_users_give_the_model(served_as):
    settings = WITH_SECTION
    assert settings.model_section(served_as) == "SmolLM2-135M-Instruct"
    assert settings.search_for(served_as).cutoff == 0.1


def test_a_model_section_never_applies_to_another_model():
    settings = WITH_SECTION
    for other in ("SmolLM2-360M-Instruct.Q4_1.gguf", "SmolLM2-135M", "gpt-4o-mini"):
        assert settings.model_section(other) is None
        assert settings.search_for(other).cutoff == 0.05


@pytest.mark.parametrize("content", [b"", b"not a model", bytes(range(256)) * 64])
def test_a_broken_model_folder_is_a_backend_error_naming_it(tmp_path, embedded_model_path, content):
    folder = tmp_path / "broken"
    folder.mkdir()
    for name in ("config.json", "tokenizer.json", "tokenizer_config.json"):
        (folder / name).write_bytes((embedded_model_path / name).read_bytes())
    whole = (embedded_model_path / "model.safetensors").read_bytes()
    (folder / "model.safetensors").write_bytes(content or whole[: len(whole) // 3])  # truncated
    settings = load_settings(env={"LLOOM_MODEL": str(folder)})
    with pytest.raises(BackendError, match=f"^mlx at {folder}: cannot load"):
        create_backend(settings, env={})


def test_the_sample_section_sets_ramify_defaults():
    assert load_settings(env={}).sample == RamifyParams()
    table = {"sample": {"n": 6, "temperature": 0.7, "min_p": 0.05, "max_tokens": 40, "seed": 7}}
    assert settings_from_table(table).sample == RamifyParams(6, 0.7, 0.05, 40, 7)
    with pytest.raises(ConfigError, match="'temp'"):
        settings_from_table({"sample": {"temp": 0.7}})
    with pytest.raises(ConfigError, match="min_p"):
        settings_from_table({"sample": {"min_p": 2.0}})


# -- every number has a range, checked where it enters ---------------------------------------
@pytest.mark.parametrize(
    "cls", [SearchParams, RamifyParams, MLXSettings, LlamaCppSettings, VLLMSettings, OpenAISettings]
)
def test_every_number_and_choice_carries_its_bounds(cls):
    for f in fields(cls):
        if str(f.type).startswith(("int", "float", "Score")) or f.name == "endpoint":
            assert bound_of(cls, f.name) is not None, f.name


@pytest.mark.parametrize(
    "text, where, expected",
    [
        (f"[mlx]\nkv_cache_mb = {2**62}\n", "[mlx] kv_cache_mb", "in 0..262144 MiB, not 46116"),
        (f"[mlx]\nprefill_chunk = {2**62}\n", "[mlx] prefill_chunk", "in 1..65536 tokens"),
        (
            "[mlx]\nbatch_window_ms = 1e9\n",
            "[mlx] batch_window_ms",
            "in 0..200 ms, not 1000000000.0",
        ),
        ("[mlx]\nbatch_window_ms = 1e300\n", "[mlx] batch_window_ms", "in 0..200 ms, not 1e+300"),
        ("[mlx]\nbatch_window_ms = nan\n", "[mlx] batch_window_ms", "in 0..200 ms, not nan"),
        ("[llamacpp]\ntimeout = 1e10\n", "[llamacpp] timeout", "in 0.1..3600 s"),
        ("[search]\ncutoff = nan\n", "[search] cutoff", "must be in 0..1, not nan"),
        ("[search]\nmultiplier = inf\n", "[search] multiplier", "must be in 0..10, not inf"),
        ("[search]\nmax_suggestions = 101\n", "[search] max_suggestions", "in 1..100, not 101"),
        ("[search]\nscore = 'max'\n", "[search] score", "'words', 'joint', 'lloom', not 'max'"),
        ('[models."m"]\nmultiplier = -inf\n', "[models.'m'] multiplier", "not -inf"),
        ("[sample]\nmin_p = nan\n", "[sample] min_p", "must be in 0..1, not nan"),
        ("[sample]\nseed = -1\n", "[sample] seed", "in 0..2147483647, not -1"),
        ("[openai]\nendpoint = 'x'\n", "[openai] endpoint", "'completions', not 'x'"),
    ],
)
def test_a_value_outside_its_bounds_names_file_and_key(tmp_path, text, where, expected):
    path, message = refused(tmp_path, text)
    assert message.startswith(f"{path} {where} must be") and expected in message, message
    assert "OPENAI_ENDPOINT" not in message  # the file is at fault, not the variable


def test_whole_numbers_for_decimal_settings_are_taken_as_decimals(tmp_path):
    path = tmp_path / "config.toml"
    path.write_text("[search]\ncutoff = 0\nmultiplier = 2\n[mlx]\nbatch_window_ms = 5\n")
    settings = load_settings(path, env={"LLAMA_TIMEOUT": "3600"})
    assert (settings.search.cutoff, settings.search.multiplier) == (0.0, 2.0)
    assert type(settings.search.cutoff) is float and type(settings.mlx.batch_window_ms) is float
    assert settings.llamacpp.timeout == 3600.0  # the bounds are inclusive


@pytest.mark.parametrize("device", ["/dev/zero", "/dev/urandom"])
def test_a_settings_file_without_end_is_refused_without_reading_it_all(device):
    with pytest.raises(ConfigError, match=f"^{device} is longer than 1 MiB: not a settings file"):
        load_settings(env={"LLOOM_CONFIG": device})


def test_a_settings_file_at_the_cap_is_read_and_one_past_it_refused(tmp_path):
    path = tmp_path / "config.toml"
    padding = "#" * (MAX_SETTINGS_BYTES - len("[search]\ncutoff = 0.3\n") - 1) + "\n"
    path.write_text("[search]\ncutoff = 0.3\n" + padding)
    assert path.stat().st_size == MAX_SETTINGS_BYTES
    assert load_settings(path, env={}).search.cutoff == 0.3
    path.write_text("[search]\ncutoff = 0.3\n#" + padding)
    with pytest.raises(ConfigError, match="longer than 1 MiB"):
        load_settings(path, env={})


@pytest.mark.parametrize(
    "text, expected",
    [
        ("a = " + "[" * 100_000, "nest too deeply"),
        ("a = " + "{b = " * 100_000, "nest too deeply"),
        ("a" + ".a" * 100_000 + " = 1", "line 1: a key of more than 32 parts"),  # once minutes
        ("[search]\n[" + "a." * 40 + "a]", "line 2: a key of more than 32 parts"),
    ],
    ids=["arrays", "tables", "dotted key", "dotted header"],
)
def test_a_settings_file_nested_absurdly_deep_is_one_clear_error_at_once(tmp_path, text, expected):
    path = tmp_path / "config.toml"
    path.write_text(text)
    started = time.perf_counter()
    with pytest.raises(ConfigError, match=f"^{path} .*{expected}"):
        load_settings(path, env={})
    assert time.perf_counter() - started < 5


@pytest.mark.parametrize(
    "text, where",
    [
        (f"[openai]\nendpoint = '{'x' * 100_000}'\n", "[openai] endpoint"),
        ("[data]\nfolder = [[[[[[[[[[1]]]]]]]]]]\n", "[data] folder"),
    ],
    ids=["long", "deep"],
)
def test_a_long_or_deep_offending_value_is_shown_short(tmp_path, text, where):
    path, message = refused(tmp_path, text)
    assert message.startswith(f"{path} {where}") and len(message) < len(str(path)) + 150, message
