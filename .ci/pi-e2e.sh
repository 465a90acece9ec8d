#!/usr/bin/env bash
# End-to-end: the pi extension inside a real pi ($PI_VERSION, one of
# .ci/pi-versions; default the newest), with fake-agy as agy. Reads as a
# transcript: each check names what a pi user would see.
#
# Needs target/debug/{agy-bridge,fake-agy} (cargo build --workspace; with
# CARGO_TARGET_DIR set, that directory's debug/).
# Installs Node 22 and pi into $AGY_BRIDGE_CI_CACHE (default
# ~/.cache/agy-bridge-ci), reusing them when already there (.ci/pi-env.sh).
set -uo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
. "$ROOT/.ci/pi-env.sh"
pi_env_install || { echo "could not install Node 22 / pi"; echo "0 passed, 1 failed"; exit 1; }

TARGET="${CARGO_TARGET_DIR:-$ROOT/target}"
BRIDGE="$TARGET/debug/agy-bridge"
FAKE="$TARGET/debug/fake-agy"
[ -x "$BRIDGE" ] && [ -x "$FAKE" ] || { echo "build first: cargo build --workspace"; echo "0 passed, 1 failed"; exit 1; }


WORK="$(mktemp -d)"; trap 'rm -rf "$WORK"' EXIT

# 0. The extension type-checks (strict) against the newest pi's own types
#    (the floor's lack what pi added since, e.g. onProviderStreamEvent:
#    called where pi has it; the floor's run below shows the rest works).
mkdir -p "$WORK/tsc" && cp "$ROOT/pi-extension/index.ts" "$ROOT/pi-extension/package.json" "$WORK/tsc/" && cp "$ROOT/.ci/probe-extension/index.ts" "$WORK/tsc/probe.ts" && ln -s "$PI_DIR/node_modules" "$WORK/tsc/node_modules"
if [ "$PI_VERSION" = "$PI_NEWEST" ]; then
  cat > "$WORK/tsc/tsconfig.json" <<'JSON'
{ "compilerOptions": { "target": "ES2022", "module": "NodeNext", "moduleResolution": "NodeNext",
    "strict": true, "noEmit": true, "skipLibCheck": true, "types": ["node"] }, "files": ["index.ts", "probe.ts"] }
JSON
  out="$(cd "$WORK/tsc" && "$PI_DIR/node_modules/.bin/tsc" -p tsconfig.json 2>&1)"; code=$?
  [ $code = 0 ]; check "pi-extension/index.ts type-checks against pi $PI_VERSION's types" $? "$out"
fi

# 0b. The extension's own parts, in Node against this pi's pi-ai, with a
#     stand-in agy-bridge (.ci/pi-ext-unit.mjs): pi's provider contract per
#     call, the protocol's tags and release rule, stream decoding, the
#     AGY_PI_TOOLS rule asked of the real agy-bridge.
unit_out="$(cd "$WORK/tsc" && timeout 120 node "$ROOT/.ci/pi-ext-unit.mjs" "$WORK/tsc" "$BRIDGE" 2>&1)"
echo "$unit_out"
passed=$((passed + $(grep -c '^ok ' <<<"$unit_out")))
failed=$((failed + $(grep -c '^FAIL' <<<"$unit_out")))
grep -q '^ok ' <<<"$unit_out" || { failed=$((failed+1)); echo "FAIL - the extension's unit checks did not run"; }
export HOME="$WORK/home" PI_CODING_AGENT_DIR="$WORK/home/.pi/agent"
mkdir -p "$PI_CODING_AGENT_DIR" "$WORK/project"
export AGY_BRIDGE_BIN="$BRIDGE" AGY_BIN="$FAKE" FAKE_AGY_SPEED=8 PI_OFFLINE=1
cd "$WORK/project"
pi_run() { timeout 180 "$PI" --offline -e "$ROOT/pi-extension" --model antigravity/gemini-3.7-flash "$@" </dev/null; }

