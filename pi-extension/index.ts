// pi-agy-bridge: registers Google's Antigravity CLI (agy) as pi provider
// "antigravity". This file is deliberately thin: every decision (prompt,
// digest, sessions, models, event mapping, errors) lives in the Rust binary
// `agy-bridge`, which this extension spawns and talks to over JSON lines.
// The protocol is documented in ARCHITECTURE.md ("The pi protocol").
//
// The binary is `$AGY_BRIDGE_BIN`, else `bin/agy-bridge` beside this file
// (the package `scripts/pack-npm.sh` packs from a local build), else the one
// in this platform's npm package (`pi-agy-bridge-<os>-<cpu>`, an optional
// dependency of the published `pi-agy-bridge`), else `agy-bridge` on PATH. It
// must be a real executable: it re-executes itself as the guardian of agy's
// process tree. With none of them, pi says so at start-up (stderr, and a
// notification in pi's UI) instead of listing no models in silence.

import { spawn, type ChildProcessWithoutNullStreams } from "node:child_process";
import { existsSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import {
	calculateCost,
	createAssistantMessageEventStream,
	getCurrentTools,
	type Api,
	type AssistantMessage,
	type AssistantMessageEventStream,
	type Message,
	type Model,
	type SimpleStreamOptions,
	type ToolCall,
	type ToolResultMessage,
	type TranscriptContext,
	type UserMessage,
} from "@earendil-works/pi-ai";
import type { ExtensionAPI, ProviderModelConfig } from "@earendil-works/pi-coding-agent";
import { Type } from "typebox";

const PROVIDER = "antigravity";
const ABORT_GRACE_MS = 3000;

const PLATFORM_PACKAGE = `pi-agy-bridge-${process.platform}-${process.arch}`;

function bridgeBin(): string {
	if (process.env.AGY_BRIDGE_BIN) return process.env.AGY_BRIDGE_BIN;
	// A package packed from a local build carries its binary (scripts/pack-npm.sh).
	try {
		const bundled = join(dirname(fileURLToPath(import.meta.url)), "bin", "agy-bridge");
		if (existsSync(bundled)) return bundled;
	} catch {
		// Not loaded from a file: no bundled binary.
	}
	try {
		const manifest = createRequire(import.meta.url).resolve(`${PLATFORM_PACKAGE}/package.json`);
		const bin = join(dirname(manifest), "bin", "agy-bridge");
		if (existsSync(bin)) return bin;
	} catch {
		// Not installed (no prebuilt binary for this platform, or optional
		// dependencies were skipped): fall back to PATH.
	}
	return "agy-bridge";
}

/** Why the binary could not be started, in words that say how to fix it;
 *  the first such sentence is kept for pi's UI (`startFailure`). */
let startFailure: string | undefined;
function cannotStart(err: Error): string {
	const bin = bridgeBin();
	const why =
		(err as NodeJS.ErrnoException).code === "ENOENT" && bin === "agy-bridge"
			? `pi-agy-bridge cannot run: it has no agy-bridge binary for ${process.platform}-${process.arch} (not bundled in the package, the npm package ${PLATFORM_PACKAGE} is not installed, and agy-bridge is not on PATH), so pi has no antigravity models. Fix: \`pi install npm:pi-agy-bridge\` from the npm registry (it brings ${PLATFORM_PACKAGE}); or, in a checkout of the agy-bridge repository, run \`scripts/pack-npm.sh\` and the \`pi install\` command it prints; or \`cargo install --path .\` there (agy-bridge on PATH); or set AGY_BRIDGE_BIN to the binary.`
			: `agy-bridge could not start (${bin}): ${err.message}`;
	startFailure ??= why;
	return why;
}

type BridgeRun = { ok: boolean; stdout: string; stderr: string; aborted: boolean };

/** Run agy-bridge to completion (config, sessions, models, ask), never
 *  blocking pi's event loop; a timeout or `signal` ends it with SIGTERM. */
function runBridge(args: string[], opts: { timeoutMs?: number; signal?: AbortSignal } = {}): Promise<BridgeRun> {
	return new Promise((resolve) => {
		if (opts.signal?.aborted) return resolve({ ok: false, stdout: "", stderr: "", aborted: true });
		const child = spawn(bridgeBin(), args, { stdio: ["ignore", "pipe", "pipe"] });
		let stdout = "";
		let stderr = "";
		let aborted = false;
		const onAbort = () => {
			aborted = true;
			child.kill("SIGTERM");
		};
		const timer = setTimeout(() => child.kill("SIGTERM"), opts.timeoutMs ?? 20000);
		opts.signal?.addEventListener("abort", onAbort, { once: true });
		const done = (r: BridgeRun) => {
			clearTimeout(timer);
			opts.signal?.removeEventListener("abort", onAbort);
			resolve(r);
		};
		// Decoded as a stream: a character split across two chunks stays whole.
		child.stdout.setEncoding("utf8").on("data", (d: string) => (stdout += d));
		child.stderr.setEncoding("utf8").on("data", (d: string) => (stderr = (stderr + d).slice(-4000)));
		child.on("error", (e) => done({ ok: false, stdout: "", stderr: cannotStart(e), aborted }));
		child.on("close", (code) => done({ ok: code === 0 && !aborted, stdout, stderr, aborted }));
	});
}

function zeroUsage(): AssistantMessage["usage"] {
	return {
		input: 0,
		output: 0,
		cacheRead: 0,
		cacheWrite: 0,
		totalTokens: 0,
		cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: 0 },
	};
}

