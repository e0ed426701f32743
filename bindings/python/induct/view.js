/* The interactive attention view of induct.view.attention() (docs/python.md, "Attention
 * views"): one canvas per head side by side, the tokens as text, and hovering a token (or
 * a row of a head's pattern) highlights what that token attends to and what attends to it.
 * Self-contained: no network, no library; induct/view.py inlines this file and the data
 * into one HTML page.
 *
 * inductAttentionView(root, data) draws into the element `root`. data:
 *   T        sequence length
 *   tokens   T strings as shown (whitespace made visible), raw: T strings as they are
 *   heads    [{label, layer, head, data}]: data is base64 of the pattern's lower triangle
 *            (query q = 0..T-1, key 0..q) as little-endian uint16, value / 65535
 *   repeat   the length L of the repeated block, or null: the induction diagonal (query q
 *            to key q - L + 1, the token after the previous occurrence; Olsson et al. 2022)
 *            is marked for the queries L .. repeatEnd - 1
 *   zmax     the attention that gets the top of the colour scale (1: probabilities)
 * The element gets root.inductView = {setQuery(q), setFocus(i), state, highlight}: the test
 * (bindings/python/tests/view_browser.py) and a page's own script may drive it. */
(function () {
    'use strict';
    /* matplotlib's viridis at 17 points (perceptually uniform, readable with every common
     * colour-vision deficiency and in greyscale), Blues and Oranges at 9 */
    const VIRIDIS = '440154,48186a,472d7b,424086,3b528b,33638d,2c728e,26828e,21918c,1fa088,' +
        '28ae80,3fbc73,5ec962,84d44b,addc30,d8e219,fde725';
    const BLUES = 'f7fbff,deebf7,c6dbef,9dcae1,6aaed6,4191c6,2070b4,08509b,08306b';
    const ORANGES = 'fff5eb,fee6ce,fdd0a2,fdae6a,fd8c3b,f16813,d84801,a53603,7f2704';

    /* 256 RGB entries interpolated between the stops */
    function lut(stops) {
        const c = stops.split(',').map((h) => [0, 2, 4].map((i) => parseInt(h.substr(i, 2), 16)));
        const out = new Uint8Array(256 * 3);
        for (let i = 0; i < 256; i++) {
            const x = (i / 255) * (c.length - 1), j = Math.min(Math.floor(x), c.length - 2), f = x - j;
            for (let k = 0; k < 3; k++) out[i * 3 + k] = Math.round(c[j][k] * (1 - f) + c[j + 1][k] * f);
        }
        return out;
    }
    const SCALE = lut(VIRIDIS), TO = lut(BLUES), FROM = lut(ORANGES);
    const css = (table, i) => `rgb(${table[i * 3]},${table[i * 3 + 1]},${table[i * 3 + 2]})`;

    /* the pattern [T][T] (upper triangle 0) from the base64 lower triangle */
    function decode(b64, T) {
        const bin = atob(b64), n = T * (T + 1) / 2;
        if (bin.length !== 2 * n) throw new Error(`pattern data of ${bin.length} bytes, want ${2 * n}`);
        const out = new Float32Array(T * T);
        let p = 0;
        for (let q = 0; q < T; q++)
            for (let k = 0; k <= q; k++, p += 2)
                out[q * T + k] = (bin.charCodeAt(p) | (bin.charCodeAt(p + 1) << 8)) / 65535;
        return out;
    }

    function el(tag, cls, text) {
        const e = document.createElement(tag);
        if (cls) e.className = cls;
        if (text !== undefined) e.textContent = text;
        return e;
    }

    function render(root, data) {
        const T = data.T, heads = data.heads.map((h) => Object.assign({}, h, { A: decode(h.data, T) }));
        const state = { query: null, focus: 0, key: null, diagonal: data.repeat != null, scale: 'linear' };
        root.innerHTML = '';
        root.classList.add('iv');

        /* controls and the read-out line */
        const bar = el('div', 'iv-bar');
        if (data.title) bar.appendChild(el('span', 'iv-title', data.title));
        let diagBox = null;
        if (data.repeat != null) {
            const lab = el('label');
            diagBox = el('input');
            diagBox.type = 'checkbox';
            diagBox.checked = true;
            diagBox.className = 'iv-diag';
            lab.append(diagBox, ` induction diagonal (repeat ${data.repeat}: key = query − ${data.repeat - 1})`);
            bar.appendChild(lab);
        }
        const scaleSel = el('select', 'iv-scale');
        for (const s of ['linear', 'sqrt']) scaleSel.appendChild(el('option', '', s));
        const lab2 = el('label');
        lab2.append('colour ', scaleSel);
        bar.appendChild(lab2);
        root.appendChild(bar);
        const info = el('div', 'iv-info', 'Hover a token, or a row of a head’s pattern. Click a head to colour the tokens by it.');
        root.appendChild(info);

        /* the tokens as text */
        const strip = el('div', 'iv-tokens');
        const spans = data.tokens.map((t, i) => {
            const s = el('span', 'iv-tok', t);
            s.dataset.i = i;
            s.title = `${i}: ${JSON.stringify(data.raw[i])}`;
            strip.appendChild(s);
            return s;
        });
        root.appendChild(strip);

        /* one canvas per head: the pattern at one pixel per cell, scaled up without
         * smoothing, and an overlay canvas for the highlights */
        const grid = el('div', 'iv-grid');
        const n = heads.length, avail = Math.max(480, Math.min(root.clientWidth || 960, 1400));
        const size = Math.max(160, Math.min(360, Math.floor(avail / Math.min(n, 4)) - 16));
        const dpr = window.devicePixelRatio || 1;
        heads.forEach((h, i) => {
            const fig = el('figure', 'iv-head');
            const wrap = el('div', 'iv-wrap');
            wrap.style.width = wrap.style.height = size + 'px';
            h.canvas = el('canvas', 'iv-pattern');
            h.canvas.width = h.canvas.height = T;
            h.overlay = el('canvas', 'iv-overlay');
            h.overlay.width = h.overlay.height = Math.round(size * dpr);
            for (const c of [h.canvas, h.overlay]) c.style.width = c.style.height = size + 'px';
            wrap.append(h.canvas, h.overlay);
            const cap = el('figcaption', '', h.label);
            fig.append(wrap, cap);
            fig.dataset.head = i;
            h.fig = fig;
            grid.appendChild(fig);
            const cell = (ev) => {
                const r = h.overlay.getBoundingClientRect();
                const q = Math.floor(((ev.clientY - r.top) / r.height) * T);
                const k = Math.floor(((ev.clientX - r.left) / r.width) * T);
                return [Math.max(0, Math.min(T - 1, q)), Math.max(0, Math.min(T - 1, k))];
            };
            h.overlay.addEventListener('mousemove', (ev) => {
                const [q, k] = cell(ev);
                if (q === state.query && k === state.key) return;
                setQuery(q, k);
                /* bring the query's token into the strip's view (the strip only) */
                const sp = spans[q], top = sp.offsetTop - strip.offsetTop;
                if (top < strip.scrollTop || top + sp.offsetHeight > strip.scrollTop + strip.clientHeight)
                    strip.scrollTop = top - strip.clientHeight / 2;
            });
            h.overlay.addEventListener('click', () => setFocus(i));
        });
        root.appendChild(grid);

        /* the colour bar */
        const legend = el('div', 'iv-legend');
        const cb = el('canvas', 'iv-colorbar');
        cb.width = 256;
        cb.height = 1;
        const g = cb.getContext('2d'), img = g.createImageData(256, 1);
        for (let i = 0; i < 256; i++) for (let k = 0; k < 3; k++) img.data[i * 4 + k] = SCALE[i * 3 + k];
        for (let i = 0; i < 256; i++) img.data[i * 4 + 3] = 255;
        g.putImageData(img, 0, 0);
        const lo = el('span', '', '0'), hi = el('span', 'iv-hi', String(data.zmax));
        const txt = el('span', 'iv-legend-text',
            ' attention (row: query, the position reading; column: key, the position read). ' +
            'Tokens: blue = what the hovered token attends to, orange = what attends to it, ' +
            'in the chosen head, relative to the largest.');
        legend.append(lo, cb, hi, txt);
        root.appendChild(legend);

        function drawHead(h) {
            const g = h.canvas.getContext('2d'), img = g.createImageData(T, T), d = img.data;
            const z = data.zmax, sq = state.scale === 'sqrt';
            for (let i = 0; i < T * T; i++) {
                let v = h.A[i] / z;
                v = v <= 0 ? 0 : v >= 1 ? 1 : (sq ? Math.sqrt(v) : v);
                const c = Math.round(v * 255) * 3;
                d[i * 4] = SCALE[c];
                d[i * 4 + 1] = SCALE[c + 1];
                d[i * 4 + 2] = SCALE[c + 2];
                d[i * 4 + 3] = 255;
            }
            g.putImageData(img, 0, 0);
        }

        function drawOverlay(h, i) {
            const c = h.overlay, g = c.getContext('2d'), W = c.width, s = W / T;
            g.clearRect(0, 0, W, W);
            if (state.diagonal && data.repeat != null) {
                /* two dashed lines either side of the cells (q, q - L + 1), q >= L, so the
                 * cells themselves stay visible */
                const L = data.repeat, end = data.repeatEnd || T, off = Math.max(2 * dpr, 1.5 * s);
                g.save();
                g.setLineDash([4 * dpr, 3 * dpr]);
                g.lineWidth = Math.max(1, dpr);
                g.strokeStyle = 'rgba(255,255,255,0.9)';
                for (const d of [off, -off]) {
                    g.beginPath();
                    const x0 = 1 * s + s / 2 - d, y0 = L * s + s / 2 + d;
                    const x1 = (end - L) * s + s / 2 - d, y1 = (end - 1) * s + s / 2 + d;
                    g.moveTo(x0, y0);
                    g.lineTo(x1, y1);
                    g.stroke();
                }
                g.restore();
            }
            if (state.query != null) {
                /* outlines around the cells (whole pixels, 2 wide), so they stay visible */
                const q = state.query, lw = 2 * Math.round(dpr);
                const a = Math.floor(q * s) - lw / 2, b = Math.ceil((q + 1) * s) + lw / 2;
                g.lineWidth = lw;
                /* the row: what q attends to (keys 0..q) */
                g.strokeStyle = '#1f78ff';
                g.strokeRect(lw / 2, a, b - lw / 2, b - a);
                /* the column: what attends to q (queries q..T-1) */
                g.strokeStyle = '#ff7f0e';
                g.strokeRect(a, a, b - a, W - lw / 2 - a);
            }
            h.fig.classList.toggle('iv-focus', i === state.focus);
        }

        function highlight() {
            const q = state.query, h = heads[state.focus];
            if (q == null) return null;
            const to = [], from = [];
            for (let k = 0; k <= q; k++) to.push([k, h.A[q * T + k]]);
            for (let i = q; i < T; i++) from.push([i, h.A[i * T + q]]);
            to.sort((a, b) => b[1] - a[1]);
            from.sort((a, b) => b[1] - a[1]);
            return { query: q, head: h.label, attendsTo: to, attendedBy: from };
        }

        function paintTokens() {
            const q = state.query, h = heads[state.focus];
            if (q == null) return;
            let maxTo = 0, maxFrom = 0;
            for (let k = 0; k < q; k++) maxTo = Math.max(maxTo, h.A[q * T + k]);
            for (let i = q + 1; i < T; i++) maxFrom = Math.max(maxFrom, h.A[i * T + q]);
            for (let i = 0; i < T; i++) {
                const s = spans[i];
                let bg = '', v = 0;
                if (i < q && maxTo > 0) v = h.A[q * T + i] / maxTo;
                else if (i > q && maxFrom > 0) v = h.A[i * T + q] / maxFrom;
                if (v >= 0.005) bg = css(i < q ? TO : FROM, Math.round(v * 255));
                s.style.background = bg;
                s.style.color = v > 0.55 ? '#fff' : '';
                s.classList.toggle('iv-query', i === q);
            }
            const top = (list, k) => list.filter(([i]) => i !== q).slice(0, k)
                .map(([i, v]) => `${i} ${JSON.stringify(data.raw[i])} (${v.toFixed(3)})`).join(', ');
            const hl = highlight();
            let key = '';
            if (state.key != null && state.key <= q)
                key = `; key ${state.key}: ${h.A[q * T + state.key].toFixed(3)}`;
            info.textContent = `${h.label}, query ${q} ${JSON.stringify(data.raw[q])}: attends most to ` +
                `${top(hl.attendsTo, 3) || '(itself only)'}; self ${h.A[q * T + q].toFixed(3)}; ` +
                `attended most by ${top(hl.attendedBy, 3) || '(none)'}${key}`;
        }

        function update() {
            heads.forEach(drawOverlay);
            paintTokens();
            root.dataset.query = state.query == null ? '' : String(state.query);
            root.dataset.focus = String(state.focus);
        }

        function setQuery(q, key) {
            if (!(q >= 0 && q < T)) return;
            state.query = q;
            state.key = key == null ? null : key;
            update();
        }

        function setFocus(i) {
            if (!(i >= 0 && i < heads.length)) return;
            state.focus = i;
            update();
        }

        strip.addEventListener('mouseover', (ev) => {
            const t = ev.target.closest('.iv-tok');
            if (t) setQuery(+t.dataset.i, null);
        });
        if (diagBox) diagBox.addEventListener('change', () => { state.diagonal = diagBox.checked; update(); });
        scaleSel.addEventListener('change', () => {
            state.scale = scaleSel.value;
            heads.forEach(drawHead);
        });

        const t0 = performance.now();
        heads.forEach(drawHead);
        update();
        root.dataset.drawMs = String(Math.round(performance.now() - t0));
        root.dataset.state = 'ready';
        root.inductView = { setQuery, setFocus, state, highlight, heads };
    }

    window.inductAttentionView = render;
})();