# 1. The recording's answer text is printed.
out="$(FAKE_AGY_RECORDING=hello pi_run --no-session -p "Say hello" 2>&1)"; code=$?
want="$(sed -n 1p "$ROOT/recordings/hello.jsonl" | node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>process.stdout.write(JSON.parse(s).stdout.trim()))')"
[ $code = 0 ] && grep -qF "$want" <<<"$out"; check "pi -p prints agy's answer (hello)" $? "exit $code
$out"

# 2. --mode json: thinking, then text, in order.
out="$(FAKE_AGY_RECORDING=thinking pi_run --no-session --mode json -p "q" 2>&1)"; code=$?
order="$(grep -o '"assistantMessageEvent":{"type":"[a-z_]*"' <<<"$out" | sed 's/.*"type":"//; s/"$//' | uniq | tr '\n' ' ')"
[ $code = 0 ] && [ "$order" = "thinking_start thinking_delta thinking_end text_start text_delta text_end " ]
check "--mode json shows thinking then text" $? "exit $code, order: $order"
grep -q 'Canberra' <<<"$out"; check "--mode json carries the answer text" $? "$(tail -5 <<<"$out")"

# 2b. Permissions `ask` (the default) where pi has no UI: agy's read-only
#     tools run, its command does not (fake-agy's tool log is the mark),
#     and the answer says which rule would allow it.
out="$(FAKE_AGY_RECORDING=tools FAKE_AGY_TOOL_LOG="$WORK/tools2b.log" pi_run --no-session -p "Fix the failing test" 2>&1)"; code=$?
grep -q '"view_file"' "$WORK/tools2b.log" && ! grep -q '"run_command"' "$WORK/tools2b.log" &&
  grep -qF 'run_command: cargo test *' <<<"$out"
check "pi -p, permissions ask: reads run, the command is denied with the rule that would allow it" $? "exit $code, ran: $(cat "$WORK/tools2b.log" 2>/dev/null)
$out"

# 3. A quota error: pi exits 1 with agy's message, and names the empty
#    bucket (agy's /usage, asked after the failure) and when it refills.
cat > "$WORK/usage3.json" <<'JSON'
{"groups":[{"buckets":[{"id":"gemini-5h","name":"Gemini 5-hour","window":"5h","remaining_fraction":0,"reset_time":"2020-01-01T14:05:00Z"}]}]}
JSON
out="$(FAKE_AGY_RECORDING=quota-error FAKE_AGY_USAGE="$WORK/usage3.json" pi_run --no-session -p "Refactor the parser" 2>&1)"; code=$?
[ $code = 1 ] && grep -q "exhausted your capacity" <<<"$out" &&
  grep -qF "Gemini 5-hour quota is used up (0% left); it was due to reset on 2020-01-01 at 14:05 UTC" <<<"$out"
check "quota error: exit 1 with agy's message and the empty bucket" $? "exit $code
$out"

# 3b. agy 1.2.17's real quota shape (exit 3, AGY_ERROR on stderr): pi shows
#     agy's own sentence, never the JSON, and does not retry it.
out="$(FAKE_AGY_RECORDING=outcomes/quota-1.2.17 FAKE_AGY_ARGV_LOG="$WORK/quota-argv.log" pi_run --no-session -p "Audit" 2>&1)"; code=$?
# agy's turns only: not its own commands (the quota's /usage, the permission hook's /hooks)
runs="$(grep '"-p"' "$WORK/quota-argv.log" 2>/dev/null | grep -vc '"-p","/')"
[ $code = 1 ] && grep -q "agy quota exceeded: Individual quota reached" <<<"$out" && ! grep -q "AGY_ERROR" <<<"$out" &&
  [ "$runs" = 1 ]
check "quota (1.2.17 shape): agy's sentence, no JSON, agy run once (no retry)" $? "exit $code, agy print runs: $runs
$out"

# 3c. The token usage of agy's last model call reaches pi's message.
out="$(FAKE_AGY_RECORDING=outcomes/pong-1.2.17 pi_run --no-session --mode json -p "ready?" 2>&1)"; code=$?
[ $code = 0 ] && grep -q '"usage":{"input":12480,"output":190' <<<"$out"
check "usage of agy's last model call is on the assistant message" $? "exit $code
$(grep -o '"usage":{[^}]*}' <<<"$out" | tail -2)"

