// The vigil dashboard. It talks only to the HTTP API of the gateway that
// served it, sending the token typed into the login prompt; the token is
// kept in sessionStorage, so it dies with the tab. Everything on screen is
// built with DOM nodes and textContent, never from HTML strings, because
// session keys, goals and messages are written by other people and agents.
'use strict';

const TOKEN_KEY = 'vigil.token';
const PAGE = 200;
// A session page draws at most this many messages and changes at first,
// the newest; a button draws as many more. A long-lived session's
// transcript can hold many thousands, which would otherwise all be built
// into the page again on each new message.
const SHOWN = 200;
// Where reading a timeline back stands when there is nothing older to read
// (see changesBefore).
const NOTHING_OLDER = Object.freeze({from: 0, width: PAGE, earliest: 0, gap: false});
// A message id above every one: a transcript read back from before it
// starts at its newest message.
const NEWEST = Number.MAX_SAFE_INTEGER;
// The sessions list and the watch graph draw this many entries at first,
// and as many more at each press of their button.
const SHOWN_ROWS = 500;
// Acknowledgements, resets and deletions write nothing to the signal log, so
// no stream carries them; a poll catches them. It runs often only while a
// notice is pending, the one state an acknowledgement can end.
const POLL_PENDING_MS = 2000;
const POLL_IDLE_MS = 15000;

const $ = (id) => document.getElementById(id);

const app = {
  token: sessionStorage.getItem(TOKEN_KEY) || '',
  gen: 0, // bumped on sign-in and sign-out: loops of an older generation stop
  abort: null, // aborts every request of the signed-in page
  sessions: [],
  cursors: [],
  // What was last drawn, as JSON: an unchanged answer is not drawn again,
  // so a poll never disturbs a person selecting or reading text.
  drawn: {sessions: '', cursors: ''},
  agent: '', // the agent filter
  // How many sessions the list draws, and cursors the graph: with
  // thousands, drawing them all on every change would stall the page.
  showRows: SHOWN_ROWS,
  showCursors: SHOWN_ROWS,
  agents: '', // the agents the filter offers, space-separated
  lastSeq: null, // the newest sequence the log stream delivered
  page: null, // the open session page
  signedIn: false,
};

class AuthError extends Error {}

// untold says whether a failed request is one the person is not to be
// told of: the page cut it off itself (on signing out, or leaving a
// page), or the token was refused, which the sign-in prompt says.
const untold = (e) => e instanceof AuthError || e.name === 'AbortError';

// h builds an element: h('a', {href: '#/'}, 'text', child, ...).
function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v !== null && v !== undefined && v !== false) el.setAttribute(k, v === true ? '' : v);
  }
  for (const c of children.flat()) {
    if (c !== null && c !== undefined && c !== false) el.append(c instanceof Node ? c : String(c));
  }
  return el;
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const backoff = (failures) => Math.min(500 * 2 ** failures, 10000);
// A stream counts as having worked, and the next one is opened without
// waiting longer, once it stayed open this long: one that a proxy or a
// busy gateway ends as soon as it opened is tried less and less often.
const STREAM_STABLE_MS = 10000;
const stayedOpen = (since) => since !== 0 && Date.now() - since >= STREAM_STABLE_MS;

function headers(extra) {
  const out = Object.assign({}, extra);
  if (app.token) out.Authorization = 'Bearer ' + app.token;
  return out;
}

// call runs one tool as the signed-in person; signal (by default, the
// signed-in page's) can abort it.
async function call(tool, input, signal = app.abort && app.abort.signal) {
  const res = await fetch('/v1/tools/' + tool, {
    method: 'POST',
    headers: headers({'Content-Type': 'application/json'}),
    body: JSON.stringify(input || {}),
    signal,
  });
  const body = await res.json().catch(() => ({}));
  if (res.status === 401) {
    signOut('The gateway no longer accepts this token. Sign in again.');
    throw new AuthError('unauthenticated');
  }
  if (!res.ok) {
    const err = new Error((body.error && body.error.message) || 'HTTP ' + res.status);
    err.code = body.error && body.error.code;
    err.stateVersion = body.error && body.error.stateVersion;
    throw err;
  }
  return body;
}

// all follows a paged tool's nextCursor to the end.
async function all(tool, input, field) {
  const out = [];
  let cursor;
  do {
    const body = await call(tool, Object.assign({}, input, cursor ? {cursor} : {}));
    out.push(...body[field]);
    cursor = body.nextCursor;
  } while (cursor);
  return out;
}

// readSSE reads a server-sent event stream with fetch, since EventSource
// cannot send an Authorization header. It returns when the stream ends.
async function readSSE(url, signal, on) {
  const res = await fetch(url, {headers: headers({Accept: 'text/event-stream'}), signal, cache: 'no-store'});
  if (res.status === 401) {
    signOut('The gateway no longer accepts this token. Sign in again.');
    throw new AuthError('unauthenticated');
  }
  if (!res.ok || !res.body) {
    const err = new Error('stream: HTTP ' + res.status);
    err.status = res.status;
    throw err;
  }
  on.open();
  const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
  let buf = '';
  for (;;) {
    const {value, done} = await reader.read();
    if (done) return;
    buf += value;
    let end;
    while ((end = buf.indexOf('\n\n')) >= 0) {
      const block = buf.slice(0, end);
      buf = buf.slice(end + 2);
      let type = 'message';
      const data = [];
      for (const line of block.split('\n')) {
        if (line.startsWith('event:')) type = line.slice(6).trim();
        else if (line.startsWith('data:')) data.push(line.slice(5).replace(/^ /, ''));
      }
      if (data.length) on.event(type, JSON.parse(data.join('\n')));
    }
  }
}

// ---- signing in and out ----

async function probe(token) {
  const res = await fetch('/v1/tools', {headers: token ? {Authorization: 'Bearer ' + token} : {}});
  if (res.status === 401) return false;
  if (!res.ok) throw new Error('HTTP ' + res.status);
  return true;
}

async function start() {
  let ok;
  try {
    ok = await probe(app.token);
  } catch (e) {
    showBanner('The gateway is not reachable; trying again.', 'error');
    setTimeout(start, 3000);
    return;
  }
  hideBanner();
  if (!ok) {
    const had = app.token !== '';
    forgetToken();
    showLogin(had ? 'The saved token was refused. Sign in again.' : '');
    return;
  }
  signedIn();
}

function forgetToken() {
  app.token = '';
  sessionStorage.removeItem(TOKEN_KEY);
}

function showLogin(message) {
  for (const id of ['view-sessions', 'view-session', 'nav', 'live', 'signout']) $(id).hidden = true;
  $('login').hidden = false;
  $('login-error').textContent = message;
  $('login-error').hidden = !message;
  $('token').value = '';
  $('token').focus();
  document.title = 'Sign in · vigil';
}

// signingIn is set while a sign-in is being checked: a second submit (a
// double click, Enter pressed twice) waits for the first, which would
// otherwise sign in twice and leave the first sign-in's streams open.
let signingIn = false;

