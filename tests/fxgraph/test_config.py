"""Config: typed fields, patching, environment overrides and clear errors."""

import pytest

from dynajit.fxgraph import Config, ConfigError, option


class SampleConfig(Config):
    cache_size_limit: int = option(8, "entries per code object before running eagerly")
    verbose: bool = option(False, "print more")
    ratio: float = option(0.5, "a fraction")
    mode: str = option("default", "how hard to try", choices=("default", "max-autotune"))
    cache_dir: str | None = option(None, "where to keep artifacts")


def test_defaults_docs_and_assignment():
    config = SampleConfig()
    assert config.cache_size_limit == 8
    assert config.describe()["verbose"] == "print more"
    assert config.defaults()["mode"] == "default"
    config.cache_size_limit = 16
    config.ratio = 1  # an int is a fine float
    config.cache_dir = "/tmp/x"
    assert config.to_dict() == {
        "cache_size_limit": 16,
        "verbose": False,
        "ratio": 1,
        "mode": "default",
        "cache_dir": "/tmp/x",
    }
    assert "cache_size_limit" in dir(config)
    assert repr(config).startswith("SampleConfig(cache_size_limit=16")


def test_patch_as_context_manager_restores_on_exit_and_on_error():
    config = SampleConfig()
    with config.patch(cache_size_limit=1, verbose=True) as patched:
        assert patched is config
        assert (config.cache_size_limit, config.verbose) == (1, True)
        with config.patch({"cache_size_limit": 2}):
            assert config.cache_size_limit == 2
        assert config.cache_size_limit == 1
    assert (config.cache_size_limit, config.verbose) == (8, False)
    with pytest.raises(KeyError), config.patch(mode="max-autotune"):
        assert config.mode == "max-autotune"
        raise KeyError("boom")
    assert config.mode == "default"


def test_patch_as_decorator_applies_on_each_call():
    config = SampleConfig()

    @config.patch(verbose=True)
    def read():
        """Docstring kept."""
        return config.verbose

    assert read() is True and read() is True
    assert config.verbose is False
    assert read.__doc__ == "Docstring kept."


def test_environment_overrides_when_created(monkeypatch):
    monkeypatch.setenv("DYNAJIT_CACHE_SIZE_LIMIT", "32")
    monkeypatch.setenv("DYNAJIT_VERBOSE", "yes")
    monkeypatch.setenv("DYNAJIT_RATIO", "0.25")
    monkeypatch.setenv("DYNAJIT_MODE", "max-autotune")
    config = SampleConfig()
    assert (config.cache_size_limit, config.verbose, config.ratio, config.mode) == (32, True, 0.25, "max-autotune")
    assert config.defaults()["cache_size_limit"] == 8


@pytest.mark.parametrize(
    ("name", "raw", "message"),
    [
        ("DYNAJIT_CACHE_SIZE_LIMIT", "many", "expected int"),
        ("DYNAJIT_VERBOSE", "maybe", "expected a boolean"),
        ("DYNAJIT_MODE", "fast", "one of"),
    ],
)
def test_bad_environment_values_are_clear_errors(monkeypatch, name, raw, message):
    monkeypatch.setenv(name, raw)
    with pytest.raises(ConfigError, match=message):
        SampleConfig()


def test_unknown_names_suggest_close_matches():
    config = SampleConfig()
    with pytest.raises(ConfigError, match="did you mean 'cache_size_limit'"):
        config.cache_size_limt = 3
    with pytest.raises(AttributeError, match="did you mean 'verbose'"):
        config.verbos
    with pytest.raises(ConfigError, match="Known fields: cache_dir, cache_size_limit"):
        config.patch(nothing_like_it=1)
    assert not hasattr(config, "zzz")


def test_type_and_choice_errors_change_nothing():
    config = SampleConfig()
    before = config.to_dict()
    with pytest.raises(ConfigError, match="takes int, got str"):
        config.cache_size_limit = "8"
    with pytest.raises(ConfigError, match="takes bool"):
        config.verbose = 1
    with pytest.raises(ConfigError, match="takes one of"):
        config.mode = "fast"
    with pytest.raises(ConfigError):
        config.patch(verbose=True, cache_size_limit="x")
    assert config.to_dict() == before
    assert issubclass(ConfigError, TypeError) and issubclass(ConfigError, AttributeError)


def test_subclasses_inherit_and_extend_fields():
    class Extended(SampleConfig):
        extra: int = option(1, "one more")

    config = Extended()
    assert config.cache_size_limit == 8 and config.extra == 1
    with pytest.raises(ConfigError):
        SampleConfig().extra = 2
