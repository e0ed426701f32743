/* The page: controls, charts and heatmaps. All training and every measurement run in
 * the worker (worker.js, on libinduct compiled to WebAssembly); this file only draws what
 * the worker posts. URL parameters preset the controls (?steps=300&seed=1&lr=0.002&heads=4&
 * left=1&right=2&smeared=1) and ?autostart=1 starts the experiment on load (the browser
 * test uses it). */
'use strict';

const $ = (id) => document.getElementById(id);
const params = new URLSearchParams(location.search);
const COLORS = ['#1f77b4', '#d62728', '#2ca02c', '#9467bd', '#ff7f0e', '#8c564b', '#e377c2', '#17becf'];

const state = {
    runs: {},            /* left, right: {loss: [[step, loss]], scores: [[step, [..]]], live, final} */
    kv: null,
    training: false,
    paused: false,
    dirty: true,
    frames: 0,
    maxFrameGap: 0,      /* longest time between two drawn frames while training (ms) */
    lateFrames: 0,       /* frames drawn more than 200 ms after the previous one */
    maxLongTask: 0,      /* longest task of this page's main thread while training (ms) */
    lastFrame: 0,
    done: null,
};

/* ---- the worker: started from the source text of inductWorkerMain (induct-worker.js),
 * through a Blob URL, which works from file:// and from any server ---- */
const worker = new Worker(URL.createObjectURL(new Blob(['(' + inductWorkerMain.toString() + ')()'],
                                                       { type: 'text/javascript' })));
worker.onmessage = (ev) => onMessage(ev.data);
worker.onerror = (ev) => setStatus('Worker error: ' + ev.message, true);

function setStatus(text, bad) {
    $('status').textContent = text;
    $('status').classList.toggle('bad', !!bad);
}

function opts() {
    return {
        leftLayers: +$('leftLayers').value, rightLayers: +$('rightLayers').value,
        heads: +$('heads').value, smeared: $('smeared').checked,
        lr: +$('lr').value, seed: Math.max(0, Math.floor(+$('seed').value)),
        steps: Math.max(1, Math.floor(+$('steps').value)), liveEvery: 20,
    };
}

function startWiki() {
    const o = opts();
    state.runs = {
        left: { layers: o.leftLayers, heads: o.heads, loss: [], scores: [], live: null, final: null, ablated: [] },
        right: { layers: o.rightLayers, heads: o.heads, loss: [], scores: [], live: null, final: null, ablated: [] },
    };
    state.done = null;
    state.maxFrameGap = 0;
    state.lateFrames = 0;
    state.maxLongTask = 0;
    state.frames = 0;
    state.training = true;
    state.started = performance.now();
    document.documentElement.dataset.state = 'training';
    $('results').textContent = '(training…)';
    $('ablation').textContent = '';
    for (const id of ['left', 'right']) {
        const r = state.runs[id];
        document.querySelector(`#${id} .meta`).textContent =
            `${r.layers} layer${r.layers > 1 ? 's' : ''}, ${r.heads} head${r.heads > 1 ? 's' : ''}` +
            (o.smeared ? ', smeared keys' : '');
    }
    $('compText').textContent = o.rightLayers > 1 ? '(after the first read-out)'
        : 'The right model has one layer: there is nothing for a head to compose with.';
    worker.postMessage({ type: 'start-wiki', opts: o });
    setStatus(`Training two models, ${o.steps} steps each…`);
    buildHeatmaps();
    for (const b of document.querySelectorAll('.export')) b.disabled = b.dataset.run === 'kv' && !state.kv;
}

