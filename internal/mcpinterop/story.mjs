// The seed's story told by an MCP client of the official TypeScript SDK,
// against a running `vigil serve`: a coordinator spawns a child, a person
// writes into the child, the coordinator is told once (one "System:" line
// in its next tool result) and reconciles exactly (session_status with the
// line's changesSince gives the one change), its resource subscription hears
// the change, and session_wait returns with the next notice.
//
// Usage: node story.mjs REVISION TRANSPORT
//   REVISION   2026-07-28 (the SDK's @modelcontextprotocol/client, pinned to
//              that revision) or 2025-11-25 (@modelcontextprotocol/sdk,
//              whose newest revision it is)
//   TRANSPORT  http (streamable HTTP at $VIGIL_URL/mcp) or stdio (the
//              $VIGIL_BIN binary run as `vigil mcp`, relaying to $VIGIL_URL)
// Environment: VIGIL_URL, VIGIL_BIN, VIGIL_AGENT (the coordinator's agent:
// it acts as that agent's main session), VIGIL_AGENT_TOKEN (its token),
// VIGIL_OPERATOR_TOKEN (a person's token), VIGIL_OPERATOR_ID (that person).
// Each run wants an agent of its own, so no earlier run's notices reach it.
//
// It prints one "ok" or "not ok" line a step and exits 1 when any step
// failed. Every wait is bounded.

const [revision, transportName] = process.argv.slice(2);
const env = (name) => {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set`);
  return v;
};
const base = env('VIGIL_URL');
const mainToken = env('VIGIL_AGENT_TOKEN');
const operatorToken = env('VIGIL_OPERATOR_TOKEN');
const operatorId = env('VIGIL_OPERATOR_ID');
const manager = `agent:${env('VIGIL_AGENT')}:main`;
const subscriptionIdKey = 'io.modelcontextprotocol/subscriptionId';
const hangGuardMs = 20000;

let failed = 0;
function check(what, ok, detail) {
  console.log(`${ok ? 'ok' : 'not ok'} - ${what}${ok || detail === undefined ? '' : ': ' + JSON.stringify(detail)}`);
  if (!ok) failed++;
  return ok;
}

function bounded(promise, what) {
  let timer;
  const guard = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: no answer within the hang guard`)), hangGuardMs);
  });
  return Promise.race([promise, guard]).finally(() => clearTimeout(timer));
}

// The notice vigil queues for a watcher of target that last saw lastSeen.
const noticeText = (target, lastSeen) =>
  `Session ${JSON.stringify(target)} changed (other actor). Reconcile before acting: ` +
  `session_status sessionKey ${JSON.stringify(target)} changesSince ${lastSeen}.`;

// A person writes into a session over the HTTP API.
async function personWrites(sessionKey, message) {
  const resp = await fetch(`${base}/v1/tools/sessions_send`, {
    method: 'POST',
    headers: { Authorization: `Bearer ${operatorToken}`, 'Content-Type': 'application/json' },
    body: JSON.stringify({ sessionKey, message, timeoutSeconds: 0 }),
    signal: AbortSignal.timeout(hangGuardMs),
  });
  const body = await resp.json();
  if (resp.status !== 200 || body.status !== 'accepted') {
    throw new Error(`the person's send answered ${resp.status} ${JSON.stringify(body)}`);
  }
}

async function loadSDK() {
  if (revision === '2026-07-28') {
    const m = await import('@modelcontextprotocol/client');
    const stdio = await import('@modelcontextprotocol/client/stdio');
    return {
      name: '@modelcontextprotocol/client',
      Client: m.Client,
      HTTP: m.StreamableHTTPClientTransport,
      Stdio: stdio.StdioClientTransport,
      options: { versionNegotiation: { mode: { pin: revision } } },
      onUpdate: (client, f) => client.setNotificationHandler('notifications/resources/updated', f),
    };
  }
  if (revision === '2025-11-25') {
    const { Client } = await import('@modelcontextprotocol/sdk/client/index.js');
    const { StreamableHTTPClientTransport } = await import('@modelcontextprotocol/sdk/client/streamableHttp.js');
    const { StdioClientTransport } = await import('@modelcontextprotocol/sdk/client/stdio.js');
    const { ResourceUpdatedNotificationSchema } = await import('@modelcontextprotocol/sdk/types.js');
    return {
      name: '@modelcontextprotocol/sdk',
      Client,
      HTTP: StreamableHTTPClientTransport,
      Stdio: StdioClientTransport,
      options: {},
      onUpdate: (client, f) => client.setNotificationHandler(ResourceUpdatedNotificationSchema, f),
    };
  }
  throw new Error(`unknown revision ${revision}`);
}

// spy records the methods the client sends and the protocol version the
// server answers initialize or server/discover with.
function spy(transport, seen) {
  const send = transport.send.bind(transport);
  transport.send = (msg, opts) => {
    if (msg.method) seen.sent.push(msg.method);
    return send(msg, opts);
  };
  let inner;
  Object.defineProperty(transport, 'onmessage', {
    configurable: true,
    get: () => inner,
    set: (f) => {
      inner = f && ((msg, extra) => {
        if (msg.result?.protocolVersion) seen.version = msg.result.protocolVersion;
        if (msg.result?.supportedVersions) seen.supported = msg.result.supportedVersions;
        return f(msg, extra);
      });
    },
  });
  return transport;
}

