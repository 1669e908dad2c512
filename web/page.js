/* page.js -- the kvplan page: the URL query (plan keys) becomes the argv a user
 * would type, and the kvplan command line compiled to WebAssembly (kvplan.js,
 * make web) answers it. Every figure on the page is read from what the CLI
 * printed; the page computes none. For a model by Hugging Face Hub reference
 * the CLI's own Hub client (src/hub/client.c) decides what to fetch; the page
 * only carries its requests (src/hub/page.c says how). docs/web.md describes it. */
'use strict';

/* The one table of URL keys: each plan key (docs/plan-format.md, settings.c's
 * table) and the `kvplan fit` option it becomes. model is fit's MODEL. bool:
 * an option without a value (the key's value must be true). noplot: `kvplan
 * plot` takes no such option (context is its x axis, a line holds K and V in
 * one format). check-web checks the table against `kvplan fit --help`. */
const KEYS = [
  {key: 'model'},
  {key: 'engine', flag: '--engine'},
  {key: 'gpu', flag: '--gpu'},
  {key: 'tp', flag: '--tp'},
  {key: 'pp', flag: '--pp'},
  {key: 'dp', flag: '--dp'},
  {key: 'dp_attention', flag: '--dp-attention', bool: true},
  {key: 'gpus', flag: '--gpus'},
  {key: 'util', flag: '--util'},
  {key: 'context', flag: '--context', noplot: true},
  {key: 'concurrency', flag: '--concurrency'},
  {key: 'kv_dtype', flag: '--kv-dtype'},
  {key: 'k_dtype', flag: '--k-dtype', noplot: true},
  {key: 'v_dtype', flag: '--v-dtype', noplot: true},
  {key: 'weight_dtype', flag: '--weight-dtype'},
  {key: 'gpu_memory', flag: '--gpu-memory'},
  {key: 'weights_memory', flag: '--weights-memory'},
  {key: 'activation_memory', flag: '--activation-memory'},
  {key: 'non_torch_memory', flag: '--non-torch-memory'},
  {key: 'cuda_graph_memory', flag: '--cuda-graph-memory'},
  {key: 'kv_cache_memory', flag: '--kv-cache-memory'},
  {key: 'cpu_offload', flag: '--cpu-offload'},
  {key: 'block_size', flag: '--block-size'},
  {key: 'max_num_batched_tokens', flag: '--max-num-batched-tokens'},
  {key: 'max_num_seqs', flag: '--max-num-seqs'},
  {key: 'n_ubatch', flag: '--n-ubatch'},
  {key: 'n_batch', flag: '--n-batch'},
  {key: 'n_seq', flag: '--n-seq'},
  {key: 'kv_unified', flag: '--kv-unified', bool: true},
  {key: 'swa_full', flag: '--swa-full', bool: true},
  {key: 'mla_v', flag: '--mla-v', bool: true},
  {key: 'flash_attn', flag: '--flash-attn'},
  {key: 'split', flag: '--split'},
  {key: 'n_gpu_layers', flag: '--n-gpu-layers'},
  {key: 'n_cpu_moe', flag: '--n-cpu-moe'},
  {key: 'override_tensor', flag: '--override-tensor'},
  {key: 'no_kv_offload', flag: '--no-kv-offload', bool: true},
  {key: 'expert_parallel', flag: '--expert-parallel', bool: true},
  {key: 'redundant_experts', flag: '--redundant-experts'},
  {key: 'max_loras', flag: '--max-loras'},
  {key: 'max_lora_rank', flag: '--max-lora-rank'},
  {key: 'host_bandwidth', flag: '--host-bandwidth'},
];
/* the fields the form shows at the top; the others go under "every other setting" */
const MAIN_FIELDS = ['model', 'gpu', 'gpus', 'tp', 'pp', 'engine', 'weight_dtype', 'kv_dtype', 'context', 'concurrency'];
const DEFAULT_QUERY = 'model=llama-3.1-8b&gpu=h100&context=32k&concurrency=8';
const CHART = '/chart.svg'; /* where kvplan plot writes, in each instance's MEMFS */
const WORKDIR = '/work';    /* the CLI's working directory: a dropped file lies here under its own name */
const READ_MAX = 64 << 20;  /* model_load.c reads at most 64 MiB of a file (a GGUF's header), so the page too */
const PATH_LIKE = /\.(ya?ml|json|gguf)$/i; /* a model file's extension: the CLI reads such a name as a file */
const FRAGMENT_MAX = 64 << 10; /* a dropped file larger than this stays out of the link (URLs have limits) */
const HUB_DIR = '/hub';     /* src/hub/page.c: it reads answers from HUB_DIR/answers/KEY, writes HUB_DIR/wants, HUB_DIR/pinned */
const CACHE_DIR = '/cache'; /* KVPLAN_CACHE: kvplan's cache, in each instance's MEMFS (so empty at each start) */
const HUB_ROUNDS = 70;      /* runs of one command at most: a 64 MiB GGUF header takes 64 (a MiB a round), plus the listing */
const DEFAULT_HUB = 'https://huggingface.co';

