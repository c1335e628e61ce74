"""posenc_lib.rope_inspect and its command line: chapter 8's numbers for any config.json, the wavelength
figure, clear one-line errors, and the pair layout table checked against each family's own code."""
import json
import math
import re
import subprocess
import sys
from importlib import resources
from pathlib import Path

import nbformat
import pytest
import torch

import posenc_lib as pl
from posenc_lib.rope_config import PAIR_LAYOUTS, pair_layout, rope_layer_types
from posenc_lib.rope_inspect import inspect_config, lengths_of, main, rope_lengths, turning_pairs, wavelength_figure

ROOT = Path(__file__).resolve().parents[1]
MODELS = json.loads(resources.files("posenc_lib").joinpath("data/model_rope_configs.json").read_text())["models"]


def chapter_8_table() -> dict[str, dict]:
    """The table chapter 8 prints in §1 (its stored output), with the attention factor §3 prints for the same rows:
    label -> base, r, L0, L, att., turning counts."""
    nb = nbformat.read(ROOT / "notebooks" / "08_rope_in_models.ipynb", as_version=4)
    outputs = ["".join(o.get("text", "") for o in c.outputs) for c in nb.cells if c.cell_type == "code"]
    text = next(out for out in outputs if "turning within L0" in out)
    factors = next(out for out in outputs if "(the attention factor:" in out)
    att = {}
    for line in factors.splitlines()[1:]:
        if line.startswith("* "):  # the footnote (DeepSeek's softmax scale), not a row
            break
        m = re.match(r"^(.+?)\s+([\d.]+)\*?$", line)  # * : DeepSeek's correction sits in the softmax scale
        assert m, line
        att[m.group(1)] = m.group(2)
    rows = {}
    for line in text.splitlines()[1:]:
        m = re.match(r"^(.+?)\s+(\S+)\s+(\d+)\s+(\S+)\s+(\d+)\s+(\S+) \| (\S+)\s+(?:[\d.]+|–)$", line)  # then the reach
        assert m, line
        label, base, r, L0, L, t0, t1 = m.groups()
        rows[label] = {"base": float(base), "r": int(r), "L0": None if L0 == "–" else int(L0), "L": int(L),
                       "att": att[label], "t0": None if t0 == "–" else t0, "t1": t1}
    assert set(att) == set(rows)  # §3 prints a factor for every row of §1
    return rows


def test_inspect_gives_chapter_8s_numbers_for_every_bundled_config():
    """Every row of chapter 8's table, from inspect_config: base, r, L0, L, attention factor, turning pairs."""
    table = chapter_8_table()
    seen = set()
    for name, entry in MODELS.items():
        for row in inspect_config(entry["config"], name=name).rows:
            seen.add(row.label)
            want = table[row.label]
            # §1's L is the longer of max_position_embeddings and factor x L0; inspect's L is the context and it
            # names factor x L0 beside it: they differ only where factor x L0 is past the context (Qwen's card)
            past = row.scaled_length is not None and row.context is not None and row.scaled_length > row.context
            L = row.scaled_length if past and row.L == row.context else row.L
            assert (row.base, row.rotary_dim, row.L0, L) == (want["base"], want["r"], want["L0"], want["L"])
            assert f"{row.attention_factor:.3f}" == want["att"]
            n = row.pairs
            assert want["t0"] == (None if row.L0 is None else f"{row.turning_within_L0}/{n}")
            assert want["t1"] == f"{turning_pairs(row.inv_freq, L)}/{n}"
    assert seen == set(table)  # one inspect row per table row, and the other way round


def test_turning_pairs_counts_wavelengths_at_most_the_length():
    inv = torch.tensor([1.0, 0.1, 0.01, 0.0])  # wavelengths 6.28, 62.8, 628, infinite
    assert [turning_pairs(inv, L) for L in (6, 7, 63, 629, 10**9)] == [0, 1, 2, 3, 3]


