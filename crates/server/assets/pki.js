// PKI health: trust anchors, each CRL's age and next update, background
// re-validation, the validation caches.

import { get } from './api.js';
import { h, table, fmtTime, fmtAge, failure, section, badge } from './ui.js';

function ratio(c) {
  if (!c) return h('span.muted', 'n/a');
  const total = (c.hits || 0) + (c.misses || 0);
  const r = c.ratio != null ? c.ratio : total ? c.hits / total : null;
  const meter = h('meter', { min: 0, max: 1, value: r || 0, 'aria-label': 'hit ratio' });
  return h('span', meter, ` ${r == null ? 'no lookups' : `${(100 * r).toFixed(1)} %`} `, h('span.muted', `(${c.hits || 0} hits, ${c.misses || 0} misses)`));
}

// An object's scalar fields as a definition list.
function facts(o) {
  if (!o || typeof o !== 'object') return h('span.muted', 'n/a');
  return h('dl.facts', Object.entries(o).flatMap(([k, v]) => [
    h('dt', k.replace(/_/g, ' ')),
    h('dd', v === null ? h('span.muted', 'none') : typeof v === 'object' ? JSON.stringify(v) : /(_at|time|last_run|update)$/.test(k) && typeof v === 'string' ? fmtTime(v) : String(v)),
  ]));
}

// Seconds since the epoch, as a time.
function epoch(s) {
  return s == null ? h('span.muted', 'never') : fmtTime(new Date(s * 1000).toISOString());
}

export async function pkiPage(root) {
  root.append(h('div.bar', h('h1', 'PKI health')));
  let p;
  try {
    p = await get('/api/v1/pki/health');
  } catch (e) {
    root.append(failure(e));
    return;
  }
  const count = (x) => (Array.isArray(x) ? x.length : x);
  root.append(
    section('Trust', h('p', h('strong', String(count(p.anchors) ?? 0)), ' trust anchors · ', h('strong', String(count(p.intermediates) ?? 0)), ' intermediate certificates loaded'),
      Array.isArray(p.anchors) ? h('ul', p.anchors.map((a) => h('li', typeof a === 'string' ? a : a.subject || JSON.stringify(a)))) : null),
    section('CRLs', table([
      { label: 'Issuer', value: (c) => c.issuer },
      { label: 'Kind', value: (c) => c.kind || '' },
      { label: 'Number', value: (c) => c.number, cell: (c) => (c.number ? h('code', c.number) : h('span.muted', 'none')), cls: 'num' },
      { label: 'This update', value: (c) => c.this_update, cell: (c) => fmtTime(c.this_update) },
      { label: 'Age', value: (c) => c.age_s, cell: (c) => fmtAge(c.age_s), cls: 'num' },
      { label: 'Next update', value: (c) => c.next_update, cell: (c) => fmtTime(c.next_update) },
      { label: 'State', value: (c) => (c.stale ? 1 : 0) + (c.usable === false ? 1 : 0), cell: (c) => (!c.stale ? badge('fresh', 'granted') : c.usable === false ? badge('stale', 'refused') : [badge('stale', 'mode-unlocked'), h('span.muted', ' in grace')]) },
      { label: 'Source', value: (c) => c.source, cell: (c) => [c.source || '', c.url ? h('div.muted.wrap', c.url) : null] },
    ], p.crls || [], { rowClass: (c) => (c.stale ? 'refused' : ''), empty: 'No CRLs loaded.', caption: 'CRLs held' })),
    section('CRL downloads', p.downloads === false ? h('p.muted', 'CRLs are not downloaded ([trust.fetch] is not configured): only the configured files are used.') : table([
      { label: 'Distribution point', value: (x) => x.url, cell: (x) => h('span.wrap', x.url) },
      { label: 'Issuer', value: (x) => x.issuer || '' },
      { label: 'Next update', value: (x) => x.next_update, cell: (x) => epoch(x.next_update) },
      { label: 'Downloaded', value: (x) => x.fetched_at, cell: (x) => epoch(x.fetched_at) },
      { label: 'Next attempt', value: (x) => x.next_attempt, cell: (x) => epoch(x.next_attempt) },
      { label: 'Error', value: (x) => x.error || '', cell: (x) => (x.error ? h('span.error', x.error) : '') },
    ], p.distribution_points || [], { rowClass: (x) => (x.error ? 'refused' : ''), empty: 'No distribution points.', caption: 'CRL distribution points' })),
    section('Re-validation', facts(p.revalidation)),
    section('Validation cache', h('dl.facts',
      h('dt', 'certificates'), h('dd', ratio(p.cache && p.cache.certificates)),
      h('dt', 'keys'), h('dd', ratio(p.cache && p.cache.keys)))),
    section('Policy', facts(p.policy)),
  );
}
