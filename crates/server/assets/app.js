// The dashboard: sign-in, navigation between pages, and the one live event
// stream every page listens to.

import { get, setToken, token, ApiError, EventStream } from './api.js';
import { h, ctx, loadNames, received, recent, live, notice } from './ui.js';
import { livePage } from './live.js';
import { doorsPage } from './doors.js';
import { cardholdersPage, cardholderPage } from './people.js';
import { accessPage } from './access.js';
import { pkiPage } from './pki.js';
import { eventsPage } from './events.js';
import { alarmsPage } from './alarms.js';
import { sitesPage } from './sites.js';

const pages = {
  live: livePage,
  doors: doorsPage,
  cardholders: cardholdersPage,
  cardholder: cardholderPage,
  access: accessPage,
  pki: pkiPage,
  events: eventsPage,
  alarms: alarmsPage,
  sites: sitesPage,
};

let stream = null;
let leave = null;

const $ = (id) => document.getElementById(id);

function showSignIn(message) {
  if (stream) stream.stop();
  stream = null;
  if (leave) leave();
  leave = null;
  $('nav').hidden = true;
  $('who').hidden = true;
  const main = $('main');
  const section = signInSection();
  main.replaceChildren(section);
  document.title = 'Sign in · pivgate';
  const err = section.querySelector('.field-error');
  err.textContent = message || '';
  section.querySelector('input').focus();
}

let signIn = null;
function signInSection() {
  if (!signIn) {
    signIn = $('signin');
    const f = $('signin-form');
    f.querySelector('input').after(h('small.error.field-error', { role: 'alert' }));
    f.addEventListener('submit', async (ev) => {
      ev.preventDefault();
      const t = f.elements.token.value.trim();
      if (!t) return;
      setToken(t);
      f.elements.token.value = '';
      await start();
    });
  }
  return signIn;
}

// Signs in with the stored token: who it is, the names, the recent events,
// then the stream from the newest one on.
async function start() {
  try {
    const me = await get('/api/v1/whoami');
    ctx.name = me.name;
    ctx.role = me.role;
    await loadNames();
    const page = await get('/api/v1/events?direction=backward&limit=100');
    recent.length = 0;
    recent.push(...page.events);
  } catch (e) {
    setToken(null);
    const why = e instanceof ApiError && e.status === 401 ? `This token is not accepted: ${e.message}` : `Cannot sign in: ${e.message}`;
    showSignIn(why);
    return;
  }
  $('who-name').textContent = ctx.name;
  $('who-role').textContent = ctx.role;
  $('who-role').className = `badge role-${ctx.role}`;
  $('nav').hidden = false;
  $('who').hidden = false;
  document.body.dataset.role = ctx.role;
  const state = $('stream-state');
  stream = new EventStream({
    event: received,
    state: (s, why) => {
      if (s === 'lagged') catchUp(why);
      state.className = `dot ${s}`;
      state.title = s === 'live' ? 'live: new events appear as they happen' : `live stream ${s}: ${why || ''}`;
      // The state in words too, not only the dot's colour.
      $('stream-label').textContent = s === 'live' ? 'live' : s === 'down' ? 'stream down, reconnecting' : s === 'lagged' ? 'catching up' : s;
      document.body.dataset.stream = s;
    },
  }, recent.length ? recent[0].id : 0);
  if (!location.hash || location.hash === '#/' || location.hash === '#') location.hash = '#/live';
  else route();
}

// The stream could not replay a range (`{from, to, error}`): read it from
// the log instead.
async function catchUp(data) {
  try {
    const { from, to } = JSON.parse(data);
    let cursor = from - 1;
    while (cursor < to) {
      const page = await get(`/api/v1/events?cursor=${cursor}&limit=1000`);
      for (const e of page.events) if (e.id <= to) received(e);
      if (page.next == null || !page.events.length) break;
      cursor = page.next;
    }
  } catch (e) {
    notice(`Some events may be missing from the live view: ${e.message}`);
  }
}

// Entity changes refresh the names the pages show.
let reloading = null;
live.addEventListener('event', (ev) => {
  const e = ev.detail;
  if (e.kind !== 'admin' || reloading) return;
  reloading = setTimeout(async () => {
    reloading = null;
    try {
      if (await loadNames()) live.dispatchEvent(new CustomEvent('names'));
    } catch (_) { /* shown by the pages' own calls */ }
  }, 200);
});

function route() {
  if (!token() || !ctx.role) return;
  const [name, arg] = location.hash.replace(/^#\/?/, '').split('/');
  const key = name === 'cardholders' && arg ? 'cardholder' : name;
  const show = pages[key] || pages.live;
  for (const a of document.querySelectorAll('#nav a')) {
    a.classList.toggle('active', a.dataset.page === (name || 'live'));
  }
  if (leave) leave();
  leave = null;
  const main = $('main');
  const root = h('div.page', { dataset: { page: key in pages ? key : 'live' } });
  const link = document.querySelector(`#nav a[data-page="${name || 'live'}"]`);
  const label = link ? link.textContent : 'Live';
  for (const a of document.querySelectorAll('#nav a')) {
    if (a === link) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  }
  document.title = `${label} · pivgate`;
  const from = document.activeElement;
  main.replaceChildren(root);
  Promise.resolve(show(root, arg ? decodeURIComponent(arg) : null)).then((cleanup) => {
    if (typeof cleanup === 'function') leave = cleanup;
    // The title says where you are; the page's heading takes the focus
    // unless it was moved meanwhile (it was on what the page replaced).
    const h1 = root.querySelector('h1');
    if (h1 && h1.textContent !== label) document.title = `${h1.textContent} · ${label} · pivgate`;
    const now = document.activeElement;
    if (h1 && root.isConnected && (!now || now === document.body || now === from || !now.isConnected)) {
      h1.tabIndex = -1;
      h1.focus();
    }
  }).catch((e) => notice(e.message));
}

window.addEventListener('hashchange', route);
window.addEventListener('pivgate:unauthorized', (ev) => {
  setToken(null);
  ctx.role = null;
  showSignIn(`Signed out: ${ev.detail.message}`);
});

function init() {
  // The skip link moves the focus into the page without touching the
  // route (which lives in the hash).
  $('skip').addEventListener('click', (ev) => {
    ev.preventDefault();
    const main = $('main');
    const first = main.querySelector('h1') || main;
    if (first !== main) first.tabIndex = -1;
    first.focus();
  });
  $('sign-out').addEventListener('click', () => {
    setToken(null);
    ctx.role = null;
    showSignIn('');
  });
  if (token()) start();
  else showSignIn('');
}

init();
