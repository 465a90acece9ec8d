// The extension's own parts, run by Node itself (type stripping) against
// pi's pi-ai, with a stand-in agy-bridge (.ci/ext-unit/fake-bridge.mjs) whose
// lines are scripted, and the real one where its rules are the point:
// pi's provider contract for each provider call (one `start`, one final
// event; hooks called and awaited as pi's own providers do; tools from the
// transcript), the protocol's tagged lines and its release rule, output
// decoded as a stream, and AGY_PI_TOOLS read by agy-bridge.
//
// node .ci/pi-ext-unit.mjs DIR BRIDGE: DIR holds index.ts and package.json
// beside a node_modules with pi's packages; BRIDGE is the real agy-bridge.
import fs from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { check, failures, until } from "./rpc-check.mjs";

const [dir, realBridge] = process.argv.slice(2);
const here = path.dirname(new URL(import.meta.url).pathname);
const log = path.join(dir, "bridge-stdin.log");
Object.assign(process.env, {
	AGY_BRIDGE_BIN: path.join(here, "ext-unit", "fake-bridge.mjs"),
	AGY_REAL_BRIDGE: realBridge,
	FAKE_BRIDGE_LOG: log,
});
delete process.env.AGY_PI_TOOLS;
fs.rmSync(log, { force: true });
const ai = await import(pathToFileURL(path.join(dir, "node_modules/@earendil-works/pi-ai/dist/index.js")).href);
// What the extension pushes into pi's streams, in order, as it pushes it.
const pushed = [];
const push = ai.AssistantMessageEventStream.prototype.push;
ai.AssistantMessageEventStream.prototype.push = function (ev) {
	pushed.push(`pi:${ev.type}`);
	return push.call(this, ev);
};

let loads = 0;
/** A fresh copy of the extension, loaded into a stand-in of pi's API. */
async function load() {
	const got = { handlers: {}, notes: [], errors: [] };
	const api = {
		on: (name, fn) => ((got.handlers[name] ??= []).push(fn), () => {}),
		registerProvider: (_name, p) => (got.provider = p),
		registerCommand: (_name, c) => (got.command = c),
		registerTool: (t) => (got.tool = t),
		getThinkingLevel: () => "off",
		getActiveTools: () => [],
		getAllTools: () => [],
	};
	const errorWas = console.error;
	console.error = (...a) => got.errors.push(a.join(" "));
	try {
		const mod = await import(`${pathToFileURL(path.join(dir, "index.ts")).href}?copy=${++loads}`);
		await mod.default(api);
	} finally {
		console.error = errorWas;
	}
	got.ctx = {
		cwd: dir,
		hasUI: false,
		sessionManager: { getSessionId: () => "unit" },
		ui: { notify: (text, kind) => got.notes.push({ text, kind }), confirm: async () => false },
	};
	return got;
}

const model = {
	id: "gemini-3.7-flash",
	name: "Gemini 3.7 Flash",
	api: "agy-bridge",
	provider: "antigravity",
	baseUrl: "agy-bridge://antigravity",
	reasoning: true,
	input: ["text"],
	cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0 },
	contextWindow: 1000000,
	maxTokens: 65536,
};
const probe = { name: "pi_probe", description: "A value only pi knows", parameters: { type: "object", properties: {} } };
const read = { name: "read", description: "pi's read", parameters: { type: "object", properties: {} } };
/** pi's transcript: the leading system message declares the prompt and tools. */
const transcript = (messages) => ai.normalizeContext({ systemPrompt: "You are pi.", tools: [read, probe], messages });
const user = (text) => ({ role: "user", content: [{ type: "text", text }], timestamp: Date.now() });