# 4. --list-models lists fake-agy's `agy models`.
out="$(timeout 60 "$PI" --offline -e "$ROOT/pi-extension" --list-models antigravity </dev/null 2>&1)"; code=$?
grep -q "gemini-3.7-flash" <<<"$out" && grep -q "claude-sonnet-4-6" <<<"$out" && grep -q "gpt-oss-120b-medium" <<<"$out"
check "--list-models antigravity lists agy's models" $? "$out"

# 5. A second turn on the same pi session resumes the same agy conversation.
# (A fresh HOME, so the only binding is this session's.)
export HOME="$WORK/home2" PI_CODING_AGENT_DIR="$WORK/home2/.pi/agent"
mkdir -p "$PI_CODING_AGENT_DIR"
SESSION="$WORK/session.jsonl"
out1="$(FAKE_AGY_RECORDING=hello pi_run --session "$SESSION" -p "Say hello" 2>&1)"; c1=$?
store="$HOME/.pi/agent/antigravity-bridge/sessions.json"
conv1="$(node -e 'const s=require(process.argv[1]);const v=Object.values(s);console.log(v.length===1?v[0].conversationId:"")' "$store" 2>/dev/null)"
out2="$(FAKE_AGY_RECORDING=resume pi_run --session "$SESSION" -p "Any suggestions?" 2>&1)"; c2=$?
conv2="$(node -e 'const s=require(process.argv[1]);const v=Object.values(s);console.log(v.length===1?v[0].conversationId:"")' "$store" 2>/dev/null)"
turns="$("$BRIDGE" decode --json "$HOME/.gemini/antigravity-cli/conversations/$conv1.db" 2>/dev/null | grep -c '"kind":"user_input"')"
[ $c1 = 0 ] && [ $c2 = 0 ] && [ -n "$conv1" ] && [ "$conv1" = "$conv2" ] && [ "$turns" = 2 ] && grep -q "proptest" <<<"$out2"
check "second -p turn resumes the same conversation" $? "exit $c1/$c2, conversations '$conv1' '$conv2', user turns in db: $turns
$(cat "$store" 2>/dev/null)
$out2"

# 5b. The cwd pi gives the session, not pi's process's: step 5's session,
#     opened from another directory, runs agy in its own (pi's ctx.cwd).
mkdir -p "$WORK/elsewhere"
out="$(cd "$WORK/elsewhere" && FAKE_AGY_RECORDING=resume FAKE_AGY_ARGV_LOG="$WORK/argv5b.log" pi_run --session "$SESSION" -p "And now?" 2>&1)"; code=$?
[ $code = 0 ] && grep -qF "\"$WORK/project\"" "$WORK/argv5b.log" && ! grep -qF "$WORK/elsewhere" "$WORK/argv5b.log"
check "a session opened from another directory runs agy in the session's cwd" $? "exit $code, agy argv: $(cat "$WORK/argv5b.log" 2>/dev/null)
$out"

# 5c. A system message pi puts mid-conversation (here: an extension adds a
#     prompt section the session's prompt lacked) reaches agy with the next
#     turn's context, as other context agy did not see does.
out="$(FAKE_AGY_RECORDING=resume FAKE_AGY_STDIN_LOG="$WORK/stdin5c.log" PROBE_SECTION="Note from pi: answer in metres." \
  pi_run -e "$ROOT/.ci/probe-extension" --session "$SESSION" -p "And the units?" 2>&1)"; code=$?
[ $code = 0 ] && grep -qF '[pi system message]' "$WORK/stdin5c.log" && grep -qF 'Note from pi: answer in metres.' "$WORK/stdin5c.log"
check "a mid-conversation system message of pi's reaches agy in the turn's context" $? "exit $code, agy's stdin: $(cat "$WORK/stdin5c.log" 2>/dev/null | cut -c1-1500)
$out"