const $ = id => document.getElementById(id);
const keyRow = key => KEYS.find(r => r.key === key);

/* ---- the URL: query = plan keys; fragment = a dropped file (name, base64) ---- */

/* The state a query gives: {settings: [[key, value]...] in table order, errors: [...], hub}. hub= is the
 * page's, not a plan key: the Hub it asks (HF_ENDPOINT), for testing against a local one */
function parseQuery(search) {
  const given = new URLSearchParams(search), settings = [], errors = [];
  const hub = (given.get('hub') || DEFAULT_HUB).replace(/\/+$/, '');
  if (!/^https?:\/\/[^\s/]+/.test(hub))
    errors.push(`hub: '${hub}' is not an http(s) URL (the Hub the page asks; ${DEFAULT_HUB} when not given)`);
  for (const [key, value] of given) {
    const row = keyRow(key);
    if (key === 'hub')
      continue;
    if (!row)
      errors.push(`unknown key '${key}' in the URL (the keys are the plan keys: ${KEYS.map(r => r.key).join(', ')})`);
    else if (given.getAll(key).length > 1 && settings.some(([k]) => k === key))
      errors.push(`'${key}' is given twice in the URL`);
    else if (row.bool && value !== 'true')
      errors.push(`${key}: the command line sets it only to true (--${key.replace(/_/g, '-')}); leave it out otherwise`);
    else
      settings.push([key, value]);
  }
  settings.sort((a, b) => KEYS.indexOf(keyRow(a[0])) - KEYS.indexOf(keyRow(b[0])));
  if (!errors.length && !settings.some(([k]) => k === 'model'))
    errors.push("the URL names no model (?model=llama-3.1-8b&gpu=h100 ...)");
  return {settings, errors, hub};
}

/* the query of settings ('/', '@' and ':' of a Hub reference left as they are), and hub= unless the default */
function queryOf(settings) {
  const word = v => encodeURIComponent(v).replace(/%(2F|40|3A)/g, c => decodeURIComponent(c));
  return settings.map(([k, v]) => `${word(k)}=${word(v)}`).join('&') +
    (hubEndpoint !== DEFAULT_HUB ? '&hub=' + word(hubEndpoint) : '');
}

/* "#file=NAME:BASE64URL" -> {name, bytes}; null without a #file= fragment; {error} for one that is
 * malformed or carries more than FRAGMENT_MAX bytes (checked on its length, before it is decoded) */
