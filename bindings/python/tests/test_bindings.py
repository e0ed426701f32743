"""Tests of the ctypes bindings: bit-identity with C, exceptions, lifetimes, layouts."""
import ctypes
import gc
import json
import os
import subprocess
import sys
import threading

import numpy as np
import pytest

import induct
from induct import _capi


def _run(env_var, *args):
    exe = os.environ.get(env_var)
    if not exe:
        pytest.fail(f"{env_var} is not set (run through meson test)")
    return subprocess.run([exe, *map(str, args)], check=True, capture_output=True,
                          text=True).stdout


def test_struct_layouts_match_c():
    layout = json.loads(_run("INDUCT_LAYOUT"))
    for cname, mirror in _capi.STRUCTS.items():
        c = layout[cname]
        assert ctypes.sizeof(mirror) == c["__size__"], cname
        fields = {name: (getattr(mirror, name).offset, getattr(mirror, name).size)
                  for name, _ in mirror._fields_}
        assert fields == {k: tuple(v) for k, v in c["fields"].items()}, cname


def _python_reference_run(steps):
    m = induct.Model(n_layers=2, d_model=32, n_heads=2, n_ctx=32, d_vocab=16, layer_norm=1,
                     d_mlp=32, smeared_keys=1, positional="shortformer", seed=11)
    d = induct.Dataset.rrt(d_vocab=16, min_block=4, seed=5)
    o = induct.Optimizer(m, "adamw", lr=3e-3, warmup_steps=3)
    losses = [o.train_step(d, 8, 32) for _ in range(steps)]
    return losses, m.weights()


def test_bit_identical_to_c():
    steps = 12
    out = _run("INDUCT_REF_TRAIN", steps).splitlines()
    c_losses = [float.fromhex(l.split()[1]) for l in out if l.startswith("loss ")]
    c_weights = {}
    for l in out:
        if l.startswith("tensor "):
            parts = l.split()
            c_weights[parts[1]] = np.array([float.fromhex(x) for x in parts[2:]],
                                           dtype=np.float32)
    losses, weights = _python_reference_run(steps)
    assert losses == c_losses  # exact doubles
    assert list(weights) == list(c_weights)
    for name, w in weights.items():
        assert np.array_equal(w.ravel(), c_weights[name]), name


def test_shapes_and_values():
    m = induct.Model(n_layers=2, d_model=16, n_heads=2, n_ctx=12, d_vocab=10, seed=3)
    toks = np.arange(24, dtype=np.int32).reshape(2, 12) % 10
    logits, losses, mean = m.forward(toks)
    assert logits.shape == (2, 12, 10) and losses.shape == (2, 11)
    # losses are the log-softmax of the logits at the next token, in nats
    lse = np.log(np.exp(logits.astype(np.float64)).sum(-1))
    ref = lse[:, :-1] - np.take_along_axis(logits[:, :-1], toks[:, 1:, None], -1)[..., 0]
    assert np.allclose(losses, ref, rtol=1e-5, atol=1e-5)
    assert mean == pytest.approx(float(np.mean(losses.astype(np.float64))), rel=1e-6)
    att = m.attention(toks[0])
    assert att.shape == (2, 2, 12, 12)
    assert np.allclose(att.sum(-1), 1, atol=1e-5) and np.all(np.triu(att, 1) == 0)
    w = m.get("blocks.1.attn.W_O")
    assert w.shape == (2, 8, 16)
    m.set("blocks.1.attn.W_O", np.zeros_like(w))
    assert not m.get("blocks.1.attn.W_O").any()
    assert m.n_params == sum(v.size for v in m.weights().values())


def test_shortformer_layers(tmp_path):
    """W_pos in layer 0's queries and keys only: the config round-trips through a file,
    the same weights give other logits than with W_pos in every layer, and the library
    refuses the field with other positional variants or above n_layers."""
    m = induct.Model(n_layers=2, d_model=8, n_heads=2, n_ctx=8, d_vocab=7, layer_norm=1,
                     positional="shortformer", shortformer_layers=1, seed=3)
    assert m.config["shortformer_layers"] == 1 and "shortformer_layers=1" in repr(m)
    path = tmp_path / "m.safetensors"
    m.save(path)
    loaded = induct.Model.load(path)
    assert loaded.config == m.config
    toks = np.array([[1, 2, 3, 4, 1, 2, 3, 4]], dtype=np.int32)
    assert np.array_equal(loaded.forward(toks)[0], m.forward(toks)[0])
    # every layer (0) differs from layer 0 only (1) once layer 1 attends at all
    every = induct.Model(n_layers=2, d_model=8, n_heads=2, n_ctx=8, d_vocab=7, layer_norm=1,
                         positional="shortformer", shortformer_layers=0, seed=3)
    for name, w in m.weights().items():
        every.set(name, w)
    assert not np.array_equal(every.forward(toks)[0], m.forward(toks)[0])
    with pytest.raises(induct.InvalidArgument, match="shortformer_layers = 1 needs positional"):
        induct.Model(positional="standard", shortformer_layers=1)
    with pytest.raises(induct.InvalidArgument, match="exceeds n_layers"):
        induct.Model(positional="shortformer", n_layers=2, shortformer_layers=3)


