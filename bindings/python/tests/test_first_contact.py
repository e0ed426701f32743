"""What a new user meets first: clear errors for bad integers and names (never a
silent wrap-around in ctypes), a repr for every handle, a docstring for every public
method, and Ctrl-C in Optimizer.train() raising KeyboardInterrupt after keeping a
resume point."""
import inspect
import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import induct
import induct.plot


def _public_classes():
    for mod in (induct, induct.plot):
        for name in getattr(mod, "__all__", ()):
            obj = getattr(mod, name)
            if inspect.isclass(obj):
                yield obj


def test_every_public_method_has_a_docstring():
    missing = []
    classes = list(_public_classes())
    assert {induct.Model, induct.Optimizer, induct.Dataset, induct.Ablation,
            induct.ByteTokenizer, induct.SentencePieceTokenizer} <= set(classes)
    for cls in classes:
        for klass in cls.__mro__:
            if not klass.__module__.startswith("induct"):
                continue  # inherited from Python (Exception, tuple, ...)
            for name, member in vars(klass).items():
                if name.startswith("_"):
                    continue
                fn = member.fget if isinstance(member, property) else \
                    getattr(member, "__func__", member)
                if not callable(fn) and not isinstance(member, property):
                    continue  # a constant
                if not (inspect.getdoc(fn) or "").strip():
                    missing.append(f"{cls.__name__}.{name}")
    for mod in (induct, induct.plot):  # module-level functions too
        for name in mod.__all__:
            obj = getattr(mod, name)
            if inspect.isfunction(obj) and not (inspect.getdoc(obj) or "").strip():
                missing.append(f"{mod.__name__}.{name}")
    assert not missing, "no docstring: " + ", ".join(sorted(set(missing)))


def _model(**kw):
    cfg = dict(n_layers=1, d_model=16, n_heads=2, n_ctx=16, d_vocab=16)
    cfg.update(kw)
    return induct.Model(**cfg)


def test_repr_of_every_handle():
    m = _model()
    r = repr(m)
    assert r.startswith("<induct.Model ") and "n_layers=1" in r and "d_vocab=16" in r
    assert f"n_params={m.n_params}" in r
    opt = induct.Optimizer(m, "sgd", lr=0.5)
    assert repr(opt).startswith("<induct.Optimizer sgd step=0 lr=0.5")
    ds = induct.Dataset.rrt(d_vocab=16)
    assert repr(ds) == "<induct.Dataset rrt d_vocab=16>"
    assert "text" in repr(induct.Dataset.text("hello world " * 20, bos=1))
    ab = m.ablate((0, 1))
    assert repr(ab) == "<induct.Ablation zero heads=[(0, 1)] active>"
    ab.restore()
    assert repr(ab).endswith("restored>")
    assert repr(induct.ByteTokenizer(bos=True)) == "<induct.ByteTokenizer d_vocab=257 bos_id=256>"
    opt.close()
    m.close()
    ds.close()
    assert repr(m) == "<induct.Model (closed)>"
    assert repr(opt) == "<induct.Optimizer (closed)>"
    assert repr(ds) == "<induct.Dataset (closed)>"


@pytest.mark.parametrize("field,value", [("n_layers", -1), ("d_model", -64), ("n_ctx", 2**32),
                                         ("seed", -1), ("max_bytes", 2**64)])
def test_negative_or_huge_config_integers_are_refused_before_the_call(field, value):
    # -1 used to wrap to 4294967295 in ctypes and came back as "too many parameters"
    with pytest.raises(ValueError, match=rf"ModelConfig\.{field} must be in \[0, \d+\].*"
                                         rf"got {value}"):
        _model(**{field: value})


def test_floats_are_not_truncated_into_integers():
    with pytest.raises(TypeError, match=r"n_layers must be an integer, got float 2\.5"):
        _model(n_layers=2.5)
    m = _model()
    with pytest.raises(TypeError, match="n_seq must be an integer"):
        m.induction_score(induct.Dataset.rrt(d_vocab=16), n_seq=1.5)


