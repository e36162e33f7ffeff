// Shared pieces: building nodes, the signed-in context, times, tables,
// forms, confirmations and the stage bar.

import { get, ApiError } from './api.js';

// `h('td.num', {title: 'x'}, child, …)`: an element with classes,
// attributes (`on*` are listeners) and children (strings become text).
export function h(spec, attrs, ...children) {
  const [tag, ...classes] = spec.split('.');
  const el = document.createElement(tag || 'div');
  if (classes.length) el.className = classes.join(' ');
  if (attrs && (typeof attrs !== 'object' || attrs instanceof Node || Array.isArray(attrs))) {
    children.unshift(attrs);
    attrs = null;
  }
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
    else if (k === 'dataset') Object.assign(el.dataset, v);
    else if (k in el && typeof v !== 'string') el[k] = v;
    else el.setAttribute(k, v === true ? '' : v);
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else el.append(c instanceof Node ? c : String(c));
  }
}

// What the signed-in page knows: who, and the names it shows for ids.
export const ctx = {
  name: null,
  role: null,
  sites: new Map(),
  doors: new Map(),
  cardholders: new Map(),
};

const RANK = { viewer: 0, operator: 1, admin: 2 };

export function can(role) {
  return ctx.role !== null && RANK[ctx.role] >= RANK[role];
}

// Reloads sites, doors and cardholders (names and time zones); true when
// what the pages show of them changed.
export async function loadNames() {
  const [sites, doors, holders] = await Promise.all([
    get('/api/v1/sites'),
    get('/api/v1/doors'),
    get('/api/v1/cardholders'),
  ]);
  const names = (m) => [...m.values()].map((x) => `${x.id}:${x.name}:${x.time_zone || x.site || ''}`).join('|');
  const before = [ctx.sites, ctx.doors, ctx.cardholders].map(names).join('/');
  ctx.sites = new Map(sites.items.map((s) => [s.id, s]));
  ctx.doors = new Map(doors.items.map((d) => [d.id, d]));
  ctx.cardholders = new Map(holders.items.map((c) => [c.id, c]));
  // Whether a name (or a time zone) the pages show has changed.
  return [ctx.sites, ctx.doors, ctx.cardholders].map(names).join('/') !== before;
}

export function doorName(id) {
  if (id == null) return '';
  const d = ctx.doors.get(id);
  return d ? d.name : `door ${id}`;
}

export function holderName(id) {
  if (id == null) return '';
  const c = ctx.cardholders.get(id);
  return c ? c.name : `cardholder ${id}`;
}

// The time zone of a door's site; otherwise the first site's; otherwise UTC.
export function zoneOf(door) {
  const d = ctx.doors.get(door);
  const s = d ? ctx.sites.get(d.site) : ctx.sites.values().next().value;
  return s ? s.time_zone : 'UTC';
}

const formats = new Map();

// An RFC 3339 time in `zone`, e.g. `2026-11-23 06:01:02 CET`.
export function fmtTime(iso, zone) {
  if (!iso) return '';
  zone = zone || zoneOf(null);
  let f = formats.get(zone);
  if (!f) {
    try {
      f = new Intl.DateTimeFormat('sv-SE', {
        timeZone: zone, year: 'numeric', month: '2-digit', day: '2-digit',
        hour: '2-digit', minute: '2-digit', second: '2-digit', hourCycle: 'h23', timeZoneName: 'short',
      });
    } catch (_) {
      f = new Intl.DateTimeFormat('sv-SE', { timeZone: 'UTC', dateStyle: 'short', timeStyle: 'long' });
    }
    formats.set(zone, f);
  }
  return f.format(new Date(iso));
}

export function fmtMs(us) {
  const ms = us / 1000;
  return ms >= 100 ? `${ms.toFixed(0)} ms` : `${ms.toFixed(ms >= 10 ? 1 : 2)} ms`;
}

export function fmtAge(s) {
  if (s == null) return '';
  const a = Math.abs(s);
  const t = a < 120 ? `${Math.round(a)} s` : a < 7200 ? `${Math.round(a / 60)} min` : a < 172800 ? `${Math.round(a / 3600)} h` : `${Math.round(a / 86400)} d`;
  return s < 0 ? `in ${t}` : t;
}

