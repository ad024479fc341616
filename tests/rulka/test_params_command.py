"""rulka/params_command.py: `rulka params PRESET` lists a preset's effective values (after --config
and -cp) with their docs, and docs/configuration.md is what its --markdown form writes today."""
from __future__ import annotations

from pathlib import Path

import pytest

from rulka.cli import main
from rulka.params_command import DOC_PATH, format_text, markdown_command, markdown_document, preset_rows
from rulka.params_doc import parameter_rows
from rulka.presets import load_graph_manager

ROOT = Path(__file__).resolve().parents[2]
#: The preset docs/configuration.md documents, and the presets whose extra sections it appends.
DOC_PRESET, DOC_ALSO = "trackmania_iqn_uni", ["cartpole_iqn"]


def test_params_prints_effective_values_after_config_and_overrides(tmp_path, capsys):
    """`rulka params` applies --config then -cp as training does, and shows value, default, unit and docs."""
    config = tmp_path / "c.yaml"
    config.write_text("training:\n  n_steps: 5\n")
    assert main(["params", "cartpole_iqn", "--config", str(config), "-cp", "training.batch_size=256"]) == 0
    out = capsys.readouterr().out
    assert ("training.batch_size = 256   (preset 64, default 512)\n    type int | unit transitions | valid: a positive int"
            in out)
    assert "training.n_steps = 5   (preset 3, default 3)" in out
    assert "training.gamma_schedule = [[0, 0.99]] (staircase)   (default [[0, 0.999]" in out
    assert "Transitions sampled from the replay memory for one gradient step." in out
    assert "training.lr_schedule = [[0, 0.001]] (staircase)   (default [[0, 0.001], [3000000, 5e-05]" in out


def test_params_filters_keys(capsys):
    """KEY arguments keep only the parameters whose key contains one of them."""
    assert main(["params", "cartpole_iqn", "iqn_k", "prio_alpha"]) == 0
    keys = [line.split(" = ")[0] for line in capsys.readouterr().out.splitlines() if " = " in line
            and not line.startswith(" ")]
    assert keys == ["neural_network.iqn_k", "neural_network.iqn_kappa", "memory.prio_alpha"]


@pytest.mark.reliability
def test_params_refuses_bad_override_and_unknown_key(capsys):
    """A value out of range is refused as training refuses it; a KEY that matches nothing says so."""
    assert main(["params", "cartpole_iqn", "-cp", "training.batch_size=-5"]) == 2
    assert "training.batch_size: must be a positive int, got -5" in capsys.readouterr().err
    assert main(["params", "cartpole_iqn", "batch_sise"]) == 2
    assert "no parameter of cartpole_iqn matches batch_sise" in capsys.readouterr().err


def test_text_listing_marks_parameters_no_yaml_key_reaches():
    """TrackMania routes the YAML `rewards` section into `environment`: the generic reward filters
    cannot be set from YAML there, and the listing says so instead of suggesting a key that fails."""
    config = load_graph_manager("trackmania_iqn_uni").config
    rows = [r for r in parameter_rows(config) if r.key == "rewards.reward_scale"]
    assert not rows[0].settable
    assert "not reachable from YAML or -cp" in format_text(rows)


def test_configuration_doc_is_current():
    """docs/configuration.md is what the command in its header writes today."""
    expected = markdown_document(DOC_PRESET, markdown_command(DOC_PRESET, DOC_ALSO), DOC_ALSO)
    path = ROOT / DOC_PATH
    current = path.read_text(encoding="utf-8") if path.is_file() else ""
    assert current == expected, f"{DOC_PATH} is stale: run `{markdown_command(DOC_PRESET, DOC_ALSO)}`"


def test_markdown_command_writes_the_document(tmp_path, capsys):
    """`rulka params PRESET --markdown --out FILE` writes the reference; flags that would change the
    values are refused, since the document describes the preset as written."""
    out = tmp_path / "c.md"
    assert main(["params", "cartpole_iqn", "--markdown", "--out", str(out)]) == 0
    text = out.read_text()
    assert text.startswith("# Configuration reference: `cartpole_iqn`")
    assert "### `training.batch_size`" in text and "| [`training.batch_size`](#trainingbatch_size) | `64` | `512` |" in text
    assert main(["params", "cartpole_iqn", "--markdown", "-cp", "training.batch_size=3"]) == 2
    assert "drop --config, -cp and KEY" in capsys.readouterr().err


def test_preset_rows_accepts_overrides():
    """preset_rows is the programmatic form of `rulka params`."""
    rows = {r.key: r for r in preset_rows("cartpole_iqn", overrides=["memory.prio_alpha=0.5"])}
    assert rows["memory.prio_alpha"].value == 0.5
