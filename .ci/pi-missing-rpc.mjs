// pi in RPC mode with pi-agy-bridge installed but no agy-bridge binary
// anywhere: the extension tells pi's UI (in RPC mode an
// `extension_ui_request`, method `notify`, level `error`) which package is
// missing and how to fix it, as soon as the session starts. pi runs on
// another provider's model (the caller gives it a key), as a user's would.
// Prints one "ok"/"FAIL" line per check; exit code = failures.
//
// Usage: node pi-missing-rpc.mjs PI_BIN WORKSPACE MUST_CONTAIN...
import { spawn } from "node:child_process";
import { createInterface } from "node:readline";
import { check, failures, until } from "./rpc-check.mjs";

const [piBin, workspace, ...mustContain] = process.argv.slice(2);

const pi = spawn(piBin, ["--offline", "--no-session", "--mode", "rpc"], { stdio: ["pipe", "pipe", "pipe"], cwd: workspace });
const events = [];
let stderr = "";
pi.stderr.on("data", (d) => (stderr += d.toString("utf8")));
createInterface({ input: pi.stdout }).on("line", (line) => {
	try {
		events.push(JSON.parse(line));
	} catch {
		// not a JSON line
	}
});

const isNote = (e) => e.type === "extension_ui_request" && e.method === "notify" && /agy-bridge/.test(e.message ?? "");
const note = await until(() => events.find(isNote), 60000);
const text = note?.message ?? "";
const detail = `notify: ${JSON.stringify(note)}; events ${JSON.stringify(events.map((e) => e.method ?? e.type)).slice(0, 400)}; stderr: ${stderr.slice(-600)}`;
check("pi's UI gets a notification about the missing agy-bridge binary", !!note, detail);
check(`it is an error that names ${mustContain.join(", ")}`, !!note && note.notifyType === "error" && mustContain.every((w) => text.includes(w)), detail);
pi.kill("SIGTERM");
process.exit(failures());
