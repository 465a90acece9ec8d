// The official MCP TypeScript SDK's client against the bridge's MCP server:
// a client nobody here wrote. Run by tests/mcp_sdk.rs as
// `node client.mjs SDK_INSTALL_DIR URL TOKEN [sdk|agy]`; prints one JSON
// line with what the server answered, and exits non-zero on any failure.
//
// `sdk` (the default) is the SDK's own sequence: initialize, tools/list,
// tools/call. `agy` is the sequence agy 1.2.x sends (docs/agy-format.md,
// "MCP"): a `server/discover` request (2026-07-28 in `_meta`) that must fail
// with -32601, then initialize at 2025-11-25 as `antigravity-client` 1.0.0
// with capabilities elicitation and roots, then tools/list and tools/call;
// the discover request goes through the SDK's transport, the rest through
// its client. Every request the SDK sends is recorded (method, protocol
// header) so the test can check the sequence, not just the answers.
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";

const [sdkDir, url, token, mode = "sdk"] = process.argv.slice(2);
const require = createRequire(path.join(sdkDir, "package.json"));
const { Client } = require("@modelcontextprotocol/sdk/client/index.js");
const { StreamableHTTPClientTransport } = require("@modelcontextprotocol/sdk/client/streamableHttp.js");
const sdkVersion = JSON.parse(
  readFileSync(path.join(sdkDir, "node_modules/@modelcontextprotocol/sdk/package.json"), "utf8"),
).version;

/** agy's initialize version; a newer SDK asking for another is pinned to it. */
const AGY_PROTOCOL = "2025-11-25";
/** What the SDK sent: one entry per POST. */
const sent = [];

/** fetch as the SDK calls it, recording each JSON-RPC message and, in `agy`
 *  mode, pinning initialize's protocolVersion to agy's. */
async function recordingFetch(input, init = {}) {
  const headers = new Headers(init.headers);
  let body = init.body;
  if (init.method === "POST" && typeof body === "string") {
    const msg = JSON.parse(body);
    if (mode === "agy" && msg.method === "initialize" && msg.params.protocolVersion !== AGY_PROTOCOL) {
      msg.params.protocolVersion = AGY_PROTOCOL;
      body = JSON.stringify(msg);
    }
    sent.push({
      method: msg.method ?? null,
      params: msg.method === "initialize" || msg.method === "server/discover" ? msg.params : undefined,
      protocolHeader: headers.get("mcp-protocol-version"),
      token: headers.get("x-token") === token,
    });
  }
  return fetch(input, { ...init, body });
}

function transport() {
  return new StreamableHTTPClientTransport(new URL(url), {
    requestInit: { headers: { "x-token": token } },
    fetch: recordingFetch,
  });
}

/** agy's first request, through a bare SDK transport: its JSON-RPC answer. */
async function discover() {
  const t = transport();
  const answer = new Promise((resolve, reject) => {
    t.onmessage = resolve;
    t.onerror = reject;
  });
  await t.start();
  await t.send({ jsonrpc: "2.0", id: 0, method: "server/discover", params: { _meta: { protocolVersion: "2026-07-28" } } });
  const got = await answer;
  await t.close();
  return got;
}

async function run() {
  const discovered = mode === "agy" ? await discover() : null;
  const client =
    mode === "agy"
      ? new Client({ name: "antigravity-client", version: "1.0.0" }, { capabilities: { elicitation: {}, roots: {} } })
      : new Client({ name: "sdk-conformance", version: "1.0.0" });
  const t = transport();
  await client.connect(t);
  const listed = await client.listTools();
  const called = await client.callTool({ name: "echo", arguments: { text: "hi" } });
  let refused = null;
  try {
    await client.callTool({ name: "echo", arguments: "not an object" });
  } catch (e) {
    refused = e.code ?? String(e);
  }
  const out = {
    sdkVersion,
    mode,
    discovered,
    protocolVersion: t.protocolVersion ?? null,
    server: client.getServerVersion(),
    tools: listed.tools.map((tool) => tool.name),
    called,
    refused,
    sent,
  };
  await client.close();
  return out;
}

try {
  console.log(JSON.stringify(await run()));
} catch (e) {
  console.error(`MCP SDK client failed: ${e.stack ?? e}`);
  process.exit(1);
}