# 6. RPC mode: `/agy mode plan` saves the setting; an abort mid-turn ends it
#    as aborted and takes agy's whole process tree down.
export HOME="$WORK/home3" PI_CODING_AGENT_DIR="$WORK/home3/.pi/agent"
mkdir -p "$PI_CODING_AGENT_DIR"
rpc_out="$(FAKE_AGY_RECORDING=long-answer FAKE_AGY_SPEED=0.3 FAKE_AGY_GRANDCHILD=1 \
  FAKE_AGY_GRANDCHILD_PIDFILE="$WORK/grandchild.pid" \
  timeout 120 node "$ROOT/.ci/pi-rpc.mjs" "$PI" "$ROOT/pi-extension" "$WORK/grandchild.pid" \
  "$HOME/.pi/agent/antigravity-bridge/config.json" 2>&1)"
echo "$rpc_out"
passed=$((passed + $(grep -c '^ok ' <<<"$rpc_out")))
failed=$((failed + $(grep -c '^FAIL' <<<"$rpc_out")))
grep -q '^ok ' <<<"$rpc_out" || { failed=$((failed+1)); echo "FAIL - pi RPC session did not run"; }

# 6b. Warm agy sessions: agy starts with the pi session, both prompts run on
#     it, and a SIGKILLed pi leaves no agy behind.
export HOME="$WORK/home5" PI_CODING_AGENT_DIR="$WORK/home5/.pi/agent"
mkdir -p "$PI_CODING_AGENT_DIR" "$WORK/ws5"
warm_out="$(FAKE_AGY_RECORDING=stdin-two-turns FAKE_AGY_BOOT_MS=500 FAKE_AGY_ARGV_LOG="$WORK/argv5.log" \
  timeout 180 node "$ROOT/.ci/pi-warm-rpc.mjs" "$PI" "$ROOT/pi-extension" "$WORK/argv5.log" "$WORK/ws5" 2>&1)"
echo "$warm_out"
passed=$((passed + $(grep -c '^ok ' <<<"$warm_out")))
failed=$((failed + $(grep -c '^FAIL' <<<"$warm_out")))
grep -q '^ok ' <<<"$warm_out" || { failed=$((failed+1)); echo "FAIL - pi RPC warm session did not run"; }

# 6c. agy's quota in pi's footer: after an agy turn the extension asks
#     `agy-bridge usage` in the background and pi shows the lowest bucket
#     (status key agy-quota); `/agy usage` lists every bucket.
export HOME="$WORK/home6" PI_CODING_AGENT_DIR="$WORK/home6/.pi/agent"
mkdir -p "$PI_CODING_AGENT_DIR" "$WORK/ws6"
# agy's buckets as agy names them, alike in two groups (no reset times, so
# the words do not move with the clock: tests/usage_cli.rs has those).
cat > "$WORK/usage6.json" <<'JSON'
{"groups":[{"name":"Gemini Models","buckets":[{"id":"gemini-weekly","name":"Weekly Limit Remaining","window":"weekly","remaining_fraction":0.6}]},{"name":"Claude and GPT models","buckets":[{"id":"3p-weekly","name":"Weekly Limit Remaining","window":"weekly","remaining_fraction":0.07}]}]}
JSON
quota_out="$(FAKE_AGY_RECORDING=stdin-two-turns FAKE_AGY_USAGE="$WORK/usage6.json" \
  timeout 180 node "$ROOT/.ci/pi-quota-rpc.mjs" "$PI" "$ROOT/pi-extension" "$WORK/ws6" \
  "agy quota: Claude and GPT models: Weekly Limit Remaining 7% left" \
  "Gemini Models: Weekly Limit Remaining 60% left" "Claude and GPT models: Weekly Limit Remaining 7% left" 2>&1)"
echo "$quota_out"
passed=$((passed + $(grep -c '^ok ' <<<"$quota_out")))
failed=$((failed + $(grep -c '^FAIL' <<<"$quota_out")))
grep -q '^ok ' <<<"$quota_out" || { failed=$((failed+1)); echo "FAIL - pi RPC quota footer session did not run"; }

