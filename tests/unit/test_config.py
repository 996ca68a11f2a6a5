"""One configuration dialect (tabsafe.model.config): the release spec, the evaluation config, the
differencing spec and the service settings read YAML through one guarded reader and report an
unknown key, a bad value, a bad file in one line naming the file."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tabsafe.errors import InputError
from tabsafe.evaluate.config import load_config
from tabsafe.model.config import MAX_BYTES, check_keys, read_yaml
from tabsafe.release.spec import ReleaseSpec
from tabsafe.risk.differencing import DifferencingSpec
from tabsafe.service.settings import Settings

READERS: dict[str, Callable[[Path], Any]] = {
    "release": ReleaseSpec.from_yaml,
    "evaluation": load_config,
    "differencing": DifferencingSpec.from_yaml,
    "service": lambda path: Settings.load(data=path.parent, config=path),
}

BOMB = "\n".join(
    [f"a0: &a0 [{', '.join(['lol'] * 9)}]"]
    + [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 9)]
) + "\n"


def _one_line(err: pytest.ExceptionInfo[InputError], path: Path, *parts: str) -> None:
    text = str(err.value)
    assert "\n" not in text and text.startswith(str(path)), text
    for part in parts:
        assert part in text, text


@pytest.mark.parametrize("reader", READERS, ids=list(READERS))
@pytest.mark.parametrize(("body", "message"), [
    (BOMB, "once its aliases are expanded"),                        # 9^9 values from 9 lines
    ("a: " + "[" * 100 + "]" * 100 + "\n", "nested more than 64 levels deep"),
    ("a: &x [1, *x]\n", "alias *x refers to a value that contains it"),
    ("tables: [\n", "not valid YAML (line 2)"),
])
def test_bad_yaml_is_one_line_in_every_reader(tmp_path: Path, reader: str, body: str, message: str) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(body)
    with pytest.raises(InputError) as err:
        READERS[reader](path)
    _one_line(err, path, message)


@pytest.mark.parametrize("reader", READERS, ids=list(READERS))
def test_an_absurd_size_is_refused_before_it_is_read(tmp_path: Path, reader: str) -> None:
    path = tmp_path / "config.yaml"
    with path.open("w") as f:
        f.write("# " + "x" * MAX_BYTES + "\n")
    with pytest.raises(InputError) as err:
        READERS[reader](path)
    _one_line(err, path, "at most 4 MiB")


@pytest.mark.parametrize(("reader", "body", "message"), [
    ("release", "tables: [{by: [sex]}]\ntabels: []\n", "unknown key 'tabels' (did you mean 'tables'?)"),
    ("release", "tables: [{by: [sex], wher: x}]\n", "table 1: unknown key 'wher' (did you mean 'where'?)"),
    ("evaluation", "data: d.csv\ntables: [{by: [sex]}]\nsetings: []\n",
     "unknown key 'setings' (did you mean 'settings'?)"),
    ("differencing", "data: d.csv\ntables: []\ntresholds: 3\n", "unknown key 'tresholds' (did you mean 'threshold'?)"),
    ("service", "limits: {max_grid_cell: 5}\n", "setting 'limits.max_grid_cell': unknown key (did you mean 'max_grid_cells'?)"),
])
def test_an_unknown_key_says_which_and_the_closest(tmp_path: Path, reader: str, body: str, message: str) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(body)
    with pytest.raises(InputError) as err:
        READERS[reader](path)
    text = str(err.value)
    assert "\n" not in text and message in text and path.name in text, text


def test_check_keys_names_all_known_keys_and_no_guess_when_nothing_is_close() -> None:
    with pytest.raises(InputError) as err:
        check_keys({"zzz": 1, "data": 2}, ["data", "tables"], "f.yaml", inside="table 3")
    assert str(err.value) == "f.yaml: table 3: unknown key 'zzz'; known: data, tables"


def test_files_named_in_a_service_config_are_relative_to_it(tmp_path: Path) -> None:
    config = tmp_path / "conf" / "serve.yaml"
    config.parent.mkdir()
    config.write_text("prepared: cache\nstore: keys.sqlite\n")
    s = Settings.load(data=tmp_path, config=config)
    assert s.prepared_path == config.parent / "cache" and s.store_path == config.parent / "keys.sqlite"


def test_a_plain_file_reads_as_before(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("a: &x {b: 1}\nc: *x\nd: [1, 2.5, text]\n")
    assert read_yaml(path) == {"a": {"b": 1}, "c": {"b": 1}, "d": [1, 2.5, "text"]}
