#!/usr/bin/env node
// A stand-in for agy-bridge, for .ci/pi-ext-unit.mjs: each scenario
// ($FAKE_BRIDGE_SCENARIO) answers the extension's lines with scripted
// protocol lines, and every stdin line is logged ($FAKE_BRIDGE_LOG). `pi-tools`
// goes to the real agy-bridge ($AGY_REAL_BRIDGE): its rules are the point.
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import { createInterface } from "node:readline";

const [cmd] = process.argv.slice(2);
const scenario = process.env.FAKE_BRIDGE_SCENARIO ?? "";
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const out = (ev) => process.stdout.write(`${JSON.stringify(ev)}\n`);

/** Bytes in two writes, split inside `char` (a multi-byte character). */
async function splitWrite(stream, text, char) {
	const bytes = Buffer.from(text, "utf8");
	const at = bytes.indexOf(Buffer.from(char, "utf8")) + 1;
	stream.write(bytes.subarray(0, at));
	await sleep(300);
	stream.write(bytes.subarray(at));
}

if (cmd === "models") out([]);
else if (cmd === "pi-tools") {
	const r = spawnSync(process.env.AGY_REAL_BRIDGE, process.argv.slice(2), { encoding: "utf8" });
	process.stdout.write(r.stdout);
	process.exitCode = r.status ?? 1;
} else if (cmd === "ask") {
	// A long answer whose "é" straddles a chunk boundary.
	await splitWrite(process.stdout, `${JSON.stringify({ answer: `${"a".repeat(70000)}é-après`, conversationId: "c1" })}\n`, "é");
} else if (cmd === "stream") {
	let requests = 0;
	const text = (i, t) => [
		{ type: "text_start", contentIndex: i },
		{ type: "text_delta", contentIndex: i, delta: t },
		{ type: "text_end", contentIndex: i },
	];
	const call = (i, id) => [
		{ type: "toolcall_start", contentIndex: i, id, toolName: "pi_probe" },
		{ type: "toolcall_delta", contentIndex: i, delta: "{}" },
		{ type: "toolcall_end", contentIndex: i, toolCall: { type: "toolCall", id, name: "pi_probe", arguments: {} } },
	];
	const usage = { input: 10, output: 5, cacheRead: 2, cacheWrite: 0, totalTokens: 17 };
	for await (const line of createInterface({ input: process.stdin })) {
		if (process.env.FAKE_BRIDGE_LOG) fs.appendFileSync(process.env.FAKE_BRIDGE_LOG, `${line}\n`);
		const msg = JSON.parse(line);
		const type = msg.type ?? "(none)";
		if (type === "warm" || type === "permission") continue;
		if (type === "request" || type === "(none)") requests += 1;
		if (scenario === "stderr") {
			await splitWrite(process.stderr, "agy-bridge: über kaputt\n", "ü");
			process.exit(3);
		}
		const events = [];
		if (type === "request" || type === "(none)") {
			if (scenario === "release" && requests === 1) events.push({ type: "start" }, ...call(0, "c1"), { type: "done", reason: "toolUse" });
			else if (scenario === "error") events.push({ type: "start" }, ...text(0, "partial"), { type: "error", reason: "error", errorMessage: "agy failed (exit 3)" });
			else events.push({ type: "start" }, { type: "thinking_start", contentIndex: 0 }, { type: "thinking_delta", contentIndex: 0, delta: "hm" }, { type: "thinking_end", contentIndex: 0 }, ...text(1, `answer ${requests}`), { type: "done", reason: "stop", usage });
		} else if (type === "release") {
			// The released turn's tail: a toolUse message is not its end; its error is.
			events.push({ type: "start" }, ...text(0, "LEAK"), ...call(1, "c2"), { type: "done", reason: "toolUse" }, { type: "start" }, { type: "error", reason: "aborted", errorMessage: `agy-bridge: ${msg.reason}` });
		}
		// An abort adds nothing: every turn here has ended by the time one comes.
		for (const ev of events) out(ev);
	}
}
