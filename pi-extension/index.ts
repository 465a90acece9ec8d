// pi-agy-bridge: registers Google's Antigravity CLI (agy) as pi provider
// "antigravity". This file is deliberately thin: every decision (prompt,
// digest, sessions, models, event mapping, errors) lives in the Rust binary
// `agy-bridge`, which this extension spawns and talks to over JSON lines.
// The protocol is documented in ARCHITECTURE.md ("The pi protocol").
//
// The binary is `$AGY_BRIDGE_BIN`, else the one in this platform's npm
// package (`pi-agy-bridge-<os>-<cpu>`, an optional dependency of
// `pi-agy-bridge`), else `agy-bridge` on PATH. It must be a real executable:
// it re-executes itself as the guardian of agy's process tree.

import { spawn, spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { createInterface } from "node:readline";
import {
	createAssistantMessageEventStream,
	type Api,
	type AssistantMessage,
	type AssistantMessageEventStream,
	type Context,
	type Model,
	type SimpleStreamOptions,
} from "@earendil-works/pi-ai";
import type { ExtensionAPI } from "@earendil-works/pi-coding-agent";
import { Type } from "typebox";

const PROVIDER = "antigravity";
const ABORT_GRACE_MS = 3000;

const PLATFORM_PACKAGE = `pi-agy-bridge-${process.platform}-${process.arch}`;

function bridgeBin(): string {
	if (process.env.AGY_BRIDGE_BIN) return process.env.AGY_BRIDGE_BIN;
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

/** Why the binary could not be started, in words that say how to fix it. */
function cannotStart(err: Error): string {
	const bin = bridgeBin();
	if ((err as NodeJS.ErrnoException).code === "ENOENT" && bin === "agy-bridge") {
		return `agy-bridge not found: the npm package ${PLATFORM_PACKAGE} (the prebuilt binary for this platform) is not installed and agy-bridge is not on PATH, so reinstall pi-agy-bridge with optional dependencies, set AGY_BRIDGE_BIN, or build it from source with \`cargo install --path .\` in a checkout of the agy-bridge repository.`;
	}
	return `agy-bridge could not start (${bin}): ${err.message}`;
}

/** Run agy-bridge to completion (config, sessions, models). */
function runBridge(args: string[], timeoutMs = 20000): { ok: boolean; stdout: string; stderr: string } {
	const r = spawnSync(bridgeBin(), args, { encoding: "utf8", timeout: timeoutMs, stdio: ["ignore", "pipe", "pipe"] });
	if (r.error) return { ok: false, stdout: "", stderr: cannotStart(r.error) };
	return { ok: r.status === 0, stdout: r.stdout ?? "", stderr: r.stderr ?? "" };
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
	| { type: "text_end" | "thinking_end"; contentIndex: number; content: string }
	| { type: "done"; reason: "stop"; usage?: BridgeUsage }
	| { type: "error"; reason: "error" | "aborted"; errorMessage: string };

/** pi's streamSimple: one `agy-bridge stream` child per turn. We own the
 *  partial AssistantMessage and apply every delta to it. */
function streamSimple(model: Model<Api>, context: Context, options?: SimpleStreamOptions): AssistantMessageEventStream {
	const stream = createAssistantMessageEventStream();
	const partial: AssistantMessage = {
		role: "assistant",
		content: [],
		api: model.api,
		provider: model.provider,
		model: model.id,
		usage: zeroUsage(),
		stopReason: "stop",
		timestamp: Date.now(),
	};
	let finished = false;
	let started = false;
	let stderrTail = "";
	const ensureStarted = () => {
		if (!started) {
			started = true;
			stream.push({ type: "start", partial });
		}
	};
	const fail = (reason: "error" | "aborted", message: string) => {
		if (finished) return;
		ensureStarted();
		finished = true;
		partial.stopReason = reason;
		partial.errorMessage = message;
		stream.push({ type: "error", reason, error: partial });
		stream.end();
	};

	const child = spawn(bridgeBin(), ["stream"], { stdio: ["pipe", "pipe", "pipe"] });
	child.on("error", (err) => fail("error", cannotStart(err)));
	child.stderr.on("data", (d: Buffer) => {
		stderrTail = (stderrTail + d.toString("utf8")).slice(-2000);
	});
	child.stdin.on("error", () => {
		/* the child went away; close() below reports it */
	});

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
			case "text_end": {
				const block = partial.content[ev.contentIndex];
				if (block?.type === "text") block.text = ev.content;
				break;
			}
			case "thinking_end": {
				const block = partial.content[ev.contentIndex];
				if (block?.type === "thinking") block.thinking = ev.content;
				break;
			}
			case "done":
				ensureStarted();
				finished = true;
				partial.stopReason = "stop";
				// agy runs on the user's own subscription: tokens, no cost.
				if (ev.usage) partial.usage = { ...zeroUsage(), ...ev.usage, cost: zeroUsage().cost };
				stream.push({ type: "done", reason: "stop", message: partial });
				stream.end();
				return;
			case "error":
				fail(ev.reason === "aborted" ? "aborted" : "error", ev.errorMessage || "agy-bridge reported an error without a message");
				return;
			default:
				return;
		}
		ensureStarted();
		stream.push({ ...ev, partial } as Parameters<typeof stream.push>[0]);
	};

	createInterface({ input: child.stdout }).on("line", (line) => {
		let ev: BridgeEvent;
		try {
			ev = JSON.parse(line);
		} catch {
			return; // not protocol: ignore rather than crash pi
		}
		apply(ev);
	});
	child.on("close", (code, signal) => {
		if (finished) return;
		if (options?.signal?.aborted) return fail("aborted", "Operation aborted");
		const why = signal ? `signal ${signal}` : `exit code ${code}`;
		const tail = stderrTail.trim().split("\n").slice(-3).join(" | ");
		fail("error", `agy-bridge ended without finishing the turn (${why})${tail ? `: ${tail}` : ""}`);
	});

	// Abort: ask politely over stdin, then make sure the child is gone.
	const onAbort = () => {
		try {
			child.stdin.write('{"type":"abort"}\n');
		} catch {
			/* already closed */
		}
		setTimeout(() => {
			if (child.exitCode === null && child.signalCode === null) child.kill("SIGTERM");
			fail("aborted", "Operation aborted");
		}, ABORT_GRACE_MS).unref();
	};
	if (options?.signal?.aborted) onAbort();
	else options?.signal?.addEventListener("abort", onAbort, { once: true });

	const request = {
		model: model.id,
		reasoning: options?.reasoning,
		sessionId: options?.sessionId,
		cwd: process.cwd(),
		messages: context.messages,
	};
	child.stdin.write(`${JSON.stringify(request)}\n`);
	return stream;
}

function loadModels(): unknown[] {
	const r = runBridge(["models", "--json"]);
	if (r.stderr.trim()) console.error(`[agy-bridge] ${r.stderr.trim()}`);
	try {
		const parsed = JSON.parse(r.stdout);
		return Array.isArray(parsed) ? parsed : [];
	} catch {
		return [];
	}
}

export default function (pi: ExtensionAPI): void {
	const models = loadModels();
	pi.registerProvider(PROVIDER, {
		name: "Antigravity (agy)",
		baseUrl: "agy-bridge://antigravity",
		apiKey: "not-used",
		api: "agy-bridge",
		models: models as never,
		streamSimple,
	});

	pi.registerCommand("agy", {
		description: "agy-bridge settings: /agy [mode plan|accept-edits | permissions on|off | model ALIAS | thinking low|medium|high | sessions | clear]",
		handler: async (args, ctx) => {
			const words = (args ?? "").trim().split(/\s+/).filter(Boolean);
			let argv: string[];
			if (words[0] === "sessions") argv = ["sessions", "list"];
			else if (words[0] === "clear") argv = ["sessions", "clear"];
			else argv = ["config", ...words];
			const r = runBridge(argv);
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
			const args = ["ask", "--json", "--caller-provider", String(ctx?.model?.provider ?? "")];
			if (params.model) args.push("--model", params.model);
			if (params.conversationId) args.push("--conversation", params.conversationId);
			if (params.mode) args.push("--mode", params.mode);
			args.push("--", params.prompt);
			const out = await new Promise<{ stdout: string; stderr: string }>((resolve) => {
				const child = spawn(bridgeBin(), args, { stdio: ["ignore", "pipe", "pipe"] });
				let stdout = "";
				let stderr = "";
				child.stdout.on("data", (d: Buffer) => (stdout += d.toString("utf8")));
				child.stderr.on("data", (d: Buffer) => (stderr = (stderr + d.toString("utf8")).slice(-2000)));
				child.on("error", (e) => resolve({ stdout: "", stderr: cannotStart(e) }));
				child.on("close", () => resolve({ stdout, stderr }));
				signal?.addEventListener("abort", () => child.kill("SIGTERM"), { once: true });
			});
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