function parseFragment(hash) {
  if (!hash.startsWith('#file='))
    return null;
  const bad = why => ({error: `the link's #file= fragment is malformed (${why}): it must be #file=NAME:BASE64URL, ` +
                              'as the page writes it; drop the file again'});
  const m = /^#file=([^:]+):([A-Za-z0-9_-]*)$/.exec(hash);
  if (!m)
    return bad('not NAME:BASE64URL');
  if (Math.floor(m[2].length * 3 / 4) > FRAGMENT_MAX)
    return {error: `the link's file is larger than ${FRAGMENT_MAX / 1024} KiB (${m[2].length} characters of base64): ` +
                   'a link carries at most that; drop the file instead'};
  let name, bin;
  try {
    name = decodeURIComponent(m[1]);
    bin = atob(m[2].replace(/-/g, '+').replace(/_/g, '/'));
  } catch (e) {
    return bad(name === undefined ? 'its name is not percent-encoded UTF-8' : 'its data is not base64');
  }
  const bytes = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++)
    bytes[i] = bin.charCodeAt(i);
  return {name, bytes};
}

function fragmentOf(file) {
  let bin = '';
  for (const b of file.bytes)
    bin += String.fromCharCode(b);
  return `#file=${encodeURIComponent(file.name)}:` + btoa(bin).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
}

/* ---- the CLI: a fresh module instance per command (its options are static) ---- */

let hubEndpoint = DEFAULT_HUB; /* the page's hub= */
const answers = new Map();  /* request key -> the answer file page.c reads: the session's Hub cache */
const inflight = new Map(); /* request key -> the fetch under way, shared by the commands that want it */
const hubStats = {requests: 0, bytes: 0};

/* One run of argv in a fresh instance: {rc, out, err, svg, wants, pinned}. wants: the Hub requests
 * page.c had no answer for (then the run's output is not the answer yet); pinned: the Hub
 * reference pinned to its commit, once one resolved. */
function run(argv, file) {
  const out = [], err = [];
  const env = m => Object.assign(m.ENV, {KVPLAN_CACHE: CACHE_DIR, HF_ENDPOINT: hubEndpoint});
  const options = {stdout: c => out.push(c), stderr: c => err.push(c), preRun: [env]};
  return kvplanModule(options).then(mod => {
    /* under emscripten's libc a file kvplan writes through kvp_buf_save (fchmod(0666 & ~umask)) gets
     * mode 0 (its umask stub), and MEMFS enforces modes: a Hub file in the cache, or plot's chart, would
     * be unreadable. The instance's file system is the page's own: nothing for modes to protect */
    mod.FS.ignorePermissions = true;
    mod.FS.mkdir(WORKDIR);
    mod.FS.mkdir(HUB_DIR);
    mod.FS.mkdir(HUB_DIR + '/answers');
    for (const [key, bytes] of answers)
      mod.FS.writeFile(`${HUB_DIR}/answers/${key}`, bytes);
    mod.FS.chdir(WORKDIR);
    if (file)
      mod.FS.writeFile(file.name, file.bytes);
    const rc = mod.callMain(argv.slice());
    let svg = null;
    if (argv[0] === 'plot' && rc === 0)
      svg = mod.FS.readFile(CHART, {encoding: 'utf8'});
    const text = a => new TextDecoder().decode(new Uint8Array(a));
    const read = path => mod.FS.analyzePath(path).exists ? mod.FS.readFile(path, {encoding: 'utf8'}) : '';
    const wants = read(HUB_DIR + '/wants').split('\n').filter(Boolean).map(line => {
      const [key, from, len, max, timeout] = line.split(' ', 5);
      return {key, from: +from, len: +len, max: +max, timeout: +timeout, url: line.split(' ').slice(5).join(' ')};
    });
    return {rc, out: text(out), err: text(err), svg, wants, pinned: read(HUB_DIR + '/pinned') || null};
  });
}

/* ---- the Hub: page.c's requests, fetched as kvplan-hub's libcurl transfers are made ---- */

/* An answer file as page.c reads it: one line, then the body. */
function answerFile(line, body) {
  const head = new TextEncoder().encode(line + '\n'), bytes = new Uint8Array(head.length + (body ? body.length : 0));
  bytes.set(head);
  if (body)
    bytes.set(body, head.length);
  return bytes;
}

