"""Port test: TransformerLens code for the standard induction-head exercises runs on
libinduct with only the import and the model construction changed.

The snippets below the "TransformerLens code" line are written as one writes them for
TransformerLens (PyTorch tensors, hook functions fn(activation, hook), hook.layer(),
utils.get_act_name, FactoredMatrix, ActivationCache methods): repeated tokens and the
per-token loss, attention-pattern detectors (current, previous and first token,
induction), an induction score from a pattern hook, head ablation with a z hook, logit
attribution with the cache's decompositions, OV and QK circuits (top-1 accuracy,
eigenvalues, the positional QK pattern) and K-composition scores.

The model is a hand-wired two-layer induction circuit (Elhage et al. 2021, "Induction
heads"), so every answer is known in closed form: layer 0 head 0 attends to the previous
position and writes its token into a "previous token" subspace; layer 0 head 1 attends
to the first position and writes only into a scratch subspace; layer 1 head 0 attends
from a token to every position whose previous token is that token and copies it to the
output; layer 1 head 1 reads and writes only the scratch subspace. The snippets' answers
are checked against those closed forms and against libinduct's own calls (ablations,
attention patterns, composition and eigenvalue copying scores computed in C)."""
import functools
import math

import numpy as np
import pytest
import torch as t

import induct

# ---- the only lines that differ from a TransformerLens session --------------------------
from induct.lens import (ActivationCache, FactoredMatrix, HookedTransformer,  # noqa: F401
                         HookedTransformerConfig, HookPoint, utils)

N_PIECES, N_CTX = 40, 48
V = N_PIECES + 1                   # the word pieces and a BOS id
TOK, POS, PREV, OUT = 0, V, V + N_CTX, 2 * V + N_CTX
JUNK, N_JUNK = 3 * V + N_CTX, 8    # the scratch subspace of the two idle heads
D_MODEL, D_HEAD = 3 * V + N_CTX + N_JUNK, N_CTX


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    import sentencepiece as spm  # python3-sentencepiece: a test dependency, no skip
    d = tmp_path_factory.mktemp("spm")
    (d / "c.txt").write_text("the cat sat on the mat and the dog sat on the log\n" * 40)
    spm.SentencePieceTrainer.train(input=str(d / "c.txt"), model_prefix=str(d / "t"),
                                   vocab_size=N_PIECES, model_type="bpe", bos_id=-1,
                                   eos_id=-1, num_threads=1, minloglevel=2)
    return induct.SentencePieceTokenizer(d / "t.model", bos_id=N_PIECES)


def induction_circuit_weights(state_dict):
    """The hand-wired circuit's weights, as a TransformerLens state dict."""
    sd = {k: t.zeros_like(v) for k, v in state_dict.items()}
    c = math.sqrt(30.0 * math.sqrt(D_HEAD))  # attention score 30 after 1/sqrt(d_head)
    g = t.Generator().manual_seed(0)
    for tok in range(V):
        sd["embed.W_E"][tok, TOK + tok] = 1.0
        sd["unembed.W_U"][OUT + tok, tok] = 15.0
        # L0H0 moves the token one position on; L1H0 matches it and copies
        sd["blocks.0.attn.W_V"][0, TOK + tok, tok] = 1.0
        sd["blocks.0.attn.W_O"][0, tok, PREV + tok] = 1.0
        sd["blocks.1.attn.W_Q"][0, TOK + tok, tok] = c
        sd["blocks.1.attn.W_K"][0, PREV + tok, tok] = c
        sd["blocks.1.attn.W_V"][0, TOK + tok, tok] = 1.0
        sd["blocks.1.attn.W_O"][0, tok, OUT + tok] = 1.0
    for p in range(N_CTX):
        sd["pos_embed.W_pos"][p, POS + p] = 1.0
        sd["blocks.0.attn.W_Q"][0, POS + p, p] = c          # L0H0: query p ...
        if p + 1 < N_CTX:
            sd["blocks.0.attn.W_K"][0, POS + p, p + 1] = c  # ... matches key p - 1
        sd["blocks.0.attn.W_Q"][1, POS + p, 0] = c          # L0H1: every query ...
    sd["blocks.0.attn.W_K"][1, POS + 0, 0] = c              # ... matches position 0
    junk = slice(JUNK, JUNK + N_JUNK)
    sd["blocks.0.attn.W_V"][1, TOK:TOK + V, :N_JUNK] = 0.1 * t.randn(V, N_JUNK, generator=g)
    sd["blocks.0.attn.W_O"][1, :N_JUNK, junk] = 0.1 * t.randn(N_JUNK, N_JUNK, generator=g)
    for w in ("W_Q", "W_K", "W_V"):
        sd[f"blocks.1.attn.{w}"][1, junk, :N_JUNK] = 0.1 * t.randn(N_JUNK, N_JUNK, generator=g)
    sd["blocks.1.attn.W_O"][1, :N_JUNK, junk] = 0.1 * t.randn(N_JUNK, N_JUNK, generator=g)
    return sd