async function main() {
  const sdk = await loadSDK();
  let transport;
  if (transportName === 'http') {
    transport = new sdk.HTTP(new URL(`${base}/mcp`), {
      requestInit: { headers: { Authorization: `Bearer ${mainToken}`, 'Vigil-Session': manager } },
    });
  } else if (transportName === 'stdio') {
    transport = new sdk.Stdio({
      command: env('VIGIL_BIN'),
      args: ['mcp', '--session', manager],
      env: { PATH: process.env.PATH, HOME: process.env.HOME ?? '/', VIGIL_ADDR: base, VIGIL_TOKEN: mainToken },
      stderr: 'inherit',
    });
  } else {
    throw new Error(`unknown transport ${transportName}`);
  }
  const seen = { sent: [] };
  spy(transport, seen);

  const updates = [];
  let updated;
  const nextUpdate = () => new Promise((resolve) => { updated = resolve; });
  let waiting = nextUpdate();
  const client = new sdk.Client({ name: 'vigil-interop', version: '1' }, sdk.options);
  sdk.onUpdate(client, (n) => {
    updates.push(n.params);
    updated(n.params);
  });

  console.log(`# ${sdk.name} on ${revision} over ${transportName}`);
  await bounded(client.connect(transport), 'connect');
  try {
    const negotiated = client.getNegotiatedProtocolVersion?.() ?? seen.version;
    check(`negotiated ${revision}`, negotiated === revision, negotiated);
    if (revision === '2026-07-28') {
      // The stdio transport may probe on a process of its own, out of the
      // spy's sight; what it does show must hold no initialize.
      console.log(`# methods seen on the transport: ${seen.sent.join(' ') || '(none)'}`);
      check('no initialize on 2026-07-28', !seen.sent.includes('initialize'), seen.sent);
    } else {
      check('initialize on 2025-11-25', seen.sent.includes('initialize'), seen.sent);
    }

    const call = async (name, args) => {
      const r = await bounded(client.callTool({ name, arguments: args }), name);
      const texts = (r.content ?? []).filter((c) => c.type === 'text').map((c) => c.text);
      return { r, texts, system: texts.filter((t) => t.startsWith('System: ')) };
    };

    const tools = await bounded(client.listTools(), 'tools/list');
    const names = tools.tools.map((t) => t.name).sort();
    check('the model tools are listed', ['session_status', 'session_wait', 'sessions_list', 'sessions_spawn'].every((n) => names.includes(n)), names);

    const spawn = await call('sessions_spawn', { task: 'draft the Q3 report', label: `writer ${revision} ${transportName}` });
    const child = spawn.r.structuredContent?.childSessionKey;
    // The spawn's result carries the notice that the child was created.
    if (!check('the coordinator spawns a child, and is told it was created', !spawn.r.isError && typeof child === 'string' &&
      spawn.system.length === 1 && spawn.system[0].startsWith('System: New session created'), spawn.texts)) {
      return;
    }
    const uri = `vigil://session/${child}`;
    // State versions are positions in the gateway's one log, so the child's
    // starts wherever the log is; its notices count from what was seen.
    const before = await call('session_status', { sessionKey: child });
    const spawnedAt = before.r.structuredContent?.stateVersion;
    check('the child has a state version', Number.isInteger(spawnedAt) && before.system.length === 0, before.r.structuredContent);

    if (revision === '2026-07-28') {
      const sub = await bounded(client.listen({ resourceSubscriptions: [uri] }), 'subscriptions/listen');
      check('subscriptions/listen honours the child resource', (sub.honoredFilter.resourceSubscriptions ?? []).includes(uri), sub.honoredFilter);
    } else {
      await bounded(client.subscribeResource({ uri }), 'resources/subscribe');
      check('resources/subscribe to the child resource', true);
    }

    const quiet = await call('sessions_list', {});
    check('no notice before anyone changed the child', quiet.system.length === 0, quiet.system);

    await personWrites(child, 'use the revised figures');

    const told = await call('sessions_list', {});
    check('the coordinator is told once: one System: line', told.system.length === 1 && told.system[0] === 'System: ' + noticeText(child, spawnedAt), told.system);

    const st = await call('session_status', { sessionKey: child, changesSince: spawnedAt });
    const sc = st.r.structuredContent ?? {};
    const events = sc.stateChanges?.events ?? [];
    check('it reconciles exactly: session_status since the line gives the one change', !st.r.isError && st.system.length === 0 &&
      events.length === 1 && events[0].sequence === sc.stateVersion && events[0].kind === 'human_direct_message' &&
      events[0].actorType === 'human' && events[0].actorId === operatorId && !sc.stateChanges.historyGap, sc);

    const again = await call('sessions_list', {});
    check('the line never comes again', again.system.length === 0, again.system);

    const u = await bounded(waiting, 'notifications/resources/updated');
    check('the subscription hears the child move', u.uri === uri, u);
    const id = u._meta?.[subscriptionIdKey];
    if (revision === '2026-07-28') {
      check('the update names its listen in _meta', id !== undefined && id !== null, u._meta);
    } else {
      check('the update carries no subscription id', id === undefined, u._meta);
    }

    const r = await bounded(client.readResource({ uri }), 'resources/read');
    const status = JSON.parse(r.contents?.[0]?.text ?? '{}');
    check('the resource reads the moved state', status.sessionKey === child && status.stateVersion >= sc.stateVersion, status);

    await personWrites(child, 'and the new template');
    const wait = await call('session_wait', { timeoutSeconds: 30 });
    const turn = wait.r.structuredContent ?? {};
    check('session_wait returns with the next notice', !wait.r.isError && turn.timedOut === false &&
      JSON.stringify(turn.systemEvents) === JSON.stringify([noticeText(child, sc.stateVersion)]) && wait.system.length === 0, turn);
  } finally {
    await client.close().catch(() => {});
  }
}

try {
  await main();
} catch (err) {
  check('the story ran to its end', false, String(err?.stack ?? err));
}
console.log(failed === 0 ? `# ${revision} ${transportName}: passed` : `# ${revision} ${transportName}: ${failed} failed`);
process.exit(failed === 0 ? 0 : 1);
