/* The npm package's hooks and caches in Node (run by web/test_npm.py from a project that
 * installed the packed tarball: `import ... from 'libinduct'`). Each check compares with an
 * independent computation or with a guarantee of docs/hooks.md; the first failure throws.
 * Prints one JSON line of figures. */
import { loadInduct, actName, InductError } from 'libinduct';

const I = await loadInduct();
const fails = [];
const ok = (cond, what) => { if (!cond) fails.push(what); };
const same = (a, b) => a.length === b.length && a.every((x, i) => Object.is(x, b[i]));
const maxDiff = (a, b) => a.reduce((m, x, i) => Math.max(m, Math.abs(x - b[i])), 0);

const V = 16, T = 24, B = 3, H = 4, D = 32, E = D / H;
const model = new I.Model({ n_layers: 2, d_model: D, n_heads: H, n_ctx: T, d_vocab: V,
                            init: I.INDUCT.INIT_GPT2, init_std: 0.3, seed: 3 });
const data = I.Dataset.rrt({ d_vocab: V, min_block: 3, max_block: 10, seed: 2 });
const { tokens } = data.batch(I.INDUCT.SPLIT_EVAL, 0, B, T);

/* the points, in pass order */
const pts = model.hookPoints();
ok(pts[0] === 'hook_embed' && pts[1] === 'hook_pos_embed' && pts[2] === 'blocks.0.hook_resid_pre'
   && pts[pts.length - 1] === 'blocks.1.hook_resid_post', `hook points ${pts}`);
ok(JSON.stringify(model.hookShape(actName('pattern', 1), B, T)) ===
   JSON.stringify([B, H, T, T]), 'the pattern shape');

/* A. a cache of every point against independent computations */
const plain = model.forward(tokens, B, T);
const { logits, cache } = model.runWithCache(tokens, B, T, { names: (n) => true });
ok(cache.size === pts.length, 'every point cached');
const WE = model.tensor('embed.W_E'), WP = model.tensor('pos_embed.W_pos');
const emb = cache.get('hook_embed').data, pos = cache.get('hook_pos_embed').data;
const rp0 = cache.act('resid_pre', 0).data;
let embOk = true, rpOk = true;
for (let b = 0; b < B; b++)
    for (let t = 0; t < T; t++)
        for (let d = 0; d < D; d++) {
            const i = (b * T + t) * D + d;
            if (emb[i] !== WE[tokens[b * T + t] * D + d] || pos[i] !== WP[t * D + d]) embOk = false;
            if (rp0[i] !== Math.fround(emb[i] + pos[i])) rpOk = false;
        }
ok(embOk, 'hook_embed/hook_pos_embed are the rows of W_E and W_pos');
ok(rpOk, 'blocks.0.hook_resid_pre is hook_embed + hook_pos_embed');
for (let b = 0; b < B; b++) {
    const att = model.attention(tokens.slice(b * T, (b + 1) * T), T);     /* [L][H][T][T] */
    for (let l = 0; l < 2; l++) {
        const c = cache.act('pattern', l).data.slice(b * H * T * T, (b + 1) * H * T * T);
        ok(same(c, att.slice(l * H * T * T, (l + 1) * H * T * T)),
           `cached pattern of layer ${l}, sequence ${b} is model.attention()'s`);
    }
}
/* the logits: their cross-entropy (float64) is forward()'s per-token loss */
let ceDiff = 0;
for (let b = 0; b < B; b++)
    for (let t = 0; t < T - 1; t++) {
        const row = logits.subarray(((b * T) + t) * V, ((b * T) + t + 1) * V);
        const mx = Math.max(...row);
        const lse = mx + Math.log(row.reduce((s, x) => s + Math.exp(x - mx), 0));
        ceDiff = Math.max(ceDiff, Math.abs(lse - row[tokens[b * T + t + 1]] - plain.losses[b * (T - 1) + t]));
    }
ok(ceDiff < 1e-5, `cross-entropy of the cached logits vs forward(): ${ceDiff}`);

/* B. hooks: zeroing a head's z is zero ablation, bit for bit (docs/hooks.md) */
const zeroHead1 = (z, shape) => {
    for (let i = 0; i < z.length; i++) if (Math.floor(i / shape[3]) % shape[2] === 1) z[i] = 0;
};
const hooked = model.runWithHooks(tokens, B, T, [['blocks.0.attn.hook_z', zeroHead1]]);
model.ablateHead(0, 1, I.INDUCT.ABLATE_ZERO);
const ablated = model.forward(tokens, B, T);
model.clearAblations();
ok(same(hooked.losses, ablated.losses), 'zeroing hook_z head 1 = zero ablation (bits)');
ok(!same(hooked.losses, plain.losses), 'the zeroing changed the losses');
/* writing back what was read changes nothing */
const back = model.runWithHooks(tokens, B, T, [{ name: 'blocks.1.attn.hook_pattern', fn: (a) => a.slice() }]);
ok(same(back.losses, plain.losses), 'a written-back pattern leaves the losses bit-identical');
/* a replacement: the last layer's attention output zeroed, so resid_post = resid_pre */
const z = model.runWithCache(tokens, B, T, { names: [['resid_pre', 1], ['resid_post', 1]],
    hooks: [['blocks.1.hook_attn_out', (a) => new Float32Array(a.length)]] });
