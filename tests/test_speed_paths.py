"""The fast paths keep the slow paths' results: device-side skipping, FLOP counting, the CUDA-count check
under torchrun and `mt bench train` (vectorised collate and prefetching: tests/data/test_batching.py)."""

import ctypes
import json
import os
import subprocess
import sys
import time

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from mt.training import flops

from mt import tuning
from mt.config import ModelConfig, TrainConfig
from mt.errors import ConfigError
from mt.training.flops import MachinePeak, training_flops
from mt.masks import padding_mask
from mt.model.kernels import linear_layer, linear_relu, plain_torch
from mt.model.transformer import build_model
from mt.training.recipe import make_optimizer
from mt.runtime import batch_padding, setup_runtime
from mt.tuning import command_of, describe, tune_process
from mt.training.update import Learner, apply_update
from tests.conftest import TINY, run_mt, tiny_overrides


def test_a_non_finite_update_is_skipped_on_the_device():
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 3)
    optimizer = make_optimizer(model, TrainConfig())
    optimizer.param_groups[0]["lr"] = 0.1
    learner = Learner(model, model, optimizer, torch.amp.GradScaler("cuda", enabled=False))
    model(torch.randn(2, 4)).sum().backward()
    apply_update(TrainConfig(), learner, torch.tensor(False))
    before = {k: v.clone() for k, v in model.state_dict().items()}
    moments = [optimizer.state[p]["exp_avg"].clone() for p in model.parameters()]
    (model(torch.randn(2, 4)).sum() * float("nan")).backward()
    apply_update(TrainConfig(clip_norm=1.0), learner, torch.tensor(True))
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    assert all(torch.equal(m, optimizer.state[p]["exp_avg"]) for m, p in zip(moments, model.parameters()))
    assert all(optimizer.state[p]["step"].item() == 1 for p in model.parameters())


def test_flop_formula_counts_every_projection_torch_counts():
    """training_flops = the matmuls torch's FlopCounterMode sees in forward + backward, plus attention. The
    counter has no formula for oneDNN's op, so the projections take F.linear here (the same products)."""
    cfg = ModelConfig(d_model=32, d_ff=64, n_heads=4, n_layers=2, dropout=0.0, max_positions=64)
    model = build_model(cfg, 50, 50, True)
    B, S, T = 3, 10, 7
    src, tgt = torch.randint(4, 50, (B, S)), torch.randint(4, 50, (B, T))
    with plain_torch(), FlopCounterMode(display=False) as counter:
        model(src, padding_mask(src), tgt).sum().backward()
    counts = {str(op).split(".")[-1]: n for op, n in counter.get_flop_counts()["Global"].items()}
    projections = counts.get("mm", 0) + counts.get("addmm", 0)
    d, n = cfg.d_model, cfg.n_layers
    attention = 3 * B * n * (4 * S * S * d + 2 * T * T * d + 4 * T * S * d)
    assert training_flops(cfg, 50, torch.full((B,), S), torch.full((B,), T)) == projections + attention