# 6d. pi decides agy's tool calls (permissions ask): the dialog, through
#     pi's extension_ui_request protocol, allows a command (it runs), denies
#     one with a reason (it does not run; agy gets the reason), and an abort
#     while it is open denies.
export HOME="$WORK/home7" PI_CODING_AGENT_DIR="$WORK/home7/.pi/agent"
mkdir -p "$PI_CODING_AGENT_DIR" "$WORK/gate"
gate_out="$(timeout 300 node "$ROOT/.ci/pi-gate-rpc.mjs" "$PI" "$ROOT/pi-extension" "$WORK/gate" 2>&1)"
echo "$gate_out"
passed=$((passed + $(grep -c '^ok ' <<<"$gate_out")))
failed=$((failed + $(grep -c '^FAIL' <<<"$gate_out")))
grep -q '^ok ' <<<"$gate_out" || { failed=$((failed+1)); echo "FAIL - pi RPC permission session did not run"; }

# 7. pi's tools for agy: agy (fake-agy) calls pi_probe, a tool of a second
#    extension whose result only this pi can produce; pi runs it; the result
#    reaches agy (its type-38 step holds it) and agy's answer follows. pi's
#    installed files are the same before and after (nothing is patched).
export HOME="$WORK/home4" PI_CODING_AGENT_DIR="$WORK/home4/.pi/agent"
mkdir -p "$PI_CODING_AGENT_DIR" "$WORK/tmp4"
pi_hash() { (cd "$PI_DIR/node_modules/@earendil-works" && find . -type f -print0 | sort -z | xargs -0 sha256sum | sha256sum); }
before="$(pi_hash)"
out="$(FAKE_AGY_RECORDING=mcp/pi-tool PROBE_SECRET_FILE="$WORK/secret" TMPDIR="$WORK/tmp4" \
  pi_run -e "$ROOT/.ci/probe-extension" --no-session --mode json -p "Ask pi for a probe value" 2>&1)"; code=$?
secret="$(cat "$WORK/secret" 2>/dev/null)"
db="$(ls "$HOME/.gemini/antigravity-cli/conversations/"*.db 2>/dev/null | head -1)"
step="$("$BRIDGE" decode --json "$db" 2>/dev/null | grep '"mcp:pi/pi_probe"' | grep -F "$secret")"
[ $code = 0 ] && [ -n "$secret" ] && grep -q '"stopReason":"toolUse"' <<<"$out" && grep -q "pi ran pi_probe" <<<"$out" && [ -n "$step" ]
check "agy calls pi's tool, pi runs it, the result reaches agy" $? "exit $code, secret '$secret', db $db
$(grep -o '"type":"tool_execution_[a-z]*"' <<<"$out" | sort | uniq -c)
$("$BRIDGE" decode --json "$db" 2>&1 | grep -i mcp | head -5)
$(tail -5 <<<"$out")"
grep -q "\"toolName\":\"pi_probe\"" <<<"$out" && grep -qF "$secret" <<<"$out"
check "pi's session shows its own toolCall and the tool result" $? "$(tail -3 <<<"$out")"
[ -z "$(ls "$WORK/tmp4" | grep agy-bridge-mcp-)" ]; check "the private MCP config dir is gone after the turn" $? "$(ls -la "$WORK/tmp4")"

mcp_rpc="$(FAKE_AGY_RECORDING=mcp/pi-tool FAKE_AGY_GRANDCHILD=1 FAKE_AGY_GRANDCHILD_PIDFILE="$WORK/grandchild4.pid" \
  timeout 120 node "$ROOT/.ci/pi-mcp-rpc.mjs" "$PI" "$ROOT/pi-extension" "$ROOT/.ci/probe-extension" \
  "$WORK/grandchild4.pid" "$WORK/probe-block" "$WORK/tmp4" 2>&1)"
echo "$mcp_rpc"
passed=$((passed + $(grep -c '^ok ' <<<"$mcp_rpc")))
failed=$((failed + $(grep -c '^FAIL' <<<"$mcp_rpc")))
grep -q '^ok ' <<<"$mcp_rpc" || { failed=$((failed+1)); echo "FAIL - pi RPC session with pi's tools did not run"; }
after="$(pi_hash)"
[ "$before" = "$after" ]; check "pi's installed files are unchanged" $? "before $before, after $after"