/** Token counts of agy's last model call (agy-bridge's `done` event). */
type BridgeUsage = { input: number; output: number; cacheRead: number; cacheWrite: number; totalTokens: number };

type BridgeEvent =
	| { type: "start" }
	| { type: "text_start" | "thinking_start"; contentIndex: number }
	| { type: "text_delta" | "thinking_delta"; contentIndex: number; delta: string }
	| { type: "text_end" | "thinking_end"; contentIndex: number }
	| { type: "toolcall_start"; contentIndex: number; id: string; toolName: string }
	| { type: "toolcall_delta"; contentIndex: number; delta: string }
	| { type: "toolcall_end"; contentIndex: number; toolCall: ToolCall }
	| { type: "done"; reason: "stop" | "toolUse"; usage?: BridgeUsage }
	| { type: "error"; reason: "error" | "aborted"; errorMessage: string };

/** agy waits for the user's decision on one of its tool calls (`ask` mode):
 *  not a message event; answered with a `permission` line. */
type PermissionRequest = { type: "permission_request"; id: string; tool: string; title: string; detail: string; sessionRule: string };

/** The pieces of pi's context a turn needs, kept per pi session: its
 *  dialogs, and the working directory pi gives the session (`ctx.cwd`: a
 *  resumed session's own, not necessarily pi's process's). */
type SessionUI = { hasUI: boolean; cwd: string; ui: { select(title: string, options: string[], opts?: { signal?: AbortSignal }): Promise<string | undefined>; input(title: string, placeholder?: string, opts?: { signal?: AbortSignal }): Promise<string | undefined> } };
const uis = new Map<string, SessionUI>();
/** pi's session behind an extension context. */
const keyOf = (ctx: { sessionManager: { getSessionId(): string } }) => ctx.sessionManager.getSessionId();

/** `/agy tools on|off`, this pi process's switch for pi's tools. Its rules
 *  are agy-bridge's (`agy-bridge pi-tools --json`): the words it takes, its
 *  default (AGY_PI_TOOLS), and the tools of pi's agy is never offered
 *  (agy-bridge leaves those out of what it serves). */
type PiToolsSwitch = { on: boolean; native: string[]; message: string; error?: string };
let piToolsOn = true;
/** Why AGY_PI_TOOLS could not be read (agy-bridge's sentence), if it could not. */
let piToolsError: string | undefined;
async function askPiTools(args: string[]): Promise<PiToolsSwitch | undefined> {
	const r = await runBridge(["pi-tools", "--json", ...args]);
	try {
		return JSON.parse(r.stdout) as PiToolsSwitch;
	} catch {
		return undefined;
	}
}

/** One `agy-bridge stream --session` child per pi session: it serves the
 *  session's turns one after another and keeps agy warm between them. One
 *  agy turn may span several pi provider calls when agy calls pi's tools
 *  (each ends with `toolUse`; the next call is the continuation carrying
 *  pi's results). */
