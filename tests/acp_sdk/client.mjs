// The official ACP TypeScript SDK (@agentclientprotocol/sdk) as an editor:
// a client nobody here wrote, driving `agy-bridge acp` over stdio. Run by
// tests/acp_sdk.rs as
//   node client.mjs SDK_INSTALL_DIR SCENARIO EXCHANGE_JSONL CWD [SESSION_ID]
// with AGY_BRIDGE_BIN naming the agent binary and the environment (HOME,
// AGY_BIN = fake-agy, FAKE_AGY_*) the agent and fake-agy read. Prints one
// JSON line with what the agent answered and exits non-zero on any failure
// the scenario did not expect. Every JSON-RPC message either side sent is
// written to EXCHANGE_JSONL as {"from":"client"|"agent","message":...}.
//
// Scenarios: `prompt` (a streamed turn; permission requests answered
// allow-once, or reject-once for a title containing $ACP_TEST_REJECT),
// `cancel` (session/cancel once the turn has streamed something), `fail`
// (a turn that fails: the JSON-RPC error), `load` (session/load SESSION_ID,
// then a prompt of $ACP_TEST_PROMPT_AFTER_LOAD when set),
// `two` (two prompts in one session, $ACP_TEST_PAUSE_MS apart; before the
// first, it waits for agy to have been started, as FAKE_AGY_ARGV_LOG shows,
// and says whether it was),
// `mode` (session/set_mode plan between agy's start and the prompt),
// `mcp` (a `prompt` whose session/new names an MCP server of the editor's:
// see editorMcpServer).
import { spawn } from "node:child_process";
import { createWriteStream, existsSync, readFileSync } from "node:fs";
import http from "node:http";
import path from "node:path";
import { Readable, Writable } from "node:stream";
import { pathToFileURL } from "node:url";

const [sdkDir, scenario, exchangePath, cwd, loadId] = process.argv.slice(2);
const acp = await import(
  pathToFileURL(path.join(sdkDir, "node_modules/@agentclientprotocol/sdk/dist/v1/stable/acp.js")).href
);