// A message at the top of the page (errors stay until closed).
export function notice(text, kind = 'error') {
  const n = document.getElementById('notice');
  n.replaceChildren(h('span', text), h('button.link', { type: 'button', onclick: () => (n.hidden = true) }, 'close'));
  n.className = kind;
  n.hidden = false;
  if (kind !== 'error') setTimeout(() => { if (n.firstChild && n.firstChild.textContent === text) n.hidden = true; }, 4000);
}

// What a failed call shows: the API's sentence, or that the service lacks
// the route.
export function failure(e) {
  if (e instanceof ApiError && e.missing) return h('p.muted.unavailable', 'Not available from this service.');
  const text = e instanceof ApiError ? `${e.message} (HTTP ${e.status})` : String(e.message || e);
  return h('p.error', { role: 'alert' }, text);
}

// A selector that finds `el` again once its part of the page is drawn
// anew (the same kind of control for the same door, row or field).
export function sameControl(el) {
  if (!el || el === document.body) return null;
  if (el.id) return `#${CSS.escape(el.id)}`;
  let sel = el.tagName.toLowerCase();
  for (const a of el.attributes) {
    if (a.name.startsWith('data-') || a.name === 'name' || a.name === 'aria-label') sel += `[${a.name}="${CSS.escape(a.value)}"]`;
  }
  return sel;
}

// Puts the focus back on `el`, or on its replacement when it was drawn
// anew meanwhile.
export function refocus(el, sel) {
  const target = el && el.isConnected ? el : sel ? document.querySelector(sel) : null;
  if (target) target.focus();
}

// A modal dialog asking `question`: the page behind is inert, Tab and
// Shift-Tab stay inside it, Escape cancels, and the focus goes back to
// where it was. `input`: a label, to ask for a line of text too. Resolves
// to false (cancelled), true, or the text typed.
function ask(question, { confirm = 'OK', danger = false, input = null, title = 'Please confirm' } = {}) {
  return new Promise((resolve) => {
    const opener = document.activeElement;
    const openerSel = sameControl(opener);
    const id = `d-${Math.random().toString(36).slice(2, 9)}`;
    const field = input ? h('input', { id: `${id}-in`, type: 'text', name: 'reason', autocomplete: 'off' }) : null;
    const ok = h(`button.${danger ? 'danger' : 'primary'}`, { type: 'submit', value: 'ok', dataset: { answer: 'ok' } }, confirm);
    const cancel = h('button', { type: 'button', dataset: { answer: 'cancel' } }, 'Cancel');
    const dialog = h('dialog.confirm', { 'aria-labelledby': `${id}-t`, 'aria-describedby': `${id}-q` },
      h('form', { method: 'dialog' },
        h('h2', { id: `${id}-t` }, title),
        h('p', { id: `${id}-q` }, question),
        field ? h('div.field', h('label', { for: field.id }, input), field) : null,
        h('div.actions', ok, cancel)));
    let answer = false;
    ok.addEventListener('click', () => { answer = field ? field.value : true; });
    cancel.addEventListener('click', () => dialog.close());
    dialog.addEventListener('keydown', (ev) => {
      if (ev.key !== 'Tab') return;
      const stops = [...dialog.querySelectorAll('input, button')].filter((e) => !e.disabled);
      const first = stops[0], last = stops[stops.length - 1];
      if (ev.shiftKey && document.activeElement === first) { ev.preventDefault(); last.focus(); }
      else if (!ev.shiftKey && document.activeElement === last) { ev.preventDefault(); first.focus(); }
    });
    dialog.addEventListener('close', () => {
      dialog.remove();
      resolve(answer);
      // After the caller's button is enabled again.
      setTimeout(() => refocus(opener, openerSel), 0);
    });
    document.body.append(dialog);
    dialog.showModal();
    (field || cancel).focus();
  });
}

// Asks before an action; resolves to whether to go on.
export async function confirmAction(question, opts) {
  return (await ask(question, opts)) !== false;
}

// Asks before an action and for its reason; resolves to the reason typed
// (possibly empty), or null when cancelled.
export async function askReason(question, opts) {
  const r = await ask(question, Object.assign({ input: 'Reason (for the log)' }, opts));
  return r === false ? null : String(r);
}

