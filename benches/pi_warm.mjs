// The pi bench of issue 18: real pi (RPC mode) with the extension, fake-agy
// as agy with a realistic start-up (FAKE_AGY_BOOT_MS, 2.4 s by default: a
// public 1.2.14 capture's `init`), at the recording's own pace. Time from
// sending a prompt to pi's first text_delta, for the first and the second
// turn of a session, warm against AGY_WARM=off, sessions alternating so both
// see the same machine; and agy's own first-token time (fake-agy alone, no
// start-up, prompt line to its first text_delta), measured in the same run.
//
// Usage: node pi_warm.mjs PI_BIN EXTENSION_DIR FAKE_AGY RECORDING ROUNDS
// [BEFORE_EXTENSION_DIR] (benches/pi-warm.sh builds and installs what it
// needs and runs it). With BEFORE_EXTENSION_DIR (the extension as it was
// before warm sessions: one `agy-bridge stream` per turn), that cold path is
// measured too, to hold AGY_WARM=off to it.
import { spawn } from "node:child_process";
import { createInterface } from "node:readline";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";

const [piBin, extensionArg, fakeAgy, recording, roundsArg, beforeArg] = process.argv.slice(2);
const extension = path.resolve(extensionArg);
const before = beforeArg ? path.resolve(beforeArg) : null;
const rounds = Number(roundsArg || 5);
const boot = process.env.FAKE_AGY_BOOT_MS ?? "2400";
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
/** How long past agy's start-up the first prompt comes. */
const THINK_MS = Number(process.env.THINK_MS ?? 4000);

/** Lines of a child's stdout as JSON, with a waiter for the next match. */
function jsonLines(stream) {
	const waiters = [];
	createInterface({ input: stream }).on("line", (line) => {
		let ev;
		try {
			ev = JSON.parse(line);
		} catch {
			return;
		}
		const now = performance.now();
		for (const w of [...waiters]) {
			if (w.pred(ev)) {
				waiters.splice(waiters.indexOf(w), 1);
				w.resolve(now);
			}
		}
	});
	return (pred, ms) =>
		new Promise((resolve, reject) => {
			const w = { pred, resolve };
			waiters.push(w);
			setTimeout(() => {
				if (waiters.includes(w)) reject(new Error(`timed out after ${ms} ms`));
			}, ms).unref();
		});
}

/** One pi session of two turns: [turn 1 ms, turn 2 ms] to the first text. */
async function piSession(warm, ext = extension) {
	const home = fs.mkdtempSync(path.join(os.tmpdir(), "pi-warm-"));
	const env = {
		...process.env,
		HOME: home,
		PI_CODING_AGENT_DIR: path.join(home, ".pi/agent"),
		AGY_BIN: fakeAgy,
		FAKE_AGY_RECORDING: recording,
		FAKE_AGY_SPEED: "1",
		FAKE_AGY_BOOT_MS: boot,
		AGY_WARM: warm ? "on" : "off",
		PI_OFFLINE: "1",
	};
	const pi = spawn(piBin, ["--offline", "--no-session", "--mode", "rpc", "-e", ext, "--model", "antigravity/gemini-3.7-flash"], {
		stdio: ["pipe", "pipe", "inherit"],
		env,
		cwd: home,
	});
	const next = jsonLines(pi.stdout);
	const send = (cmd) => pi.stdin.write(`${JSON.stringify(cmd)}\n`);
	// A user reads the screen before typing: pi's own start-up (it loads
	// the extension, which lists agy's models), then agy's, have this long.
	await sleep(Number(boot) + THINK_MS);
	const times = [];
	for (const message of ["first question", "second question"]) {
		const t0 = performance.now();
		const text = next((e) => e.type === "message_update" && e.assistantMessageEvent?.type === "text_delta", 60000);
		const end = next((e) => e.type === "agent_end", 60000);
		send({ type: "prompt", message });
		times.push((await text) - t0);
		await end;
	}
	// pi SIGKILLed with its session's agy warm: how long until that agy's
	// tree is gone (nothing may outlive pi; target 1 s).
	const agys = pidsWith(home, "fake-agy");
	const killed = performance.now();
	pi.kill("SIGKILL");
	while (agys.some(alive) && performance.now() - killed < 10000) await sleep(5);
	const gone = agys.some(alive) ? Infinity : performance.now() - killed;
	await new Promise((r) => (pi.exitCode === null && pi.signalCode === null ? pi.once("close", r) : r()));
	fs.rmSync(home, { recursive: true, force: true });
	return [...times, warm ? gone : NaN];
}