type SessionChild = {
	child: ChildProcessWithoutNullStreams;
	/** The provider call being streamed; events wait in `buffered` between calls. */
	sink: ((ev: BridgeEvent) => void) | null;
	onClose: ((code: number | null, signal: NodeJS.Signals | null) => void) | null;
	buffered: BridgeEvent[];
	/** Tool call ids agy waits on (the last `toolUse` message's). */
	parked: string[];
	/** A turn is under way (from its request to its last terminal event). */
	busy: boolean;
	/** Released turns whose last events are still to come: dropped. */
	discard: number;
	closed: { code: number | null; signal: NodeJS.Signals | null } | null;
	/** Open permission dialogs: dismissed (and so denied) when the turn ends. */
	questions: Set<AbortController>;
	/** Why the child could not be started at all. */
	startError?: string;
	stderrTail: string;
};
/** Session children by pi session: each lives as long as its session. */
const sessions = new Map<string, SessionChild>();

function send(s: SessionChild, line: unknown): void {
	try {
		s.child.stdin.write(`${JSON.stringify(line)}\n`);
	} catch {
		/* already closed: close reports it */
	}
}

/** The event that ends a turn: its `error`, or a `done` that is not
 *  `toolUse` (after `toolUse` the turn goes on with pi's tool results). */
const turnEnds = (ev: BridgeEvent) => ev.type === "error" || (ev.type === "done" && ev.reason !== "toolUse");

/** A turn this extension gives up on while it runs (a hook of pi's failed):
 *  agy-bridge stops it, and its last events are dropped here. */
function abandonTurn(s: SessionChild): void {
	if (!s.busy) return;
	send(s, { type: "abort" });
	s.parked = [];
	s.busy = false;
	s.discard += 1;
	s.sink = null;
	s.onClose = null;
}

/** Tell the session's turn that pi will not continue it: agy-bridge answers
 *  agy's waiting calls with an error and ends the turn (its last events are
 *  dropped here); the session and its warm agy stay. */
function releaseTurn(s: SessionChild, reason: string): void {
	if (!s.busy) return;
	send(s, { type: "release", reason });
	s.parked = [];
	s.busy = false;
	s.discard += 1;
	s.sink = null;
	s.onClose = null;
}

/** End a session's child (pi's session ended): stdin's end ends it, agy's
 *  tree with it; SIGTERM if it lingers. */
function endSession(key: string): void {
	const s = sessions.get(key);
	if (!s) return;
	sessions.delete(key);
	dismissQuestions(s);
	s.child.stdin.end();
	setTimeout(() => {
		if (s.child.exitCode === null && s.child.signalCode === null) s.child.kill("SIGTERM");
	}, ABORT_GRACE_MS).unref();
}

function sessionChild(key: string): SessionChild {
	const live = sessions.get(key);
	if (live && !live.closed) return live;
	const child = spawn(bridgeBin(), ["stream", "--session"], { stdio: ["pipe", "pipe", "pipe"] });
	const s: SessionChild = { child, sink: null, onClose: null, buffered: [], parked: [], busy: false, discard: 0, closed: null, questions: new Set(), stderrTail: "" };
	child.stderr.setEncoding("utf8").on("data", (d: string) => {
		s.stderrTail = (s.stderrTail + d).slice(-2000);
	});
	child.stdin.on("error", () => {
		/* the child went away; close reports it */
	});
	createInterface({ input: child.stdout }).on("line", (line) => {
		let ev: BridgeEvent | PermissionRequest;
		try {
			ev = JSON.parse(line);
		} catch {
			return; // not protocol: ignore rather than crash pi
		}
		if (ev.type === "permission_request") return void askPermission(s, key, ev);
		if (turnEnds(ev)) dismissQuestions(s);
		// ARCHITECTURE's rule: a released (or abandoned) turn still ends
		// with exactly one final event, and a late release adds none.
		if (s.discard > 0) {
			if (turnEnds(ev)) s.discard -= 1;
			return;
		}
		if (s.sink) s.sink(ev);
		else s.buffered.push(ev);
	});
	const closed = (code: number | null, signal: NodeJS.Signals | null) => {
		if (s.closed) return;
		s.closed = { code, signal };
		if (sessions.get(key) === s) sessions.delete(key);
		s.onClose?.(code, signal);
	};
	child.on("error", (err) => {
		s.startError = cannotStart(err);
		closed(null, null);
	});
	child.on("close", closed);
	sessions.set(key, s);
	return s;
}