// Runs `action` for a button: disables it meanwhile and shows the API's
// refusal (403 included) next to it.
export async function act(button, action) {
  const out = button.parentElement.querySelector('.act-error') || h('span.act-error.error', { role: 'alert' });
  out.textContent = '';
  button.after(out);
  // A disabled button loses the focus: it gets it back once done (a
  // keyboard user stays where they were).
  const focused = document.activeElement === button;
  button.disabled = true;
  try {
    await action();
  } catch (e) {
    out.textContent = e instanceof ApiError ? `${e.message} (HTTP ${e.status})` : String(e.message || e);
  } finally {
    button.disabled = !button.dataset.allowed;
    const now = document.activeElement;
    if (focused && button.isConnected && (!now || now === document.body)) button.focus();
  }
}

// A button for what `role` may do: disabled, with the reason, for a weaker
// token (the API would refuse it anyway).
// `extra['aria-label']` names it for its row or door (`Suspend Ada`).
export function roleButton(role, label, onclick, extra) {
  const allowed = can(role);
  const b = h('button', Object.assign({ type: 'button', disabled: !allowed, title: allowed ? null : `needs the ${role} role` }, extra || {}), label);
  if (allowed) b.dataset.allowed = '1';
  b.addEventListener('click', () => act(b, onclick));
  return b;
}

// A form whose fields show the API's `{error, field}` beside them.
// `fields`: [{name, label, type?, options?, required?, placeholder?}].
export function form(fields, submitLabel, onsubmit, opts = {}) {
  const f = h('form.form', { novalidate: true, autocomplete: 'off' });
  for (const fd of fields) {
    const id = `f-${Math.random().toString(36).slice(2, 9)}`;
    let input;
    if (fd.options) {
      input = h('select', { id, name: fd.name }, fd.options.map(([v, t]) => h('option', { value: v }, t)));
    } else if (fd.type === 'textarea') {
      input = h('textarea', { id, name: fd.name, rows: 6, placeholder: fd.placeholder || null, spellcheck: 'false' });
    } else {
      input = h('input', { id, name: fd.name, type: fd.type || 'text', placeholder: fd.placeholder || null, accept: fd.accept || null });
    }
    if (fd.value !== undefined) input.value = fd.value;
    f.append(h('div.field', { dataset: { field: fd.name } }, h('label', { for: id }, fd.label), input, h('small.error.field-error', { role: 'alert' })));
  }
  const general = h('p.error.form-error', { role: 'alert' });
  const submit = h('button', { type: 'submit' }, submitLabel);
  if (opts.role && !can(opts.role)) {
    submit.disabled = true;
    submit.title = `needs the ${opts.role} role`;
  }
  f.append(h('div.actions', submit, general));
  f.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    for (const e of f.querySelectorAll('.error')) e.textContent = '';
    const values = {};
    for (const fd of fields) {
      const el = f.elements[fd.name];
      values[fd.name] = fd.type === 'file' ? el.files[0] || null : el.value.trim();
      if (fd.required && !values[fd.name]) {
        f.querySelector(`[data-field="${fd.name}"] .field-error`).textContent = `${fd.label} is required`;
        return;
      }
    }
    submit.disabled = true;
    try {
      await onsubmit(values, f);
    } catch (e) {
      const slot = e.field && f.querySelector(`[data-field="${e.field}"] .field-error`);
      const text = e instanceof ApiError ? `${e.message} (HTTP ${e.status})` : String(e.message || e);
      (slot || general).textContent = text;
    } finally {
      submit.disabled = !!(opts.role && !can(opts.role));
    }
  });
  return f;
}