async function submitLogin(ev) {
  ev.preventDefault();
  if (signingIn) return;
  const token = $('token').value.trim();
  if (!token) {
    $('login-error').textContent = 'Enter a token.';
    $('login-error').hidden = false;
    return;
  }
  // A token copied from a chat or a document may bring along a character
  // no header can carry (a zero-width space, a non-breaking space, a
  // typographic quote): fetch then fails before it reaches the gateway,
  // which is no reason to call the gateway unreachable.
  const odd = token.match(/[^\x20-\x7e]/);
  if (odd) {
    $('login-error').textContent = 'The token holds a character no token has (U+' +
      odd[0].codePointAt(0).toString(16).toUpperCase().padStart(4, '0') + '): type or paste it again without it.';
    $('login-error').hidden = false;
    return;
  }
  let ok;
  signingIn = true;
  try {
    ok = await probe(token);
  } catch (e) {
    ok = null;
  } finally {
    signingIn = false;
  }
  if (!ok) {
    $('login-error').textContent = ok === false ? 'The gateway refused this token.' : 'The gateway is not reachable.';
    $('login-error').hidden = false;
    return;
  }
  app.token = token;
  sessionStorage.setItem(TOKEN_KEY, token);
  signedIn();
}

function signedIn() {
  app.gen++;
  app.signedIn = true;
  if (app.abort) app.abort.abort(); // what an earlier sign-in still had open
  app.abort = new AbortController();
  $('login').hidden = true;
  $('nav').hidden = false;
  $('live').hidden = false;
  $('signout').hidden = app.token === '';
  const gen = app.gen;
  followLog(gen);
  poll(gen);
  route();
  schedule('sessions', 'graph');
}

// signOut forgets the token and everything the page had loaded with it.
function signOut(message) {
  app.gen++;
  app.signedIn = false;
  if (app.abort) app.abort.abort();
  closePage();
  forgetToken();
  app.sessions = [];
  app.cursors = [];
  app.drawn = {sessions: '', cursors: ''};
  app.agent = app.agents = '';
  app.showRows = app.showCursors = SHOWN_ROWS;
  app.lastSeq = null;
  wanted.clear();
  clearTimeout(refreshTimer);
  refreshTimer = null;
  clearPage();
  for (const id of ['sessions-body', 'graph', 'agent-filter', 'sessions-count', 'graph-count']) $(id).replaceChildren();
  $('agent-filter').append(h('option', {value: ''}, 'All agents'));
  hideBanner();
  showLogin(message || '');
}

// ---- live updates ----

function setLive(state) {
  const el = $('live');
  el.className = 'live ' + state;
  el.textContent = state === 'on' ? 'Live' : 'Reconnecting…';
}

// followLog keeps the signal-log stream open. After any interruption it
// resumes from the last sequence it saw (the server replays what was
// missed), tells the person, and reloads what the log does not carry.
async function followLog(gen) {
  let failures = 0;
  let interrupted = false;
  while (gen === app.gen) {
    let gap = false;
    let opened = 0;
    const resumed = app.lastSeq !== null;
    const url = '/v1/events' + (resumed ? '?after=' + app.lastSeq : '');
    try {
      await readSSE(url, app.abort.signal, {
        open() {
          opened = Date.now();
          setLive('on');
          if (interrupted) {
            showBanner('The live stream was interrupted and has resumed; the page was refreshed.');
            // A stream resumed from a position replays what was missed (a
            // compaction among it reads the page whole), so the open page
            // reads on from where it stood; one begun afresh replays
            // nothing, so the page is read whole.
            refreshNow('sessions', 'graph', resumed ? 'page' : 'page-full');
          }
        },
        event(type, data) {
          if (type === 'signal') onSignal(data);
          else if (type === 'bookmark') onBookmark(data);
          else if (type === 'history_gap') gap = true;
        },
      });
    } catch (e) {
      if (gen !== app.gen || e instanceof AuthError) return;
    }
    if (gen !== app.gen) return;
    if (gap) {
      // The events after our position were pruned: start over from now.
      app.lastSeq = null;
      showBanner('Some changes were pruned before this page saw them; the page was refreshed.');
      schedule('sessions', 'graph', 'page-full');
    }
    // After a gap the banner has said what happened, and the page is read
    // whole: the stream begun afresh is no interruption to tell of over it.
    interrupted = !gap;
    setLive('off');
    if (stayedOpen(opened)) failures = 0;
    await sleep(backoff(failures++));
  }
}

// onBookmark notes where an idle log stream stands: a reconnect resumes
// there, and the live indicator says when the gateway last spoke.
function onBookmark(b) {
  if (typeof b.sequence === 'number') app.lastSeq = b.sequence;
  const live = $('live');
  live.title = 'Live: the log is at #' + b.sequence + ' (as of ' + new Date().toLocaleTimeString() + ')';
  live.dataset.bookmark = String(b.sequence);
}

function onSignal(e) {
  app.lastSeq = e.sequence;
  schedule(rowPart(e.agentId, e.sessionKey), 'graph');
  const p = app.page;
  if (p && e.sessionKey === p.key && e.agentId === p.agentId) schedule(e.kind === 'compacted' ? 'page-full' : 'page');
}

// The open session's own stream carries what the log does not: messages
// between sessions and replies (for the transcript), and the notices queued
// for it as a watcher.
async function followSession(p) {
  let failures = 0;
  let first = true;
  while (app.page === p && !p.abort.signal.aborted) {
    let opened = 0;
    try {
      await readSSE('/v1/sessions/' + encodeURIComponent(p.key) + '/events', p.abort.signal, {
        open() {
          opened = Date.now();
          if (!first) schedule('page', 'graph');
          first = false;
        },
        event(type) {
          if (type === 'message' || type === 'reply') schedule('page');
          else if (type === 'notice' || type === 'wake') schedule('graph', 'page');
          // The session was deleted: no log event says so, so the list,
          // the graph and the page are read now rather than at the next
          // poll. The stream then ends and is opened again without a
          // position, for a session made again with the key.
          else if (type === 'deleted') schedule(rowPart(p.agentId, p.key), 'graph', 'page');
        },
      });
    } catch (e) {
      // A session the token may not reach, or a key that names none,
      // stays so: the page says it (loadPage) rather than asking again
      // and again.
      if (e instanceof AuthError || e.status === 403 || e.status === 400) return;
    }
    if (app.page !== p || p.abort.signal.aborted) return;
    if (stayedOpen(opened)) failures = 0;
    await sleep(backoff(failures++));
  }
}

// noticePending says whether a notice waits for a turn, one that only a
// poll can see taken: a watcher's in the graph, or one in the open page's
// own queue (the notice that a watched session was deleted is in no
// cursor).
function noticePending() {
  const p = app.page;
  return app.cursors.some((c) => c.pending) || !!(p && p.queued && p.queued.length);
}

