// Alarms: those not cleared (forced, held open, tamper, line faults),
// unacknowledged ones first and marked, with an acknowledgement form for
// operators, then the latest alarm events. The
// page redraws when an alarm event arrives on the live stream.

import { get, call } from './api.js';
import { h, live, table, form, fmtTime, zoneOf, doorName, badge, section, failure } from './ui.js';

const KINDS = {
  'door-forced': 'door forced open',
  'door-held-open': 'door held open',
  tamper: 'tamper',
  'input-cut': 'input line cut',
  'input-shorted': 'input line shorted',
};

function ackForm(a, redraw) {
  return form([{ name: 'note', label: `Note for alarm ${a.id}`, required: true, placeholder: 'what was found or done' }],
    'Acknowledge', async (v) => {
      await call('POST', `/api/v1/alarms/${a.id}/ack`, { note: v.note });
      await redraw();
    }, { role: 'operator' });
}

export async function alarmsPage(root) {
  root.append(h('div.bar', h('h1', 'Alarms')));
  const open = h('div');
  const history = table([
    { label: 'Id', value: (e) => e.id, cls: 'num' },
    { label: 'Time', value: (e) => e.time, cell: (e) => fmtTime(e.time, zoneOf(e.door)) },
    { label: 'Door', value: (e) => doorName(e.door) },
    { label: 'Alarm', value: (e) => KINDS[e.code] || e.code },
    { label: 'State', value: (e) => (e.data && e.data.state) || '' },
    { label: 'By', value: (e) => e.actor || '', cell: (e) => [e.actor || '', e.data && e.data.note ? h('span.muted', ` — ${e.data.note}`) : null] },
  ], [], { empty: 'No alarm yet.', cls: 'alarm-history', caption: 'Alarm events, newest first', rowData: (e) => ({ id: e.id }) });
  root.append(section('Open alarms', open), section('History', history));

  async function draw() {
    let list;
    try {
      list = await get('/api/v1/alarms');
    } catch (e) {
      open.replaceChildren(failure(e));
      return;
    }
    history.update(list.history);
    // Those nobody acknowledged first (active, then returned), oldest
    // first within each.
    const rank = { active: 0, returned: 1, acknowledged: 2 };
    const sorted = [...list.active].sort((x, y) => (rank[x.state] ?? 3) - (rank[y.state] ?? 3) || x.id - y.id);
    open.replaceChildren(sorted.length
      ? h('ul.alarms', sorted.map((a) => h(`li.alarm.alarm-${a.state}`, { dataset: { alarm: a.id, state: a.state } },
        h('p', badge(a.state, a.state === 'active' ? 'refused' : 'mode-unlocked'), ' ', h('strong', KINDS[a.kind] || a.kind),
          ` at ${doorName(a.door)}`, a.input ? ` (${a.input} input)` : '', h('span.muted', ` since ${fmtTime(a.raised, zoneOf(a.door))}`)),
        a.state === 'acknowledged' ? null : ackForm(a, draw))))
      : h('p.muted.no-alarms', 'No open alarm.'));
  }
  await draw();
  const onEvent = (ev) => {
    if (ev.detail.kind === 'alarm') draw();
  };
  live.addEventListener('event', onEvent);
  return () => live.removeEventListener('event', onEvent);
}