/* At most cap bytes of a body; past them the stream is cancelled, never read. onChunk: each chunk's arrival. */
async function readCapped(body, cap, onChunk) {
  const reader = body.getReader(), parts = [];
  let got = 0;
  while (got < cap) {
    const {done, value} = await reader.read();
    if (done)
      break;
    onChunk();
    parts.push(value);
    got += value.length;
  }
  if (got >= cap)
    reader.cancel().catch(() => {});
  const out = new Uint8Array(Math.min(got, cap));
  let at = 0;
  for (const p of parts) {
    const n = Math.min(p.length, out.length - at);
    out.set(p.subarray(0, n), at);
    at += n;
  }
  return out;
}

/* One of page.c's wants: GET with its Range, redirects followed; a 200 to a Range request (the whole
 * file) and an error status refused before their bodies are read; a body read to max + 1 bytes at most
 * (page.c says "too large" past max); given up after `timeout` seconds without a byte. */
async function fetchWant(w) {
  const abort = new AbortController();
  let timer = 0;
  const alive = () => { clearTimeout(timer); timer = setTimeout(() => abort.abort(), w.timeout * 1000); };
  const headers = w.len > 0 ? {Range: `bytes=${w.from}-${w.from + w.len - 1}`} : {};
  hubStats.requests++;
  alive();
  try {
    const resp = await fetch(w.url, {headers, signal: abort.signal, cache: 'no-store', credentials: 'omit'});
    const line = `http ${resp.status} ${resp.headers.get('X-Error-Code') || '-'}`;
    if (resp.status < 200 || resp.status > 299 || (w.len > 0 && resp.status === 200)) {
      if (resp.body)
        resp.body.cancel().catch(() => {});
      return answerFile(line, null);
    }
    const body = resp.body ? await readCapped(resp.body, w.max + 1, alive) : new Uint8Array(0);
    hubStats.bytes += body.length;
    return answerFile(line, body);
  } catch (e) {
    return answerFile(abort.signal.aborted ? 'stalled' : `unreachable ${String(e.message || e).replace(/\s+/g, ' ')}`, null);
  } finally {
    clearTimeout(timer);
  }
}

/* argv run until page.c wants nothing more: each round fetches what the last one wanted (each
 * request once a session) and runs the command again in a fresh instance. Adds rounds to the result. */
async function runHub(argv, file) {
  for (let rounds = 1; ; rounds++) {
    const r = await run(argv, file);
    if (!r.wants.length)
      return Object.assign(r, {rounds});
    if (rounds === HUB_ROUNDS)
      return Object.assign(r, {rounds, rc: 2, err: r.err + `the page gave up after ${HUB_ROUNDS} rounds of requests to the Hub\n`});
    await Promise.all(r.wants.map(w => {
      if (!inflight.has(w.key))
        inflight.set(w.key, fetchWant(w).then(bytes => answers.set(w.key, bytes)));
      return inflight.get(w.key);
    }));
  }
}

/* The argv of `kvplan fit` for the settings (the model first), as a user would type it. */
function fitArgv(settings, extra) {
  const argv = ['fit'];
  for (const [k, v] of settings) {
    const row = keyRow(k);
    if (k === 'model')
      argv.splice(1, 0, v);
    else if (row.bool)
      argv.push(row.flag);
    else
      argv.push(row.flag, v);
  }
  return argv.concat(extra);
}

function plotArgv(settings) {
  const argv = fitArgv(settings.filter(([k]) => !keyRow(k).noplot), ['--svg', CHART]);
  argv[0] = 'plot';
  return argv;
}

function shellWord(s) {
  return /^[A-Za-z0-9_@%+=:,./-]+$/.test(s) ? s : `'${s.replace(/'/g, "'\\''")}'`;
}

/* ---- rendering ---- */