@pytest.fixture(scope="module")
def model(tokenizer):
    # TransformerLens: cfg = HookedTransformerConfig(...); model = HookedTransformer(cfg, ...)
    cfg = HookedTransformerConfig(n_layers=2, d_model=D_MODEL, n_ctx=N_CTX, d_head=D_HEAD,
                                  n_heads=2, d_vocab=V, attn_only=True,
                                  normalization_type=None,
                                  positional_embedding_type="standard")
    model = HookedTransformer(cfg, tokenizer=tokenizer)
    model.load_state_dict(induction_circuit_weights(model.state_dict()))
    return model


# ---- TransformerLens code -------------------------------------------------------------
def generate_repeated_tokens(model, seq_len, batch=1):
    t.manual_seed(0)
    prefix = (t.ones(batch, 1) * model.tokenizer.bos_token_id).long()
    rep_tokens_half = t.randint(0, model.cfg.d_vocab - 1, (batch, seq_len), dtype=t.int64)
    return t.cat([prefix, rep_tokens_half, rep_tokens_half], dim=-1)


def get_log_probs(logits, tokens):
    logprobs = logits.log_softmax(dim=-1)
    return logprobs[:, :-1].gather(dim=-1, index=tokens[:, 1:].unsqueeze(-1)).squeeze(-1)


def run_and_cache_model_repeated_tokens(model, seq_len, batch=1):
    rep_tokens = generate_repeated_tokens(model, seq_len, batch)
    rep_logits, rep_cache = model.run_with_cache(rep_tokens)
    return rep_tokens, rep_logits, rep_cache


def current_attn_detector(cache):
    attn_heads = []
    for layer in range(model_cfg(cache).n_layers):
        for head in range(model_cfg(cache).n_heads):
            attention_pattern = cache["pattern", layer][head]
            if attention_pattern.diagonal().mean() > 0.4:
                attn_heads.append(f"{layer}.{head}")
    return attn_heads


def prev_attn_detector(cache):
    attn_heads = []
    for layer in range(model_cfg(cache).n_layers):
        for head in range(model_cfg(cache).n_heads):
            attention_pattern = cache["pattern", layer][head]
            if attention_pattern.diagonal(-1).mean() > 0.4:
                attn_heads.append(f"{layer}.{head}")
    return attn_heads


def first_attn_detector(cache):
    attn_heads = []
    for layer in range(model_cfg(cache).n_layers):
        for head in range(model_cfg(cache).n_heads):
            attention_pattern = cache["pattern", layer][head]
            if attention_pattern[:, 0].mean() > 0.4:
                attn_heads.append(f"{layer}.{head}")
    return attn_heads


def induction_attn_detector(cache, seq_len):
    attn_heads = []
    for layer in range(model_cfg(cache).n_layers):
        for head in range(model_cfg(cache).n_heads):
            attention_pattern = cache["pattern", layer][head]
            if attention_pattern.diagonal(-seq_len + 1).mean() > 0.4:
                attn_heads.append(f"{layer}.{head}")
    return attn_heads


def model_cfg(cache):
    return cache.model.cfg


def head_zero_ablation_hook(z, hook, head_index_to_ablate):
    z[:, :, head_index_to_ablate, :] = 0.0


def get_ablation_scores(model, tokens, seq_len):
    ablation_scores = t.zeros((model.cfg.n_layers, model.cfg.n_heads))
    model.reset_hooks()
    logits = model(tokens, return_type="logits")
    loss_no_ablation = -get_log_probs(logits, tokens)[:, -(seq_len - 1):].mean()
    for layer in range(model.cfg.n_layers):
        for head in range(model.cfg.n_heads):
            temp_hook_fn = functools.partial(head_zero_ablation_hook, head_index_to_ablate=head)
            ablated_logits = model.run_with_hooks(
                tokens, fwd_hooks=[(utils.get_act_name("z", layer), temp_hook_fn)])
            loss = -get_log_probs(ablated_logits, tokens)[:, -(seq_len - 1):].mean()
            ablation_scores[layer, head] = loss - loss_no_ablation
    return ablation_scores