def test_torchrun_with_more_processes_than_gpus_is_refused(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("LOCAL_RANK", "1")
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")
    with pytest.raises(ConfigError, match="torchrun started 2 processes on this machine but it has 1 GPU"):
        setup_runtime(TrainConfig(device="cuda"))


def test_the_training_commands_keep_attention_off_cudnn_and_the_library_leaves_it(monkeypatch):
    # cuDNN attention builds a plan for every new shape (0.4-0.6 s each on an H100): tuning.attention_without_cudnn
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(tuning, "keep_freed_memory", lambda: True)  # mallopt would outlive the test
    for name in ("GOMP_SPINCOUNT", "THP_MEM_ALLOC_ENABLE"):
        monkeypatch.setenv(name, "")  # a value the user set: the test's environment stays as it is
    torch.backends.cuda.enable_cudnn_sdp(True)
    try:
        assert setup_runtime(TrainConfig(device="cuda")).device.type == "cuda"
        assert torch.backends.cuda.cudnn_sdp_enabled()  # the library's training leaves the switch alone
        assert set(tune_process(["translate", "-c", "x.pt"])) == {"malloc"}  # the variables are the user's
        assert torch.backends.cuda.cudnn_sdp_enabled()
        assert tune_process(["--debug", "train", "config.yaml"])["cudnn_attention"] == "off"
        assert not torch.backends.cuda.cudnn_sdp_enabled()
    finally:
        torch.backends.cuda.enable_cudnn_sdp(True)


def test_bench_train_prints_both_sides_as_json(tmp_path):
    proc = run_mt("bench", "train", TINY, *tiny_overrides(tmp_path, **{"train.device": "cpu"}), "--steps", "3",
                  "--warmup", "1", "--json")  # the CPU asked for: on a machine with a GPU, auto would pick CUDA
    result = json.loads(proc.stdout)
    for key in ("tokens_per_s", "reference_tokens_per_s", "ratio", "step_ms", "host_ms_per_step", "tflops", "mfu",
                "peak_tflops", "peak_memory_mb", "device", "precision", "compile"):
        assert key in result, key
    assert result["tokens_per_s"] > 0 and result["reference_tokens_per_s"] > 0 and 0 < result["mfu"] < 1
    assert result["ratio"] == pytest.approx(result["tokens_per_s"] / result["reference_tokens_per_s"], rel=0.01)
    assert result["device"] == "cpu" and result["compile"] is False


def test_batch_padding_auto_pads_where_shapes_pay_and_not_on_a_cpu():
    cpu, cuda = torch.device("cpu"), torch.device("cuda")
    assert batch_padding("auto", cpu, compiled=False) == 1
    assert batch_padding("auto", cpu, compiled=True) == 8
    assert batch_padding("auto", cuda, compiled=False) == 8
    assert batch_padding(4, cuda, compiled=False) == 4


def test_the_mfu_yardstick_is_measured_once_per_machine_then_read(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    measured = []
    monkeypatch.setattr(flops, "matmul_peak_flops", lambda *a, **k: measured.append(1) or 1e11 * len(measured))
    first = MachinePeak(torch.device("cpu"))
    assert first.flops == 1e11 and "measured now" in first.where and (tmp_path / "mt" / "matmul_peak.json").exists()
    again = MachinePeak(torch.device("cpu"))
    assert again.flops == 1e11 and len(measured) == 1 and "measured now" not in again.where  # read, not measured


def test_a_run_faster_than_the_cached_peak_raises_it_and_never_reports_an_mfu_over_one(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(flops, "matmul_peak_flops", lambda *a, **k: 1e11)  # measured under load, every time
    assert MachinePeak(torch.device("cpu")).mfu(5e10) == 0.5
    assert MachinePeak(torch.device("cpu")).mfu(3e11) == 1.0  # 300% before; measured again, still 1e11
    later = MachinePeak(torch.device("cpu"))
    assert later.flops == 3e11 and "raised" in later.where and later.mfu(1.5e11) == 0.5


def test_a_stale_cached_peak_is_measured_again_and_later_runs_use_the_new_one(tmp_path, monkeypatch):
    """A peak measured under load (1e11, the machine can do 4e11): the first run faster than it measures again,
    once, and neither it nor any later run reports an MFU against the stale peak (it reported 100%)."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    measurements = iter([1e11, 4e11])
    calls = []
    monkeypatch.setattr(flops, "matmul_peak_flops", lambda *a, **k: calls.append(1) or next(measurements))
    assert MachinePeak(torch.device("cpu")).flops == 1e11  # cached, stale
    run = MachinePeak(torch.device("cpu"))
    assert [run.mfu(2e11), run.mfu(3e11)] == [0.5, 0.75] and len(calls) == 2  # measured again once, not per row
    assert "measured again" in run.where
    later = MachinePeak(torch.device("cpu"))
    assert later.flops == 4e11 and later.mfu(2e11) == 0.5 and len(calls) == 2  # read, not measured
    cached = json.loads((tmp_path / "mt" / "matmul_peak.json").read_text())
    assert [entry["flops"] for entry in cached.values()] == [4e11]


def test_the_cached_peak_keeps_the_highest_measurement(tmp_path, monkeypatch):
    """Two runs share the cache: one that measured a lower peak than the other stored does not lower it."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(flops, "matmul_peak_flops", lambda *a, **k: 1e11)
    low = MachinePeak(torch.device("cpu"))  # measured 1e11 first ...
    cache = tmp_path / "mt" / "matmul_peak.json"
    cache.write_text(json.dumps({low.key: {"flops": 5e11, "measured": "by another run"}}))  # ... another: 5e11
    low.mfu(2e11)  # beats this run's 1e11: measured again (1e11), raised to 2e11, below the cache's 5e11
    assert json.loads(cache.read_text())[low.key]["flops"] == 5e11
    assert MachinePeak(torch.device("cpu")).flops == 5e11


@pytest.mark.parametrize("shape", [(7, 16), (3, 5, 16), (4, 1, 16), (2, 100, 16), (160, 16)])
@pytest.mark.parametrize("with_bias", [True, False])
def test_inference_linear_through_onednn_equals_f_linear(shape, with_bias):
    from mt.model.kernels import ONEDNN_MIN_ROWS, linear, onednn_inference

    torch.manual_seed(0)
    x, weight = torch.randn(shape), torch.randn(24, 16)
    bias = torch.randn(24) if with_bias else None
    expected = torch.nn.functional.linear(x, weight, bias)
    with torch.inference_mode():  # oneDNN from ONEDNN_MIN_ROWS rows on (a decoding step's fewer rows: MKL)
        rows = x.numel() // x.size(-1)
        assert onednn_inference(x) == (torch.backends.mkldnn.is_available() and rows >= ONEDNN_MIN_ROWS)
        assert torch.allclose(linear(x, weight, bias), expected, atol=1e-5)


@pytest.mark.parametrize("shape", [(7, 16), (3, 5, 16)])
@pytest.mark.parametrize("with_bias", [True, False])
def test_training_linear_through_onednn_has_f_linears_values_and_gradients(shape, with_bias):
    """`linear` in training on a CPU (`_OneDnnLinear`: oneDNN's matmul and a written-out backward) against
    F.linear in float64: output and the gradients of input, weight (a row slice, as project_q takes) and bias."""
    from mt.model.kernels import linear, onednn_training

    torch.manual_seed(0)
    x, full_weight = torch.randn(shape, requires_grad=True), torch.randn(48, 16, requires_grad=True)
    bias = torch.randn(24, requires_grad=True) if with_bias else None
    weight = full_weight[:24]
    grad_out = torch.randn(*shape[:-1], 24)
    out = linear(x, weight, bias)
    out.backward(grad_out)
    assert onednn_training(x, weight) == torch.backends.mkldnn.is_available()
    if torch.backends.mkldnn.is_available():
        assert type(out.grad_fn).__name__ == "_OneDnnLinearBackward"
    leaves = [t.detach().double().requires_grad_() for t in (x, full_weight)]
    bias64 = bias.detach().double().requires_grad_() if with_bias else None
    expected = torch.nn.functional.linear(leaves[0], leaves[1][:24], bias64)
    expected.backward(grad_out.double())
    assert torch.allclose(out.double(), expected, atol=1e-5)
    assert torch.allclose(x.grad.double(), leaves[0].grad, atol=1e-5)
    assert torch.allclose(full_weight.grad.double(), leaves[1].grad, atol=1e-5)
    assert not full_weight.grad[24:].any()
    if with_bias:
        assert torch.allclose(bias.grad.double(), bias64.grad, atol=1e-5)


def test_training_linear_without_an_input_gradient_gives_the_weights_gradient():
    """The first layer's input (an embedding lookup's output can be a leaf without a gradient) asks for none."""
    torch.manual_seed(0)
    layer, x = torch.nn.Linear(16, 8), torch.randn(5, 16)
    reference = torch.nn.Linear(16, 8)
    reference.load_state_dict(layer.state_dict())
    linear_layer(layer, x).square().sum().backward()
    reference(x).square().sum().backward()
    assert torch.allclose(layer.weight.grad, reference.weight.grad, atol=1e-5)
    assert torch.allclose(layer.bias.grad, reference.bias.grad, atol=1e-5)


def test_relu_inside_the_matmul_gives_relu_of_the_matmul():
    """`linear_relu` (oneDNN's fused ReLU when decoding on a CPU) equals F.relu of the plain linear layer, in
    inference and in training (where it is F.relu of `linear`)."""
    torch.manual_seed(0)
    layer, x = torch.nn.Linear(16, 32), torch.randn(5, 3, 16)
    expected = torch.nn.functional.relu(torch.nn.functional.linear(x, layer.weight, layer.bias))
    with torch.inference_mode():
        assert torch.allclose(linear_relu(layer, x), expected, atol=1e-6)
        assert (linear_relu(layer, x) == 0).any()
    assert torch.allclose(linear_relu(layer, x), expected, atol=1e-6)


def _import_mt(probe: str, *argv: str, **env: str) -> list[str]:
    """The words `probe` prints in a fresh `python -c probe ARGV...`, where sys.argv[1:] is ARGV, the command;
    mt's runtime variables are left out of the environment unless given in `env`."""
    inherited = {k: v for k, v in os.environ.items()
                 if k not in ("GOMP_SPINCOUNT", "THP_MEM_ALLOC_ENABLE", "ONEDNN_PRIMITIVE_CACHE_CAPACITY",
                              "LRU_CACHE_CAPACITY")}
    out = subprocess.run([sys.executable, "-c", probe, *argv], env={**inherited, **env}, capture_output=True,
                         text=True, check=True)
    return out.stdout.split()


TUNE = "from mt.tuning import tune_process; tune_process(sys.argv[1:]); "


def test_the_mt_command_shortens_openmp_spinning_before_torch_loads_unless_the_user_chose_or_it_trains():
    """GNU OpenMP reads GOMP_SPINCOUNT once, when torch loads it: tune_process must set it first. The load the
    command samples is set here (the suite's other worker keeps this machine busy)."""
    idle = "import sys, os, mt.tuning; mt.tuning.other_load = lambda: 0.0; "
    probe = idle + TUNE + "print('torch' in sys.modules, os.environ.get('GOMP_SPINCOUNT'))"
    assert _import_mt(probe, "translate") == ["False", "30000"]
    assert _import_mt(probe, "translate", GOMP_SPINCOUNT="5") == ["False", "5"]
    # GNU's default for training, which is faster with it; training loads torch, after the variables, for cuDNN
    assert _import_mt(probe, "train", "config.yaml") == ["True", "None"]
    assert _import_mt(probe, "--debug", "bench", "train") == ["True", "None"]
    busy = probe.replace("lambda: 0.0", "lambda: 1.5")
    assert _import_mt(busy, "translate") == ["False", "0"]
    assert _import_mt(busy, "train", "config.yaml") == ["True", "0"]
    assert _import_mt(busy, "score", GOMP_SPINCOUNT="5") == ["False", "5"]  # the user's value stays


def test_openmp_threads_spin_only_while_no_other_process_keeps_a_core_busy():
    assert tuning.openmp_spin_count(["translate"], 0.2) == "30000"
    assert tuning.openmp_spin_count(["serve"], None) == "30000"  # unknown (no /proc): as on an idle machine
    assert tuning.openmp_spin_count(["train"], 0.2) is None
    assert tuning.openmp_spin_count(["translate"], tuning.BUSY_CORES) == "0"
    assert tuning.openmp_spin_count(["bench", "train"], 1.0) == "0"


def _busy_loops(count: int) -> list[subprocess.Popen]:
    """CPU-bound processes that stop by themselves after 60 s (the caller kills them sooner)."""
    loop = "import time\nend = time.time() + 60\nwhile time.time() < end:\n    pass\n"
    return [subprocess.Popen([sys.executable, "-c", loop]) for _ in range(count)]


def test_the_command_sees_busy_cores_and_stops_spinning(trained_tiny):
    """Two CPU-bound processes beside `mt translate`: the load it samples at start counts them, and its threads
    do not spin (`--debug` says both)."""
    loops = _busy_loops(2)
    try:
        time.sleep(0.5)
        assert tuning.other_load() >= 1.0
        proc = run_mt("--debug", "translate", "-c", trained_tiny / "checkpoint_last.pt", input="Ein Test.\n")
    finally:
        for loop in loops:
            loop.kill()
            loop.wait()
    tuning_line = next(line for line in proc.stderr.splitlines() if line.startswith("tuning: "))
    assert "other_load=" in tuning_line and "GOMP_SPINCOUNT=0" in tuning_line, tuning_line


def test_the_mt_command_loads_torch_only_after_its_tuning():
    """`python -m mt` imports mt.cli before main() calls tune_process: nothing mt.cli imports may load torch (a
    command's own imports do, after the tuning), or the variables above come too late."""
    assert _import_mt("import sys, mt.cli; print('torch' in sys.modules)") == ["False"]


MALLINFO2 = """class MallInfo2(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in ("arena ordblks smblks hblks hblkhd usmblks fsmblks uordblks fordblks "
                                               "keepcost").split()]
libc = ctypes.CDLL(None)
libc.mallinfo2.restype = MallInfo2
"""  # glibc's malloc statistics in a probe (`import ctypes` first)


def test_the_server_caps_onednns_kernel_caches_before_torch_loads_unless_the_user_chose():
    """oneDNN and torch's ideep read their cache capacities when they load; a server's refilled batches would
    fill their default 1,024 entries each and keep them (tuning.kernel_cache_capacity)."""
    probe = ("import sys, os; " + TUNE + "import torch; "
             "print(os.environ.get('ONEDNN_PRIMITIVE_CACHE_CAPACITY'), os.environ.get('LRU_CACHE_CAPACITY'), "
             "torch._C._get_mkldnn_enabled())")
    assert _import_mt(probe, "serve", "-m", "de:en=x.pt") == ["64", "64", "True"]
    assert _import_mt(probe, "serve", ONEDNN_PRIMITIVE_CACHE_CAPACITY="8") == ["8", "64", "True"]
    assert _import_mt(probe, "translate") == ["None", "None", "True"]


def test_a_servers_kernel_caches_stop_growing_where_a_translate_runs_keep_every_shape():
    """What the capacities are for: a linear layer run at 300 row counts (as a server's refilled batches make
    them) keeps a kernel and its description per count; capped, the live memory stops growing."""
    if not hasattr(ctypes.CDLL(None), "mallinfo2"):
        pytest.skip("not glibc 2.33 or later")
    probe = f"""
import ctypes, sys
from mt.tuning import tune_process
tune_process(sys.argv[1:])
import torch
from mt.model.kernels import linear_layer
{MALLINFO2}torch.set_num_threads(1)
layer = torch.nn.Linear(256, 1024)
with torch.inference_mode():
    linear_layer(layer, torch.randn(160, 256))
    before = libc.mallinfo2().uordblks
    for rows in range(161, 461):
        linear_layer(layer, torch.randn(rows, 256))
print((libc.mallinfo2().uordblks - before) / 2 ** 20)
"""
    served, = map(float, _import_mt(probe, "serve"))
    translated, = map(float, _import_mt(probe, "translate"))
    assert served < 40 and translated > 2 * served, (served, translated)


def test_importing_mt_and_loading_a_translator_change_nothing_in_the_process(trained_tiny):
    """A notebook's `import mt` and `load_translator`: no variable set, glibc's malloc and cuDNN as they were."""
    if _transparent_huge_pages_mode() == "" or not hasattr(ctypes.CDLL(None), "mallinfo2"):
        pytest.skip("not Linux with glibc 2.33 or later")
    probe = f"""
import ctypes, os, sys, mt, torch
from mt.decoding.loading import load_translator
{MALLINFO2}libc.malloc.restype = ctypes.c_void_p
load_translator("{trained_tiny / 'checkpoint_last.pt'}", device="cpu")
mapped = libc.mallinfo2().hblkhd
libc.malloc(40 * 2 ** 20)  # over glibc's 32 MB threshold: a mapping of its own, unless mallopt turned mmap off
print(os.environ.get("GOMP_SPINCOUNT"), os.environ.get("THP_MEM_ALLOC_ENABLE"), torch.backends.cuda.cudnn_sdp_enabled(),
      libc.mallinfo2().hblkhd - mapped >= 40 * 2 ** 20)
"""
    assert _import_mt(probe, "translate") == ["None", "None", "True", "True"]


def test_the_command_words_skip_global_options():
    assert command_of(["--debug", "bench", "train", "x.yaml"]) == ["bench", "train", "x.yaml"]
    assert describe({}) == "tuning: nothing set"
    assert describe({"GOMP_SPINCOUNT": "30000", "malloc": "x"}) == "tuning: GOMP_SPINCOUNT=30000, malloc=x"


def test_debug_shows_the_tuning_the_command_made():
    proc = run_mt("--debug", "plot", "mask", "--size", "4", "-o", os.devnull, check=False,
                  env={"GOMP_SPINCOUNT": "", "THP_MEM_ALLOC_ENABLE": ""})
    tuning_lines = [line for line in proc.stderr.splitlines() if line.startswith("tuning: ")]
    assert tuning_lines == ["tuning: nothing set"], proc.stderr


THP_PROBE = """
import os, sys
from mt.tuning import tune_process
tune_process(sys.argv[1:])
import torch
x = torch.ones(64 * 2 ** 20 // 4)  # 64 MB, touched
huge = sum(int(line.split()[1]) for line in open("/proc/self/smaps") if line.startswith("AnonHugePages:"))
print(os.environ.get("THP_MEM_ALLOC_ENABLE"), huge // 1024)
"""


def _transparent_huge_pages_mode() -> str:
    """The kernel's THP mode: always, madvise or never ("" without THP support)."""
    try:
        text = open("/sys/kernel/mm/transparent_hugepage/enabled").read()
    except OSError:
        return ""
    return text[text.index("[") + 1:text.index("]")] if "[" in text else ""


def test_training_asks_for_huge_pages_before_torch_allocates_and_decoding_does_not():
    """torch reads THP_MEM_ALLOC_ENABLE at its first CPU allocation, so tune_process sets it first, for the
    training commands only; a value the user set wins. Where the kernel grants huge pages on request
    (`madvise`), a training process's large tensors are backed by them."""
    train_flag, train_huge = _import_mt(THP_PROBE, "train", "config.yaml")
    bench_flag, _ = _import_mt(THP_PROBE, "bench", "train")
    decode_flag, decode_huge = _import_mt(THP_PROBE, "translate")
    chosen_flag, _ = _import_mt(THP_PROBE, "train", THP_MEM_ALLOC_ENABLE="0")
    assert (train_flag, bench_flag, decode_flag, chosen_flag) == ("1", "1", "None", "0")
    if _transparent_huge_pages_mode() != "madvise":
        pytest.skip("the kernel's THP mode is not madvise: huge pages do not depend on the request")
    assert int(train_huge) >= 32 and int(decode_huge) < 32  # MB of the 64 MB tensor on 2 MB pages
