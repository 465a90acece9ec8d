// What the pi RPC scripts share: one "ok"/"FAIL" line per check, and
// waiting for a condition with a bound.
import { spawn } from "node:child_process";
import fs from "node:fs";
import { createInterface } from "node:readline";

let failed = 0;
export const check = (name, ok, detail = "") => {
	console.log(`${ok ? "ok  " : "FAIL"} - ${name}${ok ? "" : `\n       ${detail}`}`);
	if (!ok) failed++;
};
export const failures = () => failed;
export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
/** The first truthy value of `pred`, polled every 50 ms, or null after `ms`. */
export const until = async (pred, ms) => {
	const end = Date.now() + ms;
	while (Date.now() < end) {
		const v = pred();
		if (v) return v;
		await sleep(50);
	}
	return null;
};
/** Whether `pid` runs (not gone, not a zombie). */
export const alive = (pid) => {
	try {
		return !/\) [ZX] /.test(fs.readFileSync(`/proc/${pid}/stat`, "utf8"));
	} catch {
		return false;
	}
};
/** Live pids whose command line holds every one of `markers`. */
export const pidsWith = (...markers) =>
	fs
		.readdirSync("/proc")
		.filter((n) => /^\d+$/.test(n))
		.filter((pid) => {
			try {
				const cmd = fs.readFileSync(`/proc/${pid}/cmdline`, "utf8");
				return markers.every((m) => cmd.includes(m)) && alive(pid);
			} catch {
				return false;
			}
		});
/** `roots` and every live process below them (read from /proc's ppids). */
export const treeOf = (roots) => {
	const parent = new Map();
	for (const n of fs.readdirSync("/proc").filter((n) => /^\d+$/.test(n))) {
		try {
			// The field after the ")" that closes the command name: state, ppid.
			const stat = fs.readFileSync(`/proc/${n}/stat`, "utf8");
			parent.set(n, stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
		} catch {}
	}
	const tree = new Set(roots.map(String));
	for (let grew = true; grew; ) {
		grew = false;
		for (const [pid, ppid] of parent) {
			if (tree.has(ppid) && !tree.has(pid)) {
				tree.add(pid);
				grew = true;
			}
		}
	}
	return [...tree].filter(alive);
};
/** pi in RPC mode on the antigravity provider with `extension`: its
 *  process, every JSON line it printed (in `events`, `onEvent` called on
 *  each as it comes) and `send` for a command line. */
export const startPi = (piBin, extension, { cwd, env, onEvent } = {}) => {
	const pi = spawn(piBin, ["--offline", "--no-session", "--mode", "rpc", "-e", extension, "--model", "antigravity/gemini-3.7-flash"], {
		stdio: ["pipe", "pipe", "inherit"],
		cwd,
		env: env ?? process.env,
	});
	const events = [];
	const send = (line) => pi.stdin.write(`${JSON.stringify(line)}\n`);
	createInterface({ input: pi.stdout }).on("line", (line) => {
		let e;
		try {
			e = JSON.parse(line);
		} catch {
			return;
		}
		events.push(e);
		onEvent?.(e, send);
	});
	return { pi, events, send };
};