// poll reads everything now and then; while a notice is pending, it reads
// the graph (and the open page, whose queue the acknowledgement empties)
// often, but not the list of sessions, which can run to thousands and
// which an acknowledgement does not change.
async function poll(gen) {
  let lastAll = Date.now();
  let lastGraph = lastAll;
  while (gen === app.gen) {
    await sleep(500);
    if (gen !== app.gen || document.visibilityState !== 'visible') continue;
    const now = Date.now();
    if (now - lastAll >= POLL_IDLE_MS) {
      lastAll = lastGraph = now;
      schedule('sessions', 'graph', 'page');
    } else if (now - lastGraph >= POLL_PENDING_MS && noticePending()) {
      lastGraph = now;
      schedule('graph', 'page');
    }
  }
}

// ---- loading ----

const wanted = new Set();
let refreshTimer = null;
let refreshing = false;
// retryDelay is how long a refresh that failed waits before it tries
// again: doubled after each failure up to a limit, reset by a success, so
// a gateway that blipped is read again soon and one that is down is not
// asked ever faster.
let retryDelay = 0;
const RETRY_FIRST = 1000, RETRY_MAX = 30000;
// refreshFailure is the banner a failed refresh showed: a refresh that
// succeeds takes down that one, not one shown since about something else.
let refreshFailure = '';

// schedule asks for parts of the page to be reloaded soon; bursts of
// changes are folded into one reload. A part is 'sessions' (the whole
// list), 'graph', 'page', 'page-full', or one session's row (rowPart).
function schedule(...parts) {
  for (const part of parts) wanted.add(part);
  if (!refreshTimer && !refreshing) refreshTimer = setTimeout(refresh, 60);
}

// refreshNow is schedule without waiting out a failed refresh's retry: the
// gateway is back, so what failed is read again at once.
function refreshNow(...parts) {
  clearTimeout(refreshTimer);
  refreshTimer = null;
  schedule(...parts);
}

async function refresh() {
  refreshTimer = null;
  if (!app.signedIn) return;
  refreshing = true;
  const parts = new Set(wanted);
  wanted.clear();
  const jobs = [];
  const rows = [...parts].filter((part) => part.startsWith(ROW));
  if (parts.has('sessions')) jobs.push(loadSessions());
  else if (rows.length) jobs.push(loadRows(rows.map((part) => part.slice(ROW.length))));
  if (parts.has('graph')) jobs.push(loadGraph());
  if (parts.has('page-full')) jobs.push(loadPage(true));
  else if (parts.has('page')) jobs.push(loadPage(false));
  const results = await Promise.allSettled(jobs);
  refreshing = false;
  const failed = results.find((r) => r.status === 'rejected' && !untold(r.reason));
  if (failed) {
    refreshFailure = 'Could not refresh: ' + failed.reason.message + ' (trying again)';
    showBanner(refreshFailure, 'error');
    // What did not load is asked for again; a part that did load is read
    // again too, and drawn only if it changed.
    for (const part of parts) wanted.add(part);
    retryDelay = Math.min(retryDelay ? retryDelay * 2 : RETRY_FIRST, RETRY_MAX);
    if (!refreshTimer) refreshTimer = setTimeout(refresh, retryDelay);
    return;
  }
  if (retryDelay) {
    retryDelay = 0;
    if ($('banner-text').textContent === refreshFailure) hideBanner();
  }
  if (wanted.size && !refreshTimer) refreshTimer = setTimeout(refresh, 60);
}

// A change to a session can alter only its own row of the list, so that
// row is what it has read again: reading every page of the list for each
// change would cost a request per PAGE sessions, thousands of sessions
// over and over while agents work.
const ROW = 'row ';
const rowPart = (agentId, key) => ROW + sessionRef(agentId, key);

async function loadSessions() {
  const gen = app.gen;
  const sessions = await all('sessions_list', {limit: PAGE}, 'sessions');
  if (gen === app.gen) showSessions(sessions);
}

// loadRows reads again the rows of the sessions named (by sessionRef), one
// request each, unless the whole list costs no more.
async function loadRows(refs) {
  if (refs.length >= Math.ceil(app.sessions.length / PAGE)) return loadSessions();
  const gen = app.gen;
  const rows = await Promise.all(refs.map(async (ref) => {
    const cut = ref.indexOf(' '); // an agent's id has no space; a key may
    const agentId = ref.slice(0, cut), sessionKey = ref.slice(cut + 1);
    try {
      return {agentId, sessionKey, row: listRow(await call('session_status', {sessionKey, agentId}))};
    } catch (e) {
      // A session the token may not see is one the list does not show.
      if (e.code === 'permission_denied') return {agentId, sessionKey, row: null};
      throw e;
    }
  }));
  if (gen !== app.gen) return;
  let sessions = app.sessions;
  for (const {agentId, sessionKey, row} of rows) {
    const at = sessions.findIndex((s) => s.agentId === agentId && s.sessionKey === sessionKey);
    sessions = sessions.filter((_, i) => i !== at);
    if (!row) continue;
    // Where sessions_list would put it, ordered by agent and key; an
    // existing row stays where the list put it.
    let to = at;
    if (to < 0) to = sessions.findIndex((s) => s.agentId > agentId || (s.agentId === agentId && s.sessionKey > sessionKey));
    if (to < 0) to = sessions.length;
    sessions = sessions.slice(0, to).concat([row], sessions.slice(to));
  }
  showSessions(sessions);
}

// listRow is session_status's answer as sessions_list shows the session
// (fields in the same order, so an unchanged row compares equal), or null
// for a session that no longer exists.
function listRow(st) {
  if (!st.exists) return null;
  return {sessionKey: st.sessionKey, agentId: st.agentId, sessionId: st.sessionId, kind: st.kind, label: st.label,
    spawnedBy: st.spawnedBy, goal: st.goal, stateVersion: st.stateVersion || undefined, state: st.state,
    hostedBy: st.hostedBy, createdAt: st.createdAt, updatedAt: st.updatedAt};
}

function showSessions(sessions) {
  const json = JSON.stringify(sessions);
  if (json === app.drawn.sessions) return;
  app.drawn.sessions = json;
  app.sessions = sessions;
  renderAgentFilter();
  renderSessions();
  // The graph names sessions by their labels, which come with the list:
  // drawn before the list arrived, it is drawn again.
  renderGraph();
  if (app.page) {
    renderFacts();
    renderPageGraph();
  }
}

async function loadGraph() {
  const gen = app.gen;
  const cursors = await all('sessions_graph', {limit: PAGE}, 'cursors');
  const json = JSON.stringify(cursors);
  if (gen !== app.gen || json === app.drawn.cursors) return;
  app.drawn.cursors = json;
  app.cursors = cursors;
  renderGraph();
  if (app.page) renderPageGraph();
}

