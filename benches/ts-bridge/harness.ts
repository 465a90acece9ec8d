// One agy turn through the TypeScript bridge (EstebanForge/pi-antigravity-
// bridge), its `runAgyTurn` hosted in this node process as pi hosts it, and
// the CPU this process spends on the turn. Modules are loaded before the
// first measurement, so node's start-up is left out (in the bridge's favour:
// ours is counted whole). fake-agy is a child process, and
// process.cpuUsage() is getrusage(RUSAGE_SELF), so agy's CPU is left out too.
//
// Run by benches/ts-bridge.sh: node --import tsx harness.ts CWD, with HOME,
// AGY_BIN and FAKE_AGY_* set. Prints one JSON line.
import { runAgyTurn, type AgyEvent } from "./src/runner.ts";

const cwd = process.argv[2] ?? process.cwd();
let textBytes = 0;
let events = 0;
const before = process.cpuUsage();
const result = await runAgyTurn({ cwd, prompt: "go" }, (ev: AgyEvent) => {
	events++;
	if (ev.kind === "text") textBytes += Buffer.byteLength(ev.text, "utf8");
});
const spent = process.cpuUsage(before);
console.log(
	JSON.stringify({
		cpu_ms: Math.round((spent.user + spent.system) / 1000),
		events,
		text_bytes: textBytes,
		exit_code: result.exitCode,
	}),
);
