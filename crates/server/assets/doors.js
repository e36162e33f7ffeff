// Doors: state, last tap and readers; unlock and mode for operators; the
// door's latency over the last hour or day as a chart.

import { get, call, ApiError } from './api.js';
import { h, ctx, live, recent, can, fmtTime, fmtAge, zoneOf, holderName, roleButton, confirmAction, failure, badge, section, scroller, sameControl, STAGES } from './ui.js';

// The doors as `/api/v1/doors/status` gives them, or as close as the entity
// routes allow when the service has no status route.
async function status() {
  try {
    const s = await get('/api/v1/doors/status');
    return { items: s.items, dataAge: s.data_age, full: true };
  } catch (e) {
    // Without the route, `status` is taken for a door id.
    if (!(e instanceof ApiError && (e.missing || (e.status === 400 && e.field === 'id')))) throw e;
  }
  const [doors, readers] = (await Promise.all([get('/api/v1/doors'), get('/api/v1/readers')])).map((x) => x.items);
  const items = doors.map((d) => {
    const t = recent.find((e) => e.kind === 'tap' && e.door === d.id);
    return {
      door: d.id, name: d.name, site: d.site, mode: d.mode, mechanism: d.mechanism,
      last_tap: t ? { event: t.id, time: t.time, result: t.result, code: t.code, reason: t.reason, cardholder: t.cardholder, cardholder_name: t.cardholder != null ? holderName(t.cardholder) : null } : null,
      readers: readers.filter((r) => r.door === d.id).map((r) => ({ reader: r.id, name: r.name, connection: r.connection, connected: null, since: null })),
    };
  });
  return { items, full: false };
}

// How old one kind of the site's data is, in words.
function ageText(a, na) {
  if (!a || a.state === 'not-applicable') return h('span.muted', na);
  if (a.state === 'never') return h('span.refused-text', 'never confirmed');
  return h('span', `${fmtAge(a.age_s)} old`, h('span.muted', ` (as of ${fmtTime(a.as_of)})`));
}

// The data the doors decide from: how old it is and the site's maximum.
function dataAge(a) {
  if (!a) return null;
  return section('Data age', h('dl.facts.data-age',
    h('dt', 'Revocation data'), h('dd', ageText(a.revocation, 'not applicable (revocation checking off)')),
    h('dt', 'Access changes'), h('dd', ageText(a.changes, 'not applicable (no central)')),
    h('dt', 'Maximum age'), h('dd', a.default_max_staleness_s == null ? h('span.muted', 'none set for the site') : fmtAge(a.default_max_staleness_s))));
}

function readerLine(r) {
  const state = r.connected === true ? 'connected' : r.connected === false ? 'disconnected' : 'unknown';
  return h('li', h(`span.dot.${state}`, { title: state, 'aria-hidden': 'true' }), ` ${r.name} `, h('span.muted', `(${r.connection}) ${state}`),
    r.since ? h('span.muted', ` since ${fmtTime(r.since)}`) : null);
}

const DRIVEN_BY = { lockdown: 'site lockdown', schedule: 'unlock schedule', 'first-card': 'first-card unlock' };

// The mode the door is driven in when it is not its own mode, and why:
// "driven locked (site lockdown)", "driven unlocked (unlock schedule until …)".
function driven(d) {
  if (!d.driven_mode || d.driven_mode === d.mode) return null;
  const why = DRIVEN_BY[d.driven_by] || d.driven_by;
  const until = d.driven_until ? ` until ${fmtTime(d.driven_until, zoneOf(d.door))}` : '';
  return h('span.driven', { dataset: { driven: d.driven_mode, by: d.driven_by || '' } },
    badge(`driven ${d.driven_mode}`, `mode-${d.driven_mode}`), why ? h('span.muted', ` (${why}${until})`) : null);
}

function lastTap(t, door) {
  if (!t) return h('span.muted', 'no tap yet');
  return h('span', { class: t.result === 'refused' ? 'refused-text' : null },
    badge(t.result), ' ', t.cardholder_name || (t.cardholder != null ? holderName(t.cardholder) : 'unknown card'),
    ' · ', fmtTime(t.time, zoneOf(door)), t.result === 'refused' ? h('span.reason', ` — ${t.reason || t.code}`) : null);
}