const ALLOW_ONCE = "Allow once";
const DENY = "Deny";
const DENY_WITH_REASON = "Deny, and tell agy why…";

/** Ask the user about a tool call agy waits on, with pi's own dialog (in
 *  RPC mode pi forwards it as an extension_ui_request), and answer the
 *  bridge. A dismissed dialog (the turn ended, pi aborted) denies. */
async function askPermission(s: SessionChild, key: string, q: PermissionRequest): Promise<void> {
	const answer = (decision: "allow" | "deny", scope: "once" | "session", reason?: string) => send(s, { type: "permission", id: q.id, decision, scope, reason });
	const ui = uis.get(key);
	if (!ui?.hasUI) return answer("deny", "once", "pi has no UI here to ask the user");
	const dismiss = new AbortController();
	s.questions.add(dismiss);
	try {
		const forSession = `Allow for this session (${q.sessionRule})`;
		const title = q.detail ? `${q.title}:\n${q.detail}` : q.title;
		const choice = await ui.ui.select(title, [ALLOW_ONCE, forSession, DENY, DENY_WITH_REASON], { signal: dismiss.signal });
		if (choice === ALLOW_ONCE) return answer("allow", "once");
		if (choice === forSession) return answer("allow", "session");
		if (choice === DENY_WITH_REASON) {
			const why = await ui.ui.input("Why not? (agy reads this)", "", { signal: dismiss.signal });
			return answer("deny", "once", why?.trim() || "the user did not allow it");
		}
		answer("deny", "once", dismiss.signal.aborted ? "the turn ended before the user decided" : "the user did not allow it");
	} catch (e) {
		answer("deny", "once", `pi could not ask the user (${(e as Error).message})`);
	} finally {
		s.questions.delete(dismiss);
	}
}

/** The turn is over (or aborted): its open dialogs go, each a denial. */
function dismissQuestions(s: SessionChild): void {
	for (const q of s.questions) q.abort();
	s.questions.clear();
}

/** pi's tools, as the request lists them (agy-bridge leaves out those agy
 *  has of its own); none while `/agy tools off`. */
function offeredTools(tools: readonly { name: string; description?: string; parameters?: unknown }[]) {
	return piToolsOn ? tools.map((t) => ({ name: t.name, description: t.description, parameters: t.parameters })) : [];
}

/** What follows the newest assistant message: its toolResults by call id,
 *  then the user's steering messages (pi adds them after the results). A
 *  system message pi put there (a tool or prompt change) is skipped: the
 *  next turn's digest carries it to agy. */
function afterToolCalls(messages: Message[]): { results: Map<string, ToolResultMessage>; steer: UserMessage[] } {
	let i = messages.length;
	const steer: UserMessage[] = [];
	while (i > 0 && (messages[i - 1].role === "user" || messages[i - 1].role === "system")) {
		const m = messages[--i];
		if (m.role === "user") steer.unshift(m);
	}
	const results = new Map<string, ToolResultMessage>();
	for (let m = messages[--i]; m?.role === "toolResult"; m = messages[--i]) results.set(m.toolCallId, m);
	return { results, steer };
}

/** pi's streamSimple (pi's provider contract, docs/custom-provider.md):
 *  each turn goes to the session's `agy-bridge stream --session` child,
 *  which keeps agy warm between turns. We own the partial AssistantMessage
 *  of each provider call and apply every delta; each call's stream gets
 *  exactly one `start` and then one `done` or `error`. */