/* GiB to two places, a tie to the even digit as the CLI's printf rounds (3.125 -> 3.12; toFixed gives 3.13) */
function gib(b) {
  const c = b / 1073741824 * 100, f = Math.floor(c), n = c - f > 0.5 || (c - f === 0.5 && f % 2) ? f + 1 : f;
  return (n / 100).toFixed(2) + ' GiB';
}

function showError(text) {
  $('error').hidden = !text;
  $('kvplan-error').textContent = text || '';
}

/* the memory bar: weights, reserve, a hybrid's recurrent-state pool, KV required, free, from the JSON's fields */
function renderBar(j) {
  const parts = [
    ['weights', 'weights', j.weights_bytes_per_gpu, 'weights_bytes_per_gpu'],
    ['reserve', 'reserve (activations, non-torch, CUDA graphs)', j.activation_bytes + j.non_torch_bytes + j.cuda_graph_bytes,
     'activation_bytes + non_torch_bytes + cuda_graph_bytes'],
  ];
  if (j.mamba_bytes !== undefined)
    parts.push(['state', `recurrent-state pool (${j.mamba_slots} slots)`, j.mamba_bytes, 'mamba_bytes']);
  parts.push(['kv', 'KV the requests need', j.kv_bytes_required, 'kv_bytes_required'],
             ['free', 'free in the KV budget', j.fits ? j.free_bytes : 0, 'free_bytes']);
  const used = parts.reduce((s, p) => s + p[2], 0);
  if (used < j.gpu_memory_bytes)
    parts.push(['rest', 'the rest of the GPU (outside the engine\'s memory fraction)', j.gpu_memory_bytes - used,
                'gpu_memory_bytes - the others']);
  const total = Math.max(used, j.gpu_memory_bytes);
  const bar = $('bar'), legend = $('legend');
  bar.replaceChildren();
  legend.replaceChildren();
  for (const [cls, name, bytes, field] of parts) {
    const seg = document.createElement('span');
    seg.className = `seg ${cls}`;
    seg.style.width = (100 * bytes / total).toFixed(3) + '%';
    seg.title = `${name}: ${bytes} B`;
    bar.appendChild(seg);
    const li = document.createElement('li'), key = document.createElement('span');
    key.className = `key ${cls}`;
    li.append(key, `${name}: ${gib(bytes)} (${field})`);
    legend.appendChild(li);
  }
  if (!j.fits) {
    const li = document.createElement('li');
    li.className = 'short';
    li.textContent = j.refused ? `the engine would not start: ${j.refused}` : `does not fit: ${gib(j.short_bytes)} short`;
    legend.appendChild(li);
  }
  bar.setAttribute('aria-label', `memory per GPU: ${gib(j.gpu_memory_bytes)}`);
}

/* llama.cpp's table per device (kvplan fit's "device" table): each GPU's layers, weights and KV, and what
 * stays in host RAM (-ngl below all layers, --n-cpu-moe, --no-kv-offload) with its compute buffer */
function renderDevices(j) {
  const t = $('devices'), offload = j.host && (j.host.model_layers || j.host.layers);
  $('devices-head').hidden = t.hidden = !offload;
  t.replaceChildren();
  if (!offload)
    return;
  const row = (cells, head) => {
    const tr = document.createElement('tr');
    for (const c of cells) {
      const td = document.createElement(head ? 'th' : 'td');
      td.textContent = c;
      tr.appendChild(td);
    }
    t.appendChild(tr);
  };
  row(['device', 'layers', 'weights', 'KV', 'compute'], true);
  j.devices.forEach((d, i) => row([`GPU${i}`, d.model_layers, gib(d.weights_bytes), gib(d.buffer_bytes), '']));
  row(['host RAM', j.host.model_layers, gib(j.host.weights_bytes), gib(j.host.buffer_bytes), gib(j.host.compute_bytes)]);
}