// The newest unlock or mode command seen for the door (from the events
// loaded at sign-in and the live stream).
function lastCommand(door) {
  const e = recent.find((x) => x.kind === 'door-command' && x.door === door);
  if (!e) return h('span.muted', 'none recently');
  return h('span', { dataset: { code: e.code || '', event: e.id } }, `${e.code}${e.actor ? ` by ${e.actor}` : ''} · ${fmtTime(e.time, zoneOf(door))}`,
    e.reason ? h('span.muted', ` (${e.reason})`) : null);
}

// The door's position switch: open or closed, its phase (a grant's
// passage, forced, held open…) and when it last changed; redrawn live on
// the door's input events.
function position(p, door) {
  if (!p) return h('span.muted', 'no position switch');
  return h('span.door-position', { dataset: { open: String(p.open), state: p.state || '' } },
    badge(p.open ? 'open' : 'closed', p.open ? 'refused' : 'granted'),
    p.state ? h('span.muted', ` ${p.state}`) : null,
    p.last_change ? ` · since ${fmtTime(p.last_change, zoneOf(door))}` : null);
}

// The door's interlock groups, and the door that keeps it shut now.
function interlocks(list) {
  return h('ul.interlocks', list.map((i) => h('li', { dataset: { group: i.group, blocked: String(i.blocked_by != null) } },
    `${i.group}: `, i.blocked_by ? h('span.refused-text', `blocked, ${i.blocked_by.name} is ${i.blocked_by.because}`) : h('span.muted', 'free'))));
}

// `single`: the door's own page, where its name is the page's heading.
function doorCard(d, refresh, single) {
  // Each control is named for its door: a screen reader says which.
  const mode = h('select', { name: 'mode', disabled: !can('operator'), 'aria-label': `Mode of ${d.name}` }, ['normal', 'unlocked', 'locked'].map((m) => h('option', { value: m, selected: m === d.mode }, m)));
  const unlock = roleButton('operator', 'Unlock', async () => {
    if (!await confirmAction(`Unlock ${d.name} now? It opens for one passage.`, { confirm: `Unlock ${d.name}`, title: 'Unlock the door' })) return;
    const r = await call('POST', `/api/v1/doors/${d.door}/unlock`, { reason: 'dashboard' });
    const prev = unlock.parentElement.querySelector('.act-ok');
    if (prev) prev.remove();
    unlock.after(h('span.ok.act-ok', ` released for ${(r.unlock_ms / 1000).toFixed(1)} s`));
  }, { dataset: { action: 'unlock', door: d.door }, class: 'primary', 'aria-label': `Unlock ${d.name}` });
  const setMode = roleButton('operator', 'Set mode', async () => {
    const m = mode.value;
    if (m === d.mode) return;
    if (!await confirmAction(`Put ${d.name} in mode "${m}"? ${m === 'unlocked' ? 'The door stays open for anyone.' : m === 'locked' ? 'The door opens for nobody.' : ''}`, { confirm: `Set ${m}`, title: 'Change the door\'s mode' })) return;
    await call('PUT', `/api/v1/doors/${d.door}/mode`, { mode: m, reason: 'dashboard' });
    await refresh();
  }, { dataset: { action: 'mode', door: d.door }, 'aria-label': `Set mode of ${d.name}` });
  const chart = h('div.latency');
  const windowSel = h('select', { name: 'window', 'aria-label': `Latency window of ${d.name}`, onchange: () => latency(d, windowSel.value, chart) }, [['1h', 'last hour'], ['1d', 'last day']].map(([v, t]) => h('option', { value: v }, t)));
  latency(d, '1h', chart);
  const site = ctx.sites.get(d.site);
  const title = single ? h('h1', d.name) : h('h2', h('a', { href: `#/doors/${d.door}` }, d.name));
  return h('section.card.door', { dataset: { door: d.door }, 'aria-label': d.name },
    h('div.bar', title, badge(`mode ${d.mode}`, `mode-${d.mode}`), driven(d), d.stale ? badge('stale data', 'refused') : null, h('span.muted', `${d.mechanism}${site ? ` · ${site.name}` : ''}`)),
    h('dl',
      d.stale_policy ? [h('dt', 'Stale data'), h('dd.stale-policy', d.max_staleness_s == null ? h('span.muted', `no maximum age (policy ${d.stale_policy})`) : `${d.stale ? 'older than' : 'within'} its maximum of ${fmtAge(d.max_staleness_s)}; policy ${d.stale_policy}`)] : null,
      h('dt', 'Door'), h('dd.position', position(d.position, d.door)),
      d.interlocks && d.interlocks.length ? [h('dt', 'Interlock'), h('dd', interlocks(d.interlocks))] : null,
      h('dt', 'Last tap'), h('dd.last-tap', lastTap(d.last_tap, d.door)),
      h('dt', 'Last command'), h('dd.last-command', lastCommand(d.door)),
      h('dt', 'Readers'), h('dd', d.readers.length ? h('ul.readers', d.readers.map(readerLine)) : h('span.muted', 'none bound'))),
    h('div.actions', unlock, ' ', mode, setMode),
    h('div.bar', h(single ? 'h2' : 'h3', 'Latency'), windowSel),
    chart);
}