function streamSimple(model: Model<Api>, context: TranscriptContext, options?: SimpleStreamOptions): AssistantMessageEventStream {
	const stream = createAssistantMessageEventStream();
	const partial: AssistantMessage = {
		role: "assistant",
		content: [],
		api: model.api,
		provider: model.provider,
		model: model.id,
		usage: zeroUsage(),
		stopReason: "pending",
		timestamp: Date.now(),
	};
	let finished = false;
	let started = false;
	const ensureStarted = () => {
		if (!started) {
			started = true;
			stream.push({ type: "start", partial });
		}
	};
	// The abort listener goes when this provider call ends, whatever ends it.
	let dropAbort = () => {};
	const fail = (reason: "error" | "aborted", message: string) => {
		if (finished) return;
		ensureStarted();
		finished = true;
		dropAbort();
		partial.stopReason = reason;
		partial.errorMessage = message;
		stream.push({ type: "error", reason, error: partial });
		stream.end();
	};

	// The continuation of a turn whose agy waits on pi's tool results (the
	// results, then any steering message the user sent meanwhile: it goes
	// with the last result, so agy reads it after them), or a new turn. pi's
	// tools are the transcript's (its system messages declare them); the
	// whole transcript goes to agy-bridge, which digests what agy did not see.
	const key = options?.sessionId ?? `cwd:${process.cwd()}`;
	const cwd = uis.get(key)?.cwd ?? process.cwd();
	const live = sessionChild(key);
	const { results, steer } = afterToolCalls(context.messages);
	const continuation = live.busy && live.parked.length > 0 && live.parked.every((id) => results.has(id));
	let payload: unknown;
	if (continuation) {
		payload = live.parked.map((id, i, all) => {
			const r = results.get(id);
			const line = { type: "tool_result", toolCallId: id, content: r?.content ?? [], isError: r?.isError ?? true };
			return i === all.length - 1 && steer.length > 0 ? { ...line, steer: steer.map((m) => m.content) } : line;
		});
		live.parked = [];
	} else {
		if (live.busy) releaseTurn(live, "pi's next request did not carry the results of agy's tool calls");
		live.buffered = [];
		live.busy = true;
		payload = {
			type: "request",
			model: model.id,
			reasoning: options?.reasoning,
			sessionId: options?.sessionId,
			cwd,
			messages: context.messages,
			tools: offeredTools(getCurrentTools(context.messages)),
			ui: uis.get(key)?.hasUI ?? false,
		};
	}
	// Until the payload is written, the bridge has nothing to stop: a failed
	// hook or an abort ends this call, and agy's waiting calls are released.
	let sent = false;
	const unsent = (reason: "error" | "aborted", message: string) => {
		if (continuation) {
			live.busy = true;
			releaseTurn(live, `pi did not send agy's tool results (${message})`);
		} else live.busy = false;
		fail(reason, message);
	};
	const detach = () => {
		live.sink = null;
		live.onClose = null;
	};

	const apply = (ev: BridgeEvent) => {
		if (finished) return;
		switch (ev.type) {
			case "start":
				ensureStarted();
				return;
			case "text_start":
				partial.content[ev.contentIndex] = { type: "text", text: "" };
				break;
			case "thinking_start":
				partial.content[ev.contentIndex] = { type: "thinking", thinking: "" };
				break;
			case "text_delta": {
				const block = partial.content[ev.contentIndex];
				if (block?.type === "text") block.text += ev.delta;
				break;
			}
			case "thinking_delta": {
				const block = partial.content[ev.contentIndex];
				if (block?.type === "thinking") block.thinking += ev.delta;
				break;
			}
			// The bridge keeps no copy of a block: its text is what the
			// deltas built here.
			case "text_end": {
				const block = partial.content[ev.contentIndex];
				ensureStarted();
				stream.push({ type: "text_end", contentIndex: ev.contentIndex, content: block?.type === "text" ? block.text : "", partial });
				return;
			}
			case "thinking_end": {
				const block = partial.content[ev.contentIndex];
				ensureStarted();
				stream.push({ type: "thinking_end", contentIndex: ev.contentIndex, content: block?.type === "thinking" ? block.thinking : "", partial });
				return;
			}
			case "toolcall_start":
				ensureStarted();
				partial.content[ev.contentIndex] = { type: "toolCall", id: ev.id, name: ev.toolName, arguments: {} };
				stream.push({ type: "toolcall_start", contentIndex: ev.contentIndex, partial });
				return;
			case "toolcall_delta":
				ensureStarted();
				stream.push({ type: "toolcall_delta", contentIndex: ev.contentIndex, delta: ev.delta, partial });
				return;
			case "toolcall_end":
				// agy-bridge's arguments are a JSON object (`argumentsError` when agy's were not).
				ensureStarted();
				partial.content[ev.contentIndex] = ev.toolCall;
				stream.push({ type: "toolcall_end", contentIndex: ev.contentIndex, toolCall: ev.toolCall, partial });
				return;
			case "done":
				ensureStarted();
				finished = true;
				dropAbort();
				partial.stopReason = ev.reason;
				// Tokens from agy; the cost as pi's own providers reckon it, from
				// the model's prices (zero: agy runs on the user's own plan).
				if (ev.usage) {
					partial.usage = { ...zeroUsage(), ...ev.usage };
					calculateCost(model, partial.usage);
				}
				if (ev.reason === "toolUse") {
					// agy waits: the turn lives on until pi continues (or releases) it.
					live.parked = partial.content.flatMap((b) => (b.type === "toolCall" ? [b.id] : []));
				} else live.busy = false;
				stream.push({ type: "done", reason: ev.reason, message: partial });
				stream.end();
				return;
			case "error":
				live.busy = false;
				live.parked = [];
				fail(ev.reason === "aborted" ? "aborted" : "error", ev.errorMessage || "agy-bridge reported an error without a message");
				return;
			default:
				return;
		}
		ensureStarted();
		stream.push({ ...ev, partial } as Parameters<typeof stream.push>[0]);
	};
	const closedNow = (code: number | null, signal: NodeJS.Signals | null) => {
		if (finished) return;
		if (options?.signal?.aborted) return fail("aborted", "Operation aborted");
		if (live.startError) return fail("error", live.startError);
		const why = signal ? `signal ${signal}` : `exit code ${code}`;
		const tail = live.stderrTail.trim().split("\n").slice(-3).join(" | ");
		fail("error", `agy-bridge ended without finishing the turn (${why})${tail ? `: ${tail}` : ""}`);
	};
	// Each of the bridge's events is awaited through pi's
	// `onProviderStreamEvent` before it is applied, in order, as pi's own
	// providers do with each parsed event. The call lets go of the child as
	// soon as its last event arrives (events after it are the next call's).
	let queue = Promise.resolve();
	const take = (ev: BridgeEvent) => {
		if (ev.type === "done" || ev.type === "error") detach();
		queue = queue.then(async () => {
			if (finished) return;
			try {
				await options?.onProviderStreamEvent?.(ev, model);
			} catch (e) {
				// pi's providers fail the call; agy's turn is given up with it.
				if (ev.type === "done" && ev.reason === "toolUse") releaseTurn(live, "pi's provider_stream_event handler failed");
				else if (turnEnds(ev)) live.busy = false;
				else abandonTurn(live);
				return fail("error", `pi's provider_stream_event handler failed: ${(e as Error).message}`);
			}
			apply(ev);
		});
	};
	const onClose = (code: number | null, signal: NodeJS.Signals | null) => {
		detach();
		queue = queue.then(() => closedNow(code, signal));
	};
	// As pi's own providers do: `onPayload` sees (and may replace) what goes
	// to the bridge, the request line or the continuation's tool_result
	// lines; `onResponse` follows once it is sent, and a failing one fails
	// the call (agy's turn is given up); the bridge's events wait in
	// `buffered` meanwhile.
	const begin = async () => {
		try {
			const next = await options?.onPayload?.(payload, model);
			if (next !== undefined) payload = next;
		} catch (e) {
			return unsent("error", `pi's before_provider_request failed: ${(e as Error).message}`);
		}
		if (finished) return;
		for (const line of Array.isArray(payload) ? payload : [payload]) send(live, line);
		sent = true;
		try {
			await options?.onResponse?.({ status: 200, headers: {} }, model);
		} catch (e) {
			abandonTurn(live);
			return fail("error", `pi's after_provider_response failed: ${(e as Error).message}`);
		}
		if (finished) return;
		// Events that came while pi ran the tools go out first.
		live.sink = take;
		live.onClose = onClose;
		const waiting = live.buffered.splice(0);
		while (waiting.length > 0 && live.sink === take) take(waiting.shift() as BridgeEvent);
		live.buffered.unshift(...waiting);
		if (live.closed && live.sink === take) onClose(live.closed.code, live.closed.signal);
	};

	// Abort: ask over stdin (the bridge stops agy's tree, answers at once and
	// warms a replacement); a child that does not answer is ended.
	const onAbort = () => {
		dismissQuestions(live);
		if (finished) return;
		if (!sent) return unsent("aborted", "Operation aborted");
		send(live, { type: "abort" });
		setTimeout(() => {
			if (finished) return;
			if (live.child.exitCode === null && live.child.signalCode === null) live.child.kill("SIGTERM");
			fail("aborted", "Operation aborted");
		}, ABORT_GRACE_MS).unref();
	};
	if (options?.signal?.aborted) onAbort();
	else {
		options?.signal?.addEventListener("abort", onAbort, { once: true });
		dropAbort = () => options?.signal?.removeEventListener("abort", onAbort);
		void begin();
	}
	return stream;
}

