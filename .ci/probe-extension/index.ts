// A test extension for .ci/pi-e2e.sh: registers `pi_probe`, a tool whose
// result only this pi process can produce (a secret made at load and written
// to $PROBE_SECRET_FILE for the script to look for in agy's conversation).
// With $PROBE_BLOCK_FILE set, the tool writes that file and then runs until
// pi aborts it (the abort-while-the-tool-runs case); with $PROBE_DELAY_MS,
// it takes that long (time to steer while it runs).
// With $PROBE_HOOK_LOG set, every before_provider_request and
// after_provider_response pi fires is a JSON line there; $PROBE_REWRITE
// then replaces the text of the request's last message (a hook's returned
// payload is what the provider sends).
// With $PROBE_WARNINGS_LOG set, the warnings Node emits in this pi process
// (pi silences them) are lines there: a listener leak is one.
// With $PROBE_SECTION set, each prompt adds a section `probe_note` with that
// text to pi's system prompt: in a session whose prompt lacked it, pi puts a
// system message mid-conversation (a patch of the prompt's sections).
import fs from "node:fs";
import type { ExtensionAPI } from "@earendil-works/pi-coding-agent";
import { Type } from "typebox";

export default function (pi: ExtensionAPI): void {
	const warnings = process.env.PROBE_WARNINGS_LOG;
	if (warnings) process.emitWarning = ((w: string | Error) => fs.appendFileSync(warnings, `${w instanceof Error ? `${w.name}: ${w.message}` : w}\n`)) as typeof process.emitWarning;
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
			const delay = Number(process.env.PROBE_DELAY_MS ?? 0);
			if (delay > 0) await new Promise((resolve) => setTimeout(resolve, delay));
			return { content: [{ type: "text", text: secret }], details: {} };
		},
	});
	const section = process.env.PROBE_SECTION;
	if (section)
		pi.on("before_agent_start", (event) => {
			event.systemPromptOptions.sections.probe_note = section;
		});
	const hookLog = process.env.PROBE_HOOK_LOG;
	if (!hookLog) return;
	const log = (line: unknown) => fs.appendFileSync(hookLog, `${JSON.stringify(line)}\n`);
	pi.on("before_provider_request", (event) => {
		log({ hook: "before_provider_request", payload: event.payload });
		const rewrite = process.env.PROBE_REWRITE;
		const p = event.payload as { messages?: { role: string }[] };
		if (!rewrite || !Array.isArray(p?.messages)) return undefined;
		const last = p.messages[p.messages.length - 1];
		return { ...p, messages: [...p.messages.slice(0, -1), { ...last, content: [{ type: "text", text: rewrite }] }] };
	});
	pi.on("after_provider_response", (event) => log({ hook: "after_provider_response", status: event.status }));
}
