// pi in RPC mode: agy (fake-agy) calls pi's tool `pi_probe`, which runs
// until aborted; Esc (an RPC `abort`) while it runs must end the turn, take
// agy's tree down, close the bridge's MCP port and remove its config dir.
// Prints one "ok"/"FAIL" line per check; exit code = failures.
//
// Usage: node pi-mcp-rpc.mjs PI_BIN EXTENSION_DIR PROBE_EXTENSION_DIR PIDFILE BLOCKFILE TMPDIR
import { spawn } from "node:child_process";
import { createInterface } from "node:readline";
import fs from "node:fs";
import { alive, check, failures, until } from "./rpc-check.mjs";
import net from "node:net";
import path from "node:path";

const [piBin, extension, probe, pidfile, blockfile, tmpdir] = process.argv.slice(2);
const privateDirs = () => fs.readdirSync(tmpdir).filter((n) => n.startsWith("agy-bridge-mcp-")).map((n) => path.join(tmpdir, n));
const portOpen = (port) =>
	new Promise((resolve) => {
		const s = net.connect({ host: "127.0.0.1", port }, () => {
			s.destroy();
			resolve(true);
		});
		s.on("error", () => resolve(false));
	});

const pi = spawn(piBin, ["--offline", "--no-session", "--mode", "rpc", "-e", extension, "-e", probe, "--model", "antigravity/gemini-3.7-flash"], {
	stdio: ["pipe", "pipe", "inherit"],
	env: { ...process.env, PROBE_BLOCK_FILE: blockfile, TMPDIR: tmpdir },
});
const events = [];
createInterface({ input: pi.stdout }).on("line", (line) => {
	try {
		events.push(JSON.parse(line));
	} catch {}
});
pi.stdin.write(`${JSON.stringify({ id: "p1", type: "prompt", message: "Ask pi for a probe value" })}\n`);

const running = await until(() => fs.existsSync(blockfile), 60000);
check("agy's call of pi_probe runs in pi", !!running, `events: ${events.map((e) => e.type).join(",").slice(0, 400)}`);
const dirs = privateDirs();
let port = 0;
try {
	const cfg = JSON.parse(fs.readFileSync(path.join(dirs[0], ".agents/mcp_config.json"), "utf8"));
	port = Number(new URL(cfg.mcpServers.pi.serverUrl).port);
} catch {}
check("the bridge serves pi's tools on a loopback port while the tool runs", port > 0 && (await portOpen(port)), `dirs ${dirs}, port ${port}`);

pi.stdin.write(`${JSON.stringify({ type: "abort" })}\n`);
const end = await until(() => events.find((e) => e.type === "agent_end"), 15000);
check("abort while pi's tool runs ends the turn", !!end, `events: ${events.map((e) => e.type).join(",").slice(-400)}`);
// The aborted agy's tree, config and port go; the session's warm
// replacement (an agy of its own, with its own config and port) may stay
// while pi runs, and goes with pi.
const gone = await until(() => {
	const pid = Number(fs.readFileSync(pidfile, "utf8").trim() || 0);
	return pid > 0 && !alive(pid) && dirs.length > 0 && !fs.existsSync(dirs[0]) ? pid : 0;
}, 10000);
check("agy's process tree and the private MCP config are gone", !!gone, `dirs left: ${privateDirs()}`);
check("the MCP port is closed", port > 0 && !(await portOpen(port)), `port ${port}`);

pi.stdin.end();
pi.kill("SIGTERM");
const none = await until(() => privateDirs().length === 0, 10000);
check("once pi has exited, no private MCP config is left (the warm agy went with it)", none, `dirs left: ${privateDirs()}`);
process.exit(failures());
