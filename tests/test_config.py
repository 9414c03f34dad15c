import dataclasses
import tomllib
from enum import StrEnum
from pathlib import Path

import pytest

from memoryd.config import SECTIONS, Config, TierConfig, default_toml, load_config
from memoryd.errors import ConfigError
from memoryd.models import GraphEngine
from memoryd.settings import SETTINGS, Setting

REPO = Path(__file__).resolve().parents[1]
TOML = REPO / "config" / "memoryd.toml"


def test_defaults_need_no_file() -> None:
    config = load_config(None, {}, {})
    assert config.host == "127.0.0.1"
    assert config.port == 8765
    assert config.graph.engine == "ladybug"
    assert config.data_dir == Path("./var")


def test_file_then_env_then_flags(tmp_path: Path) -> None:
    path = tmp_path / "m.toml"
    path.write_text('port = 9000\n[graph]\nengine = "kuzu"\n[retrieval]\nbm25_weight = 2\n')
    config = load_config(path, {"MEMORYD_PORT": "9100"}, {"port": None})
    assert (config.port, config.graph.engine, config.retrieval.bm25_weight) == (9100, "kuzu", 2.0)
    config = load_config(path, {"MEMORYD_PORT": "9100"}, {"port": 9200})
    assert config.port == 9200


@pytest.mark.parametrize(
    ("env", "key"),
    [
        ({"MEMORYD_PORT": "eighty"}, "port"),
        ({"MEMORYD_PORT": "70000"}, "port"),
        ({"MEMORYD_GRAPH_ENGINE": "neo4j"}, "graph.engine"),
        ({"MEMORYD_ROUTER_THRESHOLD": "1.5"}, "router.threshold"),
        ({"MEMORYD_AUTH_ENABLED": "maybe"}, "auth.enabled"),
    ],
)
def test_bad_values_name_the_key(env: dict[str, str], key: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(None, env, {})
    assert info.value.key == key
    assert key in str(info.value)


def test_unknown_setting_in_file(tmp_path: Path) -> None:
    path = tmp_path / "m.toml"
    path.write_text("[graph]\nengin = 'kuzu'\n")
    with pytest.raises(ConfigError, match=r"graph\.engin"):
        load_config(path, {}, {})


def test_bad_toml_is_a_config_error(tmp_path: Path) -> None:
    path = tmp_path / "m.toml"
    path.write_text("port = \n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_config(path, {}, {})


def _flatten(table: dict, prefix: str = "") -> dict:
    out = {}
    for key, value in table.items():
        if isinstance(value, dict):
            out.update(_flatten(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def test_every_setting_documented_in_the_default_file() -> None:
    documented = _flatten(tomllib.loads(TOML.read_text()))
    assert set(documented) == {s.name for s in SETTINGS}
    for setting in SETTINGS:
        assert documented[setting.name] == setting.default, setting.name
    text = TOML.read_text()
    for setting in SETTINGS:
        assert setting.help in text, f"{setting.name} help missing from {TOML}"


def test_default_file_is_generated_from_the_table() -> None:
    assert TOML.read_text() == default_toml(), "run `make config`"


def test_token_hidden_in_repr() -> None:
    config = load_config(None, {"MEMORYD_AUTH_TOKEN": "s3cret"}, {})
    assert "s3cret" not in repr(config)


def test_each_typed_config_is_its_section_of_the_table() -> None:
    tables: dict[str, list[Setting]] = {}
    for setting in SETTINGS:
        table = setting.name.rpartition(".")[0]
        tables.setdefault(table, []).append(setting)
    assert [f.name for f in dataclasses.fields(Config)] == [s.name for s in tables.pop("")] + [
        cls.NAME for cls in SECTIONS
    ]
    assert [cls.NAME for cls in SECTIONS] == list(tables)
    for cls in SECTIONS:
        settings = tables[cls.NAME]
        assert [f.name for f in dataclasses.fields(cls)] == [
            s.name.rpartition(".")[2] for s in settings
        ], cls.__name__
        for f, setting in zip(dataclasses.fields(cls), settings, strict=True):
            assert f.type == type(setting.default).__name__, setting.name
            assert f.default is dataclasses.MISSING, f"{setting.name}: a default of its own"
            assert f.default_factory is dataclasses.MISSING, setting.name


def test_closed_sets_of_values_are_enums() -> None:
    for setting in SETTINGS:
        if setting.choices:
            kind = type(setting.default)
            assert issubclass(kind, StrEnum), setting.name
            assert all(type(c) is kind for c in setting.choices), setting.name
    config = load_config(None, {"MEMORYD_GRAPH_ENGINE": "kuzu"}, {})
    assert config.graph.engine is GraphEngine.KUZU
    assert TierConfig.defaults(cache_size=3).cache_size == 3
