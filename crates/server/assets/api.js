// The JSON API and the live event stream, with the token signed in with.

const KEY = 'pivgate.token';

export function token() {
  return sessionStorage.getItem(KEY);
}

export function setToken(t) {
  if (t) sessionStorage.setItem(KEY, t);
  else sessionStorage.removeItem(KEY);
}

// What a 412 says: the entity changed since it was shown.
export const STALE = 'Changed by someone else — reload to see the current version.';

// An answer other than 2xx: the status and the API's `{error, field}`.
export class ApiError extends Error {
  constructor(status, body) {
    super(status === 412 ? STALE : body && body.error ? body.error : `HTTP ${status}`);
    this.status = status;
    this.field = body && body.field ? body.field : null;
  }
  get missing() {
    return this.status === 404 && /no such route/.test(this.message);
  }
}

function headers(extra) {
  const h = { Authorization: `Bearer ${token()}` };
  return Object.assign(h, extra || {});
}

async function failure(r) {
  let body = null;
  try {
    body = await r.json();
  } catch (_) {
    body = { error: `HTTP ${r.status} ${r.statusText}` };
  }
  const e = new ApiError(r.status, body);
  if (r.status === 401) window.dispatchEvent(new CustomEvent('pivgate:unauthorized', { detail: e }));
  return e;
}

// `method path [body]` → the parsed JSON answer (null for 204). An entity's
// change names the version it was made against (`version`, from what was
// shown): a newer one is refused with 412 instead of being overwritten.
export async function call(method, path, body, version) {
  const init = { method, headers: headers(), cache: 'no-store' };
  if (version !== undefined && version !== null) init.headers['If-Match'] = `"${version}"`;
  if (body !== undefined) {
    init.headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  const r = await fetch(path, init);
  if (!r.ok) throw await failure(r);
  if (r.status === 204) return null;
  return r.json();
}

export const get = (path) => call('GET', path);

// A download that needs the token: fetched, then saved under `name`.
export async function download(path, name) {
  const r = await fetch(path, { headers: headers(), cache: 'no-store' });
  if (!r.ok) throw await failure(r);
  const blob = await r.blob();
  const url = URL.createObjectURL(blob);
  const a = document.createElement('a');
  a.href = url;
  a.download = name;
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10000);
  return blob;
}

// Splits a Server-Sent Events byte stream into events `{id, event, data}`.
// Lines end in LF, CR LF or CR; a blank line ends an event; `:` lines are
// comments (keep-alives).
export class SseParser {
  constructor(onEvent) {
    this.onEvent = onEvent;
    this.buffer = '';
    this.reset();
  }
  reset() {
    this.data = [];
    this.event = '';
    this.id = null;
  }
  push(text) {
    this.buffer += text;
    let m;
    while ((m = /\r\n|\n|\r/.exec(this.buffer))) {
      // A lone CR at the end may be the first half of CR LF.
      if (m[0] === '\r' && m.index === this.buffer.length - 1) break;
      const line = this.buffer.slice(0, m.index);
      this.buffer = this.buffer.slice(m.index + m[0].length);
      this.line(line);
    }
  }
  line(line) {
    if (line === '') {
      if (this.data.length || this.id !== null) {
        this.onEvent({ id: this.id, event: this.event || 'message', data: this.data.join('\n') });
      }
      this.reset();
      return;
    }
    if (line.startsWith(':')) return;
    const i = line.indexOf(':');
    const field = i < 0 ? line : line.slice(0, i);
    let value = i < 0 ? '' : line.slice(i + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    if (field === 'data') this.data.push(value);
    else if (field === 'event') this.event = value;
    else if (field === 'id' && !value.includes('\0')) this.id = value;
  }
}

// Follows `/api/v1/events/stream` with fetch (EventSource cannot send the
// token), reconnecting with `Last-Event-ID` after a drop. `handlers`:
// `event(e)` for each stored event, `state('live'|'down', why)`.
export class EventStream {
  constructor(handlers, lastId) {
    this.handlers = handlers;
    this.lastId = lastId == null ? null : String(lastId);
    this.stopped = false;
    this.delay = 500;
    this.run();
  }
  stop() {
    this.stopped = true;
    if (this.abort) this.abort.abort();
  }
  async run() {
    while (!this.stopped) {
      this.abort = new AbortController();
      const h = headers({ Accept: 'text/event-stream' });
      if (this.lastId !== null) h['Last-Event-ID'] = this.lastId;
      let why = 'the stream ended';
      try {
        const r = await fetch('/api/v1/events/stream', { headers: h, signal: this.abort.signal, cache: 'no-store' });
        if (!r.ok) {
          const e = await failure(r);
          why = e.message;
          if (r.status === 401 || r.status === 403) {
            this.handlers.state('down', why);
            return;
          }
        } else {
          this.delay = 500;
          this.handlers.state('live');
          await this.read(r.body);
        }
      } catch (e) {
        if (this.stopped) return;
        why = e.message;
      }
      if (this.stopped) return;
      this.handlers.state('down', why);
      await new Promise((ok) => setTimeout(ok, this.delay));
      this.delay = Math.min(this.delay * 2, 10000);
    }
  }
  async read(body) {
    const reader = body.getReader();
    const decoder = new TextDecoder();
    const parser = new SseParser((m) => {
      if (m.id !== null) this.lastId = m.id;
      if (m.event === 'message' && m.data) {
        try {
          this.handlers.event(JSON.parse(m.data));
        } catch (e) {
          console.error('event stream: unreadable event', e);
        }
      } else if (m.event === 'lagged') {
        this.handlers.state('lagged', m.data);
      }
    });
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      parser.push(decoder.decode(value, { stream: true }));
    }
  }
}