def top_1_acc(full_OV_circuit, batch_size=16):
    total = 0
    for indices in t.split(t.arange(full_OV_circuit.shape[0]), batch_size):
        AB_slice = full_OV_circuit[indices].AB
        total += (t.argmax(AB_slice, dim=1) == indices).float().sum().item()
    return total / full_OV_circuit.shape[0]


def mask_scores(attn_scores):
    mask = t.tril(t.ones_like(attn_scores)).bool()
    return attn_scores.masked_fill(~mask, -1.0e6)


def get_comp_score(W_A, W_B):
    W_A_norm = W_A.pow(2).sum().sqrt()
    W_B_norm = W_B.pow(2).sum().sqrt()
    W_AB_norm = (W_A @ W_B).pow(2).sum().sqrt()
    return (W_AB_norm / (W_A_norm * W_B_norm)).item()


def logits_to_ave_logit_diff(logits, answer_tokens, wrong_tokens):
    final_logits = logits[:, -2, :]
    return (final_logits.gather(-1, answer_tokens[:, None]) -
            final_logits.gather(-1, wrong_tokens[:, None])).mean()


def get_cache_fwd_and_bwd(model, tokens, metric):
    # attribution patching (Nanda 2023): one forward and one backward pass, caching both
    model.reset_hooks()
    cache = {}

    def forward_cache_hook(act, hook):
        cache[hook.name] = act.detach()
    model.add_hook(lambda name: name.endswith("hook_z"), forward_cache_hook, "fwd")
    grad_cache = {}

    def backward_cache_hook(act, hook):
        grad_cache[hook.name] = act.detach()
    model.add_hook(lambda name: name.endswith("hook_z"), backward_cache_hook, "bwd")
    value = metric(model(tokens))
    value.backward()
    model.reset_hooks()
    return value.item(), ActivationCache(cache, model), ActivationCache(grad_cache, model)


def attr_patch_head_out(clean_cache, corrupted_cache, corrupted_grad_cache):
    # [layer, head]: Σ over batch, position and d_head of (clean − corrupted) · gradient
    return t.stack([((clean_cache["z", layer] - corrupted_cache["z", layer]) *
                     corrupted_grad_cache["z", layer]).sum(dim=(0, 1, 3))
                    for layer in range(clean_cache.model.cfg.n_layers)])


# ---- the exercises, checked --------------------------------------------------------------
SEQ_LEN = 20


def test_repeated_tokens_and_per_token_loss(model):
    rep_tokens, rep_logits, rep_cache = run_and_cache_model_repeated_tokens(model, SEQ_LEN)
    rep_cache.remove_batch_dim()
    rep_str = model.to_str_tokens(rep_tokens)
    log_probs = get_log_probs(rep_logits, rep_tokens).squeeze()
    first_half_loss = -log_probs[:SEQ_LEN].mean()
    second_half_loss = -log_probs[SEQ_LEN:].mean()
    # the library's per-token loss is TransformerLens's -log p(next token)
    per_token = model(rep_tokens, return_type="loss", loss_per_token=True)
    t.testing.assert_close(per_token[0], -log_probs, atol=1e-4, rtol=1e-5)
    assert isinstance(rep_cache, ActivationCache) and rep_str[0] == "<bos>"
    assert len(rep_str) == 2 * SEQ_LEN + 1
    # induction: the second copy is predicted, the first is not
    assert second_half_loss < 0.25 * first_half_loss
    assert first_half_loss > 1.0


def test_attention_detectors(model):
    rep_tokens, _, rep_cache = run_and_cache_model_repeated_tokens(model, SEQ_LEN)
    rep_cache.remove_batch_dim()
    assert prev_attn_detector(rep_cache) == ["0.0"]
    assert first_attn_detector(rep_cache) == ["0.1"]
    assert induction_attn_detector(rep_cache, SEQ_LEN) == ["1.0"]
    assert current_attn_detector(rep_cache) == []
    # the cache's patterns are the library's attention patterns
    native = model.attention(rep_tokens)
    for layer in range(2):
        t.testing.assert_close(rep_cache["pattern", layer], t.from_numpy(native[layer]))