# 8. The extension fits pi (issue 21, item 7).
# 8a. pi's provider hooks fire for agy as for pi's own providers: one
#     before_provider_request and one after_provider_response per provider
#     call (the request line, then the continuation's tool_result lines),
#     and the payload a hook returns is what agy-bridge gets.
export HOME="$WORK/home8" PI_CODING_AGENT_DIR="$WORK/home8/.pi/agent"
mkdir -p "$PI_CODING_AGENT_DIR"
out="$(FAKE_AGY_RECORDING=mcp/pi-tool FAKE_AGY_STDIN_LOG="$WORK/stdin8.log" PROBE_HOOK_LOG="$WORK/hooks8.log" \
  PROBE_REWRITE="Rewritten by before_provider_request" \
  pi_run -e "$ROOT/.ci/probe-extension" --no-session --mode json -p "Ask pi for a probe value" 2>&1)"; code=$?
hooks="$(node -e 'for (const l of require("fs").readFileSync(process.argv[1], "utf8").split("\n").filter(Boolean)) {
  const h = JSON.parse(l);
  console.log(h.hook === "after_provider_response" ? `after ${h.status}` : `before ${Array.isArray(h.payload) ? h.payload.map((x) => x.type).join("+") : h.payload.model ? "request" : "?"}`);
}' "$WORK/hooks8.log" 2>/dev/null | tr '\n' ',')"
[ $code = 0 ] && [ "$hooks" = "before request,after 200,before tool_result,after 200," ]
check "pi's before_provider_request and after_provider_response fire for each provider call" $? "exit $code, hooks: $hooks
$(tail -3 <<<"$out")"
grep -q "Rewritten by before_provider_request" "$WORK/stdin8.log" 2>/dev/null && ! grep -q "Ask pi for a probe value" "$WORK/stdin8.log"
check "the payload before_provider_request returns is what reaches agy" $? "agy's stdin: $(cat "$WORK/stdin8.log" 2>/dev/null)"

# 8b. A steering message during agy's call of pi's tool, and a dozen
#     provider calls on one session's child (.ci/pi-steer-rpc.mjs).
export HOME="$WORK/home9" PI_CODING_AGENT_DIR="$WORK/home9/.pi/agent"
mkdir -p "$PI_CODING_AGENT_DIR"
steer_out="$(FAKE_AGY_RECORDING=mcp/pi-tools-sequential FAKE_AGY_STDIN_LOG="$WORK/stdin9.log" PROBE_DELAY_MS=1500 \
  PROBE_SECRET_FILE="$WORK/secret9" timeout 240 node "$ROOT/.ci/pi-steer-rpc.mjs" "$PI" "$ROOT/pi-extension" \
  "$ROOT/.ci/probe-extension" "$BRIDGE" "$WORK/secret9" "$WORK/stdin9.log" "$WORK/warnings9.log" 2>&1)"
echo "$steer_out"
passed=$((passed + $(grep -c '^ok ' <<<"$steer_out")))
failed=$((failed + $(grep -c '^FAIL' <<<"$steer_out")))
grep -q '^ok ' <<<"$steer_out" || { failed=$((failed+1)); echo "FAIL - pi RPC steering session did not run"; }

# 8c. Two sessions on one copy of the extension (pi's SDK): one's shutdown
#     leaves the other's turn alone (.ci/pi-sdk-sessions.mjs).
export HOME="$WORK/home10" PI_CODING_AGENT_DIR="$WORK/home10/.pi/agent"
mkdir -p "$PI_CODING_AGENT_DIR" "$WORK/ws10"
sdk_out="$(cd "$WORK/ws10" && FAKE_AGY_RECORDING=long-answer FAKE_AGY_SPEED=0.3 \
  timeout 180 node "$ROOT/.ci/pi-sdk-sessions.mjs" "$PI_DIR" "$ROOT/pi-extension" "$WORK/ws10" 2>&1)"
echo "$sdk_out"
passed=$((passed + $(grep -c '^ok ' <<<"$sdk_out")))
failed=$((failed + $(grep -c '^FAIL' <<<"$sdk_out")))
grep -q '^ok ' <<<"$sdk_out" || { failed=$((failed+1)); echo "FAIL - pi SDK sessions did not run"; }

echo "pi e2e (pi $PI_VERSION): $passed passed, $failed failed"
echo "$passed passed, $failed failed"
[ $failed = 0 ]