async function latency(d, window, out) {
  let l;
  try {
    l = await get(`/api/v1/doors/${d.door}/latency?window=${window}`);
  } catch (e) {
    out.replaceChildren(failure(e));
    return;
  }
  if (!l.taps) {
    out.replaceChildren(h('p.muted', `No taps in the last ${window === '1h' ? 'hour' : 'day'}.`));
    return;
  }
  const ms = (v) => (v == null ? '–' : `${v.toFixed(2)} ms`);
  const stages = l.stages.filter((s) => s.count > 0).sort((a, b) => STAGES.indexOf(a.stage) - STAGES.indexOf(b.stage));
  const max = Math.max(...stages.map((s) => s.p95_ms || 0), 0.001);
  const notes = [];
  if (l.truncated) notes.push(`only the newest ${l.taps} taps were read`);
  if (l.signal_known != null && l.signal_known < l.taps) notes.push(`the signal stage is known for ${l.signal_known} of them (it is kept in memory)`);
  out.replaceChildren(
    h('p', `${l.taps} tap${l.taps === 1 ? '' : 's'} · total p50 ${ms(l.total.p50_ms)}, p95 ${ms(l.total.p95_ms)}`, notes.length ? h('span.muted', ` (${notes.join('; ')})`) : null),
    chartSvg(l.buckets, d.door),
    scroller(`Latency by stage at ${d.name}`, h('table.stage-table', h('caption.sr-only', `Latency by stage at ${d.name}`),
      h('thead', h('tr', ['Stage', 'p50', 'p95', 'taps'].map((c) => h('th', { scope: 'col' }, c)), h('th', { scope: 'col' }, h('span.sr-only', 'p50 and p95 drawn')))),
      h('tbody', stages.map((s) => {
        const p50 = h(`span.seg.st-${s.stage}`);
        p50.style.width = `${(100 * (s.p50_ms || 0)) / max}%`;
        const p95 = h('span.seg.p95');
        p95.style.width = `${(100 * Math.max(0, (s.p95_ms || 0) - (s.p50_ms || 0))) / max}%`;
        return h('tr', { dataset: { stage: s.stage } }, h('td', s.stage), h('td.num', ms(s.p50_ms)), h('td.num', ms(s.p95_ms)), h('td.num', s.count),
          h('td.barcell', h('div.hbar', { title: `${s.stage}: p50 ${ms(s.p50_ms)}, p95 ${ms(s.p95_ms)}`, 'aria-hidden': 'true' }, p50, p95)));
      })))));
}

const SVG = 'http://www.w3.org/2000/svg';
function svg(tag, attrs, ...children) {
  const el = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) el.setAttribute(k, v);
  for (const c of children) el.append(c);
  return el;
}

