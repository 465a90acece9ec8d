// pi in RPC mode with warm agy sessions: the session's agy starts before
// the first prompt (the extension's warm line on session_start), both
// prompts run on that one agy (each shows its own answer), and once pi is
// SIGKILLed nothing of agy is left. Prints one "ok"/"FAIL" line per check;
// exit code = failures.
//
// Usage: node pi-warm-rpc.mjs PI_BIN EXTENSION_DIR ARGV_LOG WORKSPACE
import fs from "node:fs";
import { check, failures, pidsWith, startPi, until } from "./rpc-check.mjs";

const [piBin, extension, argvLog, workspace] = process.argv.slice(2);
/** agy turn processes started so far (fake-agy's argv log; not `models`…). */
const agyStarts = () =>
	(fs.existsSync(argvLog) ? fs.readFileSync(argvLog, "utf8") : "")
		.split("\n")
		.filter(Boolean)
		.map((l) => JSON.parse(l))
		// A turn's agy gets `-p ""` and its prompt on stdin; agy's own
		// commands (the footer's `-p /usage`, the permission hook's proof
		// `-p /hooks`: no model turn) are not one.
		.filter((argv) => argv.includes("-p") && !String(argv[argv.indexOf("-p") + 1]).startsWith("/"));
const agyPids = () => pidsWith("fake-agy", workspace);

const { pi, events, send } = startPi(piBin, extension, { cwd: workspace });
const warmed = await until(() => agyStarts().length === 1, 30000);
check("the session's agy starts before the first prompt", !!warmed, `agy starts: ${JSON.stringify(agyStarts())}`);

const answers = [];
for (const message of ["first question", "second question"]) {
	const from = events.length;
	send({ type: "prompt", message });
	const end = await until(() => events.slice(from).find((e) => e.type === "agent_end"), 60000);
	const text = events
		.slice(from)
		.filter((e) => e.type === "message_update" && e.assistantMessageEvent?.type === "text_delta")
		.map((e) => e.assistantMessageEvent.delta)
		.join("");
	answers.push(text);
	check(`"${message}" is answered`, !!end && text.length > 0, JSON.stringify(events.slice(from).map((e) => e.type)).slice(0, 400));
}
check("each turn shows only its own answer", answers[0] !== answers[1] && !answers[1].includes(answers[0]), JSON.stringify(answers));
check("both turns ran on the one warm agy", agyStarts().length === 1, `agy starts: ${agyStarts().length}`);

const live = agyPids();
pi.kill("SIGKILL");
const gone = await until(() => agyPids().length === 0, 10000);
check("pi SIGKILLed: its warm agy is gone", live.length > 0 && !!gone, `before ${live}, after ${agyPids()}`);
process.exit(failures());