function onMessage(m) {
    if (m.type === 'ready') {
        $('version').textContent = m.version;
        setStatus('Ready. Press Start.');
        for (const id of ['start', 'pause', 'stepOnce', 'kvStart']) $(id).disabled = false;
        if (params.get('autostart') === '1') startWiki();
    } else if (m.type === 'error') {
        setStatus('Error: ' + m.message, true);
        document.documentElement.dataset.state = 'error';
        $('results').textContent = 'error: ' + m.message;
    } else if (m.type === 'progress') {
        if (m.run === 'kv') {
            if (state.kv) state.kv.lastLoss = m.loss;
        } else if (state.runs[m.run]) {
            state.runs[m.run].loss.push([m.step, m.loss]);
            state.runs[m.run].step = m.step;
            state.runs[m.run].steps = m.steps;
        }
        state.dirty = true;
    } else if (m.type === 'live') {
        const r = state.runs[m.run];
        if (!r) return;
        r.live = m;
        const last = Array.from(m.induction.slice((m.layers - 1) * m.heads, m.layers * m.heads));
        r.scores.push([m.step, last]);
        state.dirty = true;
        state.heatDirty = true;
    } else if (m.type === 'composition') {
        if (state.runs[m.run]) state.runs[m.run].composition = m;
        state.compDirty = true;
    } else if (m.type === 'final') {
        if (state.runs[m.run]) state.runs[m.run].final = m.result;
        state.dirty = true;
    } else if (m.type === 'wiki-done') {
        state.training = !!(state.kv && state.kv.step < state.kv.steps);
        const result = {
            experiment: 'induction-rrt', seconds: m.seconds, models: m.models,
            frames: state.frames, max_frame_gap_ms: Math.round(state.maxFrameGap),
            late_frames: state.lateFrames, max_long_task_ms: Math.round(state.maxLongTask),
        };
        state.done = result;
        $('results').textContent = JSON.stringify(result, null, 1);
        document.documentElement.dataset.state = 'done';
        setStatus(`Done in ${m.seconds.toFixed(1)} s.`);
        state.dirty = true;
    } else if (m.type === 'kv') {
        state.kv.curve.push([m.step, m.accuracy, Math.max(...m.attention)]);
        state.kv.step = m.step;
        state.kv.ceiling = m.ceiling;
        state.kv.last = m;
        if (m.step >= m.steps && !(state.runs.left && state.runs.left.step < state.runs.left.steps))
            state.training = false;
        state.dirty = true;
    } else if (m.type === 'ablation') {
        const r = state.runs[m.run];
        if (!r) return;
        lastAblation = { run: m.run, heads: m.heads, loss: m.loss, base: m.base };
        r.ablated = m.heads;
        const names = m.heads.map(([l, h]) => `L${l}H${h}`).join(', ');
        $('ablation').textContent = m.heads.length
            ? `${cap(m.run)} model, step ${m.step}: loss on the repeated half ${m.loss.toFixed(2)} nats with ${names} zero-ablated, ${m.base.toFixed(2)} without.`
            : `${cap(m.run)} model: no head ablated (loss on the repeated half ${m.base.toFixed(2)} nats).`;
        state.heatDirty = true;
    } else if (m.type === 'export') {
        const a = document.createElement('a');
        a.href = URL.createObjectURL(new Blob([m.bytes], { type: 'application/octet-stream' }));
        a.download = `induct-${m.run}-${m.layers}layer-step${m.step}.safetensors`;
        document.body.appendChild(a);
        a.click();
        a.remove();
    }
}

const cap = (s) => s[0].toUpperCase() + s.slice(1);
let lastAblation = null; /* the last ablation result (read by the browser test) */

/* ---- drawing ---- */
function chart(canvas, series, o) {
    const g = canvas.getContext('2d'), W = canvas.width, H = canvas.height;
    const pad = { l: 46, r: 10, t: 10, b: 24 };
    g.clearRect(0, 0, W, H);
    g.font = '12px system-ui, sans-serif';
    const x0 = 0, x1 = Math.max(1, o.xmax), y0 = o.ymin, y1 = o.ymax;
    const X = (x) => pad.l + (x - x0) / (x1 - x0) * (W - pad.l - pad.r);
    const Y = (y) => H - pad.b - (Math.min(Math.max(y, y0), y1) - y0) / (y1 - y0) * (H - pad.t - pad.b);
    g.strokeStyle = '#ccc';
    g.fillStyle = '#555';
    g.lineWidth = 1;
    for (const t of o.yticks) {
        g.beginPath(); g.moveTo(pad.l, Y(t)); g.lineTo(W - pad.r, Y(t)); g.stroke();
        g.fillText(String(t), 4, Y(t) + 4);
    }
    g.fillText('step ' + x1, W - pad.r - 70, H - 6);
    for (const s of series) {
        if (!s.points.length) continue;
        g.strokeStyle = s.color;
        g.lineWidth = s.width || 1.5;
        g.setLineDash(s.dash || []);
        g.beginPath();
        s.points.forEach(([x, y], i) => (i ? g.lineTo(X(x), Y(y)) : g.moveTo(X(x), Y(y))));
        g.stroke();
        g.setLineDash([]);
    }
    let lx = pad.l + 8;
    for (const s of series) {
        if (!s.label) continue;
        g.fillStyle = s.color;
        g.fillRect(lx, pad.t + 2, 10, 3);
        g.fillStyle = '#333';
        g.fillText(s.label, lx + 14, pad.t + 8);
        lx += g.measureText(s.label).width + 30;
    }
}