def test_exceptions_carry_the_library_message():
    with pytest.raises(induct.InvalidArgument, match="n_heads .* does not divide d_model"):
        induct.Model(d_model=10, n_heads=4)
    m = induct.Model(n_ctx=8, d_vocab=5)
    with pytest.raises(induct.OutOfRange, match=r"token id 7 at batch 0, position 1"):
        m.forward([[1, 7, 2]])
    with pytest.raises(induct.OutOfRange, match="exceeds the model's n_ctx 8"):
        m.forward([[1] * 9])
    with pytest.raises(induct.OutOfRange, match="no tensor named"):
        m.get("blocks.9.attn.W_Q") if m._shape_of("blocks.9.attn.W_Q") else m.set("nope", [1.0])
    with pytest.raises(induct.InvalidArgument, match="not finite"):
        m.set("unembed.b_U", [float("nan")] * 5)
    o = induct.Optimizer(m)
    with pytest.raises(induct.OutOfRange, match="outside"):
        o["lr"] = -1
    with pytest.raises(KeyError):
        o["nonsense"] = 1
    with pytest.raises(induct.InvalidArgument):
        induct.Dataset.rrt(n_repeats=1)
    with pytest.raises(induct.LimitExceeded):
        induct.Model(d_vocab=2**31, d_model=2**31, n_heads=1)
    with pytest.raises(TypeError):
        induct.Model(not_a_field=1)
    e = pytest.raises(induct.InductError, induct.Model, n_layers=0).value
    assert e.status == -3 and e.name == "INDUCT_EINVAL" and e.function == "induct_model_new"


def test_numeric_error_leaves_weights():
    m = induct.Model(n_layers=1, d_model=8, n_heads=2, n_ctx=8, d_vocab=5)
    m.set("unembed.W_U", np.full((8, 5), 3e38, np.float32))
    m.set("embed.W_E", np.full((5, 8), 3e38, np.float32))
    before = m.weights()
    o = induct.Optimizer(m)
    with pytest.raises(induct.NumericError):
        o.train_step([[0, 1, 2, 3]])
    after = m.weights()
    assert all(np.array_equal(before[k], after[k]) for k in before)
    assert o["step"] == 0


def test_lifetimes():
    m = induct.Model(n_layers=1, d_model=8, n_heads=2, n_ctx=8, d_vocab=5)
    o = induct.Optimizer(m)
    del m
    gc.collect()
    assert o.train_step([[0, 1, 2, 3]]) > 0  # the optimizer keeps its model alive
    o.model.close()  # closing the Python model handle: C refcount keeps the model for o
    assert o.train_step([[0, 1, 2, 3]]) > 0
    o.close()
    o.close()  # twice is fine
    with pytest.raises(ValueError, match="closed"):
        o.train_step([[0, 1, 2, 3]])
    with induct.Model(n_layers=1) as m2:
        assert not m2.closed
    assert m2.closed


def test_errors_are_per_thread():
    results = {}

    def fail(key, kwargs):
        for _ in range(200):
            try:
                induct.Model(**kwargs)
            except induct.InductError as e:
                results.setdefault(key, set()).add(str(e))

    t1 = threading.Thread(target=fail, args=("a", {"n_layers": 0}))
    t2 = threading.Thread(target=fail, args=("b", {"d_vocab": 0}))
    t1.start(); t2.start(); t1.join(); t2.join()
    assert results["a"] == {"induct_model_new: model config: n_layers must be >= 1"}
    assert results["b"] == {"induct_model_new: model config: d_vocab must be >= 1"}


