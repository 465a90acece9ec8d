// Two pi sessions in one process on one copy of the extension (what an app
// embedding pi's SDK gets, and pi itself for sessions in one directory:
// its extension loader hands every session the same loaded module). One
// session's shutdown must end only its own agy: the other's turn, under
// way at that moment, runs to its answer.
// Prints one "ok"/"FAIL" line per check; exit code = failures.
//
// Usage: node pi-sdk-sessions.mjs PI_DIR EXTENSION_DIR WORKSPACE
import path from "node:path";
import { pathToFileURL } from "node:url";
import { check, failures, until } from "./rpc-check.mjs";

const [piDir, extension, cwd] = process.argv.slice(2);
const sdk = await import(pathToFileURL(path.join(piDir, "node_modules/@earendil-works/pi-coding-agent/dist/index.js")).href);
const agentDir = process.env.PI_CODING_AGENT_DIR;

const open = async () => {
	const settingsManager = sdk.SettingsManager.create(cwd, agentDir);
	const resourceLoader = new sdk.DefaultResourceLoader({ cwd, agentDir, settingsManager, additionalExtensionPaths: [extension] });
	await resourceLoader.reload();
	const { session } = await sdk.createAgentSession({ cwd, agentDir, resourceLoader, settingsManager, sessionManager: sdk.SessionManager.inMemory(cwd) });
	await session.bindExtensions({});
	await session.setModel(session.modelRuntime.getModel("antigravity", "gemini-3.7-flash"));
	const events = [];
	session.subscribe((e) => events.push(e));
	return { session, events };
};

const a = await open();
const b = await open();
check("two SDK sessions run on the antigravity provider", a.session.model?.provider === "antigravity" && b.session.model?.provider === "antigravity", `${a.session.model?.provider} ${b.session.model?.provider}`);

const answer = b.session.prompt("Tell me a long story");
const streaming = await until(() => b.events.find((e) => e.type === "message_update" && e.assistantMessageEvent?.type === "text_delta"), 60000);
// Session a ends as pi ends a session: its extensions hear session_shutdown.
await a.session.extensionRunner.emit({ type: "session_shutdown", reason: "quit" });
a.session.dispose();
await Promise.race([answer, new Promise((r) => setTimeout(r, 90000))]);
const last = b.session.messages.filter((m) => m.role === "assistant").at(-1);
const text = (last?.content ?? []).filter((c) => c.type === "text").map((c) => c.text).join("");
check(
	"one session's shutdown leaves the other's turn running to its answer",
	!!streaming && last?.stopReason === "stop" && text.length > 0,
	`streaming: ${!!streaming}, stopReason ${last?.stopReason}: ${last?.errorMessage ?? ""} ${text.slice(0, 80)}`,
);
await b.session.extensionRunner.emit({ type: "session_shutdown", reason: "quit" });
b.session.dispose();
process.exit(failures());