/* mean of the training loss over windows of 10 steps (the raw curve is noisy) */
function smooth(points, k = 10) {
    const out = [];
    for (let i = 0; i + k <= points.length; i += k) {
        let s = 0;
        for (let j = i; j < i + k; j++) s += points[j][1];
        out.push([points[i + k - 1][0], s / k]);
    }
    return out;
}

function drawCharts() {
    const L = state.runs.left, R = state.runs.right;
    if (L && R) {
        const xmax = Math.max(L.steps || 0, R.steps || 0, 10);
        chart($('lossChart'), [
            { points: smooth(L.loss), color: COLORS[0], label: `left (${L.layers} layer${L.layers > 1 ? 's' : ''})` },
            { points: smooth(R.loss), color: COLORS[1], label: `right (${R.layers} layer${R.layers > 1 ? 's' : ''})` },
            { points: [[0, Math.log(64)], [xmax, Math.log(64)]], color: '#999', dash: [4, 4], width: 1, label: 'random guessing' },
        ], { xmax, ymin: 0, ymax: 4.5, yticks: [0, 1, 2, 3, 4] });
        const series = [];
        for (const [run, r, dash] of [['left', L, [5, 3]], ['right', R, []]]) {
            for (let h = 0; h < r.heads; h++) {
                series.push({
                    points: r.scores.map(([s, v]) => [s, v[h]]), color: COLORS[h % COLORS.length], dash,
                    label: run === 'right' ? `L${r.layers - 1}H${h}` : null,
                });
            }
        }
        chart($('scoreChart'), series, { xmax, ymin: 0, ymax: 1, yticks: [0, 0.25, 0.5, 0.75, 1] });
        for (const [id, r] of [['left', L], ['right', R]]) {
            const last = r.loss.length ? r.loss[r.loss.length - 1] : null;
            const sc = r.scores.length ? r.scores[r.scores.length - 1][1] : [];
            let text = last ? `step ${last[0]} / ${r.steps}, training loss ${last[1].toFixed(2)}` : 'starting…';
            if (sc.length) text += `; best induction score ${Math.max(...sc).toFixed(2)}`;
            if (r.final) {
                text = `finished: loss on the repeated half ${r.final.loss.toFixed(2)} nats; ` +
                    `induction scores ${r.final.induction_scores.map((x) => x.toFixed(2)).join(', ')}`;
            }
            document.querySelector(`#${id} .numbers`).textContent = text;
        }
    }
    if (state.kv) {
        const k = state.kv, xmax = Math.max(k.steps, 10);
        chart($('kvChart'), [
            { points: k.curve.map(([s, a]) => [s, a]), color: COLORS[0], label: 'accuracy' },
            { points: [[0, k.ceiling || 0], [xmax, k.ceiling || 0]], color: COLORS[0], dash: [6, 4], width: 1, label: 'best possible (exact)' },
            { points: k.curve.map(([s, , t]) => [s, t]), color: COLORS[1], label: 'attention on the value' },
            { points: [[0, 1 / 24], [xmax, 1 / 24]], color: '#999', dash: [2, 3], width: 1, label: 'uniform 1/24' },
        ], { xmax, ymin: 0, ymax: 1, yticks: [0, 0.25, 0.5, 0.75, 1] });
        if (k.last) {
            const att = Array.from(k.last.attention), best = att.indexOf(Math.max(...att));
            $('kvNumbers').textContent = `step ${k.last.step} / ${k.steps}: accuracy ` +
                `${(100 * k.last.accuracy).toFixed(1)} % of a possible ${(100 * k.ceiling).toFixed(1)} %; ` +
                `head L${Math.floor(best / k.heads)}H${best % k.heads} puts ` +
                `${(100 * att[best]).toFixed(0)} % of the last position's attention on the value`;
        }
    }
}