ok(same(z.cache.act('resid_post', 1).data, z.cache.act('resid_pre', 1).data),
   'with hook_attn_out replaced by zeros, resid_post = resid_pre');

/* C. keyComposition against its own definition, computed here in float64 */
const kc = I.analysis.keyComposition(model, tokens.slice(0, T), T, { layer: 1, head: 2 });
const one = model.runWithCache(tokens.slice(0, T), 1, T,
    { names: [['q', 1], ['k', 1], ['result', 0], ['pattern', 1]] });
const q1 = one.cache.act('q', 1).data, k1 = one.cache.act('k', 1).data;
const res0 = one.cache.act('result', 0).data, WK = model.tensor('blocks.1.attn.W_K');
ok(same(kc.base, one.cache.act('pattern', 1).data.slice(2 * T * T, 3 * T * T)),
   'keyComposition base = the cached pattern');
let kcDiff = 0;
for (let s = 0; s < H; s++) {
    for (let qi = 0; qi < T; qi++) {
        const sc = [];
        for (let ki = 0; ki <= qi; ki++) {
            let dot = 0;
            for (let e = 0; e < E; e++) {
                let kk = k1[(ki * H + 2) * E + e];
                for (let d = 0; d < D; d++) kk -= res0[(ki * H + s) * D + d] * WK[(2 * D + d) * E + e];
                dot += q1[(qi * H + 2) * E + e] * kk;
            }
            sc.push(dot / Math.sqrt(E));
        }
        const mx = Math.max(...sc), ex = sc.map((x) => Math.exp(x - mx)), sum = ex.reduce((a, b) => a + b);
        for (let ki = 0; ki < T; ki++)
            kcDiff = Math.max(kcDiff, Math.abs((ki <= qi ? ex[ki] / sum : 0) - kc.without[s][qi * T + ki]));
    }
}
ok(kcDiff < 1e-5, `keyComposition vs softmax(q k'/sqrt(E)) in float64: ${kcDiff}`);

/* D. errors */
const boom = new Error('boom');
try { model.runWithHooks(tokens, B, T, [['hook_embed', () => { throw boom; }]]); ok(false, 'no throw'); }
catch (e) { ok(e === boom, `a hook's exception is re-thrown as it is (${e})`); }
try { model.runWithHooks(tokens, B, T, [['blocks.0.attn.hook_nothing', () => {}]]); ok(false, 'no throw'); }
catch (e) { ok(e instanceof InductError && e.statusName.endsWith('EINVAL'), `unknown point: ${e.message}`); }
try { model.runWithCache(tokens, B, T, { names: ['blocks.0.hook_resid_mid'] }); ok(false, 'no throw'); }
catch (e) { ok(e instanceof InductError && e.statusName.endsWith('ERANGE'), `missing point: ${e.message}`); }
try { model.runWithHooks(tokens, B, T, [['hook_embed', () => [1, 2, 3]]]); ok(false, 'no throw'); }
catch (e) { ok(e instanceof InductError && /returned 3 values/.test(e.message), `short replacement: ${e.message}`); }
ok(same(model.forward(tokens, B, T).losses, plain.losses), 'the model is unchanged after the errors');

/* E. K-composition in a trained model: the induction head finds its key through the
 * previous-token head (Elhage et al. 2021). 2 layers, 4 heads, 300 steps. */
const t0 = Date.now();
const m2 = new I.Model({ n_layers: 2, d_model: 64, n_heads: 4, n_ctx: 64, d_vocab: 64,
                         init: I.INDUCT.INIT_TORCH, seed: 0 });
const d2 = I.Dataset.rrt({ d_vocab: 64, seed: 1 });
const opt = new I.Optimizer(m2, I.INDUCT.OPTIM_ADAMW);
opt.set(I.INDUCT.OPT_LR, 5e-3);
for (let s = 0; s < 400; s++) opt.trainStep(d2, 64, 64);
const trainSeconds = (Date.now() - t0) / 1000;
const ind = I.analysis.inductionScore(m2, d2, 128, 64), prev = I.analysis.previousTokenScore(m2, d2, 128, 64);
const argmax = (a) => a.indexOf(Math.max(...a));
const ih = argmax(Array.from(ind.slice(4, 8))), ph = argmax(Array.from(prev.slice(0, 4)));
const seq = d2.batch(I.INDUCT.SPLIT_EVAL, 0, 1, 64), L = seq.meta[0];
const kc2 = I.analysis.keyComposition(m2, seq.tokens, 64, { layer: 1, head: ih });
const stripe = (A) => { let s = 0; for (let q = L; q < 2 * L; q++) s += A[q * 64 + q - L + 1]; return s / L; };
const base = stripe(kc2.base), stripes = kc2.without.map(stripe);
ok(ind[4 + ih] >= 0.3, `an induction head formed (L1H${ih} ${ind[4 + ih]})`);
ok(stripes[ph] <= base / 2, `without the previous-token head L0H${ph} in its keys, L1H${ih}'s ` +
   `stripe ${stripes[ph]} is not at most half of ${base}`);

console.log(JSON.stringify({
    fails, points: pts.length, ce_diff: ceDiff, key_composition_diff: kcDiff,
    trained: { train_seconds: trainSeconds, induction: Array.from(ind), previous: Array.from(prev),
               induction_head: ih, previous_head: ph, block: L, stripe: base, stripes },
}));
process.exit(fails.length ? 1 : 0);
