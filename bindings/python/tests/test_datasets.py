"""Datasets through the bindings: bit-identity with the C reference program
(ref_datasets.c), the documented structure of KV rows and text windows, token files
both ways, and every exception path of the new functions."""
import json
import os

import numpy as np
import pytest

import induct
from helpers import f64, ints, parse_reference, run_helper

TEXTS = {"a.txt": "alpha beta\n", "b.txt": "gamma delta epsilon", "sub/c.txt": "delta epsilon zeta",
         "skip.md": "not read"}
IDS = [(i * 7) % 50 for i in range(300)]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    root = tmp_path_factory.mktemp("data")
    for name, text in TEXTS.items():
        p = root / "texts" / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    c_file = root / "c_tokens.bin"
    ref = parse_reference(run_helper("INDUCT_REF_DATASETS", root / "texts", c_file))
    return root, c_file, ref


def test_kv_bit_identical_to_c(files):
    _, _, ref = files
    kv = induct.Dataset.kv(seed=3)
    toks, meta = kv.batch(2, 4, 25)
    assert np.array_equal(toks.ravel(), ints(ref["kv.batch"]))
    assert np.array_equal(np.asarray(meta), ints(ref["kv.meta"]))
    info = kv.kv_info(2, 4, 25)
    assert info.shape == (4, 4) and np.array_equal(info.ravel(), ints(ref["kv.info"]))
    assert kv.kv_ceiling(25) == f64(ref["kv.ceiling"])[0]
    m = induct.Model(n_layers=2, d_model=32, n_heads=2, n_ctx=25, d_vocab=64, seed=4)
    o = induct.Optimizer(m, lr=1e-2)
    # the KV objective is the loss at the answer position only (batch 0 at step 0)
    first = m.forward(kv.batch(0, 8, 25)[0], logits=False)[1][:, 23].astype(np.float64)
    losses = [o.train_step(kv, 8, 25) for _ in range(3)]
    assert losses[0] == pytest.approx(first.mean(), abs=1e-6)
    assert losses == list(f64(ref["kv.train_loss"]))
    acc = m.kv_accuracy(kv, 32, 25)
    assert acc == f64(ref["kv.accuracy"])[0]
    att = m.kv_attention(kv, 32, 25)
    assert att.shape == (2, 2)
    assert np.array_equal(att.ravel(), f64(ref["kv.attention"]).astype(np.float32))
    # independently: argmax at the answer position, attention from it to the value
    rows = kv.batch(0, 32, 25, split="eval")[0]
    info = kv.kv_info(0, 32, 25, split="eval")
    logits = m.forward(rows)[0][:, 23]
    assert acc == np.mean(logits.argmax(-1) == info[:, 1])
    pats = np.stack([m.attention(r)[:, :, 23, v] for r, v in zip(rows, info[:, 3])])
    assert np.allclose(att, pats.astype(np.float64).mean(0), rtol=0, atol=1e-6)


def test_kv_rows_have_the_documented_structure():
    kv = induct.Dataset.kv(d_vocab=16, seed=1)
    toks, meta = kv.batch(0, 32, 12)
    info = kv.kv_info(0, 32, 12)
    C = 11
    for row, m, (ans_pos, ans_tok, key_pos, val_pos) in zip(toks, meta, info):
        assert ans_pos == C - 1 and val_pos == key_pos + 1 == m
        assert row[key_pos] == row[C - 1]  # the query repeats the key
        assert row[val_pos] == row[C] == ans_tok  # the answer is the value after the key
    assert induct.Dataset.kv(unique_key=1, d_vocab=16).kv_ceiling(12) == 1.0


def test_text_and_token_files_bit_identical_to_c(files):
    root, c_file, ref = files
    tx = induct.Dataset.text_path(root / "texts", ".txt", bos=1, separator=10,
                                  split="document", val_fraction=0.5, seed=6)
    assert tx.d_vocab == int(ref["text.d_vocab"][0]) == 257
    assert tx.split_tokens("train") == int(ref["text.train_tokens"][0])
    assert tx.split_tokens("eval") == int(ref["text.eval_tokens"][0])
    assert tx.window_count(8, "eval") == int(ref["text.eval_windows"][0])
    assert np.array_equal(tx.batch(1, 3, 8)[0].ravel(), ints(ref["text.train_batch"]))
    assert np.array_equal(tx.batch(0, 3, 8, split="eval")[0].ravel(),
                          ints(ref["text.eval_batch"]))
    # the C program's llm.c file: Python writes the same bytes and reads the same ids
    py_file = root / "py_tokens.bin"
    induct.write_tokens(py_file, IDS, format="llmc")
    assert py_file.read_bytes() == c_file.read_bytes()
    assert induct.read_tokens(c_file, "llmc").tolist() == IDS
    tf = induct.Dataset.token_file(c_file, format="llmc", val_fraction=0.2, block_tokens=32,
                                   seed=8)
    assert tf.d_vocab == int(ref["tokfile.d_vocab"][0]) == 50
    assert tf.split_tokens() == int(ref["tokfile.train_tokens"][0])
    assert tf.window_count(16) == int(ref["tokfile.train_windows"][0])
    assert np.array_equal(tf.batch(5, 2, 16)[0].ravel(), ints(ref["tokfile.train_batch"]))
    assert np.array_equal(tf.batch(0, 2, 16, split="eval")[0].ravel(),
                          ints(ref["tokfile.eval_batch"]))