/** Live pids whose command line holds both words. */
function pidsWith(a, b) {
	return fs
		.readdirSync("/proc")
		.filter((n) => /^\d+$/.test(n))
		.map(Number)
		.filter((pid) => {
			try {
				const cmd = fs.readFileSync(`/proc/${pid}/cmdline`, "utf8");
				return cmd.includes(a) && cmd.includes(b) && alive(pid);
			} catch {
				return false;
			}
		});
}

function alive(pid) {
	try {
		return !/\) [ZX] /.test(fs.readFileSync(`/proc/${pid}/stat`, "utf8"));
	} catch {
		return false;
	}
}

/** agy's own first-token time: fake-agy alone, no start-up, the turn's
 *  prompt line to its first text_delta, for each of two turns. */
async function agyOwn() {
	const home = fs.mkdtempSync(path.join(os.tmpdir(), "agy-own-"));
	const agy = spawn(fakeAgy, ["--output-format", "stream-json", "--input-format", "stream-json", "-p", ""], {
		stdio: ["pipe", "pipe", "inherit"],
		env: { ...process.env, HOME: home, AGY_CONVERSATIONS_DIR: path.join(home, "conv"), FAKE_AGY_RECORDING: recording, FAKE_AGY_SPEED: "1", FAKE_AGY_BOOT_MS: "0" },
	});
	const next = jsonLines(agy.stdout);
	await next((e) => e.event === "init", 30000);
	const times = [];
	for (const content of ["first question", "second question"]) {
		const t0 = performance.now();
		const text = next((e) => e.event === "step_update" && e.step_update?.text_delta, 60000);
		const result = next((e) => e.event === "result", 60000);
		agy.stdin.write(`${JSON.stringify({ event: "user", message: { role: "user", content } })}\n`);
		times.push((await text) - t0);
		await result;
	}
	agy.stdin.end();
	await new Promise((r) => agy.once("close", r));
	fs.rmSync(home, { recursive: true, force: true });
	return times;
}

const median = (xs) => {
	const s = [...xs].sort((a, b) => a - b);
	return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};
const samples = { warm: [[], []], off: [[], []], before: [[], []], agy: [[], []] };
const teardown = [];
for (let i = 0; i < rounds; i++) {
	const runs = [
		["warm", () => piSession(true)],
		["off", () => piSession(false)],
		["agy", agyOwn],
	];
	if (before) runs.push(["before", () => piSession(false, before)]);
	for (const [name, run] of runs) {
		const [t1, t2, gone] = await run();
		samples[name][0].push(t1);
		samples[name][1].push(t2);
		if (name === "warm") teardown.push(gone);
	}
	process.stderr.write(`round ${i + 1}/${rounds} done\n`);
}
const ms = (x) => `${x.toFixed(0)} ms`;
const agy = [median(samples.agy[0]), median(samples.agy[1])];
console.log(`pi RPC, fake-agy start-up ${boot} ms, first prompt ${Number(boot) + THINK_MS} ms after pi started, ${rounds} sessions each, medians:\n`);
console.log("| | turn 1 (after pre-warm) | turn 2 |");
console.log("| --- | --- | --- |");
const label = { warm: "pi, AGY_WARM=on", off: "pi, AGY_WARM=off", before: "pi, the extension before warm sessions (one `stream` per turn)" };
for (const name of before ? ["warm", "off", "before"] : ["warm", "off"]) {
	const [t1, t2] = [median(samples[name][0]), median(samples[name][1])];
	console.log(`| ${label[name]} | ${ms(t1)} (+${ms(t1 - agy[0])} over agy) | ${ms(t2)} (+${ms(t2 - agy[1])} over agy) |`);
}
console.log(`| agy's own first token (no start-up) | ${ms(agy[0])} | ${ms(agy[1])} |`);
const ratio = (a, b) => (a / b).toFixed(1);
console.log(`\noff/warm: turn 1 ${ratio(median(samples.off[0]), median(samples.warm[0]))}x, turn 2 ${ratio(median(samples.off[1]), median(samples.warm[1]))}x`);
console.log(`pi SIGKILLed with a warm agy: agy's tree gone after ${ms(median(teardown))} (median; worst ${ms(Math.max(...teardown))})`);