// The `mcp` scenario's MCP server, as an editor would run one: Streamable
// HTTP on loopback, JSON answers, for what agy's client sends
// (server/discover, refused as current servers do; initialize,
// notifications/initialized, tools/list, tools/call). $ACP_TEST_MCP (JSON)
// names the server, its one tool, the header every request must carry and
// the tool's answer; a request without that header is refused (401), so
// only a config that passed the header on gets through. Every request is
// kept, for the test to check.
async function editorMcpServer(spec) {
  const requests = [];
  const [headerName, headerValue] = spec.header;
  const server = http.createServer((req, res) => {
    let body = "";
    req.on("data", (chunk) => (body += chunk));
    req.on("end", () => {
      let message = {};
      try {
        message = JSON.parse(body);
      } catch {}
      const header = req.headers[headerName.toLowerCase()] ?? null;
      requests.push({ method: message.method ?? null, params: message.params ?? null, header });
      const answer = (result) => JSON.stringify({ jsonrpc: "2.0", id: message.id, ...result });
      let reply;
      if (header !== headerValue) {
        res.writeHead(401, { "Content-Type": "text/plain" });
        return res.end("missing or wrong " + headerName);
      }
      if (message.method === "server/discover") {
        reply = answer({ error: { code: -32601, message: "Method not found" } });
      } else if (message.method === "initialize") {
        reply = answer({
          result: {
            protocolVersion: message.params?.protocolVersion,
            capabilities: { tools: {} },
            serverInfo: { name: "acp-test-editor", version: "1.0.0" },
          },
        });
      } else if (message.method === "tools/list") {
        reply = answer({
          result: { tools: [{ name: spec.tool, description: "Where a symbol is", inputSchema: { type: "object" } }] },
        });
      } else if (message.method === "tools/call") {
        reply = answer({ result: { content: [{ type: "text", text: spec.answer }], isError: false } });
      } else {
        res.writeHead(202);
        return res.end();
      }
      res.writeHead(200, { "Content-Type": "application/json", "Content-Length": Buffer.byteLength(reply) });
      res.end(reply);
    });
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  const url = `http://127.0.0.1:${server.address().port}/mcp`;
  const config = { type: "http", name: spec.server, url, headers: [{ name: headerName, value: headerValue }] };
  const close = () => new Promise((resolve) => server.close(resolve));
  return { requests, config, close };
}
const editorMcp = scenario === "mcp" ? await editorMcpServer(JSON.parse(process.env.ACP_TEST_MCP)) : null;
// Beside it, an SSE server, which agy cannot take: the agent says so.
const mcpServers = editorMcp
  ? [editorMcp.config, { type: "sse", name: "editor-events", url: "http://127.0.0.1:9/sse", headers: [] }]
  : [];

const agent = spawn(process.env.AGY_BRIDGE_BIN, ["acp"], { stdio: ["pipe", "pipe", "inherit"] });
const exchange = createWriteStream(exchangePath);
const log = (from) =>
  new TransformStream({
    transform(message, controller) {
      exchange.write(JSON.stringify({ from, message }) + "\n");
      controller.enqueue(message);
    },
  });
const wire = acp.ndJsonStream(Writable.toWeb(agent.stdin), Readable.toWeb(agent.stdout));
const toAgent = log("client");
toAgent.readable.pipeTo(wire.writable);
const stream = { writable: toAgent.writable, readable: wire.readable.pipeThrough(log("agent")) };

const updates = [];
const permissions = [];
let firstUpdate;
const streamed = new Promise((resolve) => (firstUpdate = resolve));

const client = acp
  .client({ name: "agy-bridge-acp-test" })
  .onNotification(acp.methods.client.session.update, (ctx) => {
    updates.push(ctx.params.update);
    firstUpdate();
  })
  .onRequest(acp.methods.client.session.requestPermission, (ctx) => {
    const { toolCall, options } = ctx.params;
    const reject = process.env.ACP_TEST_REJECT && (toolCall.title ?? "").includes(process.env.ACP_TEST_REJECT);
    const optionId = reject ? "reject-once" : "allow-once";
    permissions.push({ title: toolCall.title, kind: toolCall.kind, options: options.map((o) => o.kind), optionId });
    return { outcome: { outcome: "selected", optionId } };
  });

const out = await client.connectWith(stream, async (ctx) => {
  const init = await ctx.request(acp.methods.agent.initialize, {
    protocolVersion: acp.PROTOCOL_VERSION,
    clientCapabilities: {},
    clientInfo: { name: "agy-bridge-acp-test", version: "1.0.0" },
  });
  if (scenario === "load") {
    const loaded = await ctx.request(acp.methods.agent.session.load, { sessionId: loadId, cwd, mcpServers: [] });
    const text = process.env.ACP_TEST_PROMPT_AFTER_LOAD;
    if (!text) return { init, loaded };
    const replayed = updates.length;
    const done = await ctx.request(acp.methods.agent.session.prompt, { sessionId: loadId, prompt: [{ type: "text", text }] });
    return { init, loaded, replayed, stopReason: done.stopReason };
  }
  const session = await ctx.request(acp.methods.agent.session.new, { cwd, mcpServers });
  const sessionId = session.sessionId;
  if (scenario === "two") {
    const startedBeforePrompt = await agyStarted(Number(process.env.ACP_TEST_START_WAIT_MS ?? 10_000));
    const ask = (text) => ctx.request(acp.methods.agent.session.prompt, { sessionId, prompt: [{ type: "text", text }] });
    const first = await ask("What is this project?");
    await new Promise((resolve) => setTimeout(resolve, Number(process.env.ACP_TEST_PAUSE_MS ?? 0)));
    const second = await ask("Any suggestions?");
    return { init, session, startedBeforePrompt, stopReasons: [first.stopReason, second.stopReason] };
  }
  if (scenario === "mode") {
    // The session's agy is started; the mode changes before the prompt;
    // an agy in the new mode is started then, before the prompt too.
    const startedBeforePrompt = await agyStarted(10_000);
    await ctx.request(acp.methods.agent.session.setMode, { sessionId, modeId: "plan" });
    const restartedBeforePrompt = await agyStarted(10_000, '"--mode","plan"');
    const done = await ctx.request(acp.methods.agent.session.prompt, {
      sessionId,
      prompt: [{ type: "text", text: "What is this project?" }],
    });
    return { init, session, startedBeforePrompt, restartedBeforePrompt, stopReason: done.stopReason };
  }
  const prompt = ctx.request(acp.methods.agent.session.prompt, {
    sessionId,
    prompt: [{ type: "text", text: "Fix the failing test" }],
  });
  if (scenario === "cancel") {
    await streamed;
    const before = updates.length;
    await ctx.notify(acp.methods.agent.session.cancel, { sessionId });
    const done = await prompt;
    return { init, session, stopReason: done.stopReason, updatesBeforeCancel: before };
  }
  if (scenario === "fail") {
    try {
      const done = await prompt;
      return { init, session, unexpected: done };
    } catch (e) {
      return { init, session, error: { code: e.code, message: e.message, data: e.data } };
    }
  }
  const done = await prompt;
  return { init, session, stopReason: done.stopReason };
});

// Whether fake-agy was started for model turns (stream-json on its
// stdin), its command line holding `also`, within `ms`.
async function agyStarted(ms, also = "") {
  const log = process.env.FAKE_AGY_ARGV_LOG;
  const deadline = Date.now() + ms;
  const started = (line) => line.includes('"--input-format","stream-json"') && line.includes(also);
  while (Date.now() < deadline) {
    if (log && existsSync(log) && readFileSync(log, "utf8").split("\n").some(started)) return true;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  return false;
}

agent.stdin.end();
const code = await new Promise((resolve) => agent.on("exit", (c, s) => resolve(c ?? s)));
await new Promise((resolve) => exchange.end(resolve));
if (editorMcp) {
  await editorMcp.close();
  out.mcpRequests = editorMcp.requests;
}
process.stdout.write(JSON.stringify({ ...out, updates, permissions, agentExit: code }) + "\n");
