// Cardholders and their credentials: list, search, add, suspend, enroll
// from a certificate, and each cardholder's credentials and recent events.

import { get, call, ApiError } from './api.js';
import { h, can, live, fmtTime, table, form, roleButton, confirmAction, askReason, failure, badge, section, loadNames } from './ui.js';
import { eventTable, eventRow } from './live.js';

// Suspends (asking why) or reinstates a cardholder: only the status and
// reason change, on the version shown. The question comes first.
async function setStatus(holder, status) {
  let reason = null;
  if (status === 'suspended') {
    reason = await askReason(`Suspend ${holder.name}? Their cards stop opening doors at once.`, { confirm: 'Suspend', danger: true, title: 'Suspend the cardholder' });
    if (reason === null) return false;
    reason = reason.trim() || 'suspended from the dashboard';
  } else if (!await confirmAction(`Reinstate ${holder.name}?`, { confirm: 'Reinstate', title: 'Reinstate the cardholder' })) {
    return false;
  }
  await call('PATCH', `/api/v1/cardholders/${holder.id}`, { status, reason }, holder.version);
  return true;
}

function statusButton(c, after) {
  const suspend = c.status === 'active';
  return roleButton('admin', suspend ? 'Suspend' : 'Reinstate', async () => {
    if (await setStatus(c, suspend ? 'suspended' : 'active')) after();
  }, { class: suspend ? 'danger' : null, dataset: { action: suspend ? 'suspend' : 'reinstate', cardholder: c.id }, 'aria-label': `${suspend ? 'Suspend' : 'Reinstate'} ${c.name}` });
}

export async function cardholdersPage(root) {
  const holder = h('div');
  root.append(h('div.bar', h('h1', 'Cardholders')), holder);
  let groups = [];
  let credentials = [];
  let rows = [];
  const search = h('input', { type: 'search', placeholder: 'Search by name', id: 'search', 'aria-label': 'Search cardholders by name', oninput: () => list.update(filter()) });
  const filter = () => {
    const q = search.value.trim().toLowerCase();
    return q ? rows.filter((c) => c.name.toLowerCase().includes(q)) : rows;
  };
  const list = table([
    { label: 'Name', value: (c) => c.name, cell: (c) => h('a', { href: `#/cardholders/${c.id}` }, c.name) },
    { label: 'Status', value: (c) => c.status, cell: (c) => [badge(c.status), c.reason ? h('span.muted', ` ${c.reason}`) : null] },
    { label: 'Groups', value: (c) => groups.filter((g) => g.cardholders.includes(c.id)).map((g) => g.name).join(', ') },
    { label: 'Credentials', value: (c) => credentials.filter((x) => x.cardholder === c.id).length, cls: 'num' },
    { label: 'Valid until', value: (c) => c.valid_until || '', cell: (c) => fmtTime(c.valid_until) },
    { label: '', cell: (c) => statusButton(c, reload) },
  ], [], { sortBy: 0, rowData: (c) => ({ cardholder: c.id }), empty: 'No cardholders.', caption: 'Cardholders' });
  async function reload() {
    try {
      const [c, g, cr] = await Promise.all([get('/api/v1/cardholders'), get('/api/v1/groups'), get('/api/v1/credentials')]);
      rows = c.items;
      groups = g.items;
      credentials = cr.items;
      list.update(filter());
      groupSelect.replaceChildren(h('option', { value: '' }, '(none)'), ...groups.map((x) => h('option', { value: x.id }, x.name)));
    } catch (e) {
      holder.replaceChildren(failure(e));
    }
  }
  const add = form([
    { name: 'name', label: 'Name', required: true, placeholder: 'Ada Lovelace' },
    { name: 'status', label: 'Status', options: [['active', 'active'], ['suspended', 'suspended']] },
    { name: 'reason', label: 'Reason (when suspended)' },
    { name: 'group', label: 'Add to group', options: [['', '(none)']] },
  ], 'Add cardholder', async (v, f) => {
    const body = { name: v.name, status: v.status };
    if (v.reason) body.reason = v.reason;
    const c = await call('POST', '/api/v1/cardholders', body);
    if (v.group) {
      const g = await get(`/api/v1/groups/${v.group}`);
      try {
        await call('PATCH', `/api/v1/groups/${g.id}`, { cardholders: [...g.cardholders, c.id] }, g.version);
      } catch (e) {
        throw new ApiError(e.status, { error: `${c.name} was added, but not to the group: ${e.message}`, field: 'group' });
      }
    }
    f.reset();
    await loadNames();
    await reload();
    location.hash = `#/cardholders/${c.id}`;
  }, { role: 'admin' });
  add.id = 'add-cardholder';
  const groupSelect = add.elements.group;
  holder.append(
    section('All cardholders', h('div.bar', search), list),
    section('Add a cardholder', can('admin') ? null : h('p.muted', 'Adding needs an admin token.'), add),
  );
  await reload();
}