// loadPage reads the open session: its facts and, from where the page left
// off, its timeline and transcript (when full is set, the newest changes
// and the transcript's newest page, older ones being read when the person
// asks: a long session's whole history would cost a request per page of
// it, on every opening). Its reads stop when the page is left: the rest of
// a long transcript no one will see would hold up the next page's reads.
async function loadPage(full) {
  const p = app.page;
  if (!p || p.denied) return;
  const ref = {sessionKey: p.key, agentId: p.agentId};
  // A full read asks from the start for one change only: the answer names
  // the session's version, its earliest change kept, and whether retention
  // removed any, which is what reading back from the newest needs.
  let since = full ? 0 : p.since;
  let events = [];
  let status;
  let back;
  for (;;) {
    try {
      status = await call('session_status', Object.assign({changesSince: since, limit: full ? 1 : PAGE}, ref), p.abort.signal);
    } catch (e) {
      // Another agent's session, for an agent's token, or an address that
      // names no session vigil could hold: no retry changes either, so the
      // page says it instead of failing and trying again.
      if ((e.code !== 'permission_denied' && e.code !== 'invalid_argument') || app.page !== p) throw e;
      p.denied = true;
      p.abort.abort();
      renderDenied(e.code === 'invalid_argument' ? 'This address names no session: ' + e.message : '');
      return;
    }
    if (full) {
      const ch = status.stateChanges;
      since = status.stateVersion;
      const read = await changesBefore(ref, {from: since, width: PAGE, earliest: ch.earliestAvailableSequence, gap: ch.historyGap}, p.abort.signal);
      events = read.events;
      back = read.next;
      break;
    }
    events.push(...status.stateChanges.events);
    since = status.stateChanges.nextChangesSince;
    if (!status.stateChanges.truncated) break;
  }
  let messages = [];
  let afterId = full ? 0 : p.afterId;
  let before = 0;
  // Only a session vigil hosts has a transcript here; one recorded
  // elsewhere has its timeline and watchers.
  if (status.state === 'hosted' && full) {
    const hist = await call('sessions_history', Object.assign({beforeId: NEWEST, limit: PAGE}, ref), p.abort.signal);
    messages = hist.messages;
    afterId = hist.nextAfterId || 0;
    before = hist.truncated ? hist.nextBeforeId : 0;
  } else if (status.state === 'hosted') {
    for (;;) {
      const hist = await call('sessions_history', Object.assign({afterId, limit: PAGE}, ref), p.abort.signal);
      messages.push(...hist.messages);
      afterId = hist.nextAfterId || afterId;
      if (!hist.truncated) break;
    }
  }
  // A session that can watch (an agent's) has a queue of its own.
  let queued = [];
  if (status.exists && p.key.startsWith('agent:')) queued = await queueOf(p.key, p.abort.signal);
  if (app.page !== p) return;
  if (status.sessionKey !== p.key || status.agentId !== p.agentId) {
    // The address spelled the session otherwise (in capitals, say): the
    // page moves to the spelling signals and the watch graph use.
    location.replace(sessionHref(status.agentId, status.sessionKey));
    return;
  }
  if (!full && status.stateChanges.historyGap) {
    // Retention removed events after where the page stood: read it afresh.
    schedule('page-full');
    return;
  }
  const was = p.status;
  if (!full && was && was.exists && status.exists && (status.sessionId !== was.sessionId || status.createdAt !== was.createdAt)) {
    // Another incarnation: after a reset it is read again whole, and after
    // the session was deleted and created again under its key (between two
    // reads, so the page never saw it gone) nothing of the deleted one,
    // whose transcript and log are gone, may stay on the page.
    schedule('page-full');
    return;
  }
  const json = JSON.stringify([status, queued]);
  if (!full && events.length === 0 && messages.length === 0 && json === p.drawn) return;
  p.drawn = json;
  if (full || status.state !== 'hosted') {
    if (full || !status.exists) p.events = [];
    p.messages = [];
  }
  p.status = status;
  p.queued = queued;
  // concat, not push(...): spreading a whole transcript as arguments
  // overflows the stack once it is long enough.
  p.events = p.events.concat(events);
  p.messages = p.messages.concat(messages);
  p.since = since;
  p.afterId = afterId;
  // Where reading back stands moves only with a full read or a press for
  // more: a read on that began before a press would otherwise put it back
  // where the press found it, and the next press read that page again.
  if (full) {
    p.before = before;
    p.back = back;
    p.fullReads++;
  }
  // A session gone took its earlier messages and older changes with it.
  if (!status.exists) {
    p.before = 0;
    p.back = NOTHING_OLDER;
  }
  renderPage();
}

// changesBefore reads a session's changes at and before sequence back.from,
// newest first, a window of back.width sequences at a time, until it has
// half a page of them or has reached the start; it returns them oldest
// first, with where the next read back begins (from 0: nothing older is
// left to read, and gap says whether retention removed any). Sequences run
// over all sessions together, so how many of a session's changes a window
// holds depends on what else was logged meanwhile: a window holding under
// half a page is twice as wide the next time, so a few changes far apart
// cost a few reads, and one holding more than a page is read forward to
// its end, a full page a read.
async function changesBefore(ref, back, signal) {
  let {from, width, earliest, gap} = back;
  let events = [];
  while (events.length < PAGE / 2 && from > 0) {
    // Below the earliest change kept there is nothing to read, but asking
    // from 0 says whether retention removed anything there.
    const since = from - width < earliest ? 0 : from - width;
    let got = [];
    let at = since;
    let first = null;
    for (;;) {
      const ch = (await call('session_status', Object.assign({changesSince: at, limit: PAGE}, ref), signal)).stateChanges;
      if (!first) first = ch;
      // A change after from is newer than the window: the forward read
      // from where the page stands brings it.
      got = got.concat(ch.events.filter((e) => e.sequence <= from));
      at = ch.nextChangesSince;
      if (!ch.truncated || at >= from) break;
    }
    events = got.concat(events);
    earliest = first.earliestAvailableSequence;
    // Retention removed changes after since: what is older is gone.
    if (since === 0 || first.historyGap) {
      from = 0;
      gap = first.historyGap;
    } else {
      from = since;
    }
    if (got.length < PAGE / 2) width *= 2;
  }
  return {events, next: {from, width, earliest, gap}};
}

// showEarlier draws SHOWN more of the transcript, reading the page before
// the oldest message read first when fewer than that are left to draw.
// The messages drawn stay where the person is reading.
async function showEarlier(p, list) {
  if (p.messages.length - p.showMessages < SHOWN && p.before) {
    if (p.readingOlder) return; // a second press while the page is read
    p.readingOlder = true;
    const fullReads = p.fullReads;
    let hist;
    try {
      hist = await call('sessions_history', {sessionKey: p.key, agentId: p.agentId, beforeId: p.before, limit: PAGE}, p.abort.signal);
    } catch (e) {
      if (!untold(e)) showBanner('Could not read earlier messages: ' + e.message, 'error');
      return;
    } finally {
      p.readingOlder = false;
    }
    // The transcript was read afresh meanwhile (a reset, a compaction):
    // the page read belongs to what it replaced.
    if (app.page !== p || p.fullReads !== fullReads) return;
    p.messages = hist.messages.concat(p.messages);
    p.before = hist.truncated ? hist.nextBeforeId : 0;
  }
  const below = list.scrollHeight - list.scrollTop;
  p.showMessages += SHOWN;
  renderPage();
  list.scrollTop = list.scrollHeight - below;
}

