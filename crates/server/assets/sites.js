// Sites (at a central): each site's link, how far behind the central's
// changes it is, its events not yet uploaded, how old its revocation data
// and access changes are, and its clock against the central's. Redrawn
// when a site-related event arrives on the live stream, and every few
// seconds (ages, lag and backlog change without an event).

import { get } from './api.js';
import { h, live, table, fmtTime, fmtAge, badge, section, failure } from './ui.js';

const REFRESH_MS = 5000;

const LINK = {
  up: ['up', 'granted'],
  silent: ['silent', 'mode-unlocked'],
  down: ['down', 'refused'],
  never: ['never linked', ''],
};

function linkCell(s) {
  const [text, kind] = LINK[s.link.state] || [s.link.state, ''];
  return h('span', badge(text, kind),
    s.link.since ? h('span.muted', ` since ${fmtTime(s.link.since)}`) : null,
    s.link.central ? h('div.muted.wrap', `via ${s.link.central}`) : null);
}

function ageCell(a) {
  if (!a || a.state === 'unknown') return h('span.muted', 'not reported');
  if (a.state === 'not-applicable') return h('span.muted', 'n/a');
  if (a.state === 'never') return h('span.refused-text', 'never confirmed');
  return h('span', { title: a.as_of ? `as of ${fmtTime(a.as_of)}` : '' }, fmtAge(a.age_s));
}

function lagCell(c) {
  if (c.pending == null) return h('span.muted', 'n/a');
  if (!c.pending) return h('span', '0', h('span.muted', c.applied != null ? ` (at ${c.applied})` : ''));
  return h('span.refused-text', `${c.pending} pending`, h('span.muted', ` · ${fmtAge(c.behind_s)} behind`));
}

function backlogCell(u) {
  if (u.backlog == null) return h('span.muted', 'not reported');
  const text = u.backlog ? h('span.refused-text', `${u.backlog} events`) : '0';
  return h('span', text, u.last_batch ? h('span.muted', ` · last batch ${fmtTime(u.last_batch)}`) : null);
}

function skewCell(s) {
  if (s.clock_skew_s == null) return h('span.muted', 'n/a');
  const v = s.clock_skew_s;
  return `${v >= 0 ? '+' : ''}${v.toFixed(Math.abs(v) < 10 ? 2 : 0)} s`;
}

export async function sitesPage(root) {
  const note = h('p.muted');
  root.append(h('div.bar', h('h1', 'Sites'), note));
  const list = table([
    { label: 'Site', value: (s) => s.name, cell: (s) => h('strong', s.name) },
    { label: 'Link', value: (s) => s.link.state, cell: linkCell },
    { label: 'Last seen', value: (s) => s.link.last_seen, cell: (s) => (s.link.last_seen ? fmtTime(s.link.last_seen) : h('span.muted', 'never')) },
    { label: 'Change lag', value: (s) => s.changes.pending, cell: (s) => lagCell(s.changes), cls: 'num' },
    { label: 'Upload backlog', value: (s) => s.upload.backlog, cell: (s) => backlogCell(s.upload), cls: 'num' },
    { label: 'Revocation data', value: (s) => s.data_age.revocation.age_s, cell: (s) => ageCell(s.data_age.revocation), cls: 'num' },
    { label: 'Access changes', value: (s) => s.data_age.changes.age_s, cell: (s) => ageCell(s.data_age.changes), cls: 'num' },
    { label: 'Clock skew', value: (s) => s.clock_skew_s, cell: skewCell, cls: 'num' },
  ], [], {
    pageSize: 100, cls: 'sites', caption: 'Sites and their links', empty: 'No sites.',
    rowClass: (s) => (s.link.state === 'up' ? '' : 'refused'),
    rowData: (s) => ({ site: s.name, link: s.link.state }),
  });
  const body = h('div');
  root.append(section('Sites', body));

  let shown = false;
  async function draw() {
    let st;
    try {
      st = await get('/api/v1/sites/status');
    } catch (e) {
      body.replaceChildren(failure(e));
      shown = false;
      return;
    }
    if (!st.central) {
      body.replaceChildren(h('p.muted.not-central', 'This service is not a central: sites are watched at the central ([sites]).'));
      shown = false;
      return;
    }
    if (!shown) body.replaceChildren(list);
    shown = true;
    list.update(st.items);
    const up = st.items.filter((s) => s.link.up).length;
    note.textContent = `${up} of ${st.items.length} linked · feed at ${st.feed_head} · as of ${fmtTime(st.at)} (${st.instance})`;
  }
  await draw();
  const timer = setInterval(draw, REFRESH_MS);
  let soon = null;
  const onEvent = (ev) => {
    const e = ev.detail;
    if (e.kind !== 'admin' || !/^(sync|site)\./.test(e.code || '')) return;
    clearTimeout(soon);
    soon = setTimeout(draw, 200);
  };
  live.addEventListener('event', onEvent);
  return () => { clearInterval(timer); clearTimeout(soon); live.removeEventListener('event', onEvent); };
}