def test_without_numpy():
    code = ("import sys; sys.modules['numpy'] = None\n"
            "import induct\n"
            "m = induct.Model(n_layers=1, d_model=8, n_heads=2, n_ctx=8, d_vocab=5)\n"
            "lg, ls, mean = m.forward([[0, 1, 2, 3]])\n"
            "assert type(ls).__name__ == 'Shaped' and ls.shape == (1, 3), ls\n"
            "assert ls.data.typecode == 'f' and len(ls) == 3\n"
            "assert abs(sum(ls) / 3 - mean) < 1e-5\n"
            "print('ok')\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=os.environ)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


def _small():
    m = induct.Model(n_layers=2, d_model=16, n_heads=2, n_ctx=16, d_vocab=12, seed=2)
    d = induct.Dataset.rrt(d_vocab=12, min_block=3, seed=4)
    return m, d


def test_train_metrics_and_resume(tmp_path):
    m, d = _small()
    o = induct.Optimizer(m, lr=3e-3)
    seen = []
    log = o.train(d, steps=8, batch=4, seq_len=16, eval_every=4, eval_batch=8,
                  metrics=("loss", "induction_score", "previous_token", "loss_vectors"),
                  metrics_path=tmp_path / "m.jsonl", progress=lambda p: seen.append(p))
    recs = induct.read_metrics(log)
    assert [r["step"] for r in recs] == [0, 4, 8]
    assert np.array(recs[-1]["induction_score"]).shape == (2, 2)
    assert [p["step"] for p in seen if "step" in p["events"]] == list(range(1, 9))
    # the last record's eval loss equals an independent forward on the evaluation set
    toks, _ = d.batch(0, 8, 16, split="eval")
    assert recs[-1]["eval_loss"] == pytest.approx(m.forward(toks, logits=False)[2], rel=1e-6)
    # and its loss vectors are loss_vectors() on that set (pos_seed 0), one chunk: exact
    lv = m.loss_vectors(d, n_seq=8, seq_len=16, chunk=8).per_seq
    assert len(recs[-1]["loss_vectors"]) == 8
    assert np.array_equal(np.array(recs[-1]["loss_vectors"], dtype=np.float32), lv)
    # resume: 8 straight == 4, save, load, 4
    m2, _ = _small()
    o2 = induct.Optimizer(m2, lr=3e-3)
    o2.train(d, steps=4, batch=4, seq_len=16)
    o2.save(tmp_path / "half.safetensors")
    m3 = induct.Model.load(tmp_path / "half.safetensors")
    o3 = induct.Optimizer.load(m3, tmp_path / "half.safetensors")
    assert o3["step"] == 4
    o3.train(d, steps=8, batch=4, seq_len=16)
    for k, v in m.weights().items():
        assert np.array_equal(v, m3.weights()[k]), k


def test_callback_exception_stops_and_reraises():
    m, d = _small()
    o = induct.Optimizer(m)

    def boom(p):
        if p["step"] == 3:
            raise RuntimeError("stop here")

    with pytest.raises(RuntimeError, match="stop here"):
        o.train(d, steps=10, batch=2, seq_len=16, progress=boom)
    assert o["step"] == 3  # the run stopped right after the step that raised
    with pytest.raises(induct.Interrupted):
        o.train(d, steps=10, batch=2, seq_len=16, progress=lambda p: p["step"] >= 5)
    assert o["step"] == 5


def test_unknown_metric_and_missing_file(tmp_path):
    m, d = _small()
    o = induct.Optimizer(m)
    with pytest.raises(ValueError, match="unknown metric"):
        o.train(d, steps=1, metrics=("nonsense",))
    with pytest.raises(induct.InductError):
        induct.Model.load(tmp_path / "missing.safetensors")


def test_memory_cap():
    """max_bytes (resource limits): a config beyond the cap is refused, the cap can
    be changed later, and memory_used reports what the model holds."""
    with pytest.raises(induct.InductError) as e:
        induct.Model(n_layers=1, d_model=8, n_heads=2, n_ctx=1 << 20, d_vocab=11,
                     max_bytes=1 << 20)
    assert e.value.name == "INDUCT_ELIMIT" and "max_bytes" in str(e.value)
    m = induct.Model(n_layers=1, d_model=8, n_heads=2, n_ctx=8, d_vocab=11)
    held = m.memory_used
    assert held >= 8 * m.n_params
    assert m.config["max_bytes"] == 0
    m.set_max_bytes(held)
    assert m.config["max_bytes"] == held
    with pytest.raises(induct.InductError) as e:
        m.set_max_bytes(held - 1)
    assert e.value.name == "INDUCT_ELIMIT"
    assert m.config["max_bytes"] == held


# ---- inputs are never narrowed silently ----

def test_token_ids_reach_c_unaltered_or_are_refused(tmp_path):
    m = induct.Model(n_layers=1, d_model=8, n_heads=2, n_ctx=8, d_vocab=11, seed=1)
    ok = m.forward(np.array([[1, 2, 3]], dtype=np.int32))[1]
    # wider or unsigned integer arrays are fine when every id fits int32
    for dt in (np.int64, np.uint64, np.int16, np.uint8):
        assert np.array_equal(m.forward(np.array([[1, 2, 3]], dtype=dt))[1], ok)
    assert np.array_equal(m.forward([[1, 2, 3]])[1], ok)
    # ids outside int32 are refused with the library's range error, not wrapped to 0
    big = [[1, 2, 2**33]]
    for toks in (np.array(big), big, np.array([[1, 2, -2**40]]), [[1, 2, 2**80]],
                 np.array(big, dtype=np.uint64)):
        with pytest.raises(induct.OutOfRange, match="outside the range of C int32"):
            m.forward(toks)
    # ids inside int32 reach the C range check unaltered
    with pytest.raises(induct.OutOfRange, match="token id 2147483647 at batch 0, position 2"):
        m.forward(np.array([[1, 2, 2**31 - 1]]))
    # non-integer ids are a TypeError, never truncated
    for toks in (np.array([[1.0, 2.0, 3.0]]), [[1, 2.7, 3]], np.array([[True, False, True]]),
                 np.array([[1, 2, 3]], dtype=np.float32)):
        with pytest.raises(TypeError, match="integer ids expected"):
            m.forward(toks)
    # every entry point that takes ids
    o = induct.Optimizer(m)
    with pytest.raises(induct.OutOfRange):
        o.train_step(np.array(big))
    with pytest.raises(TypeError):
        o.train_step(np.array([[1.5, 2.0, 3.0]]))
    assert o["step"] == 0
    with pytest.raises(induct.OutOfRange):
        induct.Dataset.tokens(np.array([[1, 2, 2**33, 4]]), d_vocab=11)
    with pytest.raises(induct.OutOfRange):
        m.backward(np.array(big))
    with pytest.raises(induct.OutOfRange):
        m.attention(np.array([1, 2, 2**33]))
    with pytest.raises(TypeError):
        induct.write_tokens(tmp_path / "t.bin", np.array([1.0, 2.0]))
    with pytest.raises(induct.OutOfRange):
        induct.write_tokens(tmp_path / "t.bin", [1, 2**32 + 1])
    assert not (tmp_path / "t.bin").exists()
    # the same rules without NumPy
    code = ("import sys; sys.modules['numpy'] = None\n"
            "import induct\n"
            "m = induct.Model(n_layers=1, d_model=8, n_heads=2, n_ctx=8, d_vocab=11)\n"
            "for toks, exc in (([[1, 2, 2**33]], induct.OutOfRange), ([[1, 2.0, 3]], TypeError)):\n"
            "    try:\n"
            "        m.forward(toks)\n"
            "    except exc:\n"
            "        pass\n"
            "    else:\n"
            "        raise SystemExit(f'{toks} was accepted')\n"
            "print('ok')\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=os.environ)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr + out.stdout


def test_paths_with_nul_are_refused(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    m = induct.Model(n_layers=1, d_model=8, n_heads=2, n_ctx=8, d_vocab=11)
    o = induct.Optimizer(m)
    d = induct.Dataset.rrt(d_vocab=11, min_block=2)
    with pytest.raises(ValueError, match="embedded null byte"):
        open("x\x00.safetensors", "wb")  # what Python itself does
    calls = [lambda: m.save("x\x00.safetensors"), lambda: o.save("x\x00.safetensors"),
             lambda: induct.Model.load("x\x00"), lambda: induct.Optimizer.load(m, "x\x00"),
             lambda: induct.write_tokens("x\x00.bin", [1, 2]),
             lambda: induct.read_tokens("x\x00.bin"),
             lambda: induct.Dataset.token_file("x\x00.bin"),
             lambda: induct.Dataset.text_path("x\x00"),
             lambda: o.train(d, steps=1, batch=2, seq_len=8, metrics_path="x\x00.jsonl"),
             lambda: o.train(d, steps=1, batch=2, seq_len=8, snapshot_every=1,
                             snapshot_path="x\x00.safetensors"),
             lambda: m.get("unembed.b_U\x00junk"),
             lambda: m.set("unembed.b_U\x00junk", np.zeros(11, np.float32))]
    for f in calls:
        with pytest.raises(ValueError, match="embedded null byte"):
            f()
    assert os.listdir(tmp_path) == [] and o["step"] == 0
    # text given as bytes may hold NUL bytes: they are data
    assert induct.Dataset.text(b"ab\x00cd" * 100).split_tokens() > 0


def test_set_checks_the_shape():
    m = induct.Model(n_layers=1, d_model=8, n_heads=2, d_head=3, n_ctx=8, d_vocab=11)
    w = m.get("blocks.0.attn.W_Q")
    assert w.shape == (2, 8, 3)
    before = m.weights()
    for bad in (np.ascontiguousarray(w.transpose(0, 2, 1)), w.reshape(-1), w.reshape(2, 24),
                w.reshape(1, 2, 8, 3)):
        with pytest.raises(ValueError, match=r"shape \(2, 8, 3\)"):
            m.set("blocks.0.attn.W_Q", bad)
    assert all(np.array_equal(v, before[k]) for k, v in m.weights().items())
    m.set("blocks.0.attn.W_Q", w + 1)
    assert np.array_equal(m.get("blocks.0.attn.W_Q"), w + 1)
    m.set("unembed.b_U", [0.5] * 11)  # nested lists of the right shape are fine
    with pytest.raises(induct.OutOfRange, match="no tensor named"):
        m.set("nope", [1.0])


def _write_bare_safetensors(path, tensors):
    """TL-named float32 tensors without __metadata__ (as a tool other than libinduct writes)."""
    import struct
    header, blobs, off = {}, [], 0
    for k, v in tensors.items():
        b = np.ascontiguousarray(v, dtype="<f4").tobytes()
        header[k] = {"dtype": "F32", "shape": list(v.shape), "data_offsets": [off, off + len(b)]}
        off += len(b)
        blobs.append(b)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def test_load_needs_the_architecture_the_tensors_cannot_tell(tmp_path):
    cfg = dict(n_layers=2, d_model=16, n_heads=2, n_ctx=12, d_vocab=10, positional="shortformer",
               seed=3)
    m = induct.Model(**cfg)
    rng = np.random.default_rng(0)
    for name, w in m.weights().items():  # weights of order 1, so positions matter
        m.set(name, rng.normal(0, 0.5, w.shape).astype(np.float32))
    toks = np.arange(24, dtype=np.int32).reshape(2, 12) % 10
    ref = m.forward(toks)[0]
    path = tmp_path / "bare.safetensors"
    _write_bare_safetensors(path, m.weights())
    with pytest.raises(induct.FormatError, match="cannot be told from its tensors.*"
                       "positional_embedding_type.*normalization_type"):
        induct.Model.load(path)
    m2 = induct.Model.load(path, **cfg)
    assert np.array_equal(m2.forward(toks)[0], ref)
    # as standard positions the same tensors give other logits: guessing would be wrong
    m3 = induct.Model.load(path, **dict(cfg, positional="standard"))
    assert np.abs(m3.forward(toks)[0] - ref).max() > 0.1
    # a file with metadata: a given config must agree with it
    m.save(tmp_path / "full.safetensors")
    assert np.array_equal(induct.Model.load(tmp_path / "full.safetensors").forward(toks)[0], ref)
    with pytest.raises(induct.FormatError, match="positional_embedding_type .* contradicts"):
        induct.Model.load(tmp_path / "full.safetensors", **dict(cfg, positional="standard"))
    with pytest.raises(induct.FormatError, match="shape"):
        induct.Model.load(path, **dict(cfg, n_heads=4, d_head=2))


def test_scalar_arguments_are_not_wrapped():
    d = induct.Dataset.rrt(d_vocab=11, min_block=2)
    m = induct.Model(n_layers=1, d_model=8, n_heads=2, n_ctx=8, d_vocab=11)
    with pytest.raises(induct.OutOfRange, match="refused, not wrapped"):
        m.set_threads(2**32 + 1)  # would be 1 thread
    with pytest.raises(induct.OutOfRange, match="refused, not wrapped"):
        m.set_max_bytes(-1)  # would be 2**64 - 1
    with pytest.raises(induct.OutOfRange, match="refused, not wrapped"):
        d.batch(-1, 2, 8)  # would be batch 2**64 - 1
    with pytest.raises(induct.OutOfRange, match="refused, not wrapped"):
        m.set_threads(-1)
    assert d.batch(2**64 - 1, 2, 8)[0].shape == (2, 8)  # the whole uint64 range is fine
