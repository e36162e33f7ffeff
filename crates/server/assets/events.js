// Events: the log with filters, paging with the API's cursor, CSV export.

import { get, download, ApiError } from './api.js';
import { h, ctx, table, form, fmtTime, zoneOf, doorName, holderName, badge, stageBar, section, failure } from './ui.js';

const LIMIT = 50;

export async function eventsPage(root) {
  let query = new URLSearchParams();
  let cursors = [null]; // the cursor of each page shown so far
  const status = h('span.muted');
  const older = h('button', { type: 'button', disabled: true, onclick: () => load(cursors.length) }, 'Older ›');
  const newer = h('button', { type: 'button', disabled: true, onclick: () => load(cursors.length - 2) }, '‹ Newer');
  const csvNote = h('span', { id: 'csv-note', role: 'status' });
  const csv = h('button', { type: 'button', id: 'csv' }, 'Export CSV');
  const list = table([
    { label: 'Id', value: (e) => e.id, cls: 'num' },
    { label: 'Time', value: (e) => e.time, cell: (e) => fmtTime(e.time, zoneOf(e.door)) },
    { label: 'Kind', value: (e) => e.kind },
    { label: 'Door', value: (e) => doorName(e.door) },
    { label: 'Cardholder', value: (e) => holderName(e.cardholder), cell: (e) => (e.cardholder != null ? h('a', { href: `#/cardholders/${e.cardholder}` }, holderName(e.cardholder)) : '') },
    { label: 'Result', value: (e) => e.result || e.code, cell: (e) => (e.result ? badge(e.result) : h('span.muted', e.code || '')) },
    { label: 'Reason', value: (e) => e.reason || '', cell: (e) => [e.reason || '', e.actor ? h('span.muted', ` (${e.actor})`) : null] },
    { label: 'Stages', cell: (e) => (e.kind === 'tap' && e.data ? stageBar(e.data.stages) : '') },
  ], [], { pageSize: LIMIT, rowClass: (e) => (e.result === 'refused' ? 'refused' : ''), rowData: (e) => ({ id: e.id }), empty: 'No events match.', cls: 'events', caption: 'Event log, newest first' });

  async function load(n) {
    const q = new URLSearchParams(query);
    q.set('direction', 'backward');
    q.set('limit', LIMIT);
    if (cursors[n] != null) q.set('cursor', cursors[n]);
    const page = await get(`/api/v1/events?${q}`);
    cursors = cursors.slice(0, n + 1);
    if (page.next != null) cursors.push(page.next);
    list.update(page.events);
    root.dataset.query = String(query);
    status.textContent = `page ${n + 1}${page.events.length ? ` · events ${page.events[page.events.length - 1].id}–${page.events[0].id}` : ''}`;
    older.disabled = page.next == null;
    newer.disabled = n === 0;
  }

  const doors = [['', 'any door'], ...[...ctx.doors.values()].map((d) => [String(d.id), d.name])];
  const holders = [['', 'anyone'], ...[...ctx.cardholders.values()].sort((a, b) => a.name.localeCompare(b.name)).map((c) => [String(c.id), c.name])];
  const filters = form([
    { name: 'door', label: 'Door', options: doors },
    { name: 'cardholder', label: 'Cardholder', options: holders },
    { name: 'kind', label: 'Kind', options: [['', 'any'], ['tap', 'tap'], ['admin', 'change'], ['door-command', 'door command'], ['reader', 'reader'], ['door', 'door input'], ['alarm', 'alarm']] },
    { name: 'result', label: 'Result', options: [['', 'any'], ['granted', 'granted'], ['refused', 'refused']] },
    // At a central, the site that uploaded the event.
    ...(ctx.sites.size > 1 ? [{ name: 'site', label: 'Site', options: [['', 'any'], ...[...ctx.sites.values()].map((x) => [x.name, x.name])] }] : []),
    { name: 'since', label: 'Since (your clock)', type: 'datetime-local' },
    { name: 'until', label: 'Until (your clock)', type: 'datetime-local' },
  ], 'Apply', async (v) => {
    const q = new URLSearchParams();
    for (const [k, val] of Object.entries(v)) {
      if (!val) continue;
      if (k === 'since' || k === 'until') {
        const t = new Date(val);
        if (Number.isNaN(t.getTime())) throw new ApiError(400, { error: `not a time: ${val}`, field: k });
        q.set(k, t.toISOString());
      } else q.set(k, val);
    }
    const before = query;
    query = q;
    cursors = [null];
    try {
      await load(0);
    } catch (e) {
      query = before;
      throw e;
    }
  });
  filters.id = 'event-filters';
  filters.classList.add('inline');
  csv.addEventListener('click', async () => {
    csvNote.textContent = '';
    csvNote.className = '';
    csv.disabled = true;
    try {
      const blob = await download(`/api/v1/events.csv?${query}`, 'pivgate-events.csv');
      csvNote.textContent = `saved pivgate-events.csv (${blob.size.toLocaleString()} bytes)`;
      csvNote.className = 'ok';
    } catch (e) {
      csvNote.textContent = e instanceof ApiError && e.missing ? 'CSV export is not available from this service.' : e.message;
      csvNote.className = 'error';
    } finally {
      csv.disabled = false;
    }
  });
  status.setAttribute('role', 'status');
  root.append(h('div.bar', h('h1', 'Events')), section('Filters', filters),
    h('div.bar', newer, status, older, h('span.spacer'), csv, csvNote), list);
  try {
    await load(0);
  } catch (e) {
    root.append(failure(e));
  }
}
