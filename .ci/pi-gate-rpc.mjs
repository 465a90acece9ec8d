// pi decides agy's tool calls (permissions `ask`), in real pi's RPC mode,
// answering the extension's dialog as a client of pi's
// `extension_ui_request` protocol. The recording's turn reads files (the
// read-only rules pass them, unasked), then runs `cargo test`, which
// fake-agy marks in its tool log only if it really ran. Three pi runs:
//   allow: the dialog names the command; "Allow once" runs it;
//   deny:  "Deny, and tell agy why…" with a reason: nothing runs, and the
//          reason reaches agy's answer;
//   abort: an abort while the dialog is open denies; nothing runs, nothing
//          of the aborted agy is left (the session starts its next warm
//          agy at once), and nothing once pi exits.
// Prints one "ok"/"FAIL" line per check; exit code = failures.
//
// Usage: node pi-gate-rpc.mjs PI_BIN EXTENSION_DIR WORK_DIR
import fs from "node:fs";
import { alive, check, failures, pidsWith, startPi, treeOf, until } from "./rpc-check.mjs";

const [piBin, extension, work] = process.argv.slice(2);

/** The tools fake-agy actually ran (its tool log), by name and command. */
const ran = (log) =>
	(fs.existsSync(log) ? fs.readFileSync(log, "utf8") : "")
		.split("\n")
		.filter(Boolean)
		.map((l) => JSON.parse(l))
		.map((t) => `${t.name} ${t.args?.CommandLine ?? ""}`.trim());

const fakeAgyPids = (workspace) => pidsWith("fake-agy", workspace);

/** One pi in RPC mode, in its own workspace, answering dialogs with `answer`. */
async function session(name, answer) {
	const workspace = `${work}/ws-${name}`;
	const toolLog = `${work}/tools-${name}.log`;
	fs.mkdirSync(workspace, { recursive: true });
	const { pi, events, send } = startPi(piBin, extension, {
		cwd: workspace,
		env: { ...process.env, AGY_PERMISSIONS: "ask", FAKE_AGY_RECORDING: "tools", FAKE_AGY_TOOL_LOG: toolLog },
		onEvent: (e, reply) => {
			if (e.type === "extension_ui_request" && (e.method === "select" || e.method === "input")) answer(e, reply, events);
		},
	});
	send({ type: "prompt", message: "Fix the failing test" });
	const end = await until(() => events.find((e) => e.type === "agent_end"), 60000);
	const thinking = events
		.filter((e) => e.type === "message_update" && e.assistantMessageEvent?.type === "thinking_delta")
		.map((e) => e.assistantMessageEvent.delta)
		.join("");
	const text = events
		.filter((e) => e.type === "message_update" && e.assistantMessageEvent?.type === "text_delta")
		.map((e) => e.assistantMessageEvent.delta)
		.join("");
	const dialogs = events.filter((e) => e.type === "extension_ui_request" && e.method === "select");
	return { pi, events, end, thinking, text, dialogs, toolLog, workspace };
}

const ALLOW_ONCE = "Allow once";
const DENY_WHY = "Deny, and tell agy why…";

// allow
{
	const s = await session("allow", (e, send) => {
		if (e.method === "select") send({ type: "extension_ui_response", id: e.id, value: ALLOW_ONCE });
	});
	const first = s.dialogs[0];
	check("allow: the turn ends", !!s.end, JSON.stringify(s.events.map((e) => e.method ?? e.type)).slice(0, 500));
	check("allow: the dialog names the tool and the command", !!first && first.title.includes("run_command") && first.title.includes("cargo test"), JSON.stringify(first));
	check("allow: the dialog offers once / this session / deny / deny with a reason", !!first && first.options.length === 4 && first.options[1].includes("run_command: cargo test *"), JSON.stringify(first?.options));
	check("allow: read-only tools passed without a dialog", !s.dialogs.some((d) => /view_file|grep_search|list_dir/.test(d.title)), JSON.stringify(s.dialogs.map((d) => d.title)));
	check("allow: the allowed command ran (fake-agy's tool log)", ran(s.toolLog).includes("run_command cargo test"), JSON.stringify(ran(s.toolLog)));
	check("allow: the stream says the decision", s.thinking.includes("run_command cargo test: allowed once"), s.thinking.slice(-800));
	const toolLine = s.events.findIndex((e) => e.type === "message_update" && e.assistantMessageEvent?.delta?.includes("[agy tool: run_command] cargo test"));
	const dialog = s.events.indexOf(first);
	check("allow: the tool's line is shown before the decision is asked", toolLine >= 0 && toolLine < dialog, `tool line #${toolLine}, dialog #${dialog}`);
	check("allow: the tool's line is shown once", s.thinking.split("[agy tool: run_command] cargo test").length === 2, s.thinking);
	s.pi.kill("SIGTERM");
}

// deny, with a reason
{
	const s = await session("deny", (e, send) => {
		if (e.method === "select") send({ type: "extension_ui_response", id: e.id, value: DENY_WHY });
		else send({ type: "extension_ui_response", id: e.id, value: "use the test suite instead" });
	});
	check("deny: the turn ends", !!s.end, JSON.stringify(s.events.map((e) => e.method ?? e.type)).slice(0, 500));
	check("deny: the denied command did not run", !ran(s.toolLog).some((t) => t.startsWith("run_command")) && ran(s.toolLog).includes("view_file"), JSON.stringify(ran(s.toolLog)));
	check("deny: agy got the reason (its answer carries it)", s.text.includes("use the test suite instead"), s.text.slice(0, 600));
	check("deny: the stream says who denied it and why", s.thinking.includes("denied by the user: use the test suite instead"), s.thinking.slice(-800));
	s.pi.kill("SIGTERM");
}

// abort while the dialog is open. The session then starts a warm agy for
// its next turn at once (on the same conversation), so what must be gone is
// the aborted turn's agy: the tree that was running when the dialog opened.
{
	let asked = null;
	const s = await session("abort", (e, send) => {
		if (e.method === "select" && !asked) {
			asked = treeOf(fakeAgyPids(`${work}/ws-abort`));
			send({ type: "abort" });
		}
	});
	const last = [...s.events].reverse().find((e) => e.type === "message_end" && e.message?.role === "assistant")?.message;
	check("abort: the open question ends the turn as aborted", !!s.end && last?.stopReason === "aborted", JSON.stringify(last ?? null).slice(0, 300));
	check("abort: the command did not run", !ran(s.toolLog).some((t) => t.startsWith("run_command")), JSON.stringify(ran(s.toolLog)));
	const aborted = asked ?? [];
	check("abort: agy was running when the dialog opened", aborted.length > 0, "no fake-agy process in the workspace at the dialog");
	const gone = await until(() => aborted.every((pid) => !alive(pid)), 10000);
	check("abort: nothing of the aborted turn's agy is left", !!gone, `still alive: ${aborted.filter(alive)} of ${aborted}`);
	s.pi.kill("SIGTERM");
	const after = await until(() => fakeAgyPids(s.workspace).length === 0, 10000);
	check("abort: once pi has exited, no agy of its session is left", !!after, `fake-agy pids: ${fakeAgyPids(s.workspace)}`);
}
process.exit(failures());
