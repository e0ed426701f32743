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
        INDUCT, InductError, Model, Dataset, Optimizer, analysis,
        version: str(M._induct_version_string()),
        module: M,
    };
}
