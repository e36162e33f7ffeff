// Access: groups (cardholders × doors under a schedule), schedules drawn
// as week grids, and holidays.

import { get, call } from './api.js';
import { h, ctx, can, table, form, roleButton, confirmAction, failure, section, doorName, holderName, loadNames } from './ui.js';

const DAYS = ['mon', 'tue', 'wed', 'thu', 'fri', 'sat', 'sun'];

// `mon-fri`, `sat,sun`, `fri-mon`, `weekdays`, `weekend`, `daily` → day
// indexes, Monday 0.
export function parseDays(text) {
  const out = new Set();
  for (let part of text.split(',')) {
    part = part.trim().toLowerCase();
    if (part === 'daily' || part === 'all') DAYS.forEach((_, i) => out.add(i));
    else if (part === 'weekdays') [0, 1, 2, 3, 4].forEach((i) => out.add(i));
    else if (part === 'weekend') [5, 6].forEach((i) => out.add(i));
    else if (part.includes('-')) {
      const [a, b] = part.split('-').map((d) => DAYS.indexOf(d.slice(0, 3)));
      if (a < 0 || b < 0) continue;
      for (let i = a; ; i = (i + 1) % 7) {
        out.add(i);
        if (i === b) break;
      }
    } else if (DAYS.indexOf(part.slice(0, 3)) >= 0) out.add(DAYS.indexOf(part.slice(0, 3)));
  }
  return [...out];
}

function minutes(clock) {
  const [hh, mm, ss] = clock.split(':').map(Number);
  return hh * 60 + (mm || 0) + (ss || 0) / 60;
}

// `HH:MM-HH:MM` → [[start, end]] in minutes of the day, split at midnight
// when it crosses it (the second part on the next day: `next`).
function spans(range) {
  const [a, b] = range.split('-').map(minutes);
  if (b > a) return [{ start: a, end: b, next: false }];
  return [{ start: a, end: 1440, next: false }, { start: 0, end: b, next: true }].filter((s) => s.end > s.start);
}

// The week of a schedule: one row a day, open times filled; holiday
// windows on their own row.
export function weekGrid(s) {
  const rows = DAYS.map(() => []);
  for (const w of s.windows) {
    const i = w.trim().lastIndexOf(' ');
    const days = parseDays(w.slice(0, i));
    for (const d of days) {
      for (const sp of spans(w.slice(i + 1))) rows[sp.next ? (d + 1) % 7 : d].push({ ...sp, label: w });
    }
  }
  const holiday = (s.holiday_windows || []).flatMap((r) => spans(r).map((sp) => ({ ...sp, start: sp.next ? sp.start : sp.start, label: `holidays ${r}` })));
  const track = (items) => h('div.track', items.map((it) => {
    const el = h('span.open', { title: it.label });
    el.style.left = `${(100 * it.start) / 1440}%`;
    el.style.width = `${(100 * (it.end - it.start)) / 1440}%`;
    return el;
  }));
  const hours = h('div.hours', [0, 6, 12, 18, 24].map((hr) => {
    const t = h('span', `${String(hr).padStart(2, '0')}:00`);
    t.style.left = `${(100 * hr) / 24}%`;
    return t;
  }));
  return h('div.week', { dataset: { schedule: s.id } },
    DAYS.map((d, i) => h('div.day', h('span.dname', d), track(rows[i]))),
    h('div.day.holiday', h('span.dname', 'hol'), track(holiday)),
    h('div.day', h('span.dname', ''), hours));
}

export async function accessPage(root) {
  root.append(h('div.bar', h('h1', 'Access')));
  let groups, schedules, holidays;
  try {
    [groups, schedules, holidays] = (await Promise.all([get('/api/v1/groups'), get('/api/v1/schedules'), get('/api/v1/holidays')])).map((x) => x.items);
  } catch (e) {
    root.append(failure(e));
    return;
  }
  const scheduleName = (id) => (schedules.find((s) => s.id === id) || { name: `schedule ${id}` }).name;
  root.append(section('Groups', table([
    { label: 'Group', value: (g) => g.name },
    { label: 'Schedule', value: (g) => scheduleName(g.schedule) },
    { label: 'Doors', value: (g) => g.doors.map(doorName).join(', ') },
    { label: 'Cardholders', value: (g) => g.cardholders.length, cell: (g) => h('span', { title: g.cardholders.map(holderName).join(', ') }, `${g.cardholders.length}: `, h('span.muted', g.cardholders.slice(0, 5).map(holderName).join(', ') + (g.cardholders.length > 5 ? ', …' : ''))) },
  ], groups, { sortBy: 0, empty: 'No groups.', caption: 'Groups' })));

  root.append(section('Schedules', h('p.muted', 'Open times in each site\'s time zone; a window that crosses midnight continues on the next day.'),
    h('div.schedules', schedules.map((s) => h('div.schedule', h('h3', s.name), h('p.muted', s.windows.join(' · ') || 'never open'), weekGrid(s))))));

  const siteName = (id) => (id == null ? 'every site' : (ctx.sites.get(id) || { name: `site ${id}` }).name);
  const reload = () => window.dispatchEvent(new HashChangeEvent('hashchange'));
  const add = form([
    { name: 'date', label: 'Date', type: 'date', required: true },
    { name: 'name', label: 'Name', required: true, placeholder: 'New Year' },
    { name: 'site', label: 'Site', options: [['', 'every site'], ...[...ctx.sites.values()].map((s) => [String(s.id), s.name])] },
  ], 'Add holiday', async (v) => {
    const body = { date: v.date, name: v.name };
    if (v.site) body.site = Number(v.site);
    await call('POST', '/api/v1/holidays', body);
    await loadNames();
    reload();
  }, { role: 'admin' });
  add.id = 'add-holiday';
  root.append(section('Holidays', table([
    { label: 'Date', value: (x) => x.date },
    { label: 'Name', value: (x) => x.name },
    { label: 'Site', value: (x) => siteName(x.site) },
    { label: '', cell: (x) => roleButton('admin', 'Delete', async () => {
      // Asked before anything is sent.
      if (!await confirmAction(`Delete the holiday ${x.name} (${x.date})? Schedules use their normal windows that day.`, { confirm: 'Delete', danger: true, title: 'Delete the holiday' })) return;
      await call('DELETE', `/api/v1/holidays/${x.id}`, undefined, x.version);
      reload();
    }, { class: 'danger', dataset: { action: 'delete-holiday' }, 'aria-label': `Delete the holiday ${x.name} (${x.date})` }) },
  ], holidays, { sortBy: 0, empty: 'No holidays.', cls: 'holidays', rowData: (x) => ({ holiday: x.id }), caption: 'Holidays' }), can('admin') ? null : h('p.muted', 'Changes need an admin token.'), add));
}