/* file: the dropped or carried file the figures come from (named by its path, never as a built-in) */
function renderSummary(j, file) {
  const s = $('summary');
  s.className = j.fits ? 'fits' : 'nofit';
  const n = v => v.toLocaleString('en'); /* counts as the CLI prints them: 131,072 */
  s.textContent = (file ? `from the file ./${file.name} (not a built-in model): ` : '') + `${j.model} on ${j.gpus} x ${j.gpu || 'GPU'} (${gib(j.gpu_memory_bytes)} each), ${j.engine} ` +
    `${j.engine_version}, tp ${j.tp} pp ${j.pp}: ${j.fits ? 'fits' : 'does NOT fit'} ${n(j.concurrency)} x ` +
    `${n(j.context)} tokens. Capacity: ${n(j.kv_tokens)} KV tokens, ${j.max_concurrency.toFixed(2)} requests of ` +
    `${n(j.context)} tokens; max context ${n(j.max_context)} tokens at concurrency ${n(j.concurrency)}.`;
}

let serial = 0; /* the answer being computed; an older one that finishes late is dropped */

/* A Hub model: the link pins the commit it resolved to (model=ORG/NAME@COMMIT), so that a shared link
 * gives this answer later; and what was fetched for it, under the answer. */
function showHub(state, fit) {
  const model = state.settings.find(([k]) => k === 'model')[1];
  $('hub').hidden = !fit.pinned;
  if (!fit.pinned)
    return;
  const pinned = state.settings.map(([k, v]) => [k, k === 'model' ? fit.pinned : v]);
  history.replaceState(null, '', '?' + queryOf(pinned) + location.hash);
  $('hub').textContent = `${model} is ${fit.pinned} at ${hubEndpoint} (the link names that commit): ` +
    `${fit.rounds} runs of the command; this session asked the Hub ${hubStats.requests} times, for ` +
    `${hubStats.bytes.toLocaleString('en')} bytes of configs and headers.`;
}

function finish(done) {
  $('status').textContent = done === 'ok' ? 'done' : 'error';
  $('status').dataset.done = done;
}

/* no answer: the message (the CLI's stderr, or the page's own) instead */
function refuse(text) {
  $('answer').hidden = true;
  $('kvplan-json').textContent = '';
  showError(text);
  finish('error');
}

function answer(state, file) {
  const mine = ++serial;
  $('status').textContent = 'computing ...';
  $('status').dataset.done = '';
  if (state.errors.length) {
    $('kvplan-argv').textContent = '';
    refuse(state.errors.join('\n'));
    return Promise.resolve();
  }
  const argv = fitArgv(state.settings, ['--format', 'json']);
  $('kvplan-argv').textContent = 'kvplan ' + argv.map(shellWord).join(' ');
  return Promise.all([runHub(argv, file), runHub(fitArgv(state.settings, ['--explain']), file),
                      runHub(plotArgv(state.settings), file),
                      runHub(fitArgv(state.settings, ['--emit']), file)]).then(([fit, explain, plot, launch]) => {
    if (mine !== serial)
      return;
    showHub(state, fit);
    if (fit.rc !== 0 && fit.rc !== 1)
      return refuse(fit.err);
    showError(fit.err); /* a model's warnings */
    const j = JSON.parse(fit.out);
    $('kvplan-json').textContent = fit.out;
    $('explain').textContent = explain.out; /* its stderr is fit's, shown above */
    $('log').textContent = j.refused ? `${j.engine} would not start:\n  ${j.refused}` :
      j.log.length ? j.log.join('\n') : '(this engine logs nothing about its KV cache)';
    /* the engine's own command for it, or why there is none (an engine without one: ideal, hf-*) */
    $('launch').textContent = launch.rc === 2 ? launch.err.replace(/^kvplan: /, '') : launch.out;
    $('copy-launch').hidden = launch.rc === 2;
    if (plot.svg)
      $('chart').innerHTML = plot.svg;
    else
      $('chart').textContent = plot.err;
    renderSummary(j, file);
    renderBar(j);
    renderDevices(j);
    $('answer').hidden = false;
    finish('ok');
  }).catch(e => {
    if (mine === serial)
      refuse('the page failed: ' + e);
  });
}