// showOlder draws SHOWN more of the timeline, reading back from the oldest
// change read first when fewer than that are left to draw.
async function showOlder(p) {
  if (p.events.length - p.showEvents < SHOWN && p.back.from > 0) {
    if (p.readingChanges) return; // a second press while they are read
    p.readingChanges = true;
    const fullReads = p.fullReads;
    let read;
    try {
      read = await changesBefore({sessionKey: p.key, agentId: p.agentId}, p.back, p.abort.signal);
    } catch (e) {
      if (!untold(e)) showBanner('Could not read older changes: ' + e.message, 'error');
      return;
    } finally {
      p.readingChanges = false;
    }
    // The timeline was read afresh meanwhile (a reset, a gap): the
    // changes read belong to what it replaced.
    if (app.page !== p || p.fullReads !== fullReads) return;
    p.events = read.events.concat(p.events);
    p.back = read.next;
  }
  p.showEvents += SHOWN;
  renderPage();
}

// queueOf is what is queued for a session's next turn, or null when the
// token may not see it (an agent's token sees only the queue of the
// session it acts as): the page then shows the rest of the session.
async function queueOf(key, signal) {
  try {
    return (await call('session_pending', {sessionKey: key}, signal)).events;
  } catch (e) {
    if (e.code === 'permission_denied') return null;
    throw e;
  }
}

// ---- routes ----

function sessionHref(agentId, key) {
  return '#/session/' + encodeURIComponent(agentId) + '/' + encodeURIComponent(key);
}