def test_text_tokens_are_bytes():
    text = "Ein Tag, ein Byte: ünï.\n" * 8
    tx = induct.Dataset.text(text, val_fraction=0.5, block_tokens=0, n_eval_windows=0)
    data = np.frombuffer(text.encode(), dtype=np.uint8).astype(np.int32)
    held = data[len(data) - len(data) // 2:]  # the last floor(n f) tokens are held out
    assert tx.d_vocab == 256 and tx.split_tokens("eval") == len(held)
    T = 10
    E = (len(held) - 1) // T  # all disjoint windows, starting at i T
    assert tx.window_count(T, "eval") == E
    rows = tx.batch(0, E, T, split="eval")[0]
    assert np.array_equal(rows, np.stack([held[i * T:(i + 1) * T] for i in range(E)]))


@pytest.mark.parametrize("fmt,dtype,header", [("u16", "<u2", 0), ("u32", "<u4", 0),
                                              ("llmc", "<u2", 1024)])
def test_token_file_formats(tmp_path, fmt, dtype, header):
    ids = [0, 1, 65535 if fmt != "u32" else 70000, 42]
    p = tmp_path / f"t.{fmt}"
    induct.write_tokens(p, np.array(ids, dtype=np.int64), format=fmt)
    raw = p.read_bytes()
    assert np.frombuffer(raw[header:], dtype=dtype).tolist() == ids
    if fmt == "llmc":
        assert np.frombuffer(raw[:12], "<i4").tolist() == [20240520, 1, 4]
    assert induct.read_tokens(p, fmt).tolist() == ids


def test_dataset_exceptions(tmp_path):
    p = tmp_path / "t.bin"
    induct.write_tokens(p, [1, 2, 3, 4], format="u16")
    p_trunc = tmp_path / "trunc.bin"
    p_trunc.write_bytes(p.read_bytes()[:-1])
    with pytest.raises(induct.FormatError, match="trunc.bin"):
        induct.Dataset.token_file(p_trunc)
    with pytest.raises(induct.OutOfRange, match="t.bin"):
        induct.Dataset.token_file(p, d_vocab=3)
    with pytest.raises(induct.IOFailure, match="missing"):
        induct.read_tokens(tmp_path / "missing.bin")
    with pytest.raises(ValueError, match="format"):
        induct.read_tokens(p, format="u8")
    with pytest.raises(ValueError, match="format"):
        induct.Dataset.token_file(p, format="u8")
    with pytest.raises(induct.OutOfRange):
        induct.write_tokens(tmp_path / "big.bin", [1, 70000], format="u16")
    assert not (tmp_path / "big.bin").exists()
    with pytest.raises(induct.InvalidArgument):
        induct.Dataset.text(b"one document only", split="document")
    with pytest.raises(induct.InvalidArgument):
        induct.Dataset.text(b"", val_fraction=0.1)
    with pytest.raises(induct.FormatError):
        induct.Dataset.text_path(tmp_path, ".nothing")
    rrt = induct.Dataset.rrt()
    with pytest.raises(induct.InvalidArgument):
        rrt.kv_info(0, 2, 25)
    with pytest.raises(induct.InvalidArgument):
        rrt.kv_ceiling(25)
    with pytest.raises(induct.InvalidArgument):
        rrt.split_tokens()
    kv = induct.Dataset.kv(pair_min=20)
    with pytest.raises(induct.OutOfRange):
        kv.batch(0, 2, 12)
    with pytest.raises(TypeError, match="unknown KVConfig field"):
        induct.Dataset.kv(n_pairs=3)
    m = induct.Model(n_layers=1, d_model=8, n_heads=2, n_ctx=25, d_vocab=16)
    with pytest.raises(induct.InvalidArgument):
        m.kv_accuracy(induct.Dataset.kv(d_vocab=64), 4, 25)  # vocabulary larger than the model's


def test_training_logs_kv_metrics(tmp_path):
    kv = induct.Dataset.kv(d_vocab=16, seed=2)
    m = induct.Model(n_layers=1, d_model=16, n_heads=2, n_ctx=12, d_vocab=16, seed=1)
    o = induct.Optimizer(m, lr=1e-2)
    log = o.train(kv, steps=4, batch=8, seq_len=12, eval_every=2, eval_batch=16,
                  metrics=("loss", "kv_accuracy", "kv_attention"),
                  metrics_path=tmp_path / "kv.jsonl")
    last = induct.read_metrics(log)[-1]
    assert last["step"] == 4
    assert last["kv_accuracy"] == m.kv_accuracy(kv, 16, 12)
    assert np.array_equal(np.float32(last["kv_attention_on_answer"]), m.kv_attention(kv, 16, 12))


def test_bos_rule(tmp_path):
    """Every dataset reports its BOS; the training driver's probe metrics use it."""
    text = b"the cat sat on the mat. " * 200
    assert induct.Dataset.rrt().bos is None
    assert induct.Dataset.rrt(bos=0, token_lo=1).bos == 0
    assert induct.Dataset.text(text).bos is None
    d = induct.Dataset.text(text, bos=1, block_tokens=256)
    assert d.bos == induct.TEXT_BOS == 256
    assert induct.Dataset.tokens([[1, 2, 3, 4]], d_vocab=5).bos is None
    pc = d.probe_config()
    assert (pc["bos"], pc["token_lo"], pc["token_hi"]) == (256, 0, 256)
    m = induct.Model(n_layers=1, d_model=16, n_heads=2, n_ctx=128, d_vocab=257, seed=5)
    probe = m.probe_tokens(**pc)
    assert probe.shape == (10, 101) and (probe[:, 0] == 256).all() and (probe[:, 1:] < 256).all()
    o = induct.Optimizer(m)
    log = tmp_path / "m.jsonl"
    o.train(d, steps=1, batch=2, seq_len=64, eval_every=1, eval_batch=2,
            metrics=("prefix_matching", "copying"), metrics_path=log)
    rec = json.loads(log.read_text().splitlines()[-1])
    assert np.array_equal(np.float32(rec["prefix_matching_score"]), m.prefix_matching(**pc))
    assert np.array_equal(np.float32(rec["copying_score"]), m.copying(**pc))
    assert not np.array_equal(m.prefix_matching(**pc), m.prefix_matching())  # not NUL-BOS
    mine = dict(bos=256, token_lo=97, token_hi=123, block_len=10, seed=4)
    o.train(d, steps=2, batch=2, seq_len=64, eval_every=1, eval_batch=2,
            metrics=("prefix_matching",), metrics_path=log, probe=mine)
    rec = json.loads(log.read_text().splitlines()[-1])
    assert np.array_equal(np.float32(rec["prefix_matching_score"]), m.prefix_matching(**mine))
    with pytest.raises(induct.InvalidArgument):
        o.train(d, steps=3, batch=2, seq_len=64, metrics=("prefix_matching",),
                probe=dict(mine, bos=100))
    assert o["step"] == 2


def test_set_repeats(tmp_path):
    """The repeated-span curriculum: with fraction 1 every train row is its plain window
    (same start) except one run [b, b+L) that copies [a, a+L) of the same row; the eval
    split and fraction 0 are bit-identical to a dataset without it; bad values raise."""
    p = tmp_path / "distinct.bin"
    induct.write_tokens(p, list(range(5000)), format="u32")  # distinct ids: a copy is visible

    def open_tf():
        return induct.Dataset.token_file(p, format="u32", block_tokens=500, seed=4)

    plain, d = open_tf(), open_tf()
    assert d.set_repeats(1.0, 3, 12) is d
    T = 40
    x, mx = d.batch(2, 64, T)
    y, my = plain.batch(2, 64, T)
    assert list(mx) == list(my)
    for row, base in zip(x, y):
        diff = np.flatnonzero(row != base)
        b, L = int(diff[0]), len(diff)
        assert np.array_equal(diff, np.arange(b, b + L)) and 3 <= L <= 12
        a = int(np.flatnonzero(base == row[b])[0])
        assert a + L <= b and b + L <= T
        assert np.array_equal(row[b:b + L], base[a:a + L])
    assert np.array_equal(d.batch(0, 16, T, split="eval")[0],
                          plain.batch(0, 16, T, split="eval")[0])
    d.set_repeats(0, 3, 12)
    assert np.array_equal(d.batch(2, 64, T)[0], y)
    # narrowing in the binding, then the library's checks
    with pytest.raises(TypeError, match="fraction"):
        d.set_repeats("0.5", 3, 12)
    with pytest.raises(TypeError, match="min_len"):
        d.set_repeats(0.5, 3.0, 12)
    with pytest.raises(induct.OutOfRange, match="max_len"):
        d.set_repeats(0.5, 3, 2 ** 32)
    with pytest.raises(induct.OutOfRange, match="min_len"):
        d.set_repeats(0.5, -1, 12)
    for bad in (float("nan"), float("inf"), -0.1, 1.5):
        with pytest.raises(induct.InvalidArgument, match="fraction"):
            d.set_repeats(bad, 3, 12)
    with pytest.raises(induct.InvalidArgument, match="min_len"):
        d.set_repeats(0.5, 13, 12)
    with pytest.raises(induct.InvalidArgument, match="min_len"):
        d.set_repeats(0.5, 0, 12)
    with pytest.raises(induct.NotSupported, match="text and token-file"):
        induct.Dataset.rrt().set_repeats(0.5, 3, 12)
    d.set_repeats(0.5, 30, 40)
    with pytest.raises(induct.OutOfRange, match="min_len 30"):
        d.batch(0, 2, 59)
    assert d.batch(0, 2, 59, split="eval")[0].shape == (2, 59)