/* ---- the form ---- */

let engines = [];     /* kvplan engines --format json */
let dropped = null;   /* {name, bytes}: the dropped file, also in the URL's fragment */

function option(select, value, text) {
  const o = document.createElement('option');
  o.value = value;
  o.textContent = text;
  select.appendChild(o);
}

function fillReleases(engine, release) {
  const sel = $('f-release'), e = engines.find(x => x.engine === engine);
  sel.replaceChildren();
  option(sel, '', e ? `default (${e.default})` : 'default');
  for (const r of e ? e.releases : [])  /* the month tagged beside it, where a source gives it */
    option(sel, r.version, r.date && r.date !== '-' ? `${r.version} (${r.date})` : r.version);
  sel.value = release || '';
}

/* the form's fields from the state (unknown values are kept as typed) */
function fillForm(state) {
  const get = k => (state.settings.find(([key]) => key === k) || [k, ''])[1];
  for (const row of KEYS) {
    const el = $('f-' + row.key);
    if (el && row.key !== 'engine') {
      if (el.tagName === 'SELECT' && get(row.key) && ![...el.options].some(o => o.value === get(row.key)))
        option(el, get(row.key), get(row.key));
      el.value = get(row.key);
    }
  }
  const [engine, release] = get('engine').split('@');
  if (engine && ![...$('f-engine').options].some(o => o.value === engine))
    option($('f-engine'), engine, engine);
  $('f-engine').value = engine || '';
  fillReleases(engine || 'vllm', release);
}

function readForm() {
  const settings = [];
  for (const row of KEYS) {
    let v;
    if (row.key === 'engine') {
      v = $('f-engine').value;
      if (v && $('f-release').value)
        v += '@' + $('f-release').value;
    } else {
      v = $('f-' + row.key).value.trim();
    }
    if (v)
      settings.push([row.key, v]);
  }
  return {settings, errors: settings.some(([k]) => k === 'model') ? [] : ['which model? (type its name or a Hugging Face id, or drop a file)']};
}

/* the dropped file when the model names it as a path (./NAME; a name with a model file's extension
 * is one too): a plain name is a built-in's, which a file never shadows (kvp_model_ref_is_path) */
function fileFor(state) {
  return dropped && state.settings.some(([k, v]) => k === 'model' && (v === './' + dropped.name ||
    (v === dropped.name && PATH_LIKE.test(v)))) ? dropped : null;
}

let timer = 0;
function formChanged() {
  clearTimeout(timer);
  timer = setTimeout(() => {
    const state = readForm();
    const file = fileFor(state);
    const carried = file && file.bytes.length <= FRAGMENT_MAX;
    history.replaceState(null, '', '?' + queryOf(state.settings) + (carried ? fragmentOf(file) : ''));
    answer(state, file).then(() => {
      if (file && !carried)
        $('status').textContent += ` (${file.name} is too large to travel in the link: a shared link needs the file dropped again)`;
    });
  }, 250);
}

/* A config.json without `_name_or_path` is named by its folder (kvplan's name_from_file), and a
 * dropped file has none the page can see: the page asks for a name and gives the file as NAME.json
 * (UNNAMED until one is typed). */
const UNNAMED = 'unnamed-model';
function namesItself(bytes) {
  try {
    return typeof JSON.parse(new TextDecoder().decode(bytes))._name_or_path === 'string';
  } catch (e) {
    return true; /* not JSON: a GGUF or a kvplan YAML, named by its file */
  }
}

function fileName(s) {
  return s.replace(/[^A-Za-z0-9._-]/g, '_');
}