async function loadModels(): Promise<ProviderModelConfig[]> {
	const r = await runBridge(["models", "--json"]);
	if (r.stderr.trim()) console.error(`[agy-bridge] ${r.stderr.trim()}`);
	try {
		const parsed = JSON.parse(r.stdout);
		return Array.isArray(parsed) ? parsed : [];
	} catch {
		return [];
	}
}

export default async function (pi: ExtensionAPI): Promise<void> {
	const [models, tools] = await Promise.all([loadModels(), askPiTools([])]);
	piToolsOn = tools?.on ?? true;
	piToolsError = tools?.error;
	if (piToolsError) console.error(`[agy-bridge] ${piToolsError}`);
	// No binary: say so in pi's UI too (stderr scrolls away under the TUI).
	pi.on("session_start", (_ev, ctx) => {
		if (startFailure && ctx.hasUI) ctx.ui.notify(startFailure, "error");
	});
	pi.registerProvider(PROVIDER, {
		name: "Antigravity (agy)",
		baseUrl: "agy-bridge://antigravity",
		apiKey: "not-used",
		api: "agy-bridge",
		models,
		streamSimple,
	});

	// A turn pi will not continue: agy's waiting tool calls get an error
	// (the session's agy stays warm). Only this pi session's: an app may run
	// several sessions on one copy of this extension.
	pi.on("agent_end", (_ev, ctx) => {
		const s = sessions.get(keyOf(ctx));
		if (s && s.parked.length > 0) releaseTurn(s, "the pi turn ended before agy's tool calls were continued");
	});
	pi.on("session_shutdown", (_ev, ctx) => {
		endSession(keyOf(ctx));
		uis.delete(keyOf(ctx));
	});
	// Start agy before the first prompt (and again for a new model), so
	// even the first turn finds it warm.
	const warm = (ctx: SessionUI & { model?: Model<Api>; sessionManager: { getSessionId(): string } }) => {
		const sessionId = keyOf(ctx);
		uis.set(sessionId, { hasUI: ctx.hasUI, cwd: ctx.cwd, ui: ctx.ui });
		const model = ctx.model;
		if (!model || model.provider !== PROVIDER) return;
		const level = pi.getThinkingLevel();
		const active = new Set(pi.getActiveTools());
		send(sessionChild(sessionId), {
			type: "warm",
			model: model.id,
			reasoning: level === "off" ? undefined : level,
			sessionId,
			cwd: ctx.cwd,
			tools: offeredTools(pi.getAllTools().filter((t) => active.has(t.name))),
			ui: ctx.hasUI,
		});
	};
	pi.on("session_start", (_ev, ctx) => warm(ctx));
	pi.on("model_select", (_ev, ctx) => warm(ctx));

	// agy's quota in pi's footer after each agy turn: `agy-bridge usage`
	// answers from its cache for 5 minutes, runs in the background (never
	// awaited on the turn's path) and at most one at a time.
	let quotaRunning = false;
	pi.on("agent_end", (_ev, ctx) => {
		if (ctx.model?.provider !== PROVIDER || quotaRunning) return;
		quotaRunning = true;
		void runBridge(["usage", "--json", "--max-age-secs", "300"], { timeoutMs: 15000 })
			.then((r) => {
				if (!r.ok) return;
				const lowest = (JSON.parse(r.stdout) as { lowest?: string | null }).lowest;
				if (lowest) ctx.ui.setStatus("agy-quota", `agy quota: ${lowest}`);
			})
			.catch(() => {})
			.finally(() => {
				quotaRunning = false;
			});
	});

	pi.registerCommand("agy", {
		description: "agy-bridge settings: /agy [usage | mode plan|accept-edits | permissions ask|allow|deny | allow [RULE] | tools on|off | model ALIAS | thinking low|medium|high | sessions | clear [all] | help]",
		handler: async (args, ctx) => {
			const words = (args ?? "").trim().split(/\s+/).filter(Boolean);
			// agy-bridge reads the word and says what the switch is now.
			if (words[0] === "tools") {
				if (!words[1] && piToolsError) return ctx.ui.notify(piToolsError, "error");
				const r = await askPiTools(words[1] ? ["--set", words.slice(1).join(" ")] : ["--current", piToolsOn ? "on" : "off"]);
				if (!r) return ctx.ui.notify(startFailure ?? "agy-bridge pi-tools gave no answer", "error");
				if (!r.error) {
					piToolsOn = r.on;
					piToolsError = undefined;
				}
				return ctx.ui.notify(r.message, r.error ? "error" : "info");
			}
			if (words[0] === "usage") {
				const r = await runBridge(["usage"]);
				return ctx.ui.notify((r.stdout + (r.ok ? "" : r.stderr)).trim() || "(no output)", r.ok ? "info" : "error");
			}
			// Every other answer is agy-bridge's, in words; `clear all` asks first.
			const argv = ["slash", "--session-id", keyOf(ctx), "--cwd", ctx.cwd, "--pi-tools", piToolsOn ? "on" : "off"];
			if (words[0] === "clear" && words[1] === "all") {
				const sure = await ctx.ui.confirm("Forget every pi session's agy conversation?", "Each begins a new agy conversation on its next turn.");
				if (!sure) return ctx.ui.notify("nothing was cleared", "info");
				argv.push("--yes");
			}
			const r = await runBridge([...argv, "--", ...words]);
			const text = (r.stdout + (r.ok ? "" : r.stderr)).trim() || "(no output)";
			ctx.ui.notify(text, r.ok ? "info" : "error");
		},
	});

	pi.registerTool({
		name: "AskAntigravity",
		label: "Ask Antigravity",
		description:
			"Delegate a self-contained task or question to Google's Antigravity agent (agy), which works in this workspace on its own and returns its final answer plus a conversation id you can pass back to continue.",
		promptSnippet: "Delegate a self-contained task to the Antigravity agent (agy)",
		parameters: Type.Object({
			prompt: Type.String({ description: "The complete task or question for agy" }),
			model: Type.Optional(Type.String({ description: "flash, pro, gemini, sonnet, opus, gpt-oss, or e.g. '3.5 flash low'" })),
			conversationId: Type.Optional(Type.String({ description: "Continue an earlier AskAntigravity conversation" })),
			mode: Type.Optional(Type.String({ description: "plan or accept-edits" })),
		}),
		async execute(_id, params, signal, _onUpdate, ctx) {
			const args = ["ask", "--json", "--caller-provider", String(ctx?.model?.provider ?? ""), "--cwd", ctx.cwd];
			if (params.model) args.push("--model", params.model);
			if (params.conversationId) args.push("--conversation", params.conversationId);
			if (params.mode) args.push("--mode", params.mode);
			args.push("--", params.prompt);
			// agy's own watchdog is 10 minutes; ours ends the child a minute later.
			const out = await runBridge(args, { timeoutMs: 11 * 60 * 1000, signal });
			if (out.aborted) throw new Error("AskAntigravity was aborted");
			let result: { answer?: string; conversationId?: string | null; error?: string | null };
			try {
				result = JSON.parse(out.stdout);
			} catch {
				throw new Error(`AskAntigravity failed: ${out.stderr.trim() || "no output from agy-bridge"}`);
			}
			if (result.error) throw new Error(`AskAntigravity failed: ${result.error}`);
			const footer = result.conversationId ? `\n\n[agy conversation: ${result.conversationId}]` : "";
			return {
				content: [{ type: "text", text: `${result.answer ?? ""}${footer}` }],
				details: { conversationId: result.conversationId ?? null },
			};
		},
	});
}
