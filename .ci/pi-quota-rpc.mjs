// pi in RPC mode: agy's quota in pi's footer. After an agy turn ends the
// extension asks `agy-bridge usage` in the background, and pi shows the
// bucket with the least left under the status key `agy-quota` (in RPC mode
// a fire-and-forget `extension_ui_request`, method `setStatus`). The turn
// ends first: the footer is never on its path. `/agy usage` lists every
// bucket. FAKE_AGY_USAGE (set by the caller) makes the words predictable.
// Prints one "ok"/"FAIL" line per check; exit code = failures.
//
// Usage: node pi-quota-rpc.mjs PI_BIN EXTENSION_DIR WORKSPACE FOOTER_TEXT BUCKET_LINE...
import { check, failures, startPi, until } from "./rpc-check.mjs";

const [piBin, extension, workspace, footer, ...bucketLines] = process.argv.slice(2);

const { pi, events, send: command } = startPi(piBin, extension, { cwd: workspace });
const send = (message) => command({ type: "prompt", message });
const isQuotaStatus = (e) => e.type === "extension_ui_request" && e.method === "setStatus" && e.statusKey === "agy-quota";
const types = (from) => JSON.stringify(events.slice(from).map((e) => e.method ?? e.type)).slice(0, 600);

send("first question");
const end = await until(() => events.findIndex((e) => e.type === "agent_end") + 1, 60000);
check("the agy turn ends", !!end, types(0));
const status = await until(() => events.findIndex(isQuotaStatus) + 1, 20000);
const shown = status ? events[status - 1].statusText : undefined;
check(`the footer shows the lowest bucket: "${footer}"`, shown === footer, `setStatus: ${JSON.stringify(shown)}; events ${types(0)}`);
check("the footer comes after the turn ended (not on its path)", !!status && !!end && status > end, `agent_end #${end}, setStatus #${status}`);

const from = events.length;
send("/agy usage");
const note = await until(() => events.slice(from).find((e) => e.type === "extension_ui_request" && e.method === "notify"), 20000);
const text = note?.message ?? "";
check("/agy usage lists every bucket", bucketLines.length > 0 && bucketLines.every((l) => text.includes(l)), `notify: ${JSON.stringify(note)}; events ${types(from)}`);

pi.kill("SIGTERM");
process.exit(failures());