/** One provider call: its events' types, the final message, what pi's hooks saw. */
async function call(p, messages, opts = {}) {
	pushed.length = 0;
	const seen = pushed;
	const options = { sessionId: opts.session, ...opts.options };
	if (opts.streamHook)
		options.onProviderStreamEvent = async (ev) => {
			seen.push(`hook:${ev.type}`);
			await new Promise((r) => setTimeout(r, 5));
		};
	const stream = p.streamSimple(model, transcript(messages), options);
	const types = [];
	let last;
	for await (const ev of stream) {
		types.push(ev.type);
		last = ev.type === "done" ? ev.message : ev.type === "error" ? ev.error : last;
	}
	return { types, last, seen };
}
const once = (types) => types.filter((t) => t === "start").length === 1 && types.filter((t) => t === "done" || t === "error").length === 1 && ["done", "error"].includes(types.at(-1));
const logged = () => (fs.existsSync(log) ? fs.readFileSync(log, "utf8").split("\n").filter(Boolean).map((l) => JSON.parse(l)) : []);

const ext = await load();
const p = ext.provider;

// 1. A turn: tools from the transcript, the whole transcript sent, the request tagged.
process.env.FAKE_BRIDGE_SCENARIO = "plain";
let r = await call(p, [user("first")], { session: "plain", streamHook: true });
check("a provider call streams one start, then its blocks, then one done", once(r.types) && r.types.join(" ") === "start thinking_start thinking_delta thinking_end text_start text_delta text_end done", r.types.join(" "));
const request = logged().find((l) => l.type === "request");
check("the request line is tagged {\"type\":\"request\"}", request !== undefined, JSON.stringify(logged()));
check("pi's tools come from the transcript (getCurrentTools), all of them for agy-bridge to filter", JSON.stringify(request?.tools?.map((t) => t.name)) === '["read","pi_probe"]', JSON.stringify(request?.tools));
check("the transcript goes whole, its leading system message first", request?.messages?.[0]?.role === "system" && request.messages.at(-1).content[0].text === "first", JSON.stringify(request?.messages?.map((m) => m.role)));
const pairs = r.seen.filter((s) => s.startsWith("hook:")).length;
const order = r.seen.join(" ");
const alternating = r.seen.every((s, i) => (i % 2 === 0 ? s.startsWith("hook:") : s === `pi:${r.seen[i - 1].slice(5)}`));
check("onProviderStreamEvent is awaited for each of agy-bridge's events before the event is pushed to pi", pairs === 8 && alternating && r.seen.length === 16, order);
const tokens = { input: 10, output: 5, cacheRead: 2, cacheWrite: 0, totalTokens: 17 };
const reckoned = { ...tokens, cost: {} };
reckoned.cost = ai.calculateCost(model, { ...tokens, cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: 0 } });
check("usage: agy's tokens, the cost pi's own providers reckon (calculateCost: zero prices, not provider-billed)", JSON.stringify(r.last.usage) === JSON.stringify(reckoned) && r.last.usage.cost.total === 0, `${JSON.stringify(r.last.usage)} vs ${JSON.stringify(reckoned)}`);

// 2. pi's hooks failing: the call fails with one start and one error; the
//    bridge's turn is given up, and the next call is not disturbed by it.
r = await call(p, [user("first"), user("second")], { session: "plain", options: { onPayload: () => { throw new Error("no payload"); } } });
check("a failing onPayload fails the call (one start, one error) and sends nothing", once(r.types) && r.types.at(-1) === "error" && /before_provider_request failed: no payload/.test(r.last.errorMessage) && logged().filter((l) => l.type === "request").length === 1, `${r.types} ${r.last?.errorMessage}`);
r = await call(p, [user("first"), user("third")], { session: "plain", options: { onResponse: () => { throw new Error("no response"); } } });
const aborted = await until(() => logged().at(-1)?.type === "abort", 10000);
check("a failing onResponse fails the call as pi's providers do (one start, one error) and aborts agy's turn", once(r.types) && /after_provider_response failed: no response/.test(r.last.errorMessage) && aborted, `${r.types} ${r.last?.errorMessage} ${JSON.stringify(logged().at(-1))}`);
r = await call(p, [user("first"), user("fourth")], { session: "plain" });
check("the given-up turn's events are dropped: the next call gets its own answer only", once(r.types) && r.last.content.length === 2 && r.last.content.at(-1).text === "answer 3", JSON.stringify(r.last?.content));
r = await call(p, [user("fifth")], { session: "plain", options: { onProviderStreamEvent: () => { throw new Error("no event"); } } });
check("a failing onProviderStreamEvent fails the call (one start, one error)", once(r.types) && /provider_stream_event handler failed: no event/.test(r.last.errorMessage), `${r.types} ${r.last?.errorMessage}`);

