import pytest

from mt.config import ModelConfig, config_from_dict, load_config
from mt.errors import ConfigError
from tests.conftest import TINY, run_mt


def test_tiny_config_loads_with_typed_sections():
    cfg = load_config(TINY)
    assert cfg.model.d_model == 64 and isinstance(cfg.train.lr_scale, float)
    assert cfg.tokenizer.joint is True and cfg.model.norm == "post"


def test_defaults_come_from_the_dataclass():
    cfg = load_config(None)
    assert cfg.model == ModelConfig()
    assert (cfg.decode.beam_size, cfg.decode.alpha, cfg.decode.max_len_b) == (4, 0.6, 50)


def test_set_overrides_are_parsed_to_the_field_type():
    cfg = load_config(TINY, ["model.d_model=128", "train.lr_scale=2", "tokenizer.joint=false",
                             "model.norm=pre", "output_dir=/tmp/x", "data.dataset_config=null"])
    assert cfg.model.d_model == 128
    assert cfg.train.lr_scale == 2.0 and isinstance(cfg.train.lr_scale, float)
    assert cfg.tokenizer.joint is False and cfg.model.norm == "pre" and cfg.output_dir == "/tmp/x"


@pytest.mark.parametrize("override, message", [
    ("model.d_modle=3", "unknown key 'model.d_modle'"),
    ("modle.d_model=3", "unknown section 'modle'"),
    ("model.d_model=big", "model.d_model must be int, got 'big'"),
    ("model.dropout=-0.1", "model.dropout must be in [0, 1)"),
    ("model.n_heads=5", "model.d_model (64) must be divisible by model.n_heads (5)"),
    ("model.norm=middle", "model.norm must be one of post, pre"),
    ("train.batch_tokens=0", "train.batch_tokens must be at least 1"),
    ("data.pad_to_multiple=0", "data.pad_to_multiple must be auto or a positive integer, got 0"),
    ("data.pad_to_multiple=eight", "data.pad_to_multiple must be auto or a positive integer, got 'eight'"),
    ("nonsense", "expected section.key=value"),
])
def test_bad_overrides_name_the_key(override, message):
    with pytest.raises(ConfigError) as err:
        load_config(TINY, [override])
    assert message in str(err.value)


def test_unknown_key_in_file_lists_allowed_keys(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("model:\n  d_model: 64\n  layers: 3\n")
    with pytest.raises(ConfigError, match=r"c.yaml: unknown key 'model.layers' \(allowed: d_model, d_ff"):
        load_config(path)


def test_malformed_yaml_names_the_line(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("model:\n  d_model: 64\n  n_heads: [4\ntrain:\n  seed: 1\n")
    with pytest.raises(ConfigError, match=r"bad.yaml: line \d+: malformed YAML"):
        load_config(path)


def test_cli_reports_config_errors_in_one_line(tmp_path):
    proc = run_mt("info", TINY, "--set", "model.d_model=abc", check=False)
    assert proc.returncode != 0
    assert proc.stderr.strip().splitlines() == [f"error: {TINY}: model.d_model must be int, got 'abc'"]


def test_gradient_clipping_is_off_as_in_the_paper_but_on_for_several_directions():
    """A four-direction model at the demo's schedule ignored its source unclipped and used it clipped
    (docs/multilingual.md): a run of several directions clips at 1.0 unless told otherwise."""
    four = {"train": [{"src": f"a.{s}", "tgt": f"a.{t}", "src_lang": s, "tgt_lang": t}
                      for s, t in (("de", "en"), ("en", "de"), ("fr", "en"), ("en", "fr"))]}
    assert config_from_dict({"data": four}).train.clip_norm == 1.0
    assert config_from_dict({"data": four, "train": {"clip_norm": 0}}).train.clip_norm == 0.0
    one = {"train": [{"src": "a.tmx", "src_lang": "de", "tgt_lang": "en"}]}  # languages named, one direction
    assert config_from_dict({"data": one}).train.clip_norm == 0.0
    assert load_config(TINY).train.clip_norm == 0.0
