// What the pi RPC scripts share: one "ok"/"FAIL" line per check, and
// waiting for a condition with a bound.
import fs from "node:fs";

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