/* one canvas per head; click toggles its ablation */
function buildHeatmaps() {
    for (const id of ['left', 'right']) {
        const r = state.runs[id], row = document.querySelector(`#heat-${id} .row`);
        row.textContent = '';
        const n = r.heads + (id === 'right' && r.layers > 1 ? 1 : 0);
        for (let i = 0; i < n; i++) {
            const fig = document.createElement('figure');
            const c = document.createElement('canvas');
            c.width = c.height = 64;
            const cap = document.createElement('figcaption');
            fig.append(c, cap);
            fig.addEventListener('click', () => {
                const head = fig.dataset.head, layer = fig.dataset.layer;
                if (head !== undefined) worker.postMessage({ type: 'ablate', run: id, layer: +layer, head: +head });
            });
            row.append(fig);
        }
    }
}

function drawHeat(canvas, att, off, T) {
    const g = canvas.getContext('2d'), img = g.createImageData(T, T);
    for (let p = 0; p < T; p++) {
        for (let k = 0; k < T; k++) {
            const a = k <= p ? att[off + p * T + k] : 0, v = Math.round(255 * (1 - Math.min(1, Math.sqrt(a))));
            const i = 4 * (p * T + k);
            img.data[i] = v; img.data[i + 1] = v; img.data[i + 2] = k <= p ? 255 : 240; img.data[i + 3] = 255;
        }
    }
    g.putImageData(img, 0, 0);
}

function drawHeatmaps() {
    for (const id of ['left', 'right']) {
        const r = state.runs[id];
        if (!r || !r.live) continue;
        const m = r.live, T = 64, figs = document.querySelectorAll(`#heat-${id} figure`);
        const last = m.layers - 1;
        const ind = m.induction, prev = m.previous;
        const isAbl = (l, h) => r.ablated.some(([a, b]) => a === l && b === h);
        for (let h = 0; h < m.heads && h < figs.length; h++) {
            const fig = figs[h];
            drawHeat(fig.querySelector('canvas'), m.attention, ((last * m.heads) + h) * T * T, T);
            fig.dataset.layer = last;
            fig.dataset.head = h;
            fig.classList.toggle('ablated', isAbl(last, h));
            fig.querySelector('figcaption').textContent =
                `L${last}H${h} · induction ${ind[last * m.heads + h].toFixed(2)}`;
        }
        if (id === 'right' && m.layers > 1 && figs.length > m.heads) {
            let best = 0;
            for (let h = 1; h < m.heads; h++) if (prev[h] > prev[best]) best = h;
            const fig = figs[m.heads];
            drawHeat(fig.querySelector('canvas'), m.attention, best * T * T, T);
            fig.dataset.layer = 0;
            fig.dataset.head = best;
            fig.classList.add('prev');
            fig.classList.toggle('ablated', isAbl(0, best));
            fig.querySelector('figcaption').textContent = `L0H${best} · previous token ${prev[best].toFixed(2)}`;
        }
    }
}

/* the K-composition panel: the induction head's pattern as trained and without the
 * layer-0 head whose removal from its keys lowers the stripe most; a bar per layer-0 head */