// FASC-N fields as the API decodes them, or the raw hex.
function fascn(c) {
  const f = c.fasc_n_fields;
  if (f) {
    return h('span.fascn', { title: c.fasc_n || '' },
      `agency ${f.agency_code} · system ${f.system_code} · credential ${f.credential_number} · series ${f.cs} · issue ${f.ici} · person ${f.pi} · org ${f.oc}/${f.oi} · association ${f.poa}`);
  }
  if (!c.fasc_n) return h('span.muted', 'none');
  return [h('code.wrap', c.fasc_n), c.fasc_n_error ? h('div.muted', c.fasc_n_error) : null];
}

// Suspends, reinstates or revokes a credential (asking first): only its
// state changes, on the version shown.
async function setCredential(id, state, version) {
  let reason = null;
  if (state !== 'active') {
    const what = state === 'revoked' ? 'Revoke this credential? This is permanent.' : 'Suspend this credential?';
    reason = await askReason(what, { confirm: state === 'revoked' ? 'Revoke' : 'Suspend', danger: true, title: state === 'revoked' ? 'Revoke the credential' : 'Suspend the credential' });
    if (reason === null) return false;
    reason = reason.trim() || `${state} from the dashboard`;
  } else if (!await confirmAction('Reinstate this credential?', { confirm: 'Reinstate', title: 'Reinstate the credential' })) {
    return false;
  }
  const at = state === 'revoked' ? new Date().toISOString() : null;
  await call('PATCH', `/api/v1/credentials/${id}`, { state, reason, at }, version);
  return true;
}

async function credentialsOf(id) {
  try {
    return (await get(`/api/v1/cardholders/${id}/credentials`)).items;
  } catch (e) {
    if (!(e instanceof ApiError && e.missing)) throw e;
    return (await get('/api/v1/credentials')).items.filter((c) => c.cardholder === id);
  }
}