def test_induction_score_from_a_pattern_hook(model):
    seq_len, batch = SEQ_LEN, 10
    rep_tokens_10 = generate_repeated_tokens(model, seq_len, batch)
    induction_score_store = t.zeros((model.cfg.n_layers, model.cfg.n_heads))

    def induction_score_hook(pattern, hook):
        induction_stripe = pattern.diagonal(dim1=-2, dim2=-1, offset=1 - seq_len)
        induction_score_store[hook.layer(), :] = induction_stripe.mean(dim=(0, 2))

    pattern_hook_names_filter = lambda name: name.endswith("pattern")  # noqa: E731
    model.run_with_hooks(rep_tokens_10, return_type=None,
                         fwd_hooks=[(pattern_hook_names_filter, induction_score_hook)])
    # the same stripe from the library's own attention patterns, one sequence at a time
    ref = np.zeros((2, 2))
    for row in rep_tokens_10.numpy():
        att = model.attention(row)
        ref += np.diagonal(att, offset=1 - seq_len, axis1=-2, axis2=-1).mean(-1) / batch
    t.testing.assert_close(induction_score_store, t.from_numpy(ref).float())
    assert induction_score_store.argmax().item() == 2        # L1H0
    assert induction_score_store[1, 0] > 0.4  # the detector's threshold above


def test_head_ablation(model):
    rep_tokens = generate_repeated_tokens(model, SEQ_LEN, 10)
    ablation_scores = get_ablation_scores(model, rep_tokens, SEQ_LEN)
    # the two circuit heads matter; the idle heads write only the scratch subspace
    assert ablation_scores[0, 0] > 1.0 and ablation_scores[1, 0] > 1.0
    assert abs(ablation_scores[0, 1]) < 1e-5 and abs(ablation_scores[1, 1]) < 1e-5
    # a zeroed z is the library's zero ablation, bit for bit
    hooked = model.run_with_hooks(rep_tokens, fwd_hooks=[(
        utils.get_act_name("z", 1), functools.partial(head_zero_ablation_hook,
                                                      head_index_to_ablate=0))])
    with model.ablate((1, 0)):
        ablated = model(rep_tokens)
    assert t.equal(hooked, ablated)


def test_logit_attribution(model):
    rep_tokens, rep_logits, cache = run_and_cache_model_repeated_tokens(model, SEQ_LEN, 4)
    # every head's direct contribution to the correct next token, plus the rest
    per_head, labels = cache.stack_head_results(layer=-1, return_labels=True,
                                                incl_remainder=True)
    attrs = cache.logit_attrs(per_head[:, :, :-1], rep_tokens[:, 1:], pos_slice=(0, -1))
    correct_logits = rep_logits[:, :-1].gather(-1, rep_tokens[:, 1:, None]).squeeze(-1)
    t.testing.assert_close(attrs.sum(0), correct_logits - model.b_U[rep_tokens[:, 1:]],
                           atol=1e-4, rtol=1e-5)
    second_half = attrs[:, :, SEQ_LEN:].mean(dim=(1, 2))
    assert labels[second_half.argmax().item()] == "L1H0"
    # the same through the layer decomposition (embeddings, attention outputs)
    resid_stack, resid_labels = cache.decompose_resid(layer=-1, return_labels=True,
                                                      pos_slice=-1)
    assert resid_labels == ["embed", "pos_embed", "0_attn_out", "1_attn_out"]
    scaled = cache.apply_ln_to_stack(resid_stack, layer=-1, pos_slice=-1)
    directions = model.tokens_to_residual_directions(rep_tokens[:, -1])
    direct = t.einsum("cbd,bd->cb", scaled, directions)
    t.testing.assert_close(direct.sum(0), rep_logits[t.arange(4), -1, rep_tokens[:, -1]]
                           - model.b_U[rep_tokens[:, -1]], atol=1e-4, rtol=1e-5)


def test_ov_and_qk_circuits(model):
    layer, head_index = 1, 0
    W_O = model.W_O[layer, head_index]
    W_V = model.W_V[layer, head_index]
    W_E = model.W_E
    W_U = model.W_U
    OV_circuit = FactoredMatrix(W_V, W_O)
    full_OV_circuit = W_E @ OV_circuit @ W_U
    assert full_OV_circuit.shape == (V, V) and full_OV_circuit.mdim == D_HEAD
    assert top_1_acc(full_OV_circuit) == 1.0  # the induction head copies every token
    # its eigenvalues: all 15 (W_E OV W_U = 15 I), and the library's copying score
    evals = full_OV_circuit.eigenvalues
    nonzero = evals[evals.abs() > 1e-3]
    t.testing.assert_close(nonzero.real, t.full((V,), 15.0), atol=1e-3, rtol=0)
    score = (evals.real.sum() / evals.abs().sum()).item()
    assert score == pytest.approx(model.copying_eigen()[layer, head_index], abs=1e-5)
    assert score == pytest.approx(1.0, abs=1e-5)
    # model.OV is the same factored matrix for every head
    t.testing.assert_close((model.W_E @ model.OV[1, 0] @ model.W_U).AB, full_OV_circuit.AB)
    # the positional QK circuit of the previous-token head
    layer, head_index = 0, 0
    W_pos = model.W_pos
    W_QK = model.W_Q[layer, head_index] @ model.W_K[layer, head_index].T
    pos_by_pos_scores = W_pos @ W_QK @ W_pos.T
    masked_scaled = mask_scores(pos_by_pos_scores / model.cfg.d_head ** 0.5)
    pos_by_pos_pattern = t.softmax(masked_scaled, dim=-1)
    assert pos_by_pos_pattern.diag(-1).mean() > 0.99
    factored = (W_pos @ model.QK[layer, head_index] @ W_pos.T).AB
    t.testing.assert_close(factored, pos_by_pos_scores)