function drawComposition() {
    const r = state.runs.right, c = r && r.composition;
    if (!c) return;
    drawHeat($('compBase'), c.basePattern, 0, 64);
    drawHeat($('compRemoved'), c.removedPattern, 0, 64);
    const name = `L${c.layer}H${c.head}`, src = (s) => `L${c.source}H${s}`;
    $('compBaseCap').textContent = `${name}, as trained · stripe ${c.base.toFixed(2)}`;
    $('compRemovedCap').textContent = `${name} without ${src(c.best)} in its keys · ${c.stripes[c.best].toFixed(2)}`;
    const g = $('compChart').getContext('2d'), W = 420, H = 170, pad = { l: 40, b: 22, t: 8 };
    g.clearRect(0, 0, W, H);
    g.font = '12px system-ui, sans-serif';
    const n = c.stripes.length, bw = Math.min(60, (W - pad.l - 10) / n - 10);
    const Y = (v) => H - pad.b - Math.max(0, Math.min(1, v)) * (H - pad.b - pad.t);
    g.fillStyle = '#555';
    for (const t of [0, 0.5, 1]) { g.fillText(String(t), 8, Y(t) + 4); }
    c.stripes.forEach((v, s) => {
        const x = pad.l + 10 + s * (bw + 10);
        g.fillStyle = s === c.best ? COLORS[1] : COLORS[0];
        g.fillRect(x, Y(v), bw, Y(0) - Y(v));
        g.fillStyle = '#333';
        g.fillText(`−${src(s)}`, x, H - 6);
    });
    g.strokeStyle = '#333';
    g.setLineDash([5, 4]);
    g.beginPath(); g.moveTo(pad.l, Y(c.base)); g.lineTo(W - 6, Y(c.base)); g.stroke();
    g.setLineDash([]);
    $('compText').textContent = `Step ${c.step}: ${name} puts ${(100 * c.base).toFixed(0)} % of its ` +
        `attention from the repeated half on the induction stripe; without ${src(c.best)} in its keys ` +
        `${(100 * c.stripes[c.best]).toFixed(0)} %. Block length ${c.L}.`;
}

function frame(now) {
    if (state.training && !state.paused && state.lastFrame) {
        state.maxFrameGap = Math.max(state.maxFrameGap, now - state.lastFrame);
        if (now - state.lastFrame > 200) state.lateFrames++;
    }
    state.lastFrame = now;
    if (state.training) state.frames++;
    /* redraw what changed at most every 100 ms: the worker posts a loss every step, and
     * drawing each one would take CPU time from the training on a small machine */
    if (now - (state.lastDraw || 0) >= 100) {
        if (state.dirty) { drawCharts(); state.dirty = false; }
        if (state.heatDirty) { drawHeatmaps(); state.heatDirty = false; }
        if (state.compDirty) { drawComposition(); state.compDirty = false; }
        state.lastDraw = now;
    }
    requestAnimationFrame(frame);
}
requestAnimationFrame(frame);
/* Tasks of the main thread longer than 50 ms (Chromium's Long Tasks API): the page's own
 * code must never keep it from drawing; a late frame without a long task is the machine
 * (other processes on the same cores), not the page. */
if (typeof PerformanceObserver !== 'undefined' &&
    (PerformanceObserver.supportedEntryTypes || []).includes('longtask')) {
    new PerformanceObserver((list) => {
        if (!state.training) return;
        for (const e of list.getEntries()) state.maxLongTask = Math.max(state.maxLongTask, e.duration);
    }).observe({ entryTypes: ['longtask'] });
}

/* ---- controls ---- */
for (const [k, id] of [['steps', 'steps'], ['seed', 'seed'], ['lr', 'lr'], ['heads', 'heads'],
                       ['left', 'leftLayers'], ['right', 'rightLayers'], ['kvsteps', 'kvSteps']]) {
    if (params.has(k)) $(id).value = params.get(k);
}
if (params.get('smeared') === '1') $('smeared').checked = true;

$('start').onclick = startWiki;
$('pause').onclick = () => {
    state.paused = !state.paused;
    worker.postMessage({ type: state.paused ? 'pause' : 'resume' });
    $('pause').textContent = state.paused ? 'Resume' : 'Pause';
    setStatus(state.paused ? 'Paused. “Step once” trains every model one step.' : 'Training…');
};
$('stepOnce').onclick = () => worker.postMessage({ type: 'step' });
$('kvStart').onclick = () => {
    const o = { layers: +$('kvLayers').value, heads: +$('heads').value, smeared: $('smeared').checked,
                lr: +$('lr').value, seed: Math.max(0, Math.floor(+$('seed').value)),
                steps: Math.max(1, Math.floor(+$('kvSteps').value)) };
    state.kv = { steps: o.steps, heads: o.heads, curve: [], ceiling: 0, step: 0 };
    state.training = true;
    worker.postMessage({ type: 'start-kv', opts: o });
    document.querySelector('.export[data-run="kv"]').disabled = false;
};
for (const b of document.querySelectorAll('.export')) {
    b.onclick = () => worker.postMessage({ type: 'export', run: b.dataset.run });
}
