// A test extension for .ci/pi-e2e.sh: registers `pi_probe`, a tool whose
// result only this pi process can produce (a secret made at load and written
// to $PROBE_SECRET_FILE for the script to look for in agy's conversation).
// With $PROBE_BLOCK_FILE set, the tool writes that file and then runs until
// pi aborts it (the abort-while-the-tool-runs case).
import fs from "node:fs";
import type { ExtensionAPI } from "@earendil-works/pi-coding-agent";
import { Type } from "typebox";

export default function (pi: ExtensionAPI): void {
	const secret = `probe-${process.pid}-${Math.random().toString(36).slice(2)}`;
	if (process.env.PROBE_SECRET_FILE) fs.writeFileSync(process.env.PROBE_SECRET_FILE, secret);
	pi.registerTool({
		name: "pi_probe",
		label: "Probe",
		description: "A value only pi knows",
		parameters: Type.Object({ question: Type.Optional(Type.String()) }),
		async execute(_id, _params, signal) {
			const block = process.env.PROBE_BLOCK_FILE;
			if (block) {
				fs.writeFileSync(block, "running");
				await new Promise<void>((resolve) => {
					if (signal?.aborted) return resolve();
					signal?.addEventListener("abort", () => resolve(), { once: true });
				});
				return { content: [{ type: "text", text: "aborted" }], details: {} };
			}
			return { content: [{ type: "text", text: secret }], details: {} };
		},
	});
}