def test_k_composition_scores(model):
    W_QK = model.W_Q @ model.W_K.transpose(-1, -2)
    W_OV = model.W_V @ model.W_O
    composition_scores = {"Q": t.zeros(2, 2), "K": t.zeros(2, 2), "V": t.zeros(2, 2)}
    for i in range(model.cfg.n_heads):
        for j in range(model.cfg.n_heads):
            composition_scores["Q"][i, j] = get_comp_score(W_OV[0, i], W_QK[1, j])
            composition_scores["K"][i, j] = get_comp_score(W_OV[0, i], W_QK[1, j].T)
            composition_scores["V"][i, j] = get_comp_score(W_OV[0, i], W_OV[1, j])
    # closed form: OV(L0H0) QK(L1H0)ᵀ = c² Σ_t e_t e_tᵀ over V tokens: 1/sqrt(V)
    assert composition_scores["K"][0, 0].item() == pytest.approx(1 / math.sqrt(V), rel=1e-5)
    assert composition_scores["K"][1, 0] == 0 and composition_scores["K"][0, 1] == 0
    assert composition_scores["Q"][0, 0] == 0  # L0H0 writes where no query reads
    # the factored and the library's scores agree
    for mode in "QKV":
        tl = model.all_composition_scores(mode)[0, :, 1, :]
        native = t.from_numpy(model.composition(mode.lower())[0, :, 1, :])
        t.testing.assert_close(composition_scores[mode], native, atol=1e-5, rtol=1e-4)
        t.testing.assert_close(tl, native, atol=1e-5, rtol=1e-4)
    k = utils.composition_scores(model.OV[0], model.QK[1].T)
    t.testing.assert_close(k.float(), composition_scores["K"], atol=1e-5, rtol=1e-4)


def test_attribution_patching(model):
    """Attribution patching as its TransformerLens notebook writes it (hooks that keep
    act.detach() in both directions, metric(logits).backward()) against the exact patches
    (induct.patching, TransformerLens's patching module's names): at layer 1, whose head
    outputs reach the logits linearly (no LayerNorm), the estimate is the exact change;
    the induction head's patch restores the clean logit difference."""
    from induct import patching
    clean = generate_repeated_tokens(model, SEQ_LEN, batch=2)
    corrupted = clean.clone()
    corrupted[:, 1:SEQ_LEN + 1] = (clean[:, 1:SEQ_LEN + 1] + 7) % (V - 1)
    answer = clean[:, -1]
    wrong = (answer + 1) % (V - 1)

    def metric(logits):
        return logits_to_ave_logit_diff(logits, answer, wrong)
    clean_value, clean_cache, _ = get_cache_fwd_and_bwd(model, clean, metric)
    corrupted_value, corrupted_cache, corrupted_grad_cache = get_cache_fwd_and_bwd(
        model, corrupted, metric)
    attr = attr_patch_head_out(clean_cache, corrupted_cache, corrupted_grad_cache)
    assert clean_value > corrupted_value + 5  # the induction head predicts
    exact = patching.get_act_patch_attn_head_out_all_pos(model, corrupted, clean_cache,
                                                         metric) - corrupted_value
    assert attr.shape == (2, 2) and exact.shape == (2, 2)
    scale = 2 * model(clean).abs().max().item()
    assert np.abs(attr[1].numpy() - exact[1]).max() <= 1e-5 * scale
    assert np.abs(exact[1]).max() > 1  # not vacuous
    assert exact[1, 0] + corrupted_value == pytest.approx(clean_value, abs=1e-5 * scale)
    # the library's one-call form gives the same estimates
    est = patching.attribution_patching(model, corrupted, clean_cache,
                                        patching.LogitDiff(answer, wrong, pos=-2),
                                        ["attn_head_out_all_pos"])
    np.testing.assert_allclose(est["attn_head_out_all_pos"], attr.numpy(), rtol=1e-4,
                               atol=1e-5 * scale)
