// pi in RPC mode with pi's tools for agy (fake-agy calls pi_probe twice a
// turn, each call taking $PROBE_DELAY_MS):
// - a steering message the user sends while agy's tool call runs reaches
//   agy after the tool's result, in the same agy turn (no new turn, no
//   error for agy's call), and the turn goes on to its answer;
// - a dozen provider calls on the session's one child (four turns of three
//   messages) leave Node no listener leak to warn about.
// Prints one "ok"/"FAIL" line per check; exit code = failures.
//
// pi silences Node's warnings; the probe extension logs them to WARNINGS_LOG.
//
// Usage: node pi-steer-rpc.mjs PI_BIN EXTENSION_DIR PROBE_EXTENSION_DIR BRIDGE SECRET_FILE STDIN_LOG WARNINGS_LOG
import { execFileSync, spawn } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { createInterface } from "node:readline";
import { check, failures, until } from "./rpc-check.mjs";

const [piBin, extension, probe, bridge, secretFile, stdinLog, warningsLog] = process.argv.slice(2);
const STEER = "Answer in metres, please";
const pi = spawn(piBin, ["--offline", "--no-session", "--mode", "rpc", "-e", extension, "-e", probe, "--model", "antigravity/gemini-3.7-flash"], {
	stdio: ["pipe", "pipe", "inherit"],
	env: { ...process.env, PROBE_WARNINGS_LOG: warningsLog },
});
const events = [];
createInterface({ input: pi.stdout }).on("line", (line) => {
	try {
		events.push(JSON.parse(line));
	} catch {}
});
const send = (line) => pi.stdin.write(`${JSON.stringify(line)}\n`);
const agyTurns = () => (fs.existsSync(stdinLog) ? fs.readFileSync(stdinLog, "utf8").split("\n").filter(Boolean).length : 0);
/** The assistant messages pi ended since event `from`. */
const assistants = (from) => events.slice(from).filter((e) => e.type === "message_end" && e.message?.role === "assistant").map((e) => e.message);

// 1. A steering message while agy's first call of pi_probe runs.
let from = events.length;
send({ type: "prompt", message: "Ask pi twice, the second question after the first answer" });
const running = await until(() => events.slice(from).find((e) => e.type === "tool_execution_start" && e.toolName === "pi_probe"), 60000);
send({ type: "steer", message: STEER });
const end = await until(() => events.slice(from).find((e) => e.type === "agent_end"), 60000);
const msgs = assistants(from);
check(
	"a steering message during agy's tool call: the turn goes on to agy's answer (three messages, the last a stop)",
	!!running && !!end && msgs.length === 3 && msgs.at(-1).stopReason === "stop" && msgs.every((m) => m.stopReason !== "error"),
	JSON.stringify(msgs.map((m) => [m.stopReason, m.errorMessage])),
);
const conversations = path.join(process.env.HOME, ".gemini/antigravity-cli/conversations");
const db = fs.existsSync(conversations) ? fs.readdirSync(conversations).find((n) => n.endsWith(".db")) : undefined;
const decoded = db ? execFileSync(bridge, ["decode", "--json", path.join(conversations, db)], { encoding: "utf8" }) : "";
const secret = fs.existsSync(secretFile) ? fs.readFileSync(secretFile, "utf8") : "<no secret>";
// The steer rides on the result of the call pi was running when it came,
// or (when that call had ended first, on a busy machine) on the next one's.
const probeSteps = decoded.split("\n").filter((l) => l.includes('"mcp:pi/pi_probe"') && l.includes(secret));
const step = probeSteps.find((l) => l.includes(STEER)) ?? probeSteps[0] ?? "";
check(
	"agy gets the tool's result, then the steering message, in its call's result",
	step.includes(STEER) && step.indexOf(secret) < step.indexOf(STEER),
	`pi_probe steps: ${decoded.split("\n").filter((l) => l.includes('"mcp:pi/pi_probe"')).map((l) => l.slice(0, 400)).join("\n") || decoded.slice(0, 600)}; agy's stdin: ${fs.existsSync(stdinLog) ? fs.readFileSync(stdinLog, "utf8").slice(0, 300) : "-"}`,
);
check("the steering message started no agy turn of its own", agyTurns() === 1, `agy turns on stdin: ${agyTurns()}`);

// 2. Three more turns: twelve provider calls on the one child.
for (const n of [2, 3, 4]) {
	from = events.length;
	send({ type: "prompt", message: `Ask pi twice (turn ${n})` });
	await until(() => events.slice(from).find((e) => e.type === "agent_end"), 60000);
	const m = assistants(from);
	check(`turn ${n}: three messages, the last a stop`, m.length === 3 && m.at(-1).stopReason === "stop", JSON.stringify(m.map((x) => [x.stopReason, x.errorMessage])));
}
const warnings = fs.existsSync(warningsLog) ? fs.readFileSync(warningsLog, "utf8") : "";
check("twelve provider calls on one session's child: Node saw no listener leak", !/MaxListenersExceeded/.test(warnings), warnings.slice(-800));

pi.stdin.end();
pi.kill("SIGTERM");
process.exit(failures());