// pageOf is the session a page address names, or null; an address that
// does not decode (a link cut short) names none.
function pageOf(hash) {
  const m = hash.match(/^#\/session\/([^/]+)\/(.+)$/);
  if (!m) return null;
  try {
    return {agentId: decodeURIComponent(m[1]), key: decodeURIComponent(m[2])};
  } catch (e) {
    return null;
  }
}

function route() {
  if (!app.signedIn) return;
  const m = pageOf(location.hash);
  if (!m) {
    closePage();
    $('view-session').hidden = true;
    $('view-sessions').hidden = false;
    document.title = 'Sessions · vigil';
    $('sessions-title').focus({preventScroll: true});
    return;
  }
  const {agentId, key} = m;
  // A key of an agent names its agent itself: an address that puts it
  // under another (edited by hand, say) means the key's own session.
  const owner = refOf(key.toLowerCase());
  if (owner && owner !== agentId.toLowerCase()) {
    location.replace(sessionHref(owner, key));
    return;
  }
  $('view-sessions').hidden = true;
  $('view-session').hidden = false;
  if (app.page && app.page.key === key && app.page.agentId === agentId) return;
  closePage();
  app.page = {agentId, key, status: null, events: [], messages: [], since: 0, afterId: 0, before: 0, fullReads: 0,
    back: NOTHING_OLDER,
    abort: new AbortController(), goalDirty: false, drawn: '', showMessages: SHOWN, showEvents: SHOWN};
  document.title = keyText(key) + ' · vigil';
  clearPage();
  $('s-title').textContent = keyText(key);
  $('s-crumb').textContent = keyText(key);
  $('s-title').focus({preventScroll: true});
  if (key.startsWith('agent:')) followSession(app.page);
  renderPageGraph();
  schedule('page-full');
}

// clearPage empties the session page, so nothing of one session lingers
// on the next one's page or after signing out.
function clearPage() {
  for (const id of ['s-title', 's-crumb', 's-facts', 'goal-current', 'transcript', 'timeline', 'watchers', 'watches']) {
    $(id).replaceChildren();
  }
  for (const id of ['goal-error', 'send-error', 's-missing', 's-denied', 's-invalid']) $(id).hidden = true;
  $('send-message').value = '';
  fillGoalForm(null);
}

function closePage() {
  if (app.page) app.page.abort.abort();
  app.page = null;
}

// ---- rendering ----

// when shows a time with its date (local, year first, so it sorts and
// reads the same everywhere); the title has the full local form.
function when(ms) {
  if (!ms) return '—';
  const d = new Date(ms);
  const pad = (n) => String(n).padStart(2, '0');
  const text = d.getFullYear() + '-' + pad(d.getMonth() + 1) + '-' + pad(d.getDate()) + ' ' +
    pad(d.getHours()) + ':' + pad(d.getMinutes()) + ':' + pad(d.getSeconds());
  return h('time', {datetime: d.toISOString(), title: d.toLocaleString()}, text);
}

// labelOf is a session's label, when the sessions list knows one.
function labelOf(agentId, key) {
  const s = app.sessions.find((row) => row.sessionKey === key && (!agentId || row.agentId === agentId));
  return s && s.label ? s.label : '';
}

function sessionLink(agentId, key) {
  return h('a', {href: sessionHref(agentId, key), class: 'key'}, keyText(key));
}

// A key is an identifier, and any text may be one (an agent's id and an
// actor's too, which keyText shows the same way): a character that
// reorders or hides what follows it, or draws nothing at all, would let
// one key look like another, so a key shows each as its code point. That
// is every default-ignorable code point (bidi embeddings, overrides,
// isolates and marks, zero-width characters, soft hyphens, variation
// selectors, tag characters, Hangul fillers, ...) and the line and
// paragraph separators, which break the line the key is on.
const HIDDEN_CHARS = /[\p{Default_Ignorable_Code_Point}\u2028\u2029]/gu;
function keyText(key) {
  return key.replace(HIDDEN_CHARS, (c) => '<U+' + c.codePointAt(0).toString(16).toUpperCase().padStart(4, '0') + '>');
}

// graphLink is sessionLink for the watch graph, where a row of raw keys is
// hard to read: the session's label, when it has one, comes first.
function graphLink(agentId, key) {
  const label = labelOf(agentId, key);
  if (!label) return sessionLink(agentId, key);
  return h('span', {class: 'labelled'}, h('span', {class: 'label'}, label), ' ', sessionLink(agentId, key));
}

function refOf(key) {
  const parts = key.split(':');
  return parts[0] === 'agent' && parts.length >= 3 ? parts[1] : '';
}

function goalBadge(goal) {
  if (!goal) return h('span', {class: 'muted'}, '—');
  return h('span', {class: 'badge goal-' + goal.status, title: goal.objective}, goal.status);
}

function renderAgentFilter() {
  const sel = $('agent-filter');
  const agents = [...new Set(app.sessions.map((s) => s.agentId))].sort();
  if (app.agent && !agents.includes(app.agent)) agents.push(app.agent);
  // Rebuilt only when the list changes, so an open menu is left alone.
  if (agents.join(' ') === app.agents) return;
  app.agents = agents.join(' ');
  sel.replaceChildren(h('option', {value: ''}, 'All agents'), ...agents.map((a) => h('option', {value: a}, keyText(a))));
  sel.value = app.agent;
}

// sessionRef names a session as the API does, by agent and key: two agents
// may each have a session of the same bare key ("global").
const sessionRef = (agentId, key) => agentId + ' ' + key;

// renderSessions lists sessions depth-first along spawn edges, so each
// child sits under its parent.
function renderSessions() {
  const shown = app.sessions.filter((s) => !app.agent || s.agentId === app.agent);
  const byId = new Map(shown.map((s) => [sessionRef(s.agentId, s.sessionKey), s]));
  const children = new Map();
  const roots = [];
  for (const s of shown) {
    const parent = s.spawnedBy ? sessionRef(refOf(s.spawnedBy) || s.agentId, s.spawnedBy) : '';
    if (parent && byId.has(parent) && s.spawnedBy !== s.sessionKey) {
      if (!children.has(parent)) children.set(parent, []);
      children.get(parent).push(s);
    } else {
      roots.push(s);
    }
  }
  const order = [];
  const seen = new Set();
  const visit = (s, depth) => {
    const id = sessionRef(s.agentId, s.sessionKey);
    if (seen.has(id)) return;
    seen.add(id);
    order.push([s, depth]);
    for (const c of children.get(id) || []) visit(c, depth + 1);
  };
  roots.forEach((s) => visit(s, 0));
  shown.forEach((s) => visit(s, 0)); // anything left in a spawn cycle
  const rows = order.slice(0, app.showRows).map(([s, depth]) => sessionRow(s, depth));
  const rest = order.length - rows.length;
  if (rest > 0) {
    rows.push(h('tr', {class: 'more'}, h('td', {colspan: 8}, moreButton('sessions-more',
      'Show more sessions (' + rest + ' not shown)', () => {
        app.showRows += SHOWN_ROWS;
        renderSessions();
      }))));
  }
  $('sessions-body').replaceChildren(...rows);
  $('sessions-empty').hidden = shown.length > 0;
  $('sessions-table').hidden = shown.length === 0;
  $('sessions-count').textContent = '(' + shown.length + ')';
}

function sessionRow(s, depth) {
  const name = h('td', {class: 'tree', 'data-label': 'Session'},
    depth > 0 ? h('span', {class: 'branch', 'aria-hidden': 'true'}, '└') : null,
    sessionLink(s.agentId, s.sessionKey),
    s.label ? h('span', {class: 'label'}, s.label) : null);
  name.style.setProperty('--depth', depth);
  return h('tr', {class: 'session', 'data-key': s.sessionKey, 'data-agent': s.agentId},
    name,
    h('td', {'data-label': 'Agent'}, keyText(s.agentId)),
    h('td', {'data-label': 'Kind'}, h('span', {class: 'badge kind'}, s.kind)),
    h('td', {'data-label': 'Hosted by'}, hostBadge(s)),
    h('td', {'data-label': 'Parent'}, s.spawnedBy ? sessionLink(refOf(s.spawnedBy) || s.agentId, s.spawnedBy) : h('span', {class: 'muted'}, '—')),
    h('td', {'data-label': 'Version', class: 'num'}, String(s.stateVersion || 0)),
    h('td', {'data-label': 'Goal'}, goalBadge(s.goal)),
    h('td', {'data-label': 'Last activity'}, when(s.updatedAt)));
}

// hostBadge says where a session lives: vigil, or the runtime that keeps
// a session recorded elsewhere.
function hostBadge(s) {
  const elsewhere = s.state === 'recorded';
  return h('span', {class: 'badge host' + (elsewhere ? ' elsewhere' : ''), 'data-state': s.state || '',
    title: elsewhere ? 'hosted elsewhere: vigil keeps its timeline and watchers' : 'hosted by this gateway'}, s.hostedBy || 'vigil');
}

function cursorItem(c, side) {
  const other = side === 'watcher' ? c.target : c.watcher;
  const otherAgent = side === 'watcher' ? c.targetAgentId : refOf(c.watcher);
  return h('li', {class: 'cursor' + (c.pending ? ' pending' : ''), 'data-watcher': c.watcher, 'data-target': c.target},
    h('div', {class: 'edge'},
      h('span', {class: 'arrow', 'aria-hidden': 'true'}, side === 'watcher' ? '→' : '←'),
      h('span', {class: 'sr'}, side === 'watcher' ? 'watches ' : 'watched by '),
      graphLink(otherAgent, other),
      h('dl', {class: 'lnm'},
        h('dt', {title: 'last seen'}, 'L'), h('dd', {}, String(c.lastSeen)),
        h('dt', {title: 'notified'}, 'N'), h('dd', {}, String(c.notified)),
        h('dt', {title: 'material'}, 'M'), h('dd', {}, String(c.material))),
      h('span', {class: 'badge ' + (c.pending ? 'pending' : 'synced')}, c.pending ? 'notice pending' : 'synced')),
    c.pending && c.notice ? h('p', {class: 'notice'}, c.notice) : null);
}

function renderGraph() {
  const shown = app.cursors.filter((c) => !app.agent || c.targetAgentId === app.agent || refOf(c.watcher) === app.agent);
  const byWatcher = new Map();
  for (const c of shown) {
    if (!byWatcher.has(c.watcher)) byWatcher.set(c.watcher, []);
    byWatcher.get(c.watcher).push(c);
  }
  // Drawn up to app.showCursors cursors, watcher by watcher.
  let room = app.showCursors;
  const items = [];
  for (const w of [...byWatcher.keys()].sort()) {
    if (room <= 0) break;
    const list = byWatcher.get(w);
    const pending = list.filter((c) => c.pending).length;
    items.push(h('li', {class: 'watcher' + (pending ? ' has-pending' : ''), 'data-watcher': w},
      h('h3', {}, graphLink(refOf(w), w), ' ', h('span', {class: 'muted'}, 'watches ' + list.length),
        pending ? h('span', {class: 'badge pending'}, pending + ' pending') : null),
      h('ul', {}, list.slice(0, room).map((c) => cursorItem(c, 'watcher')))));
    room -= list.length;
  }
  if (room < 0 || items.length < byWatcher.size) {
    const drawn = Math.min(app.showCursors, shown.length);
    items.push(h('li', {class: 'more'}, moreButton('graph-more', 'Show more of the graph (' + (shown.length - drawn) + ' not shown)', () => {
      app.showCursors += SHOWN_ROWS;
      renderGraph();
    })));
  }
  $('graph').replaceChildren(...items);
  $('graph-empty').hidden = shown.length > 0;
  const pending = shown.filter((c) => c.pending).length;
  $('graph-count').textContent = '(' + shown.length + (pending ? ', ' + pending + ' pending' : '') + ')';
}

function renderPageGraph() {
  const p = app.page;
  if (!p) return;
  const watchers = app.cursors.filter((c) => c.target === p.key && c.targetAgentId === p.agentId);
  const watches = app.cursors.filter((c) => c.watcher === p.key);
  $('watchers').replaceChildren(...watchers.map((c) => cursorItem(c, 'target')));
  $('watches').replaceChildren(...watches.map((c) => cursorItem(c, 'watcher')));
  $('watchers-empty').hidden = watchers.length > 0;
  $('watches-empty').hidden = watches.length > 0;
}

function fact(term, value) {
  return h('div', {}, h('dt', {}, term), h('dd', {}, value));
}

function renderFacts() {
  const p = app.page;
  const st = p && p.status;
  if (!st) return;
  const row = app.sessions.find((s) => s.sessionKey === p.key && s.agentId === p.agentId);
  $('s-missing').hidden = st.exists;
  $('s-elsewhere').hidden = st.state !== 'recorded';
  const facts = !st.exists ? [] : st.state === 'recorded' ? [
    fact('Agent', keyText(st.agentId)),
    fact('Kind', st.kind),
    fact('Hosted by', hostBadge(st)),
    fact('State version', String(st.stateVersion)),
    st.createdAt ? fact('First recorded', when(st.createdAt)) : null,
    st.updatedAt ? fact('Last recorded', when(st.updatedAt)) : null,
  ] : [
    fact('Agent', keyText(st.agentId)),
    fact('Kind', st.kind),
    fact('Hosted by', hostBadge(st)),
    st.label ? fact('Label', st.label) : null,
    fact('Parent', st.spawnedBy ? sessionLink(refOf(st.spawnedBy) || st.agentId, st.spawnedBy) : '—'),
    fact('State version', String(st.stateVersion)),
    fact('Incarnation', st.sessionId),
    fact('Created', when(st.createdAt)),
    fact('Last activity', when(Math.max(st.updatedAt || 0, (row && row.updatedAt) || 0))),
  ];
  $('s-facts').replaceChildren(...facts.filter(Boolean));
}

// renderDenied shows the page of a session the token may not see, or
// (with the reason) of an address naming none: why, and none of the forms
// that could only fail.
function renderDenied(invalid) {
  for (const id of ['goal-form', 'send-form', 'queued-card', 's-missing', 's-elsewhere']) $(id).hidden = true;
  $('s-denied').hidden = !!invalid;
  $('s-invalid').hidden = !invalid;
  $('s-invalid').textContent = invalid || '';
  $('goal-current').replaceChildren();
  $('transcript-empty').hidden = true;
  $('timeline-empty').hidden = true;
  $('s-facts').replaceChildren();
}

function renderPage() {
  const p = app.page;
  const st = p.status;
  renderFacts();
  const hosted = st.state === 'hosted';
  for (const id of ['goal-form', 'send-form']) $(id).hidden = !hosted;
  const goal = st.goal || null;
  $('goal-current').replaceChildren(goal
    ? h('span', {}, h('span', {class: 'badge goal-' + goal.status}, goal.status), ' ', h('span', {class: 'objective'}, goal.objective))
    : h('span', {class: 'muted'}, 'No goal.'));
  if (!p.goalDirty) fillGoalForm(goal);
  // Disabled with the focus on it, the button would drop the focus to the
  // page's body: the objective, the next thing to write, takes it.
  if (!goal && document.activeElement === $('goal-clear')) $('goal-objective').focus();
  $('goal-clear').disabled = !goal;

  const list = $('transcript');
  // Follow the newest message unless the person has scrolled up to read.
  const atEnd = list.scrollHeight - list.scrollTop - list.clientHeight < 40;
  const messages = p.messages.slice(-p.showMessages);
  const earlier = p.messages.length - messages.length;
  // While older pages are unread, how many messages they hold is unknown.
  const more = p.before ? 'Show earlier messages' : 'Show earlier messages (' + earlier + ' not shown)';
  list.replaceChildren(...(earlier > 0 || p.before ? [moreItem('transcript-more', more, () => showEarlier(p, list))] : []),
    ...messages.map((m) => h('li',
    {class: 'message role-' + m.role + ' actor-' + m.actorType, 'data-id': String(m.id)},
    h('div', {class: 'meta'},
      h('span', {class: 'badge actor actor-' + m.actorType}, m.role === 'assistant' ? 'reply' : m.role === 'summary' ? 'summary' : m.actorType),
      m.actorId ? h('span', {class: 'who'}, keyText(m.actorId)) : null,
      m.channel ? h('span', {class: 'channel'}, 'via ' + m.channel) : null,
      when(m.createdAt)),
    h('p', {class: 'content'}, m.content))));
  if (atEnd) list.scrollTop = list.scrollHeight;
  $('transcript-empty').hidden = p.messages.length > 0 || !st.exists;
  $('transcript-empty').textContent = hosted ? 'No messages yet.' : 'Its runtime keeps its transcript.';

  const events = p.events.slice(-p.showEvents).reverse();
  const older = p.events.length - events.length;
  $('timeline').replaceChildren(...events.map((e) => h('li',
    {class: 'event actor-' + e.actorType, 'data-sequence': String(e.sequence), 'data-kind': e.kind, 'data-actor-type': e.actorType},
    h('div', {class: 'meta'},
      h('span', {class: 'seq', title: 'sequence'}, '#' + e.sequence),
      h('span', {class: 'badge actor actor-' + e.actorType}, e.actorType),
      e.actorId ? h('span', {class: 'who'}, keyText(e.actorId)) : null,
      when(e.occurredAt)),
    h('p', {class: 'summary'}, h('span', {class: 'kind'}, e.kind), ' ', e.summary))));
  // While older changes are unread, how many there are is unknown.
  if (older > 0 || p.back.from > 0) {
    const more = p.back.from > 0 ? 'Show older changes' : 'Show older changes (' + older + ' not shown)';
    $('timeline').append(moreItem('timeline-more', more, () => showOlder(p)));
  }
  // Retention's removals lie before the oldest change kept, so they are
  // told of once everything kept has been read.
  if (p.back.from === 0 && p.back.gap) $('timeline').append(h('li', {class: 'gap'}, 'Older changes were removed by retention.'));
  $('timeline-empty').hidden = events.length > 0;

  const canWatch = st.exists && p.key.startsWith('agent:') && p.queued !== null;
  $('queued-card').hidden = !canWatch;
  $('queued').replaceChildren(...(p.queued || []).map((e) => h('li',
    {class: 'queued-event' + (e.data && e.data.type === 'deleted' ? ' deleted' : ''), 'data-target': e.target || ''},
    // A bare target key does not name its agent: the notice's data does.
    e.target ? h('div', {class: 'meta'}, sessionLink((e.data && e.data.targetAgentId) || refOf(e.target) || st.agentId, e.target)) : null,
    h('p', {class: 'notice'}, e.text))));
  $('queued-empty').hidden = !canWatch || (p.queued || []).length > 0;
  renderPageGraph();
}

// moreItem is a list item with a button that draws more of a list; the
// button keeps the focus across the redraw while there is still more.
function moreItem(id, text, draw) {
  return h('li', {class: 'more'}, moreButton(id, text, draw));
}

function moreButton(id, text, draw) {
  const button = h('button', {id, type: 'button', class: 'secondary'}, text);
  button.addEventListener('click', async () => {
    await draw();
    const again = $(id);
    if (again) again.focus({preventScroll: true});
  });
  return button;
}

function fillGoalForm(goal) {
  $('goal-objective').value = goal ? goal.objective : '';
  $('goal-status').value = goal ? goal.status : 'active';
  if (app.page) app.page.goalDirty = false;
}

// ---- actions ----

function showError(id, e) {
  if (untold(e)) return;
  $(id).textContent = e.message;
  $(id).hidden = false;
}

// showFailed tells of an action on page p that failed: under its form
// while p is open, else in the banner, naming the session, since the form
// now belongs to another session's page.
function showFailed(p, id, what, e) {
  if (app.page === p) showError(id, e);
  else if (!untold(e)) showBanner(what + ': ' + e.message, 'error');
}

// busy disables a button while its action runs, and runs nothing while
// it is disabled: a form sent without its button (Ctrl+Enter) would
// otherwise send the same thing twice. A disabled button loses the focus
// to the page's body, so a person who pressed it from the keyboard gets
// the focus back on it, unless it has gone elsewhere since.
async function busy(button, fn) {
  if (button.disabled) return;
  const focused = document.activeElement === button;
  button.disabled = true;
  try {
    await fn();
  } finally {
    button.disabled = false;
    if (focused && (document.activeElement === document.body || !document.activeElement)) button.focus();
  }
}

async function saveGoal(ev) {
  ev.preventDefault();
  const p = app.page;
  if (!p || !p.status) return;
  $('goal-error').hidden = true;
  const objective = $('goal-objective').value.trim();
  const status = $('goal-status').value;
  if (!objective) {
    showError('goal-error', new Error('Write an objective, or clear the goal.'));
    return;
  }
  const ref = {sessionKey: p.key, agentId: p.agentId};
  const goal = p.status.goal;
  // The person decided on what the page showed when they began: the first
  // write applies only while the session is still at that version, so an
  // edit made meanwhile by someone else is not silently overwritten.
  const seen = {ifStateVersion: p.goalDirty && p.editBase !== undefined ? p.editBase : p.status.stateVersion};
  const failed = 'The goal of ' + keyText(p.key) + ' was not saved';
  await busy($('goal-save'), async () => {
    try {
      if (!goal) {
        await call('session_goal', Object.assign({action: 'set', objective, status}, ref, seen));
      } else {
        const writes = [];
        if (objective !== goal.objective) writes.push({action: 'edit', objective});
        if (status !== goal.status) writes.push({action: 'status', status});
        for (const [i, w] of writes.entries()) {
          const out = await call('session_goal', Object.assign(w, ref, i === 0 ? seen : {}));
          // A write that applied is the person's own change: if a later
          // one fails, saving again builds on it rather than being refused
          // as if someone else had changed the session.
          p.editBase = out.stateVersion;
        }
      }
      p.goalDirty = false;
      schedule('page', rowPart(p.agentId, p.key));
    } catch (e) {
      if (e.code === 'conflict') {
        showConflict(p, e, 'while you were editing', 'save again', failed);
        return;
      }
      showFailed(p, 'goal-error', failed, e);
    }
  });
}

// showConflict says that a goal write was refused because the session
// changed after what the page showed, and reads the page again. The form
// keeps what the person wrote: having now been shown the version that
// refused it, they may save it again over that version.
function showConflict(p, e, when, retry, what) {
  showFailed(p, 'goal-error', what, new Error('Someone changed this session ' + when + ' (it is now at version ' +
    e.stateVersion + '). Nothing was saved: look at the latest changes, then ' + retry + '.'));
  p.editBase = e.stateVersion;
  if (app.page === p) refreshNow('page-full');
}

async function clearGoal() {
  const p = app.page;
  if (!p) return;
  $('goal-error').hidden = true;
  // The goal cleared is the goal shown: one someone else has set since is
  // not cleared unseen.
  const seen = p.status ? {ifStateVersion: p.status.stateVersion} : {};
  const failed = 'The goal of ' + keyText(p.key) + ' was not cleared';
  await busy($('goal-clear'), async () => {
    try {
      await call('session_goal', Object.assign({sessionKey: p.key, agentId: p.agentId, action: 'clear'}, seen));
      p.goalDirty = false;
      schedule('page', rowPart(p.agentId, p.key));
    } catch (e) {
      if (e.code === 'conflict') {
        showConflict(p, e, 'after this page last showed it', 'clear it again', failed);
        return;
      }
      showFailed(p, 'goal-error', failed, e);
    }
  });
}

// sendMessage writes into the session as a person: a human direct message
// through the web channel, which the session's watchers are told about.
async function sendMessage(ev) {
  ev.preventDefault();
  const p = app.page;
  if (!p) return;
  $('send-error').hidden = true;
  const message = $('send-message').value;
  if (!message.trim()) {
    showError('send-error', new Error('Write a message first.'));
    return;
  }
  await busy($('send-button'), async () => {
    try {
      await call('sessions_send', {sessionKey: p.key, agentId: p.agentId, message, channel: 'web', timeoutSeconds: 0});
      // The form now belongs to whatever page is open: a person who went
      // on to another session meanwhile may have begun a draft there.
      if (app.page === p) $('send-message').value = '';
      schedule('page', rowPart(p.agentId, p.key), 'graph');
    } catch (e) {
      showFailed(p, 'send-error', 'The message to ' + keyText(p.key) + ' was not sent', e);
    }
  });
}

// ---- banner ----

function showBanner(text, kind) {
  $('banner').className = 'banner' + (kind ? ' ' + kind : '');
  $('banner-text').textContent = text;
  $('banner').hidden = false;
}

function hideBanner() {
  $('banner').hidden = true;
}

document.addEventListener('DOMContentLoaded', () => {
  // The skip link moves the focus without touching the address, which
  // names the page shown: #main would be read as a route to the list.
  document.querySelector('a.skip').addEventListener('click', (ev) => {
    ev.preventDefault();
    $('main').focus();
  });
  $('login-form').addEventListener('submit', submitLogin);
  $('signout').addEventListener('click', () => signOut(''));
  $('banner-close').addEventListener('click', hideBanner);
  $('agent-filter').addEventListener('change', (ev) => {
    app.agent = ev.target.value;
    renderSessions();
    renderGraph();
  });
  $('goal-form').addEventListener('submit', saveGoal);
  $('goal-form').addEventListener('input', () => {
    // The version the person started from: a save applies only while the
    // session is still there, whatever the page has redrawn since.
    if (app.page && !app.page.goalDirty && app.page.status) app.page.editBase = app.page.status.stateVersion;
    if (app.page) app.page.goalDirty = true;
  });
  $('goal-clear').addEventListener('click', clearGoal);
  $('send-form').addEventListener('submit', sendMessage);
  $('send-message').addEventListener('keydown', (ev) => {
    if (ev.key === 'Enter' && (ev.ctrlKey || ev.metaKey)) $('send-form').requestSubmit();
  });
  window.addEventListener('hashchange', route);
  start();
});
