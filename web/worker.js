/* The page's Web Worker: trains the models with libinduct (WebAssembly) and posts what
 * the page draws. Placed by web/bundle.py after libinduct.js and induct-api.js inside
 * inductWorkerMain(); every number it posts comes from the library's own functions
 * (training step, forward losses, attention patterns, induction and previous-token
 * scores, key-value accuracy and attention), except the mean of the forward pass's
 * per-token losses over the repeated half, taken exactly as examples/induction_rrt.c
 * takes it, and the K-composition read-out (composition(): patterns from the library's
 * cache and hooks, a stripe mean over them).
 *
 * Messages in:  {type: 'start-wiki', opts}, {type: 'start-kv', opts}, {type: 'pause'},
 *               {type: 'resume'}, {type: 'step'}, {type: 'ablate', run, layer, head},
 *               {type: 'export', run}
 * Messages out: {type: 'ready'|'error'|'progress'|'live'|'composition'|'final'|
 *               'wiki-done'|'kv'|'ablation'|'export', ...} (see the handlers in page.js). */

const V = 64, T = 64, BATCH = 64;           /* the wiki experiment, as induction_rrt.c */
const EVAL_LOSS_SEQ = 512, EVAL_SCORE_SEQ = 256, LIVE_SEQ = 32, ABLATE_SEQ = 128;
const KV_SEQ = 25, KV_EVAL = 512;           /* the key-value task, as kv_retrieval.c */

let I = null;
const runs = new Map();
let paused = false, pendingSteps = 0, wikiStart = 0, wikiId = 0;

const post = (msg, transfer) => self.postMessage(msg, transfer || []);

/* Let queued messages (pause, ablate, export) run between steps without the 4 ms clamp
 * of nested timers. */
const channel = new MessageChannel();
let wake = null;
channel.port1.onmessage = () => { const w = wake; wake = null; if (w) w(); };
const yieldNow = () => new Promise((r) => { wake = r; channel.port2.postMessage(0); });
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function freeRun(r) {
    r.opt.free();
    r.model.free();
    r.data.free();
}

/* Mean per-token loss over the repeated half (predictions of tokens L+1 .. 2L-1 of each
 * sequence): examples/induction_rrt.c's repeated_loss, on the first nSeq sequences of the
 * eval split's batch 0. */
function repeatLoss(r, nSeq) {
    const b = r.data.batch(I.INDUCT.SPLIT_EVAL, 0, nSeq, T);
    const { losses } = r.model.forward(b.tokens, nSeq, T);
    let s = 0, n = 0;
    for (let i = 0; i < nSeq; i++) {
        const L = b.meta[i];
        for (let t = L + 1; t < 2 * L; t++, n++) s += losses[i * (T - 1) + t - 1];
    }
    return s / n;
}

function newWikiRun(id, layers, o) {
    const model = new I.Model({
        n_layers: layers, d_model: 64, n_heads: o.heads, n_ctx: T, d_vocab: V,
        positional: I.INDUCT.POS_STANDARD, init: I.INDUCT.INIT_TORCH,
        smeared_keys: o.smeared ? 1 : 0, seed: o.seed,
    });
    const data = I.Dataset.rrt({ d_vocab: V, seed: o.seed + 1 });
    const opt = new I.Optimizer(model, I.INDUCT.OPTIM_ADAMW);
    opt.set(I.INDUCT.OPT_LR, o.lr);
    /* the sequence whose attention is drawn: the first of the eval split */
    const show = data.batch(I.INDUCT.SPLIT_EVAL, 0, 1, T);
    return {
        id, kind: 'wiki', layers, heads: o.heads, model, data, opt, step: 0, steps: o.steps,
        trainMs: 0, liveEvery: o.liveEvery, show, ablated: [], wiki: wikiId,
    };
}