def test_lengths_follow_windows_chunks_and_factor():
    gemma = MODELS["Gemma 3 4B"]["config"]
    assert rope_layer_types(gemma) == ["sliding_attention", "full_attention"]
    assert rope_lengths(gemma, "sliding_attention") == (None, 1024)
    scout = MODELS["Llama 4 Scout 17B-16E Instruct"]["config"]
    assert rope_lengths(scout) == (8192, 8192)  # chunked RoPE layers
    qwen_yarn = MODELS["Qwen2.5 7B Instruct + YaRN (model card)"]["config"]
    assert rope_lengths(qwen_yarn) == (32768, 32768)  # the context is max_position_embeddings ...
    assert lengths_of(qwen_yarn).scaled == 4 * 32768  # ... and factor x L0 is named as that
    no_original = {"head_dim": 64, "max_position_embeddings": 4096, "rope_scaling": {"type": "yarn", "factor": 4.0}}
    assert rope_lengths(no_original) == (4096, 4096) and lengths_of(no_original).scaled == 16384  # L0 falls back
    no_context = {"head_dim": 64, "rope_scaling": {"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 2048}}
    assert rope_lengths(no_context) == (2048, 8192)  # no max_position_embeddings: factor x L0
    dynamic = {"head_dim": 64, "max_position_embeddings": 4096, "rope_scaling": {"type": "dynamic", "factor": 2.0}}
    assert rope_lengths(dynamic) == (4096, 8192)  # dynamic NTK's base grows past the context, to factor x L0


def test_both_config_forms_give_the_same_report():
    """Gemma 3's older file (rope_local_base_freq) and transformers 5's per-layer rope_parameters."""
    old = MODELS["Gemma 3 4B"]["config"]["text_config"]
    new = {k: v for k, v in old.items() if k not in ("rope_theta", "rope_local_base_freq", "rope_scaling")}
    new["rope_parameters"] = {"sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
                              "full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1e6}}
    a, b = inspect_config(old).to_dict(), inspect_config(new).to_dict()
    assert a["ropes"] == b["ropes"] and a["layout"] == b["layout"] == "half"


def test_mrope_and_proportional_configs():
    qwen_vl = {"model_type": "qwen2_vl", "hidden_size": 3584, "num_attention_heads": 28, "rope_theta": 1e6,
               "max_position_embeddings": 32768, "rope_scaling": {"type": "mrope", "mrope_section": [16, 24, 24]}}
    report = inspect_config(qwen_vl)
    assert report.rows[0].mrope_section == (16, 24, 24) and "MRoPE sections [16, 24, 24]" in report.text()
    gemma4 = {"model_type": "gemma4_text", "head_dim": 256, "global_head_dim": 512, "max_position_embeddings": 131072,
              "layer_types": ["sliding_attention"] * 5 + ["full_attention"],
              "rope_parameters": {"sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
                                  "full_attention": {"rope_type": "proportional", "rope_theta": 1e6,
                                                     "partial_rotary_factor": 0.25}}}
    full = next(row for row in inspect_config(gemma4).rows if row.layer_type == "full_attention")
    assert (full.head_dim, full.rotary_dim, full.pairs, full.zero_frequency_pairs) == (512, 128, 256, 192)
    assert any("proportional RoPE" in w for w in inspect_config(gemma4).warnings)


def test_pitfall_warnings():
    def warnings(cfg):
        return " | ".join(inspect_config(cfg).warnings)

    assert "switches from short_factor to long_factor" in warnings(MODELS["Phi-3 mini 128k instruct"]["config"])
    dynamic = {"head_dim": 64, "max_position_embeddings": 4096, "rope_scaling": {"type": "dynamic", "factor": 2.0}}
    assert "keys already cached keep the base" in warnings(dynamic)
    assert "max_position_embeddings (32768) is L0" in warnings(
        MODELS["Qwen2.5 7B Instruct + YaRN (model card)"]["config"])
    assert "no original_max_position_embeddings" in warnings(
        {"head_dim": 64, "max_position_embeddings": 4096, "rope_scaling": {"type": "yarn", "factor": 4.0}})
    assert "16 x L0 but factor is 8" in warnings(MODELS["Llama 3.1 8B"]["config"])
    assert "a kernel must rotate rotary_dim" in warnings({"head_dim": 64, "partial_rotary_factor": 0.25})
    assert "not in posenc_lib's table" in warnings({"model_type": "my_model", "head_dim": 64})
    assert warnings(MODELS["Qwen2.5 7B Instruct"]["config"]) == ""  # plain RoPE: nothing to warn about


def test_both_mscales_warning_is_true_and_hands_over_no_rule():
    """With mscale 0.5 and mscale_all_dim 1 the RoPE's factor is (0.1 * 0.5 ln s + 1) / (0.1 ln s + 1), not
    0.5 / 1; DeepSeek's softmax correction applies as well (not instead). The line says so and writes no formula
    (which setting reaches which part of a score is chapter 8's Exercise 2)."""
    s = 40.0
    base = {"qk_rope_head_dim": 64, "qk_nope_head_dim": 128, "rope_theta": 10000.0,
            "max_position_embeddings": int(4096 * s),
            "rope_scaling": {"type": "yarn", "factor": s, "original_max_position_embeddings": 4096,
                             "mscale": 0.5, "mscale_all_dim": 1.0}}
    factor = (0.1 * 0.5 * math.log(s) + 1) / (0.1 * math.log(s) + 1)
    for cfg, tail in ((dict(base, model_type="deepseek_v3"), "both corrections apply"),
                      ({k: v for k, v in base.items() if k not in ("qk_rope_head_dim", "qk_nope_head_dim")}
                       | {"head_dim": 64}, "does not apply here (no qk_rope_head_dim)")):
        line = next(w for w in inspect_config(cfg).warnings if "mscale and mscale_all_dim are both set" in w)
        assert f"attention factor ({factor:g}) depends on both (it is not mscale / mscale_all_dim)" in line, line
        assert tail in line and "instead" not in line and "ln" not in line and "their ratio" not in line, line
    assert not math.isclose(factor, 0.5)  # the old line's "their ratio" read as 0.5


def test_layers_say_which_use_rope_windows_or_nope():
    base = inspect_config(MODELS["Llama 4 Scout 17B-16E (base)"]["config"])  # no_rope_layers: [] in the file
    assert base.layers["nope_layers"] == list(range(3, 48, 4))  # transformers' default fills it in
    scout = inspect_config(MODELS["Llama 4 Scout 17B-16E Instruct"]["config"])
    assert scout.layers["nope_layers"] == list(range(3, 48, 4)) and scout.layers["attention_chunk_size"] == 8192
    assert scout.layers["temperature"]["value"] == pytest.approx(
        pl.attention_temperature(torch.tensor([10485759])).item())
    gpt_oss = inspect_config(MODELS["GPT-OSS 20B"]["config"])
    assert gpt_oss.layers["layer_types"] == {"sliding_attention": 12, "full_attention": 12}
    assert "within that window 9/32 pairs turn" in gpt_oss.layers["summary"]  # chapter 8, §1


# ---------------------------------------------------------------- the command line

def _write(tmp_path, config, name="config.json"):
    path = tmp_path / name
    path.write_text(json.dumps(config))
    return str(path)


@pytest.mark.parametrize("name", MODELS)
def test_cli_runs_on_every_bundled_config(name, tmp_path, capsys):
    assert main([_write(tmp_path, MODELS[name]["config"]), "--name", name]) == 0
    out = capsys.readouterr().out
    assert out.startswith(name) and "pair layout:" in out and "L0 = " in out
    assert main([_write(tmp_path, MODELS[name]["config"]), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data == json.loads(json.dumps(inspect_config(MODELS[name]["config"]).to_dict()))


def test_python_m_and_the_console_script_print_the_same(tmp_path):
    path = _write(tmp_path, MODELS["Llama 3.1 8B"]["config"])
    via_m = subprocess.run([sys.executable, "-m", "posenc_lib", "inspect", path], capture_output=True, text=True)
    assert via_m.returncode == 0 and "35/64 within L0" in via_m.stdout and "39/64 within L" in via_m.stdout
    script = Path(sys.executable).parent / "posenc-inspect"
    assert script.exists(), "posenc-inspect is not installed: pip install -e . (pyproject's [project.scripts])"
    via_script = subprocess.run([str(script), path], capture_output=True, text=True)
    assert via_script.returncode == 0 and via_script.stdout == via_m.stdout


def test_plot_draws_chapter_8s_figure_for_the_model(tmp_path):
    png = tmp_path / "waves.png"
    assert main([_write(tmp_path, MODELS["Gemma 3 4B"]["config"]), "--plot", str(png)]) == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    fig = wavelength_figure(inspect_config(MODELS["Gemma 3 4B"]["config"]).rows)
    left, right = fig.axes
    assert len(right.get_lines()) == 1 + 2 and len(left.get_lines()) == 1  # two RoPEs and the line at 1; no L0
    assert right.get_yscale() == "log" and "λ'_j / L" in right.get_title()


@pytest.mark.parametrize("content,match", [
    ("{not json", "is not JSON"),
    (json.dumps([1, 2]), "config must be a dict"),
    (json.dumps({"rope_theta": 10000.0}), "config needs a head dimension"),
    (json.dumps({"head_dim": 64, "rope_scaling": {"rope_type": "llama9"}}), "rope_type must be one of"),
    (json.dumps({"head_dim": 64, "rope_scaling": {"rope_type": "llama3", "factor": 8}}),
     "needs the key 'low_freq_factor'"),
    (json.dumps({"head_dim": 64, "max_position_embeddings": "long"}), "max_position_embeddings must be an integer"),
])
def test_a_malformed_config_is_one_line_and_exit_status_2(content, match, tmp_path, capsys):
    path = tmp_path / "config.json"
    path.write_text(content)
    assert main([str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("posenc-inspect: ") and match in err


def test_a_missing_file_is_one_line_and_exit_status_2(tmp_path, capsys):
    assert main([str(tmp_path / "nowhere.json")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "cannot read" in err


def test_python_m_without_a_command_says_how(capsys):
    from posenc_lib.__main__ import main as package_main

    assert package_main([]) == 2 and "python -m posenc_lib {inspect}" in capsys.readouterr().err


def test_inspect_raises_value_error_naming_the_field():
    with pytest.raises(ValueError, match="partial_rotary_factor must be in"):
        inspect_config({"head_dim": 64, "partial_rotary_factor": 2.0})
    with pytest.raises(ValueError, match="mrope_section must sum to the rotated pairs r/2 = 32"):
        inspect_config({"head_dim": 64, "rope_scaling": {"type": "mrope", "mrope_section": [8, 8, 8]}})


# ---------------------------------------------------------------- the pair layout table, by behaviour

import transformers  # noqa: E402  (locked in requirements/test.txt: a missing one is an error, not a skip)
# multimodal model types whose language model is another type's code
TEXT_MODEL = {"gemma3": "gemma3_text", "gemma4": "gemma4_text", "llama4": "llama4_text", "qwen2_5_vl": "qwen2_5_vl_text",
              "qwen3_vl": "qwen3_vl_text", "qwen3_5": "qwen3_5_text", "qwen3_5_moe": "qwen3_5_moe_text"}
MROPE_FAMILIES = ("qwen2_vl", "qwen2_5_vl", "qwen3_vl", "qwen3_5", "qwen3_5_moe")  # packages whose text RoPE is MRoPE
PACKAGE = {"qwen2_5_vl_text": "qwen2_5_vl", "qwen3_vl_text": "qwen3_vl", "qwen3_5_text": "qwen3_5",
           "qwen3_5_moe_text": "qwen3_5_moe"}


def _layout_of(model_type: str) -> str:
    """Run the family's own rotary module and rotation on a tiny config; name the layout whose apply_rope matches."""
    import importlib

    from transformers import AutoConfig

    g = torch.Generator().manual_seed(0)
    d, T = 32, 6
    package = PACKAGE.get(model_type, model_type.removesuffix("_text"))
    module = importlib.import_module(f"transformers.models.{package}.modeling_{package}")
    pos = torch.arange(T)[None]
    factor = 1.0
    if model_type == "gptj":  # sin and cos tables, (batch, seq, heads, d) tensors
        sincos = module.create_sinusoidal_positions(T, d)[pos]
        sin, cos = torch.split(sincos, d // 2, dim=-1)
        x = torch.randn(1, T, 2, d, generator=g)
        got = module.apply_rotary_pos_emb(x, sin, cos).transpose(1, 2)
        x = x.transpose(1, 2)
        inv = pl.rope_frequencies(d)
    else:
        kw = dict(hidden_size=2 * d, num_attention_heads=2, num_key_value_heads=2, head_dim=d, qk_rope_head_dim=d)
        if package in MROPE_FAMILIES:  # the text model's own config, MRoPE sections over all d/2 pairs
            text_type = "qwen2_vl_text" if model_type == "qwen2_vl" else model_type
            config = AutoConfig.for_model(text_type, **kw, partial_rotary_factor=1.0, rope_parameters={
                "rope_type": "default", "rope_theta": 10000.0, "mrope_section": [4, 6, 6], "partial_rotary_factor": 1.0})
        else:
            config = AutoConfig.for_model(model_type, **kw)
        rotary_cls = next(c for n, c in vars(module).items() if n.endswith("RotaryEmbedding") and "Vision" not in n)
        rotary = rotary_cls(config)
        x = torch.randn(1, 2, T, d, generator=g)
        ids = pos.expand(3, 1, T) if package in MROPE_FAMILIES else pos
        args = ("sliding_attention",) if package in ("gemma3", "gemma4") else ()
        out = rotary(x, ids, *args)
        inv = rotary.inv_freq if not args else getattr(rotary, "sliding_attention_inv_freq")
        factor = getattr(rotary, "attention_scaling", 1.0) if not args else 1.0  # GPT-OSS's default YaRN
        if model_type.startswith("llama4"):  # complex freqs_cis, (batch, seq, heads, d) tensors
            got = module.apply_rotary_emb(x.transpose(1, 2), x.transpose(1, 2), out)[0].transpose(1, 2)
        elif model_type == "deepseek_v2":
            got = module.apply_rotary_emb(x, x, out)[0]
        else:
            cos, sin = out
            if model_type != "gpt_oss":  # GPT-OSS's cos has d/2 columns (one per pair)
                x = x[..., : cos.shape[-1]]  # partial rotary (Phi): the module rotates the first r features only
            if model_type in ("deepseek_v3", "deepseek_v32"):  # interleaved pairs, written back de-interleaved
                q = module.apply_rotary_pos_emb_interleave(x, x, cos, sin)[0]
                got = q[..., torch.argsort(pl.layout_permutation(x.shape[-1]))]
            elif package == "gemma4":  # one tensor at a time
                got = module.apply_rotary_pos_emb(x, cos, sin)
            else:
                got = module.apply_rotary_pos_emb(x, x, cos, sin)[0]
    errors = {layout: (pl.apply_rope(x, pos, layout=layout, inv_freq=inv.float()[: x.shape[-1] // 2],
                                     attention_factor=factor) - got).abs().max().item()
              for layout in ("half", "interleaved")}
    (best, err), (_, other) = sorted(errors.items(), key=lambda kv: kv[1])
    assert err < 1e-4 < other, errors
    return best


@pytest.mark.crosscheck
@pytest.mark.parametrize("model_type", sorted(PAIR_LAYOUTS))
def test_pair_layout_table_matches_each_familys_own_rotation(model_type):
    assert _layout_of(TEXT_MODEL.get(model_type, model_type)) == PAIR_LAYOUTS[model_type]


def test_pair_layout_reads_the_text_config_and_deepseeks_switch():
    assert pair_layout(MODELS["Gemma 3 4B"]["config"]) == ("half", "gemma3_text")
    assert pair_layout({"model_type": "deepseek_v3", "head_dim": 64}) == ("interleaved", "deepseek_v3")
    assert pair_layout({"model_type": "deepseek_v3", "head_dim": 64, "rope_interleave": False})[0] == "half"
    assert pair_layout({"model_type": "mystery", "head_dim": 64}) == (None, "mystery")