function dropFile(f) {
  return f.slice(0, READ_MAX).arrayBuffer().then(buf => {
    const bytes = new Uint8Array(buf), ask = f.name === 'config.json' && !namesItself(bytes);
    $('name-row').hidden = !ask;
    $('f-file-name').value = '';
    dropped = {name: ask ? UNNAMED + '.json' : fileName(f.name), bytes};
    /* named as a path, so that it never reads as a built-in (kvp_model_ref_is_path): a model
     * file's extension already is one, else ./NAME */
    $('f-model').value = PATH_LIKE.test(dropped.name) ? dropped.name : './' + dropped.name;
    formChanged();
  });
}

/* the name typed for a config.json that names no model: the dropped file is NAME.json */
function nameDropped(e) {
  if (!dropped)
    return;
  dropped.name = (fileName(e.target.value.trim()) || UNNAMED) + '.json';
  $('f-model').value = './' + dropped.name;
}

function buildForm() {
  const more = $('more-fields');
  for (const row of KEYS) {
    if (MAIN_FIELDS.includes(row.key))
      continue;
    const label = document.createElement('label'), input = document.createElement('input');
    label.textContent = row.key + ' ';
    input.id = 'f-' + row.key;
    input.placeholder = row.bool ? 'true, or leave empty' : 'the default';
    label.appendChild(input);
    more.appendChild(label);
  }
  $('form').addEventListener('input', formChanged);
  $('form').addEventListener('change', e => {
    if (e.target.id === 'f-engine')
      fillReleases(e.target.value, '');
    formChanged();
  });
  $('form').addEventListener('submit', e => e.preventDefault());
  const drop = $('drop');
  drop.addEventListener('dragover', e => { e.preventDefault(); drop.classList.add('over'); });
  drop.addEventListener('dragleave', () => drop.classList.remove('over'));
  drop.addEventListener('drop', e => {
    e.preventDefault();
    drop.classList.remove('over');
    if (e.dataTransfer.files.length)
      dropFile(e.dataTransfer.files[0]);
  });
  $('f-file').addEventListener('change', e => { if (e.target.files.length) dropFile(e.target.files[0]); });
  $('f-file-name').addEventListener('input', nameDropped); /* before the form's listener reads the model */
  $('copy-launch').addEventListener('click', copyLaunch);
}

/* the pickers' contents come from the CLI too: kvplan models, gpus, engines */
function loadCatalogs() {
  return Promise.all([run(['models', '--format', 'json']), run(['gpus', '--format', 'json']),
                      run(['engines', '--format', 'json'])]).then(([models, gpus, eng]) => {
    for (const m of JSON.parse(models.out)) {
      const o = document.createElement('option');
      o.value = m.name;
      o.textContent = m.hf_id || m.name;
      $('models').appendChild(o);
    }
    option($('f-gpu'), '', '(none: give gpu_memory)');
    for (const g of JSON.parse(gpus.out))
      option($('f-gpu'), g.id, `${g.id}: ${g.name}`);
    engines = JSON.parse(eng.out);
    option($('f-engine'), '', 'vllm (default)');
    for (const e of engines)
      option($('f-engine'), e.engine, e.engine);
  });
}

/* the launch command's first line onto the clipboard (the second, a # note, is for the reader) */
function copyLaunch() {
  const line = $('launch').textContent.split('\n')[0];
  navigator.clipboard.writeText(line).then(() => { $('copy-launch').textContent = 'copied'; },
                                           () => { $('copy-launch').textContent = 'select it and copy'; });
  setTimeout(() => { $('copy-launch').textContent = 'copy'; }, 2000);
}

function start() {
  const t0 = performance.now();
  buildForm();
  return loadCatalogs().then(() => {
    const state = parseQuery(location.search || '?' + DEFAULT_QUERY);
    hubEndpoint = state.hub;
    const carried = parseFragment(location.hash);
    dropped = carried && !carried.error ? carried : null;
    fillForm(state);
    if (carried && carried.error)
      return refuse(carried.error);
    return answer(state, fileFor(state));
  }).then(() => {
    $('status').title = `${Math.round(performance.now() - t0)} ms from load`;
  }).catch(e => refuse('the page failed: ' + e));
}

start();
