// The official MCP TypeScript SDK's client against the bridge's MCP server:
// a client nobody here wrote. Run by tests/mcp_sdk.rs as
// `node client.mjs SDK_INSTALL_DIR URL TOKEN`; prints one JSON line with
// what initialize, tools/list and tools/call returned, and exits non-zero on
// any failure.
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";

const [sdkDir, url, token] = process.argv.slice(2);
const require = createRequire(path.join(sdkDir, "package.json"));
const { Client } = require("@modelcontextprotocol/sdk/client/index.js");
const { StreamableHTTPClientTransport } = require("@modelcontextprotocol/sdk/client/streamableHttp.js");
const sdkVersion = JSON.parse(
  readFileSync(path.join(sdkDir, "node_modules/@modelcontextprotocol/sdk/package.json"), "utf8"),
).version;

const client = new Client({ name: "sdk-conformance", version: "1.0.0" });
const transport = new StreamableHTTPClientTransport(new URL(url), {
  requestInit: { headers: { "x-token": token } },
});
try {
  await client.connect(transport);
  const listed = await client.listTools();
  const called = await client.callTool({ name: "echo", arguments: { text: "hi" } });
  let refused = null;
  try {
    await client.callTool({ name: "echo", arguments: "not an object" });
  } catch (e) {
    refused = e.code ?? String(e);
  }
  console.log(JSON.stringify({
    sdkVersion,
    protocolVersion: transport.protocolVersion ?? null,
    server: client.getServerVersion(),
    tools: listed.tools.map((t) => t.name),
    called,
    refused,
  }));
  await client.close();
} catch (e) {
  console.error(`MCP SDK client failed: ${e.stack ?? e}`);
  process.exit(1);
}