// A table that sorts on its headers (buttons) and pages. `columns`:
// [{label, value(row) → sort key, cell(row) → node or text, cls?}];
// `opts.caption` says what it lists (read out, not shown).
export function table(columns, rows, opts = {}) {
  const size = opts.pageSize || 25;
  let page = 0;
  let sortBy = opts.sortBy ?? null;
  let desc = !!opts.desc;
  const body = h('tbody');
  const info = h('span.muted');
  const prev = h('button.link', { type: 'button', onclick: () => { page--; draw(); } }, '‹ previous');
  const next = h('button.link', { type: 'button', onclick: () => { page++; draw(); } }, 'next ›');
  const heads = columns.map((c, i) => h('th', {
    scope: 'col',
    class: c.value && c.label ? 'sortable' : null,
    onclick: c.value && c.label ? () => { desc = sortBy === i ? !desc : false; sortBy = i; page = 0; draw(); } : null,
  }, c.value && c.label ? h('button.sort', { type: 'button' }, c.label) : c.label || h('span.sr-only', 'Actions')));
  function sorted() {
    if (sortBy === null) return rows;
    const key = columns[sortBy].value;
    return [...rows].sort((a, b) => {
      const x = key(a), y = key(b);
      const r = x == null ? 1 : y == null ? -1 : typeof x === 'number' && typeof y === 'number' ? x - y : String(x).localeCompare(String(y), undefined, { numeric: true });
      return desc ? -r : r;
    });
  }
  function draw() {
    const all = sorted();
    const pages = Math.max(1, Math.ceil(all.length / size));
    page = Math.min(Math.max(page, 0), pages - 1);
    body.replaceChildren(...all.slice(page * size, page * size + size).map((r) => {
      const tr = h('tr', columns.map((c) => h('td', { class: c.cls || null }, c.cell ? c.cell(r) : c.value(r))));
      if (opts.rowClass) tr.className = opts.rowClass(r) || '';
      if (opts.rowData) Object.assign(tr.dataset, opts.rowData(r));
      return tr;
    }));
    if (!all.length) body.append(h('tr', h('td.muted', { colSpan: columns.length }, opts.empty || 'Nothing yet.')));
    heads.forEach((th, i) => {
      th.dataset.sort = i === sortBy ? (desc ? 'desc' : 'asc') : '';
      if (i === sortBy) th.setAttribute('aria-sort', desc ? 'descending' : 'ascending');
      else th.removeAttribute('aria-sort');
    });
    info.textContent = all.length ? `${page * size + 1}–${Math.min(all.length, (page + 1) * size)} of ${all.length}` : '';
    prev.disabled = page === 0;
    next.disabled = page >= pages - 1;
  }
  draw();
  const caption = opts.caption || 'List';
  const wrap = h('div.table', scroller(caption, h('table', { class: opts.cls || null }, h('caption.sr-only', caption), h('thead', h('tr', heads)), body)), h('div.pager', { role: 'group', 'aria-label': `${caption}: pages` }, prev, info, next));
  wrap.update = (r) => { rows = r; draw(); };
  return wrap;
}

// A table in a box that scrolls sideways when the window is narrow (or
// zoomed in); it takes the focus so that the keyboard can scroll it.
export function scroller(label, tableEl) {
  return h('div.scroll', { tabindex: '0', role: 'region', 'aria-label': label }, tableEl);
}

export const STAGES = ['detect', 'select', 'read', 'challenge', 'validate', 'verify', 'decide', 'signal'];

// A horizontal stacked bar of a tap's stages, each as wide as its share of
// the total, its milliseconds on hover.
export function stageBar(stages) {
  const by = new Map((stages || []).map((s) => [s.name, s.wall_us]));
  const total = [...by.values()].reduce((a, b) => a + b, 0);
  const bar = h('div.stagebar', { title: `total ${fmtMs(total)}`, 'aria-hidden': 'true' });
  const words = [];
  for (const name of STAGES) {
    if (!by.has(name)) continue;
    const us = by.get(name);
    const seg = h(`span.seg.st-${name}`, { title: `${name}: ${fmtMs(us)}`, dataset: { stage: name } });
    seg.style.flexGrow = String(Math.max(us, total / 200));
    bar.append(seg);
    words.push(`${name} ${fmtMs(us)}`);
  }
  // The bar in words, for those who cannot see or tell apart its colours.
  return h('div.stages', bar, h('span.total', fmtMs(total)), h('span.sr-only', `: ${words.join(', ')}`));
}

export function stageLegend() {
  return h('div.legend', { 'aria-hidden': 'true' }, STAGES.map((s) => h('span', h(`i.st-${s}`), s)));
}

export function badge(text, kind) {
  return h(`span.badge.${kind || text}`, text);
}

export function section(title, ...children) {
  return h('section.card', h('h2', title), ...children);
}

// Events as they are committed: the newest first (`recent`), and a
// `live.addEventListener('event', e => e.detail)` for each new one.
export const live = new EventTarget();
export const recent = [];
const KEEP = 500;

export function received(event) {
  if (recent.length && recent[0].id >= event.id) return;
  recent.unshift(event);
  if (recent.length > KEEP) recent.length = KEEP;
  live.dispatchEvent(new CustomEvent('event', { detail: event }));
}
