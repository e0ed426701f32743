/* libinduct for JavaScript: a thin wrapper over the C API of induct.h compiled to
 * WebAssembly (libinduct.js). Handles for models, datasets and optimizers; every
 * analysis is the library's own function, its results returned as typed arrays
 * (copies, so they stay valid after the next call). Errors of the C API are thrown as
 * InductError with the library's status name and message.
 *
 * This file is not loaded on its own: web/bundle.py places it after libinduct.js, in the
 * ES module induct.mjs (`import { loadInduct } from './induct.mjs'`) and in the page's
 * worker, induct-worker.js. One instance runs on one thread, like the C library's
 * one-thread-per-model rule; run it in a Web Worker to keep a page responsive. */

/* Constants of induct.h (values are frozen there). */
const INDUCT = Object.freeze({
    POS_STANDARD: 0, POS_SHORTFORMER: 1, POS_NONE: 2,
    INIT_GPT2: 0, INIT_TORCH: 1,
    SPLIT_TRAIN: 0, SPLIT_EVAL: 1,
    OPTIM_ADAMW: 0, OPTIM_SGD: 1,
    OPT_LR: 1, OPT_BETA1: 2, OPT_BETA2: 3, OPT_EPS: 4, OPT_WEIGHT_DECAY: 5,
    OPT_GRAD_CLIP: 6, OPT_WARMUP_STEPS: 7, OPT_SCHEDULE: 8, OPT_TOTAL_STEPS: 9,
    OPT_MIN_LR_RATIO: 10, OPT_MOMENTUM: 11, OPT_STEP: 12,
    ABLATE_NONE: 0, ABLATE_ZERO: 1, ABLATE_MEAN: 2,
    BUF_PARAM: 0, BUF_GRAD: 1,
});

/* The full hook point name from TransformerLens's short forms, as Python's induct.act_name:
 * actName('pattern', 1) = 'blocks.1.attn.hook_pattern', actName('resid_pre', 0) =
 * 'blocks.0.hook_resid_pre', actName('normalized', 1, 'ln2') = 'blocks.1.ln2.hook_normalized',
 * actName('normalized') = 'ln_final.hook_normalized'; a full name is returned as it is. */
function actName(name, layer, layerType) {
    if ((name.includes('.') || name.startsWith('hook_')) && layer == null && layerType == null)
        return name;
    const ALIAS = { attn: 'pattern', attn_logits: 'attn_scores', key: 'k', query: 'q',
                    value: 'v', mlp_pre: 'pre', mlp_post: 'post' };
    const ATTN = ['k', 'v', 'q', 'z', 'result', 'pattern', 'attn_scores', 'k_smeared'];
    const TYPES = { a: 'attn', m: 'mlp', b: '', block: '', blocks: '', attention: 'attn' };
    name = ALIAS[name] || name;
    let full = layer != null ? `blocks.${layer}.` : '';
    if (ATTN.includes(name)) layerType = 'attn';
    else if (name === 'pre' || name === 'post') layerType = 'mlp';
    else if (layerType in TYPES) layerType = TYPES[layerType];
    if (layerType) full += `${layerType}.`;
    full += `hook_${name}`;
    if (name === 'normalized' && layer == null) full = `ln_final.${full}`;
    return full;
}

class InductError extends Error {
    constructor(status, name, message, call) {
        super(`${name}: ${message}`); /* the message names the function */
        this.name = 'InductError';
        this.status = status;      /* the negative induct_status */
        this.statusName = name;    /* e.g. "ERANGE" */
        this.call = call;
    }
}

