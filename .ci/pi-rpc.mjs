// pi in RPC mode, driving the extension the way a user does: `/agy` changes
// a setting, and Esc (an RPC `abort`) mid-turn stops agy's whole process
// tree. Prints one "ok"/"FAIL" line per check; exit code = failures.
//
// Usage: node pi-rpc.mjs PI_BIN EXTENSION_DIR PIDFILE CONFIG_JSON
import { spawn } from "node:child_process";
import { createInterface } from "node:readline";
import fs from "node:fs";

const [piBin, extension, pidfile, configPath] = process.argv.slice(2);
let failures = 0;
const check = (name, ok, detail = "") => {
	console.log(`${ok ? "ok  " : "FAIL"} - ${name}${ok ? "" : `\n       ${detail}`}`);
	if (!ok) failures++;
};

const pi = spawn(piBin, ["--offline", "--no-session", "--mode", "rpc", "-e", extension, "--model", "antigravity/gemini-3.7-flash"], {
	stdio: ["pipe", "pipe", "inherit"],
});
const events = [];
const waiters = [];
createInterface({ input: pi.stdout }).on("line", (line) => {
	let ev;
	try {
		ev = JSON.parse(line);
	} catch {
		return;
	}
	events.push(ev);
	for (const w of [...waiters]) {
		if (w.pred(ev)) {
			waiters.splice(waiters.indexOf(w), 1);
			w.resolve(ev);
		}
	}
});
const send = (cmd) => pi.stdin.write(`${JSON.stringify(cmd)}\n`);
const waitFor = (pred, ms, what) =>
	new Promise((resolve) => {
		const found = events.find(pred);
		if (found) return resolve(found);
		const w = { pred, resolve };
		waiters.push(w);
		setTimeout(() => {
			const i = waiters.indexOf(w);
			if (i >= 0) waiters.splice(i, 1);
			resolve(null);
		}, ms);
	});
const alive = (pid) => {
	try {
		const stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8");
		return !/\) [ZX] /.test(stat);
	} catch {
		return false;
	}
};

// 1. /agy mode plan: the extension runs `agy-bridge config mode plan`.
send({ type: "prompt", message: "/agy mode plan" });
const note = await waitFor((e) => e.type === "extension_ui_request" && e.method === "notify", 20000, "notify");
let config = {};
try {
	config = JSON.parse(fs.readFileSync(configPath, "utf8"));
} catch {}
check("/agy mode plan saves the setting and reports it", note && /plan/.test(note.message) && config.mode === "plan", JSON.stringify({ note, config }));

// 2. Abort mid-turn: pi ends the turn as aborted, agy's tree is gone.
send({ id: "p1", type: "prompt", message: "Write a long report" });
const delta = await waitFor(
	(e) => e.type === "message_update" && e.assistantMessageEvent?.type === "text_delta",
	30000,
	"first text",
);
check("the turn streams text before it ends", !!delta, "no text_delta within 30 s");
const t0 = Date.now();
send({ type: "abort" });
const end = await waitFor((e) => e.type === "agent_end", 15000, "agent_end");
const last = end?.messages?.filter((m) => m.role === "assistant").at(-1);
check("abort ends the turn as aborted", last?.stopReason === "aborted", JSON.stringify(last ?? end ?? null).slice(0, 400));
check("abort is prompt (< 5 s)", end && Date.now() - t0 < 5000, `${Date.now() - t0} ms`);
await new Promise((r) => setTimeout(r, 500));
let grandchild = 0;
try {
	grandchild = Number(fs.readFileSync(pidfile, "utf8").trim());
} catch {}
check("agy's process tree is gone after abort", grandchild > 0 && !alive(grandchild), `grandchild pid ${grandchild}`);

pi.stdin.end();
pi.kill("SIGTERM");
process.exit(failures);