// p50 and p95 of the total per bucket, as two lines over time.
function chartSvg(buckets, door) {
  const W = 560, H = 160, L = 44, B = 22, T = 8, R = 8;
  const pts = buckets.filter((b) => b.taps > 0 && b.p50_ms != null && b.p95_ms != null);
  const max = Math.max(...pts.map((b) => b.p95_ms), 1);
  const t0 = Date.parse(buckets[0].start);
  const t1 = Math.max(Date.parse(buckets[buckets.length - 1].start), t0 + 1);
  const x = (b) => L + ((Date.parse(b.start) - t0) / (t1 - t0)) * (W - L - R);
  const y = (v) => T + (1 - v / max) * (H - T - B);
  const last = pts[pts.length - 1];
  const g = svg('svg', { viewBox: `0 0 ${W} ${H}`, class: 'chart', role: 'img', 'aria-label': `Latency p50 and p95 per interval: the highest p95 ${max.toFixed(1)} ms${last ? `, the latest p50 ${last.p50_ms.toFixed(1)} ms and p95 ${last.p95_ms.toFixed(1)} ms` : ''}` });
  for (const f of [0, 0.5, 1]) {
    g.append(svg('line', { x1: L, x2: W - R, y1: y(max * f), y2: y(max * f), class: 'grid' }));
    const label = svg('text', { x: L - 4, y: y(max * f) + 4, 'text-anchor': 'end', class: 'axis' });
    label.textContent = `${(max * f).toFixed(max * f >= 10 ? 0 : 1)}`;
    g.append(label);
  }
  const ms = svg('text', { x: 2, y: 12, class: 'axis' });
  ms.textContent = 'ms';
  g.append(ms);
  for (const [b, anchor] of [[buckets[0], 'start'], [buckets[buckets.length - 1], 'end']]) {
    const t = svg('text', { x: x(b), y: H - 6, 'text-anchor': anchor, class: 'axis' });
    t.textContent = fmtTime(b.start, zoneOf(door)).slice(11, 16);
    g.append(t);
  }
  for (const [key, cls] of [['p95_ms', 'p95'], ['p50_ms', 'p50']]) {
    if (pts.length > 1) g.append(svg('polyline', { points: pts.map((b) => `${x(b).toFixed(1)},${y(b[key]).toFixed(1)}`).join(' '), class: `line ${cls}` }));
    for (const b of pts) {
      const c = svg('circle', { cx: x(b).toFixed(1), cy: y(b[key]).toFixed(1), r: 2.5, class: `pt ${cls}` });
      const tip = svg('title');
      tip.textContent = `${fmtTime(b.start, zoneOf(door))}: ${b.taps} taps, ${cls} ${b[key].toFixed(1)} ms`;
      c.append(tip);
      g.append(c);
    }
  }
  return h('figure', g, h('figcaption.legend', h('span', h('i.p50'), 'p50'), h('span', h('i.p95'), 'p95'), h('span.muted', 'total per interval')));
}

// Draws `card` in place of `old`, keeping the focus on the same control
// when it was in the old one.
function replaceCard(old, card) {
  const sel = old.contains(document.activeElement) ? sameControl(document.activeElement) : null;
  old.replaceWith(card);
  const again = sel && card.querySelector(sel);
  if (again) again.focus();
}

// All doors, or (`arg`: its id) one door on its own page.
export async function doorsPage(root, arg) {
  const only = arg != null ? Number(arg) : null;
  const single = only != null;
  const list = h('div.doors');
  const note = h('p.muted');
  const ages = h('div.data-ages');
  root.append(single ? h('div.bar', note, h('a', { href: '#/doors' }, '‹ all doors')) : h('div.bar', h('h1', 'Doors'), note), ages, list);
  const refresh = async () => {
    try {
      const s = await status();
      const items = s.items.filter((d) => only == null || d.door === only);
      note.textContent = s.full ? '' : 'Reader connection state is not available from this service.';
      if (!single) ages.replaceChildren(...[dataAge(s.dataAge)].filter(Boolean));
      const sel = list.contains(document.activeElement) ? sameControl(document.activeElement) : null;
      list.replaceChildren(...items.map((d) => doorCard(d, refresh, single)));
      const again = sel && list.querySelector(sel);
      if (again) again.focus();
      if (!items.length) list.append(single ? h('h1', `No door ${arg}`) : h('p.muted', 'No doors.'));
    } catch (e) {
      list.replaceChildren(failure(e));
    }
  };
  await refresh();
  let timer = null;
  const onEvent = (ev) => {
    const e = ev.detail;
    if (e.door == null && e.kind !== 'admin') return;
    clearTimeout(timer);
    timer = setTimeout(async () => {
      // Only the touched door's card is redrawn, so a choice being made in
      // another card's controls stays.
      try {
        const s = await status();
        for (const d of s.items) {
          if (e.kind === 'admin' || d.door === e.door) {
            const old = list.querySelector(`section.door[data-door="${d.door}"]`);
            if (old) replaceCard(old, doorCard(d, refresh, single));
          }
        }
      } catch (_) { /* the next event tries again */ }
    }, 300);
  };
  live.addEventListener('event', onEvent);
  return () => { clearTimeout(timer); live.removeEventListener('event', onEvent); };
}