function newKvRun(o) {
    const model = new I.Model({
        n_layers: o.layers, d_model: 64, n_heads: o.heads, n_ctx: KV_SEQ, d_vocab: V,
        positional: I.INDUCT.POS_STANDARD, init: I.INDUCT.INIT_TORCH,
        smeared_keys: o.smeared ? 1 : 0, seed: o.seed + o.layers,
    });
    const data = I.Dataset.kv({ d_vocab: V, pair_min: 4, pair_max: 19, seed: o.seed + 100 });
    const opt = new I.Optimizer(model, I.INDUCT.OPTIM_ADAMW);
    opt.set(I.INDUCT.OPT_LR, o.lr);
    const ceiling = data.kvCeiling(KV_SEQ);
    return {
        id: 'kv', kind: 'kv', layers: o.layers, heads: o.heads, model, data, opt, step: 0,
        steps: o.steps, trainMs: 0, ceiling, liveEvery: 20, ablated: [],
    };
}

/* Live read-outs of a wiki model: per-head induction and previous-token scores on a small
 * eval set, and the attention patterns of the shown sequence. */
function wikiLive(r) {
    const ind = I.analysis.inductionScore(r.model, r.data, LIVE_SEQ, T);
    const prev = I.analysis.previousTokenScore(r.model, r.data, LIVE_SEQ, T);
    const att = r.model.attention(r.show.tokens, T);
    if (r.layers > 1) composition(r, ind);
    post({
        type: 'live', run: r.id, step: r.step, layers: r.layers, heads: r.heads,
        induction: ind, previous: prev, attention: att, L: r.show.meta[0],
        tokens: r.show.tokens,
    }, [ind.buffer, prev.buffer, att.buffer]);
}

/* Mean attention from each query of the repeated half (q = L .. 2L-1) to the token after
 * its token's first occurrence (key q - L + 1): the induction stripe of one pattern [T][T]. */
function stripe(A, L) {
    let s = 0;
    for (let q = L; q < 2 * L; q++) s += A[q * T + q - L + 1];
    return s / L;
}

/* K-composition, read and written through hook points (analysis.keyComposition in
 * induct-api.js; Elhage et al. 2021): for the last layer's head with the highest induction
 * score, its pattern on the shown sequence with each head of the layer before taken out of
 * its keys; the head whose removal lowers the induction stripe most is drawn. */
function composition(r, induction) {
    const H = r.heads, last = r.layers - 1;
    let h = 0;
    for (let i = 1; i < H; i++) if (induction[last * H + i] > induction[last * H + h]) h = i;
    const L = r.show.meta[0];
    const kc = I.analysis.keyComposition(r.model, r.show.tokens, T, { layer: last, head: h });
    const stripes = kc.without.map((A) => stripe(A, L));
    let best = 0;
    for (let s = 1; s < H; s++) if (stripes[s] < stripes[best]) best = s;
    const base = kc.base, removed = kc.without[best];
    post({
        type: 'composition', run: r.id, step: r.step, layer: last, head: h, source: last - 1,
        L, base: stripe(base, L), stripes, best, basePattern: base, removedPattern: removed,
    }, [base.buffer, removed.buffer]);
}

function kvLive(r) {
    const acc = I.analysis.kvAccuracy(r.model, r.data, KV_EVAL, KV_SEQ);
    const att = I.analysis.kvAttention(r.model, r.data, KV_EVAL, KV_SEQ);
    post({
        type: 'kv', step: r.step, steps: r.steps, accuracy: acc, attention: att,
        ceiling: r.ceiling, layers: r.layers, heads: r.heads,
    }, [att.buffer]);
}

/* The loss on the repeated half with the chosen heads zero-ablated, next to the same loss
 * without ablation (the library refuses to train an ablated model, so the ablation is
 * applied for this evaluation only). */
function ablationReport(r) {
    const base = repeatLoss(r, ABLATE_SEQ);
    let loss = base;
    if (r.ablated.length) {
        try {
            for (const [l, h] of r.ablated) r.model.ablateHead(l, h, I.INDUCT.ABLATE_ZERO);
            loss = repeatLoss(r, ABLATE_SEQ);
        } finally {
            r.model.clearAblations();
        }
    }
    post({ type: 'ablation', run: r.id, step: r.step, heads: r.ablated, base, loss });
}