def test_integer_arguments_are_range_checked():
    m = _model()
    ds = induct.Dataset.rrt(d_vocab=16)
    with pytest.raises(ValueError, match=r"n_threads must be in \[0, 4294967295\].*4294967297"):
        m.set_threads(2**32 + 1)  # used to be read as 1
    with pytest.raises(ValueError, match=r"batch must be in \[0, 4294967295\].*got -2"):
        ds.batch(0, -2, 8)
    with pytest.raises(ValueError, match="index must be in"):
        ds.batch(-1, 2, 8)
    with pytest.raises(ValueError, match="steps must be in"):
        induct.Optimizer(m).train(ds, steps=-5)  # used to be 1.8e19 steps
    with pytest.raises(ValueError, match="n_seq must be in"):
        m.previous_token_score(ds, n_seq=-1)
    # the generic check of every C call: a signed value into uint32_t
    with pytest.raises(ValueError, match=r"induct_model_ablate_head argument 1 must be in "):
        m.ablate_head(-1, 0)
    # one exception for both readings: a bad value, and the library's range error
    with pytest.raises(induct.OutOfRange, match="refused, not wrapped"):
        _model(n_heads=-2)


def test_unknown_names_list_the_choices():
    m = _model()
    with pytest.raises(ValueError, match=r"unknown optimizer kind 'adam'; known: "
                                         r"\['adamw', 'sgd'\]"):
        induct.Optimizer(m, "adam")
    with pytest.raises(TypeError, match="unknown optimizer parameter 'learning_rate'"):
        induct.Optimizer(m, learning_rate=1e-3)
    ds = induct.Dataset.rrt(d_vocab=16)
    with pytest.raises(ValueError, match=r"unknown split 'val'; known: \['eval', 'train'\]"):
        ds.batch(0, 2, 8, split="val")
    with pytest.raises(KeyError, match="known:"):
        induct.Optimizer(m)["learning_rate"]


_CHILD = textwrap.dedent("""
    import os, signal, sys
    import induct
    signal.signal(signal.SIGINT, signal.default_int_handler)  # as in a terminal
    out = sys.argv[1]
    m = induct.Model(n_layers=1, d_model=16, n_heads=2, n_ctx=16, d_vocab=16, seed=3)
    ds = induct.Dataset.rrt(d_vocab=16, seed=4)
    opt = induct.Optimizer(m, lr=1e-3)
    try:
        opt.train(ds, steps=10**9, batch=4, seq_len=16, eval_every=10**8,
                  metrics_path=os.path.join(out, "metrics.jsonl"),
                  resume_path=os.path.join(out, "resume-{step}.safetensors"))
    except KeyboardInterrupt as e:
        print(type(e).__name__, e.step, e.path, int(opt["step"]), flush=True)
        raise
""")


def test_ctrl_c_in_train_raises_keyboard_interrupt_after_saving_a_resume_point(tmp_path):
    env = dict(os.environ)
    proc = subprocess.Popen([sys.executable, "-c", _CHILD, str(tmp_path)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    log = tmp_path / "metrics.jsonl"
    # the step-0 evaluation line: train() is running (no time limit: a loaded machine
    # only makes this take longer; the test's own timeout ends a hang)
    while not (log.exists() and log.stat().st_size):
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate()
    assert "Exception ignored" not in err, err
    assert "stopped by the progress callback" not in err, err
    assert "KeyboardInterrupt: training interrupted at step" in err, err
    # the interpreter exits by SIGINT, as for any uncaught KeyboardInterrupt (a shell
    # sees 130), which needs the exact type KeyboardInterrupt
    assert proc.returncode == -signal.SIGINT
    name, step, path, opt_step = out.split()
    assert name == "KeyboardInterrupt" and int(step) == int(opt_step) >= 0
    assert path == str(tmp_path / f"resume-{step}.safetensors") and os.path.isfile(path)
    # the file is a resume point: continuing from it is bit-identical to never stopping
    k = int(step)
    ds = induct.Dataset.rrt(d_vocab=16, seed=4)
    a = induct.Model(n_layers=1, d_model=16, n_heads=2, n_ctx=16, d_vocab=16, seed=3)
    induct.Optimizer(a, lr=1e-3).train(ds, steps=k + 3, batch=4, seq_len=16)
    b = induct.Model.load(path)
    ob = induct.Optimizer.load(b, path)
    assert int(ob["step"]) == k
    ob.train(ds, steps=k + 3, batch=4, seq_len=16)
    for name in a.tensor_names():
        assert np.array_equal(a.get(name), b.get(name)), name


def test_exception_in_progress_is_reraised_and_sigint_handler_restored():
    m = _model()
    ds = induct.Dataset.rrt(d_vocab=16)
    opt = induct.Optimizer(m)
    before = signal.getsignal(signal.SIGINT)

    def boom(info):
        raise RuntimeError("from the callback")
    with pytest.raises(RuntimeError, match="from the callback"):
        opt.train(ds, steps=5, batch=2, seq_len=16, progress=boom)
    assert signal.getsignal(signal.SIGINT) is before
    assert int(opt["step"]) == 1