export async function cardholderPage(root, arg) {
  const id = Number(arg);
  let c;
  try {
    c = await get(`/api/v1/cardholders/${id}`);
  } catch (e) {
    root.append(h('h1', 'Cardholder'), failure(e));
    return;
  }
  const creds = h('div');
  const drawCreds = async () => {
    try {
      const items = await credentialsOf(id);
      creds.replaceChildren(table([
        { label: 'Id', value: (x) => x.id, cls: 'num' },
        { label: 'State', value: (x) => x.state, cell: (x) => [badge(x.state), x.reason ? h('span.muted', ` ${x.reason}`) : null] },
        { label: 'Card UUID', value: (x) => x.card_uuid || '', cell: (x) => x.card_uuid ? h('code', x.card_uuid) : h('span.muted', 'none') },
        { label: 'FASC-N', value: (x) => x.fasc_n || '', cell: fascn },
        { label: 'Assurance', value: (x) => x.assurance || '', cell: (x) => (x.assurance ? [x.assurance, x.assurance_level ? h('span.muted', ` · ${x.assurance_level}`) : null] : h('span.muted', 'n/a')) },
        { label: 'Expires', value: (x) => x.expires_at || '', cell: (x) => [fmtTime(x.expires_at), x.expired ? [' ', badge('expired', 'refused')] : null] },
        { label: 'Enrolled', value: (x) => x.enrolled_at || '', cell: (x) => [fmtTime(x.enrolled_at), x.enrolled_by ? h('span.muted', ` by ${x.enrolled_by}`) : null] },
        { label: '', cell: (x) => x.state === 'revoked' ? '' : [
          x.state === 'active'
            ? roleButton('admin', 'Suspend', async () => { if (await setCredential(x.id, 'suspended', x.version)) drawCreds(); }, { class: 'danger', 'aria-label': `Suspend credential ${x.id}` })
            : roleButton('admin', 'Reinstate', async () => { if (await setCredential(x.id, 'active', x.version)) drawCreds(); }, { 'aria-label': `Reinstate credential ${x.id}` }),
          ' ',
          roleButton('admin', 'Revoke', async () => { if (await setCredential(x.id, 'revoked', x.version)) drawCreds(); }, { class: 'danger', 'aria-label': `Revoke credential ${x.id}` }),
        ] },
      ], items, { rowData: (x) => ({ credential: x.id }), empty: 'No credentials: enroll one below.', caption: `Credentials of ${c.name}` }));
    } catch (e) {
      creds.replaceChildren(failure(e));
    }
  };
  const enroll = form([
    { name: 'file', label: 'Card authentication certificate (PEM file)', type: 'file', accept: '.pem,.crt,.cer,application/x-pem-file' },
    { name: 'certificate', label: 'or paste the PEM', type: 'textarea', placeholder: '-----BEGIN CERTIFICATE-----' },
  ], 'Enroll', async (v, f) => {
    const pem = v.file ? await v.file.text() : v.certificate;
    if (!pem) throw new ApiError(422, { error: 'choose a certificate file or paste its PEM', field: 'certificate' });
    await call('POST', '/api/v1/credentials/enroll', { cardholder: id, certificate: pem });
    f.reset();
    await drawCreds();
  }, { role: 'admin' });
  enroll.id = 'enroll';
  const { table: events, body } = eventTable([], `Recent events of ${c.name}, newest first`);
  try {
    const page = await get(`/api/v1/events?cardholder=${id}&direction=backward&limit=25`);
    body.replaceChildren(...page.events.map(eventRow));
  } catch (e) {
    body.replaceChildren(h('tr', h('td', { colSpan: 6 }, failure(e))));
  }
  root.append(...[
    h('div.bar', h('h1', c.name), badge(c.status), c.reason ? h('span.muted', c.reason) : null,
      statusButton(c, () => window.dispatchEvent(new HashChangeEvent('hashchange'))),
      h('a.link', { href: '#/cardholders' }, '‹ all cardholders')),
    c.valid_from || c.valid_until ? h('p.muted', `Valid ${c.valid_from ? `from ${fmtTime(c.valid_from)} ` : ''}${c.valid_until ? `until ${fmtTime(c.valid_until)}` : ''}`) : null,
    section('Credentials', creds),
    section('Enroll a card', can('admin') ? h('p.muted', 'The card authentication certificate (slot 9E) is validated as at a reader; its card UUID and FASC-N come from its subjectAltName.') : h('p.muted', 'Enrolling needs an admin token.'), enroll),
    section('Recent events', events),
  ].filter(Boolean));
  await drawCreds();
  const onEvent = (ev) => {
    const e = ev.detail;
    if (e.cardholder !== id) return;
    body.prepend(eventRow(e));
    if (e.kind === 'admin') drawCreds();
  };
  live.addEventListener('event', onEvent);
  return () => live.removeEventListener('event', onEvent);
}