function finishWiki(r) {
    const t0 = performance.now();
    const loss = repeatLoss(r, EVAL_LOSS_SEQ);
    const ind = I.analysis.inductionScore(r.model, r.data, EVAL_SCORE_SEQ, T);
    const prev = I.analysis.previousTokenScore(r.model, r.data, EVAL_SCORE_SEQ, T);
    r.final = {
        layers: r.layers, steps: r.step, loss,
        induction_scores: Array.from(ind.slice((r.layers - 1) * r.heads, r.layers * r.heads)),
        previous_token_scores: Array.from(prev.slice(0, r.heads)),
        train_seconds: r.trainMs / 1000, eval_seconds: (performance.now() - t0) / 1000,
    };
    post({ type: 'final', run: r.id, result: r.final });
    const wiki = [...runs.values()].filter((x) => x.kind === 'wiki' && x.wiki === r.wiki);
    if (wiki.every((x) => x.final)) {
        post({
            type: 'wiki-done', seconds: (performance.now() - wikiStart) / 1000,
            models: wiki.map((x) => x.final),
        });
    }
}

function trainOne(r) {
    const t0 = performance.now();
    const loss = r.opt.trainStep(r.data, BATCH, r.kind === 'kv' ? KV_SEQ : T);
    r.trainMs += performance.now() - t0;
    r.step++;
    r.lastLoss = loss;
    post({ type: 'progress', run: r.id, step: r.step, steps: r.steps, loss });
    if (r.step % r.liveEvery === 0 || r.step === r.steps) {
        if (r.kind === 'wiki') {
            wikiLive(r);
            if (r.ablated.length) ablationReport(r);
        } else {
            kvLive(r);
        }
    }
    if (r.step === r.steps && r.kind === 'wiki') finishWiki(r);
}

async function loop() {
    for (;;) {
        const active = [...runs.values()].filter((r) => r.step < r.steps);
        if (!active.length || (paused && pendingSteps === 0)) {
            await sleep(30);
            continue;
        }
        try {
            for (const r of active) trainOne(r);
        } catch (e) {
            post({ type: 'error', message: String(e && e.message || e) });
            for (const r of active) r.steps = r.step; /* stop these runs */
        }
        if (pendingSteps > 0) pendingSteps--;
        await yieldNow();
    }
}

function handle(msg) {
    if (msg.type === 'start-wiki') {
        for (const [id, r] of runs) if (r.kind === 'wiki') { freeRun(r); runs.delete(id); }
        const o = msg.opts;
        wikiId++;
        wikiStart = performance.now();
        runs.set('left', newWikiRun('left', o.leftLayers, o));
        runs.set('right', newWikiRun('right', o.rightLayers, o));
        for (const id of ['left', 'right']) wikiLive(runs.get(id));
    } else if (msg.type === 'start-kv') {
        if (runs.has('kv')) { freeRun(runs.get('kv')); runs.delete('kv'); }
        const r = newKvRun(msg.opts);
        runs.set('kv', r);
        kvLive(r);
    } else if (msg.type === 'pause') {
        paused = true;
    } else if (msg.type === 'resume') {
        paused = false;
    } else if (msg.type === 'step') {
        pendingSteps++;
    } else if (msg.type === 'ablate') {
        const r = runs.get(msg.run);
        if (!r) return;
        const i = r.ablated.findIndex(([l, h]) => l === msg.layer && h === msg.head);
        if (i >= 0) r.ablated.splice(i, 1);
        else r.ablated.push([msg.layer, msg.head]);
        ablationReport(r);
    } else if (msg.type === 'export') {
        const r = runs.get(msg.run);
        if (!r) return;
        const bytes = r.model.saveSafetensors();
        post({ type: 'export', run: msg.run, step: r.step, layers: r.layers, bytes }, [bytes.buffer]);
    }
}

self.onmessage = (ev) => {
    if (!I) { queued.push(ev.data); return; }
    try { handle(ev.data); } catch (e) { post({ type: 'error', message: String(e && e.message || e) }); }
};
const queued = [];
loadInduct().then((api) => {
    I = api;
    post({ type: 'ready', version: api.version, simd: true });
    for (const m of queued.splice(0)) {
        try { handle(m); } catch (e) { post({ type: 'error', message: String(e && e.message || e) }); }
    }
    loop();
}, (e) => post({ type: 'error', message: 'loading libinduct failed: ' + e }));