/* Load the WebAssembly module and return the API object. */
async function loadInduct(moduleOptions) {
    const M = await createInductModule(moduleOptions || {});
    const layout = JSON.parse(M.UTF8ToString(M._induct_web_layout()));
    const str = (p) => M.UTF8ToString(p);

    function check(rc, call) {
        if (rc !== 0) {
            throw new InductError(rc, str(M._induct_status_name(rc)),
                                  str(M._induct_last_error_message()), call);
        }
    }
    /* Scratch memory for one call: alloc(bytes) -> pointer, freed by release(). */
    function scope(fn) {
        const ptrs = [];
        const alloc = (n) => {
            const p = M._malloc(Math.max(8, n));
            if (!p) throw new InductError(-2, 'ENOMEM', 'out of memory', 'malloc');
            ptrs.push(p);
            return p;
        };
        try { return fn(alloc); } finally { for (const p of ptrs) M._free(p); }
    }
    const f32 = (p, n) => new Float32Array(M.HEAPF32.buffer, p, n).slice();
    const i32 = (p, n) => new Int32Array(M.HEAP32.buffer, p, n).slice();
    const f64 = (p) => new Float64Array(M.HEAPF64.buffer, p, 1)[0];
    const u32 = (p) => new Uint32Array(M.HEAPU32.buffer, p, 1)[0];
    function putI32(alloc, arr) {
        const p = alloc(arr.length * 4);
        new Int32Array(M.HEAP32.buffer, p, arr.length).set(arr);
        return p;
    }
    function cstring(alloc, s) {
        const n = M.lengthBytesUTF8(s) + 1, p = alloc(n);
        M.stringToUTF8(s, p, n);
        return p;
    }

    /* Fill a size-prefixed config struct: defaults from the C *_config_init, then the
     * fields given by name (unknown names are an error, not ignored). */
    function config(alloc, type, init, values, call) {
        const L = layout[type], p = alloc(L.size);
        check(init(p, L.size), call);
        const dv = new DataView(M.HEAPU8.buffer);
        for (const [k, v] of Object.entries(values || {})) {
            const f = L.fields[k];
            if (!f) throw new InductError(-3, 'EINVAL', `unknown field ${type}.${k}`, call);
            const [off, kind] = f;
            if (kind === 'u32') dv.setUint32(p + off, v, true);
            else if (kind === 'i32') dv.setInt32(p + off, v, true);
            else if (kind === 'f64') dv.setFloat64(p + off, v, true);
            else if (kind === 'u64') dv.setBigUint64(p + off, BigInt(v), true);
            else throw new InductError(-1, 'ERROR', `field ${k} of kind ${kind}`, call);
        }
        return p;
    }
    const modelCfg = (a, v) => config(a, 'induct_model_config', M._induct_model_config_init, v,
                                      'induct_model_config_init');
    const evalCfg = (a, v) => v ? config(a, 'induct_eval_config', M._induct_eval_config_init,
                                         v, 'induct_eval_config_init') : 0;

    /* ---- hooks: JavaScript callbacks at hook points (docs/hooks.md, docs/web.md) ----
     * induct_web.c's hook function hands each call to Module.inductHookCall with the id of
     * the callback; `activation` is a Float32Array view into the module's memory, valid
     * during the call only (the memory may move after it). */
    const hookCallbacks = new Map();
    let nextHookId = 1;
    M.inductHookCall = (id, namePtr, act, shapePtr, ndim) => {
        const h = hookCallbacks.get(id);
        if (!h || h.run.error) return 1;
        try {
            const shape = Array.from(new Uint32Array(M.HEAPU32.buffer, shapePtr, ndim));
            const n = shape.reduce((a, b) => a * b, 1), name = str(namePtr);
            const r = h.fn(new Float32Array(M.HEAPF32.buffer, act, n), shape, name);
            if (r !== undefined && r !== null) {   /* a replacement */
                if (r.length !== n)
                    throw new InductError(-3, 'EINVAL', `the hook at ${name} returned ${r.length} ` +
                                          `values for an activation of ${n}`, 'hook');
                new Float32Array(M.HEAPF32.buffer, act, n).set(r);
            }
            return 0;
        } catch (e) {
            h.run.error = e;   /* re-thrown after the C call */
            return 1;
        }
    };
    /* [[name, fn], ...] or [{name, fn}, ...] -> an induct_hook array in module memory;
     * calls body(pointer, count); unregisters the callbacks and re-throws a callback's
     * exception afterwards. */
    function withHooks(alloc, hooks, body) {
        const L = layout.induct_hook, run = { error: null }, ids = [];
        const list = (hooks || []).map((h) => Array.isArray(h) ? { name: h[0], fn: h[1] } : h);
        const arr = alloc(Math.max(1, list.length) * L.size), fnPtr = M._induct_web_hook_fn();
        try {
            list.forEach((h, i) => {
                if (typeof h.name !== 'string' || typeof h.fn !== 'function')
                    throw new InductError(-3, 'EINVAL', `hook ${i} needs a name and a function`, 'hook');
                const id = nextHookId++;
                ids.push(id);
                hookCallbacks.set(id, { fn: h.fn, run });
                const base = arr + i * L.size;
                M.HEAPU32[(base + L.fields.name[0]) >> 2] = cstring(alloc, actName(h.name));
                M.HEAPU32[(base + L.fields.fn[0]) >> 2] = fnPtr;
                M.HEAPU32[(base + L.fields.user[0]) >> 2] = id;
            });
            try {
                return body(arr, list.length);
            } catch (e) {
                if (run.error) throw run.error;
                throw e;
            }
        } finally {
            for (const id of ids) hookCallbacks.delete(id);
        }
    }

    /* A cache: full hook point name -> {data: Float32Array, shape}, with TransformerLens's
     * short forms in act(): cache.act('pattern', 1). */
    class ActivationCache extends Map {
        act(name, layer, layerType) {
            const full = actName(name, layer, layerType);
            if (!this.has(full)) throw new InductError(-3, 'EINVAL', `${full} is not in the cache`, 'cache');
            return this.get(full);
        }
    }

    /* A call with a [n_layers][n_heads] float output. */
    function headTable(call, fn, model, ...args) {
        const n = model.nLayers * model.nHeads;
        return scope((alloc) => {
            const out = alloc(4 * n);
            check(fn(model.ptr, ...args, out, n, 0), call);
            return f32(out, n);
        });
    }

    class Model {
        /* cfg: fields of induct_model_config by name (n_layers, d_model, n_heads, n_ctx,
         * d_vocab, positional, smeared_keys, init, seed, ...); the rest default. */
        constructor(cfg) {
            this.ptr = scope((alloc) => {
                const out = alloc(4);
                check(M._induct_model_new(out, modelCfg(alloc, cfg)), 'induct_model_new');
                return u32(out);
            });
            this.config = this.#readConfig();
            this.nLayers = this.config.n_layers;
            this.nHeads = this.config.n_heads;
        }
        #readConfig() {
            return scope((alloc) => {
                const L = layout.induct_model_config, p = modelCfg(alloc, {});
                check(M._induct_model_get_config(this.ptr, p), 'induct_model_get_config');
                const dv = new DataView(M.HEAPU8.buffer), o = {};
                for (const [k, [off, kind]] of Object.entries(L.fields))
                    o[k] = kind === 'u32' ? dv.getUint32(p + off, true)
                         : kind === 'i32' ? dv.getInt32(p + off, true)
                         : kind === 'f64' ? dv.getFloat64(p + off, true)
                         : Number(dv.getBigUint64(p + off, true));
                return o;
            });
        }
        get nParams() { return Number(M._induct_model_n_params(this.ptr)); }
        /* Per-token losses [batch][seqLen-1] (nats) and their mean. */
        forward(tokens, batch, seqLen) {
            const n = batch * (seqLen - 1);
            return scope((alloc) => {
                const t = putI32(alloc, tokens), l = alloc(4 * n), mean = alloc(8);
                check(M._induct_model_forward(this.ptr, t, batch, seqLen, 0, 0, l, n, mean),
                      'induct_model_forward');
                return { losses: f32(l, n), mean: f64(mean) };
            });
        }
        /* Attention patterns of one sequence, [n_layers][n_heads][seqLen][seqLen]. */
        attention(tokens, seqLen) {
            const n = this.nLayers * this.nHeads * seqLen * seqLen;
            return scope((alloc) => {
                const t = putI32(alloc, tokens), out = alloc(4 * n);
                check(M._induct_model_attention(this.ptr, t, seqLen, out, n, 0),
                      'induct_model_attention');
                return f32(out, n);
            });
        }
        /* Every hook point name of this model, in the order a pass reaches them. */
        hookPoints() {
            const names = [];
            for (;;) {
                const got = scope((alloc) => {
                    const len = alloc(4);
                    const rc = M._induct_model_hook_point(this.ptr, names.length, 0, 0, len);
                    if (rc === -4) return null;   /* ERANGE: past the last point */
                    if (rc !== -5 && rc !== 0) check(rc, 'induct_model_hook_point');
                    const n = u32(len), out = alloc(n);
                    check(M._induct_model_hook_point(this.ptr, names.length, out, n, len),
                          'induct_model_hook_point');
                    return str(out);
                });
                if (got === null) return names;
                names.push(got);
            }
        }
        /* The shape of a hook point for a [batch][seqLen] input (array of 3 or 4 sizes). */
        hookShape(name, batch, seqLen) {
            return scope((alloc) => {
                const shape = alloc(16), nd = alloc(4);
                check(M._induct_model_hook_shape(this.ptr, cstring(alloc, actName(name)), batch,
                                                 seqLen, shape, nd, 0), 'induct_model_hook_shape');
                return Array.from(new Uint32Array(M.HEAPU32.buffer, shape, u32(nd)));
            });
        }
        /* One forward pass with JavaScript hooks: hooks = [[name, fn], ...] (or {name, fn});
         * fn(activation, shape, name) gets a writable Float32Array view of the activation
         * (valid during the call only: do not call the library from inside a hook) and may
         * change it in place or return a replacement of the same length; what it leaves is
         * what the rest of the pass uses. An exception in fn stops the pass and is thrown
         * here. Returns {logits [batch][seqLen][d_vocab] (or null with logits: false),
         * losses [batch][seqLen-1], mean} (nats). */
        runWithHooks(tokens, batch, seqLen, hooks, { logits = true } = {}) {
            const V = this.config.d_vocab, nl = batch * seqLen * V, n = batch * (seqLen - 1);
            return scope((alloc) => {
                const t = putI32(alloc, tokens), lg = logits ? alloc(4 * nl) : 0;
                const ls = alloc(4 * n), mean = alloc(8);
                withHooks(alloc, hooks, (arr, nh) => check(
                    M._induct_model_run_with_hooks(this.ptr, t, batch, seqLen, arr, nh, lg,
                                                   logits ? nl : 0, ls, n, mean),
                    'induct_model_run_with_hooks'));
                return { logits: logits ? f32(lg, nl) : null, losses: f32(ls, n), mean: f64(mean) };
            });
        }
        /* One forward pass that keeps activations: {logits (or null), cache}. names: an
         * array of hook point names (TransformerLens short forms as [name, layer]), a
         * predicate on the full name, or undefined for every point but attn.hook_result.
         * With hooks (as runWithHooks) the cache holds what they left; without, the pass is
         * the library's induct_model_run_with_cache (logits bit-identical to a plain pass). */
        runWithCache(tokens, batch, seqLen, { names, hooks, logits = true } = {}) {
            let list;
            if (names === undefined) list = this.hookPoints().filter((x) => !x.endsWith('.attn.hook_result'));
            else if (typeof names === 'function') list = this.hookPoints().filter(names);
            else list = names.map((x) => Array.isArray(x) ? actName(...x) : actName(x));
            const shapes = list.map((x) => this.hookShape(x, batch, seqLen));
            const cache = new ActivationCache();
            list.forEach((x, i) => cache.set(x, {
                data: new Float32Array(shapes[i].reduce((a, b) => a * b, 1)), shape: shapes[i] }));
            if (hooks && hooks.length) {
                const copy = list.map((x) => [x, (a) => { cache.get(x).data.set(a); }]);
                const r = this.runWithHooks(tokens, batch, seqLen, hooks.concat(copy), { logits });
                return { logits: r.logits, cache, mean: r.mean };
            }
            const V = this.config.d_vocab, nl = batch * seqLen * V;
            return scope((alloc) => {
                const t = putI32(alloc, tokens), k = list.length;
                const np = alloc(4 * k), bp = alloc(4 * k), cp = alloc(4 * k);
                const bufs = list.map((x) => alloc(4 * cache.get(x).data.length));
                list.forEach((x, i) => {
                    M.HEAPU32[(np >> 2) + i] = cstring(alloc, x);
                    M.HEAPU32[(bp >> 2) + i] = bufs[i];
                    M.HEAPU32[(cp >> 2) + i] = cache.get(x).data.length;
                });
                const lg = logits ? alloc(4 * nl) : 0, mean = alloc(8);
                check(M._induct_model_run_with_cache(this.ptr, t, batch, seqLen, np, bp, cp, k, lg,
                                                     logits ? nl : 0, mean),
                      'induct_model_run_with_cache');
                list.forEach((x, i) => cache.get(x).data.set(
                    new Float32Array(M.HEAPF32.buffer, bufs[i], cache.get(x).data.length)));
                return { logits: logits ? f32(lg, nl) : null, cache, mean: f64(mean) };
            });
        }
        /* A weight tensor by TransformerLens name (which: INDUCT.BUF_PARAM or BUF_GRAD). */
        tensor(name, which = INDUCT.BUF_PARAM) {
            return scope((alloc) => {
                const s = cstring(alloc, name), len = alloc(4);
                const rc = M._induct_model_get_tensor(this.ptr, s, which, 0, 0, len);
                if (rc !== -5) check(rc, 'induct_model_get_tensor');
                const n = u32(len), out = alloc(4 * n);
                check(M._induct_model_get_tensor(this.ptr, s, which, out, n, len),
                      'induct_model_get_tensor');
                return f32(out, n);
            });
        }
        ablateHead(layer, head, mode = INDUCT.ABLATE_ZERO) {
            check(M._induct_model_ablate_head(this.ptr, layer, head, mode),
                  'induct_model_ablate_head');
        }
        clearAblations() {
            check(M._induct_model_clear_ablations(this.ptr), 'induct_model_clear_ablations');
        }
        /* The model as a safetensors file (induct_model_save's format), as bytes. */
        saveSafetensors() {
            const path = '/tmp/induct-export.safetensors';
            scope((alloc) => check(M._induct_model_save(this.ptr, cstring(alloc, path)),
                                   'induct_model_save'));
            const bytes = M.FS.readFile(path);
            M.FS.unlink(path);
            return bytes;
        }
        interrupt() { M._induct_model_interrupt(this.ptr); }
        free() { if (this.ptr) M._induct_model_free(this.ptr); this.ptr = 0; }
    }

    class Dataset {
        constructor(ptr, kind) { this.ptr = ptr; this.kind = kind; }
        static #make(type, init, create, cfg, kind) {
            return new Dataset(scope((alloc) => {
                const out = alloc(4);
                check(create(out, config(alloc, type, init, cfg, type + '_init')),
                      create === M._induct_dataset_new_rrt ? 'induct_dataset_new_rrt'
                                                            : 'induct_dataset_new_kv');
                return u32(out);
            }), kind);
        }
        /* Repeated random tokens (fields of induct_rrt_config). */
        static rrt(cfg) {
            return Dataset.#make('induct_rrt_config', M._induct_rrt_config_init,
                                 M._induct_dataset_new_rrt, cfg, 'rrt');
        }
        /* Key-value retrieval (fields of induct_kv_config). */
        static kv(cfg) {
            return Dataset.#make('induct_kv_config', M._induct_kv_config_init,
                                 M._induct_dataset_new_kv, cfg, 'kv');
        }
        /* Batch `index` of a split: tokens [batch][seqLen] and meta [batch] (RRT: the
         * block length L; KV: the value position). */
        batch(split, index, batch, seqLen) {
            const n = batch * seqLen;
            return scope((alloc) => {
                const t = alloc(4 * n), m = alloc(4 * batch);
                check(M._induct_dataset_batch(this.ptr, split, BigInt(index), batch, seqLen, t,
                                              n, m, batch), 'induct_dataset_batch');
                return { tokens: i32(t, n), meta: i32(m, batch) };
            });
        }
        /* The exact Bayes-optimal accuracy of a KV dataset (its ceiling). */
        kvCeiling(seqLen) {
            return scope((alloc) => {
                const out = alloc(8);
                check(M._induct_dataset_kv_ceiling(this.ptr, seqLen, out),
                      'induct_dataset_kv_ceiling');
                return f64(out);
            });
        }
        free() { if (this.ptr) M._induct_dataset_free(this.ptr); this.ptr = 0; }
    }

    class Optimizer {
        constructor(model, kind = INDUCT.OPTIM_ADAMW) {
            this.model = model;
            this.ptr = scope((alloc) => {
                const out = alloc(4);
                check(M._induct_optimizer_new(out, model.ptr, kind), 'induct_optimizer_new');
                return u32(out);
            });
        }
        set(param, value) {
            check(M._induct_optimizer_set(this.ptr, param, value), 'induct_optimizer_set');
        }
        get(param) {
            return scope((alloc) => {
                const out = alloc(8);
                check(M._induct_optimizer_get(this.ptr, param, out), 'induct_optimizer_get');
                return f64(out);
            });
        }
        /* One training step on batch `step` of the dataset's train split; the mean loss
         * before the update (nats). */
        trainStep(dataset, batch, seqLen) {
            return scope((alloc) => {
                const loss = alloc(8);
                check(M._induct_train_step(this.ptr, dataset.ptr, batch, seqLen, loss),
                      'induct_train_step');
                return f64(loss);
            });
        }
        free() { if (this.ptr) M._induct_optimizer_free(this.ptr); this.ptr = 0; }
    }

    /* The analyses of induct.h, named as there. Head tables are [n_layers][n_heads]. */
    const analysis = {
        /* K-composition through hook points (Elhage et al. 2021, "A Mathematical Framework
         * for Transformer Circuits"): the attention pattern [seqLen][seqLen] of head `head`
         * of layer `layer` on one sequence as the model computes it (`base`), and for each
         * head s of layer `sourceLayer` (< layer) with s's output taken out of that head's
         * keys only (`without[s]`): a cache gives s's hook_result (z_s W_O[s]), and a hook
         * on the layer's hook_k subtracts (z_s W_O[s]) W_K[head] from the head's keys. The
         * keys must be linear in the residual stream: models with LayerNorm are refused
         * (NOTSUP). Queries, values and every other head are left as they are. */
        keyComposition(model, tokens, seqLen, { layer, head, sourceLayer = layer - 1 }) {
            const c = model.config, H = c.n_heads, D = c.d_model, E = c.d_head, T = seqLen;
            if (c.layer_norm)
                throw new InductError(-11, 'ENOTSUP', 'keyComposition: with LayerNorm the keys are ' +
                                      'not linear in the residual stream', 'keyComposition');
            if (!(layer < c.n_layers && head < H && sourceLayer >= 0 && sourceLayer < layer))
                throw new InductError(-4, 'ERANGE', `keyComposition: layer ${layer} head ${head} ` +
                                      `source layer ${sourceLayer} out of range`, 'keyComposition');
            const resName = `blocks.${sourceLayer}.attn.hook_result`;
            const patName = `blocks.${layer}.attn.hook_pattern`;
            const res = model.runWithCache(tokens, 1, T, { names: [resName], logits: false })
                .cache.get(resName).data;                       /* [1][T][H][D] */
            const WK = model.tensor(`blocks.${layer}.attn.W_K`);   /* [H][D][E] */
            const pattern = (s) => {
                const hooks = s < 0 ? [] : [[`blocks.${layer}.attn.hook_k`, (k) => {   /* [1][T][H][E] */
                    for (let t = 0; t < T; t++) {
                        const o = (t * H + s) * D;
                        for (let e = 0; e < E; e++) {
                            let acc = 0;
                            for (let d = 0; d < D; d++) acc += res[o + d] * WK[(head * D + d) * E + e];
                            k[(t * H + head) * E + e] -= acc;
                        }
                    }
                }]];
                const r = model.runWithCache(tokens, 1, T, { names: [patName], hooks, logits: false });
                return r.cache.get(patName).data.slice(head * T * T, (head + 1) * T * T);
            };
            const without = [];
            for (let s = 0; s < H; s++) without.push(pattern(s));
            return { base: pattern(-1), without };
        },
        /* prefix-matching / induction score on an RRT dataset's eval batch 0 */
        inductionScore: (model, ds, nSeq, seqLen) =>
            headTable('induct_analysis_induction_score', M._induct_analysis_induction_score,
                      model, ds.ptr, nSeq, seqLen),
        previousTokenScore: (model, ds, nSeq, seqLen) =>
            headTable('induct_analysis_previous_token_score',
                      M._induct_analysis_previous_token_score, model, ds.ptr, nSeq, seqLen),
        /* [seqLen-1] mean loss per position; evalConfig: fields of induct_eval_config */
        lossByPosition(model, ds, evalConfig) {
            return scope((alloc) => {
                const c = evalCfg(alloc, evalConfig), len = alloc(4);
                const rc = M._induct_analysis_loss_by_position(model.ptr, ds.ptr, c, 0, 0, len);
                if (rc !== 0 && rc !== -5) check(rc, 'induct_analysis_loss_by_position');
                const n = u32(len), out = alloc(4 * n);
                check(M._induct_analysis_loss_by_position(model.ptr, ds.ptr, c, out, n, len),
                      'induct_analysis_loss_by_position');
                return f32(out, n);
            });
        },
        kvAccuracy(model, ds, nSeq, seqLen) {
            return scope((alloc) => {
                const out = alloc(8);
                check(M._induct_analysis_kv_accuracy(model.ptr, ds.ptr, nSeq, seqLen, out),
                      'induct_analysis_kv_accuracy');
                return f64(out);
            });
        },
        kvAttention: (model, ds, nSeq, seqLen) =>
            headTable('induct_analysis_kv_attention', M._induct_analysis_kv_attention, model,
                      ds.ptr, nSeq, seqLen),
    };

    return {
        INDUCT, InductError, Model, Dataset, Optimizer, analysis, ActivationCache, actName,
        version: str(M._induct_version_string()),
        module: M,
    };
}
