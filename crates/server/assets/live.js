// Live: every event as it is committed, newest first; a tap shows its
// stages as a bar.

import { h, recent, live, fmtTime, zoneOf, doorName, holderName, stageBar, stageLegend, badge, scroller } from './ui.js';

const SHOW = 200;

// One row of the live list (also used by the cardholder and door pages).
export function eventRow(e) {
  const tap = e.kind === 'tap';
  const d = e.data || {};
  const row = h('tr.event', { dataset: { id: e.id, kind: e.kind, result: e.result || '' } });
  if (e.result === 'refused') row.classList.add('refused');
  const who = e.cardholder != null ? holderName(e.cardholder) : tap && d.card ? h('span.muted', { title: d.card.subject || '' }, 'no cardholder') : e.actor ? h('span.muted', `token ${e.actor}`) : '';
  const mech = tap ? [d.mechanism || '', d.assurance ? h('span.muted', ` · ${d.assurance}`) : null, d.path === 'fast' ? h('span.muted', ' · fast path') : null] : '';
  const result = tap
    ? [badge(e.result), ' ', e.result === 'refused' ? h('span.reason', e.reason || e.code || '') : h('span.muted', e.reason && e.reason !== 'granted' ? e.reason : '')]
    : [badge(e.kind === 'admin' ? 'change' : 'command', e.kind), ' ', h('span.muted', e.code || ''), e.reason ? h('span.muted', ` — ${e.reason}`) : null];
  row.append(
    h('td.time', fmtTime(e.time, zoneOf(e.door))),
    h('td', doorName(e.door)),
    h('td', who),
    h('td', mech),
    h('td', result),
    h('td.stagecell', tap ? stageBar(d.stages) : ''),
  );
  return row;
}

// `caption`: what the table lists (read out, not shown). `table` is the
// table in its sideways-scrolling box.
export function eventTable(events, caption = 'Events, newest first') {
  const body = h('tbody', events.map(eventRow));
  const t = h('table.events', h('caption.sr-only', caption), h('thead', h('tr', ['Time', 'Door', 'Cardholder', 'Mechanism', 'Result', 'Stages'].map((c) => h('th', { scope: 'col' }, c)))), body);
  return { table: scroller(caption, t), body };
}

// One event in a sentence, as it is announced.
function spoken(e) {
  const where = e.door != null ? ` at ${doorName(e.door)}` : '';
  const who = e.cardholder != null ? `, ${holderName(e.cardholder)}` : '';
  if (e.kind === 'tap') return `Tap${where}: ${e.result || ''}${who}${e.result === 'refused' && (e.reason || e.code) ? `, ${e.reason || e.code}` : ''}`;
  return `${e.kind === 'admin' ? 'Change' : e.kind === 'door-command' ? 'Door command' : e.kind === 'door' ? 'Door' : e.kind === 'alarm' ? `Alarm ${(e.data && e.data.state) || ''}` : e.kind}${where}: ${e.code || ''}${e.reason ? `, ${e.reason}` : ''}`;
}

export function livePage(root) {
  let onlyTaps = false;
  let paused = false;
  const { table, body } = eventTable([], 'Live events, newest first');
  const count = h('span.muted');
  // New events are read out politely (never moving the focus), unless
  // paused.
  const said = h('p.sr-only', { id: 'live-announce', 'aria-live': 'polite', 'aria-atomic': 'true' });
  const draw = () => {
    const rows = recent.filter((e) => !onlyTaps || e.kind === 'tap').slice(0, SHOW);
    body.replaceChildren(...rows.map(eventRow));
    if (!rows.length) body.append(h('tr.empty', h('td.muted', { colSpan: 6 }, 'No events yet: tap a card at a door.')));
    count.textContent = `${rows.length} shown`;
  };
  const taps = h('input', { type: 'checkbox', id: 'only-taps', onchange: (ev) => { onlyTaps = ev.target.checked; draw(); } });
  const pause = h('input', { type: 'checkbox', id: 'pause', onchange: (ev) => { paused = ev.target.checked; said.textContent = paused ? 'Live updates paused.' : ''; if (!paused) draw(); } });
  root.append(
    h('div.bar', h('h1', 'Live'), h('label', taps, ' taps only'), h('label', pause, ' pause live updates'), count),
    said,
    stageLegend(),
    table,
  );
  draw();
  const onEvent = (ev) => {
    const e = ev.detail;
    if (paused || (onlyTaps && e.kind !== 'tap')) return;
    const empty = body.querySelector('tr.empty');
    if (empty) empty.remove();
    const row = eventRow(e);
    row.classList.add('new');
    body.prepend(row);
    while (body.children.length > SHOW) body.lastChild.remove();
    count.textContent = `${body.children.length} shown`;
    said.textContent = spoken(e);
  };
  // New names (a cardholder added, a door renamed): drawn again.
  const onNames = () => { if (!paused) draw(); };
  live.addEventListener('event', onEvent);
  live.addEventListener('names', onNames);
  return () => {
    live.removeEventListener('event', onEvent);
    live.removeEventListener('names', onNames);
  };
}