// 3. The bridge's error, and the bridge dying with a split character on stderr.
process.env.FAKE_BRIDGE_SCENARIO = "error";
r = await call(p, [user("q")], { session: "error" });
check("agy-bridge's error: one start, one error with its message", once(r.types) && r.last.errorMessage === "agy failed (exit 3)", `${r.types} ${r.last?.errorMessage}`);
process.env.FAKE_BRIDGE_SCENARIO = "stderr";
r = await call(p, [user("q")], { session: "stderr" });
check("agy-bridge gone mid-turn: one start, one error; its stderr decoded as a stream (no U+FFFD)", once(r.types) && r.last.errorMessage.includes("über kaputt") && !r.last.errorMessage.includes("\uFFFD"), `${r.types} ${r.last?.errorMessage}`);

// 4. The release rule: pi's next request without the results of agy's
//    calls releases the turn; its tail (a toolUse message, then its error)
//    is dropped, and the next request's answer is the call's.
process.env.FAKE_BRIDGE_SCENARIO = "release";
fs.rmSync(log, { force: true });
r = await call(p, [user("ask pi")], { session: "release" });
check("agy's call of pi's tool ends the call with toolUse", once(r.types) && r.last.stopReason === "toolUse" && r.last.content[0].name === "pi_probe", `${r.types} ${JSON.stringify(r.last?.content)}`);
const withCall = [user("ask pi"), r.last, user("never mind")];
r = await call(p, withCall, { session: "release" });
const text = r.last?.content?.filter((b) => b.type === "text").map((b) => b.text).join("");
check("released: the next call gets only its own answer (one start, one done)", once(r.types) && text === "answer 2" && r.last.stopReason === "stop", `${r.types} ${JSON.stringify(r.last?.content)}`);
const types = logged().map((l) => l.type);
check("every line to agy-bridge is tagged: request, release, request", JSON.stringify(types) === '["request","release","request"]', JSON.stringify(logged()));

// 5. Output decoded as a stream: AskAntigravity's long answer.
const out = await ext.tool.execute("id", { prompt: "long" }, undefined, undefined, ext.ctx);
const answer = out.content[0].text;
check("a character split across two pipe chunks stays whole (AskAntigravity's answer)", answer.includes("é-après") && !answer.includes("\uFFFD"), answer.slice(69990, 70020));

// 6. AGY_PI_TOOLS is agy-bridge's to read: a bad word is its error, never "on".
process.env.AGY_PI_TOOLS = "bogus";
const bad = await load();
await bad.command.handler("tools", bad.ctx);
check("AGY_PI_TOOLS=bogus: /agy tools shows agy-bridge's error, not \"on\"", bad.notes[0]?.kind === "error" && bad.notes[0].text.startsWith('AGY_PI_TOOLS="bogus" is not valid') && bad.errors.some((e) => e.includes("AGY_PI_TOOLS")), JSON.stringify(bad.notes));
delete process.env.AGY_PI_TOOLS;
await ext.command.handler("tools maybe", ext.ctx);
await ext.command.handler("tools off", ext.ctx);
process.env.FAKE_BRIDGE_SCENARIO = "plain";
fs.rmSync(log, { force: true });
await call(p, [user("q")], { session: "off" });
check("/agy tools takes agy-bridge's words: maybe is refused, off turns pi's tools off", ext.notes[0]?.kind === "error" && ext.notes[1]?.text.startsWith("agy can call pi's tools: off (all but read, bash") && JSON.stringify(logged()[0]?.tools) === "[]", `${JSON.stringify(ext.notes)} ${JSON.stringify(logged()[0]?.tools)}`);

for (const h of ext.handlers.session_shutdown ?? []) h({}, ext.ctx);
console.log(`extension: ${failures()} failed`);
process.exit(failures() ? 1 : 0);
