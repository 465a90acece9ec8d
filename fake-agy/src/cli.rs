//! agy's command-line surface (docs/agy-format.md, "The CLI surface"), parsed by hand so that
//! usage errors behave as agy's do: a message on stderr and exit code 2.
//!
//! agy is a Go program with pflag-style flags: `--name value`, `--name=value`,
//! `-p value`, `-p=value`; a flag that takes a value always consumes the next
//! argument, even one that starts with `-`.
//!
//! Which flags exist depends on the agy version emulated ([`Surface`]): a
//! caller probes `--help` to learn whether a flag is there, so the help text
//! and the parser must agree on it.

use std::time::Duration;

/// The command line of the agy version emulated. The newest has every flag;
/// `FAKE_AGY_NO_SLASH_FLAG=1` models an agy before 1.2.14, whose `--help`
/// does not list `--disable-slash-commands` and which rejects it as an
/// unknown flag (exit 2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Surface {
    /// `--disable-slash-commands` exists (documented from agy 1.2.14).
    pub slash_flag: bool,
}

impl Surface {
    pub const NEWEST: Surface = Surface { slash_flag: true };

    pub fn from_env() -> Surface {
        let off = std::env::var("FAKE_AGY_NO_SLASH_FLAG").is_ok_and(|v| {
            let v = v.trim().to_ascii_lowercase();
            !v.is_empty() && !matches!(v.as_str(), "0" | "false" | "no")
        });
        if off {
            Surface { slash_flag: false }
        } else {
            Surface::NEWEST
        }
    }

    /// Whether this command line has the flag `long` (its canonical name).
    fn has(self, long: &str) -> bool {
        long != SLASH_FLAG || self.slash_flag
    }
}

/// The flag that keeps a prompt starting with `/` from being a command.
const SLASH_FLAG: &str = "disable-slash-commands";

/// Exit code agy uses for usage errors.
pub const USAGE_EXIT: i32 = 2;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutputFormat {
    Text,
    Json,
    StreamJson,
}

/// What the command line asks for.
#[derive(Debug)]
pub enum Invocation {
    Help,
    Version,
    Models,
    /// A subcommand fake-agy accepts but does not emulate.
    Other(String),
    Print(Box<PrintArgs>),
    /// Internal: the child process that writes a subagent's database.
    SubagentWriter(Vec<String>),
    /// Internal: the process `FAKE_AGY_LATE_COMMIT_MS` leaves behind.
    LateWriter(Vec<String>),
}

/// The flags of a print-mode run. Most are accepted and ignored, as the
/// recording already fixes what the run does.
#[derive(Debug, Clone)]
pub struct PrintArgs {
    pub prompt: String,
    pub conversation: Option<String>,
    pub continue_latest: bool,
    pub model: Option<String>,
    pub effort: Option<String>,
    pub mode: Option<String>,
    pub add_dirs: Vec<String>,
    /// The timeout and its text as agy formats it (Go's `Duration.String`).
    pub print_timeout: Duration,
    pub skip_permissions: bool,
    pub sandbox: bool,
    pub output_format: OutputFormat,
    pub input_format: Option<String>,
    pub agent: Option<String>,
    pub log_file: Option<String>,
    pub project: Option<String>,
    pub new_project: bool,
    pub json_schema: Option<String>,
    pub disable_slash_commands: bool,
}

/// A usage error: the message goes to stderr with the usage text, exit 2.
#[derive(Debug, PartialEq, Eq)]
pub struct UsageError(pub String);

/// The subcommands agy has; only `models` and `help` do anything here.
const SUBCOMMANDS: &[&str] = &[
    "models",
    "help",
    "update",
    "changelog",
    "install",
    "plugins",
    "agents",
];

/// The hidden first argument that turns fake-agy into a subagent writer.
pub const SUBAGENT_WRITER: &str = "__fake-agy-subagent-writer";

/// The hidden first argument that turns fake-agy into a late writer.
pub const LATE_WRITER: &str = "__fake-agy-late-writer";

#[derive(Clone, Copy, PartialEq, Eq)]
enum Takes {
    Value,
    Bool,
}

/// (long names, short name, takes a value).
const FLAGS: &[(&[&str], Option<char>, Takes)] = &[
    (&["print", "prompt"], Some('p'), Takes::Value),
    (&["prompt-interactive"], Some('i'), Takes::Value),
    (&["conversation"], None, Takes::Value),
    (&["continue"], Some('c'), Takes::Bool),
    (&["model"], None, Takes::Value),
    (&["effort"], None, Takes::Value),
    (&["mode"], None, Takes::Value),
    (&["add-dir"], None, Takes::Value),
    (&["print-timeout"], None, Takes::Value),
    (&["dangerously-skip-permissions"], None, Takes::Bool),
    (&["sandbox"], None, Takes::Bool),
    (&["output-format"], None, Takes::Value),
    (&["input-format"], None, Takes::Value),
    (&["agent"], None, Takes::Value),
    (&["log-file"], None, Takes::Value),
    (&["project"], None, Takes::Value),
    (&["new-project"], None, Takes::Bool),
    (&["json-schema"], None, Takes::Value),
    (&["disable-slash-commands"], None, Takes::Bool),
    (&["version"], None, Takes::Bool),
    (&["help"], Some('h'), Takes::Bool),
];

fn find_long(name: &str, surface: Surface) -> Option<(&'static str, Takes)> {
    FLAGS
        .iter()
        .find(|(longs, _, _)| longs.contains(&name) && surface.has(longs[0]))
        .map(|(longs, _, t)| (longs[0], *t))
}

fn find_short(c: char) -> Option<(&'static str, Takes)> {
    FLAGS
        .iter()
        .find(|(_, short, _)| *short == Some(c))
        .map(|(longs, _, t)| (longs[0], *t))
}

fn parse_bool(flag: &str, v: &str) -> Result<bool, UsageError> {
    match v {
        "1" | "t" | "T" | "true" | "TRUE" | "True" => Ok(true),
        "0" | "f" | "F" | "false" | "FALSE" | "False" => Ok(false),
        _ => Err(UsageError(format!(
            "invalid argument {v:?} for \"--{flag}\" flag: strconv.ParseBool: parsing {v:?}: invalid syntax"
        ))),
    }
}

fn one_of(flag: &str, v: &str, allowed: &[&str]) -> Result<String, UsageError> {
    if allowed.contains(&v) {
        Ok(v.to_string())
    } else {
        Err(UsageError(format!(
            "invalid argument {v:?} for \"--{flag}\" flag: must be one of {}",
            allowed.join("|")
        )))
    }
}

/// `models`, `help` and the other subcommands, when `args` starts with one.
fn subcommand(args: &[String]) -> Option<Invocation> {
    let first = args.first()?;
    if first == SUBAGENT_WRITER {
        return Some(Invocation::SubagentWriter(args[1..].to_vec()));
    }
    if first == LATE_WRITER {
        return Some(Invocation::LateWriter(args[1..].to_vec()));
    }
    if !SUBCOMMANDS.contains(&first.as_str()) {
        return None;
    }
    if args[1..].iter().any(|a| a == "--help" || a == "-h") || first == "help" {
        return Some(Invocation::Help);
    }
    Some(match first.as_str() {
        "models" => Invocation::Models,
        other => Invocation::Other(other.to_string()),
    })
}

/// Read the flag at `args[*i]` and its value (the next argument for a flag
/// that takes one, `"true"`/`"false"` for a boolean), advancing `i`.
fn next_flag(
    args: &[String],
    i: &mut usize,
    surface: Surface,
) -> Result<(&'static str, String), UsageError> {
    let arg = &args[*i];
    *i += 1;
    let (name, takes, inline): (&str, Takes, Option<String>) =
        if let Some(rest) = arg.strip_prefix("--") {
            if rest.is_empty() {
                return Err(UsageError(
                    "unexpected \"--\": fake-agy takes no positional arguments".into(),
                ));
            }
            let (n, v) = match rest.split_once('=') {
                Some((n, v)) => (n, Some(v.to_string())),
                None => (rest, None),
            };
            let (canon, takes) =
                find_long(n, surface).ok_or_else(|| UsageError(format!("unknown flag: --{n}")))?;
            (canon, takes, v)
        } else if let Some(rest) = arg.strip_prefix('-').filter(|r| !r.is_empty()) {
            let mut chars = rest.chars();
            let c = chars.next().unwrap_or('-');
            let tail: String = chars.collect();
            let (canon, takes) = find_short(c)
                .ok_or_else(|| UsageError(format!("unknown shorthand flag: '{c}' in -{rest}")))?;
            let inline = if tail.is_empty() {
                None
            } else if let Some(v) = tail.strip_prefix('=') {
                Some(v.to_string())
            } else if takes == Takes::Value {
                Some(tail)
            } else {
                return Err(UsageError(format!(
                    "unknown shorthand flag: '{}' in -{rest}",
                    tail.chars().next().unwrap_or('-')
                )));
            };
            (canon, takes, inline)
        } else {
            return Err(UsageError(format!(
                "unexpected argument {arg:?}: fake-agy takes no positional arguments"
            )));
        };
    let value = match (takes, inline) {
        (Takes::Value, Some(v)) => v,
        (Takes::Value, None) => {
            let v = args
                .get(*i)
                .cloned()
                .ok_or_else(|| UsageError(format!("flag needs an argument: --{name}")))?;
            *i += 1;
            v
        }
        (Takes::Bool, Some(v)) => parse_bool(name, &v)?.to_string(),
        (Takes::Bool, None) => "true".to_string(),
    };
    Ok((name, value))
}

/// The flags seen so far.
struct Flags {
    p: PrintArgs,
    prompt: Option<String>,
    interactive: bool,
    version: bool,
    help: bool,
}

impl Flags {
    fn new() -> Flags {
        Flags {
            p: PrintArgs {
                prompt: String::new(),
                conversation: None,
                continue_latest: false,
                model: None,
                effort: None,
                mode: None,
                add_dirs: Vec::new(),
                print_timeout: Duration::from_secs(300),
                skip_permissions: false,
                sandbox: false,
                output_format: OutputFormat::Text,
                input_format: None,
                agent: None,
                log_file: None,
                project: None,
                new_project: false,
                json_schema: None,
                disable_slash_commands: false,
            },
            prompt: None,
            interactive: false,
            version: false,
            help: false,
        }
    }

    /// Set flag `name` (its canonical long name) to `value`.
    fn set(&mut self, name: &str, value: String) -> Result<(), UsageError> {
        let p = &mut self.p;
        let on = value == "true";
        match name {
            "print" => self.prompt = Some(value),
            "prompt-interactive" => self.interactive = true,
            "conversation" => p.conversation = Some(value),
            "continue" => p.continue_latest = on,
            "model" => p.model = Some(value),
            // agy takes any word here and judges it with the model
            // (`crate::effort`), not as a flag.
            "effort" => p.effort = Some(value),
            "mode" => p.mode = Some(one_of(name, &value, &["accept-edits", "plan"])?),
            "add-dir" => p.add_dirs.push(value),
            "print-timeout" => {
                p.print_timeout = parse_go_duration(&value).map_err(|e| {
                    UsageError(format!(
                        "invalid argument {value:?} for \"--print-timeout\" flag: {e}"
                    ))
                })?
            }
            "dangerously-skip-permissions" => p.skip_permissions = on,
            "sandbox" => p.sandbox = on,
            "output-format" => {
                p.output_format =
                    match one_of(name, &value, &["text", "json", "stream-json"])?.as_str() {
                        "json" => OutputFormat::Json,
                        "stream-json" => OutputFormat::StreamJson,
                        _ => OutputFormat::Text,
                    }
            }
            "input-format" => {
                p.input_format = Some(one_of(name, &value, &["text", "stream-json"])?)
            }
            "agent" => p.agent = Some(value),
            "log-file" => p.log_file = Some(value),
            "project" => p.project = Some(value),
            "new-project" => p.new_project = on,
            "json-schema" => p.json_schema = Some(value),
            "disable-slash-commands" => p.disable_slash_commands = on,
            "version" => self.version = on,
            "help" => self.help = on,
            _ => return Err(UsageError(format!("unknown flag: --{name}"))),
        }
        Ok(())
    }

    /// What the whole command line asks for.
    fn invocation(mut self) -> Result<Invocation, UsageError> {
        if self.help {
            return Ok(Invocation::Help);
        }
        if self.version {
            return Ok(Invocation::Version);
        }
        if self.interactive {
            return Err(UsageError(
                "-i/--prompt-interactive starts agy's interactive UI, which fake-agy does not emulate; use -p"
                    .into(),
            ));
        }
        self.p.prompt = self.prompt.ok_or_else(|| {
            UsageError(
                "fake-agy only emulates print mode: -p/--print/--prompt VALUE is required".into(),
            )
        })?;
        Ok(Invocation::Print(Box::new(self.p)))
    }
}

/// Parse `args` (without the program name) as the newest agy would.
#[cfg(test)]
pub fn parse(args: &[String]) -> Result<Invocation, UsageError> {
    parse_for(args, Surface::NEWEST)
}

/// Parse `args` (without the program name) on the command line `surface`.
pub fn parse_for(args: &[String], surface: Surface) -> Result<Invocation, UsageError> {
    if let Some(sub) = subcommand(args) {
        return Ok(sub);
    }
    let mut flags = Flags::new();
    let mut i = 0;
    while i < args.len() {
        let (name, value) = next_flag(args, &mut i, surface)?;
        flags.set(name, value)?;
    }
    flags.invocation()
}

/// Parse a Go `time.ParseDuration` string: `300ms`, `1.5h`, `2h45m`, `5m0s`.
pub fn parse_go_duration(s: &str) -> Result<Duration, String> {
    let orig = s;
    let s = s.strip_prefix('+').unwrap_or(s);
    if s.starts_with('-') {
        return Err(format!("negative duration {orig:?}"));
    }
    if s == "0" {
        return Ok(Duration::ZERO);
    }
    if s.is_empty() {
        return Err(format!("time: invalid duration {orig:?}"));
    }
    let bytes = s.as_bytes();
    let mut pos = 0;
    let mut total: f64 = 0.0;
    while pos < bytes.len() {
        let start = pos;
        while pos < bytes.len() && (bytes[pos].is_ascii_digit() || bytes[pos] == b'.') {
            pos += 1;
        }
        let number = &s[start..pos];
        if number.is_empty() || number == "." || number.matches('.').count() > 1 {
            return Err(format!("time: invalid duration {orig:?}"));
        }
        let n: f64 = number
            .parse()
            .map_err(|_| format!("time: invalid duration {orig:?}"))?;
        let ustart = pos;
        while pos < bytes.len() && !(bytes[pos].is_ascii_digit() || bytes[pos] == b'.') {
            pos += 1;
        }
        let unit_ns: f64 = match &s[ustart..pos] {
            "ns" => 1.0,
            "us" | "µs" | "μs" => 1e3,
            "ms" => 1e6,
            "s" => 1e9,
            "m" => 60e9,
            "h" => 3600e9,
            "" => return Err(format!("time: missing unit in duration {orig:?}")),
            u => return Err(format!("time: unknown unit {u:?} in duration {orig:?}")),
        };
        total += n * unit_ns;
    }
    if !total.is_finite() || total > u64::MAX as f64 {
        return Err(format!("time: invalid duration {orig:?}"));
    }
    Ok(Duration::from_nanos(total.round() as u64))
}

/// Format a duration as Go's `time.Duration.String` does (`5m0s`, `1.5s`,
/// `500ms`, `1h0m0s`), which is how agy prints its print timeout.
pub fn go_duration_string(d: Duration) -> String {
    let ns = d.as_nanos();
    if ns == 0 {
        return "0s".into();
    }
    fn frac(v: u128, div: u128) -> String {
        let int = v / div;
        let rem = v % div;
        if rem == 0 {
            return int.to_string();
        }
        let width = div.to_string().len() - 1;
        let f = format!("{rem:0width$}");
        format!("{int}.{}", f.trim_end_matches('0'))
    }
    if ns < 1_000_000_000 {
        let (div, unit) = if ns < 1_000 {
            (1, "ns")
        } else if ns < 1_000_000 {
            (1_000, "µs")
        } else {
            (1_000_000, "ms")
        };
        return format!("{}{unit}", frac(ns, div));
    }
    const S: u128 = 1_000_000_000;
    let h = ns / (3600 * S);
    let m = (ns % (3600 * S)) / (60 * S);
    let s = ns % (60 * S);
    let mut out = String::new();
    if h > 0 {
        out.push_str(&format!("{h}h"));
    }
    if h > 0 || m > 0 {
        out.push_str(&format!("{m}m"));
    }
    out.push_str(&format!("{}s", frac(s, S)));
    out
}

/// The short usage block printed after a usage error (stderr) and at the top
/// of `--help`, for the newest command line (see [`usage`]).
const USAGE: &str = "\
Usage:
  fake-agy -p PROMPT [flags]
  fake-agy [command]

Available Commands:
  models      List available models
  help        Help about any command
  update, changelog, install, plugins, agents
              Accepted; print one line and exit 0 (not emulated)

Flags:
  -p, --print, --prompt string        Run one turn non-interactively with this prompt (required)
      --conversation string           Continue the conversation with this id (appends to <id>.db)
  -c, --continue                      Continue the most recent conversation
      --model string                  Model slug or display name (the stream-json init model)
      --effort string                 low|medium|high (1.3.1: also xhigh|max); refused as agy refuses
                                      a word or a model without it, else ignored
      --mode string                   accept-edits|plan (accepted, ignored)
      --add-dir string                Extra workspace directory, repeatable (accepted, ignored)
      --print-timeout duration        Give up waiting for the turn after this long (default 5m0s)
      --dangerously-skip-permissions  Run tools that need permission (else agy stalls or auto-denies)
      --sandbox                       (accepted, ignored)
      --output-format string          text|json|stream-json (default \"text\")
      --input-format string           text|stream-json: stream-json reads the turn from stdin, one JSON line
                                      {\"event\":\"user\",\"message\":{...}} (one turn per process)
      --agent string                  (accepted, ignored)
      --log-file string               (accepted, ignored)
      --project string                (accepted, ignored)
      --new-project                   (accepted, ignored)
      --json-schema string            (accepted, ignored)
      --disable-slash-commands        Take a prompt that starts with / as text, not as an agy
                                      slash command (agy 1.2.14 and later)
  -i, --prompt-interactive string     Interactive mode: not emulated (usage error)
      --version                       Print the recording's `agy --version` output
  -h, --help                          Show this help
";

/// The usage block of `surface`: without the flags it lacks.
pub fn usage(surface: Surface) -> String {
    let mut out = String::new();
    let mut skipping = false;
    for line in USAGE.split_inclusive('\n') {
        // A flag's description may continue on indented lines.
        let continued = skipping && line.starts_with("                                      ");
        skipping = (line.contains(&format!("--{SLASH_FLAG} ")) || continued) && !surface.slash_flag;
        if !skipping {
            out.push_str(line);
        }
    }
    out
}

/// The full `--help` text: usage plus every environment knob.
pub fn help_text(surface: Surface) -> String {
    let usage = usage(surface);
    format!(
        "fake-agy: a stand-in for Google's Antigravity CLI (agy) that replays an
agy-bridge recording into a real-schema SQLite conversation database.
It reads stdin only with --input-format stream-json: one turn per line, in one
process and one conversation, as agy does. In text mode it prints only the answer on stdout; with
--output-format stream-json or json it prints agy's JSON (see fake-agy/README.md).

{usage}
Environment:
  FAKE_AGY_RECORDING=NAME|PATH  Recording to replay: a .jsonl path or a name in the
                                recordings dir (default: hello). Missing: exit 2.
  FAKE_AGY_RECORDINGS_DIR=DIR   Where names are looked up (default: the repo's recordings/)
  FAKE_AGY_SPEED=F              Replay speed factor; 10 = ten times faster (default 1)
  FAKE_AGY_BOOT_MS=N            agy's start-up: wait N ms (not scaled) before `init` and
                                before reading stdin. Default 0, for fast tests; real agy
                                takes about 2400 ms (REALISTIC_BOOT_MS, which benches use)
  FAKE_AGY_SYNCHRONOUS=MODE     SQLite's synchronous for the writes: FULL (default, as
                                SQLite's default: an fsync before each commit is visible),
                                NORMAL, OFF or EXTRA
  AGY_CONVERSATIONS_DIR=DIR     Write <uuid>.db here instead of
                                $HOME/.gemini/antigravity-cli/conversations
  FAKE_AGY_MODELS_FORMAT=1|2|3  `models` prints a built-in catalog in agy's format 1
                                (labels, 1.0.x), 2 (slugs) or 3 (slug<TAB>label, the
                                progress line on stderr) instead of the recording's
                                models_output (whose progress line goes to stderr too)
  FAKE_AGY_MODELS_SIGNED_OUT=1  `models` prints agy 1.1.20's \"Error: Please sign in ...\"
                                on stderr, nothing on stdout, and exits 1
  FAKE_AGY_USAGE=FILE           `-p /usage` answers the quota buckets in FILE (agy's json
                                answer, its data object, stream-json or text lines) instead
                                of the built-in set (gemini-weekly 73%, gemini-5h 42%,
                                3p-weekly 91%); as agy 1.1.11+: json = the result with
                                command.data, stream-json = command_result then a result
                                (conversation_id \"\", num_turns 0), text = one
                                tab-separated line per bucket
  FAKE_AGY_NO_SLASH_FLAG=1      Be an agy before 1.2.14, without the flag that disables
                                slash commands (absent from this help, and an unknown
                                flag: exit 2)
  FAKE_AGY_TOOL_LOG=PATH        Append one JSON line {{name,args,stepIdx}} each time a
                                recorded tool runs (no hook denied it; on the permitted path)
  FAKE_AGY_HOOK_LOG=PATH        Append each payload a PreToolUse hook was given, one JSON
                                line each
  FAKE_AGY_APPLY_EDITS=1        Write the recording's file edits to disk as agy would
                                (write_to_file, replace_file_content and
                                multi_replace_file_content; only tools that ran), just
                                before the tool's DONE step is written. Only inside the
                                working directory and the --add-dir dirs (symlinks and ..
                                resolved): elsewhere a warning on stderr, nothing written. A
                                TargetContent not in the file is agy's edit error: a
                                warning, the file left as it was

Hooks: <DIR>/.agents/hooks.json of each --add-dir DIR is loaded (unparsable: a warning
naming it, ignored); `-p /hooks` lists the hooks with their source file. With
--dangerously-skip-permissions every matching PreToolUse hook runs (`sh -c`, in the
.agents dir, the payload on stdin) before each recorded tool: all must print
{{\"decision\":\"allow\"}}; `{{}}`, a non-zero exit or a crash deny: the step ends ERROR
(`tool call denied by pre-tool hook: REASON`), an answer states it and the turn ends. A
hook past its timeout is killed and the tool runs (agy 1.1.7). Without the flag hooks
are not consulted: the recording's auto-deny stands.

Fault knobs:
  FAKE_AGY_DB_DELAY_MS=N        Wait N ms (not scaled) before creating the database;
                                all commit times shift by N
  FAKE_AGY_NO_DB=1              Never create a database; sleep for the recording's
                                duration, then print and exit as the recording says
  FAKE_AGY_CRASH_AT_COMMIT=N    Crash right after the Nth applied commit (1-based,
                                counting every commit this run applies, any database)
  FAKE_AGY_CRASH_MODE=MODE      exit:CODE (default exit:3; a line goes to stderr first)
                                or sigkill (SIGKILL to itself); also how a recording
                                whose outcome is `killed` dies (default: its exit code)
  FAKE_AGY_GRANDCHILD=1         At start leave a grandchild (`sleep 600`) in fake-agy's
                                process group that outlives fake-agy unless the whole
                                group is killed
  FAKE_AGY_GRANDCHILD_PIDFILE=P Write that grandchild's pid to P
  FAKE_AGY_LATE_COMMIT_MS=N     At exit leave a process outside fake-agy's process group
                                holding the database's write lock; N ms later it commits
                                one more step (a copy of the last) and exits: work that
                                outlives agy
  FAKE_AGY_COMMIT_LOG=PATH      Append one line per commit, right after it commits:
                                `<n> <unix-time-ns> <db-uuid> <idx,idx,...|->`
  FAKE_AGY_ARGV_LOG=PATH        Append each invocation's arguments to PATH as a JSON array per line
  FAKE_AGY_CPU_LOG=PATH         At exit (and after each stdin turn), append this process's
                                CPU so far (its threads and reaped children) to PATH:
                                {{\"pid\":N,\"cpu_us\":N}} per line; a pid's last line is its total
  FAKE_AGY_STDIN_LOG=PATH       Append each prompt read on stdin to PATH as a JSON string per line
  FAKE_AGY_HANG=1               After the last commit, sleep forever instead of exiting
  FAKE_AGY_FORGET_CONVERSATIONS=1  --conversation never finds an earlier conversation
                                (agy's warning, then a new one), as when agy no longer has it
  FAKE_AGY_KEEP_CONVERSATIONS=N Keep at most N conversation databases (agy keeps about 500):
                                the oldest others go when a run creates one
  FAKE_AGY_GIVEN_PROMPT=1       Write the prompt this run was given (not the recording's)
                                into its user-input step, as agy records its prompt
  FAKE_AGY_IGNORE_HOOKS=1       Be an agy that does not load hooks from --add-dir:
                                no hook runs, `/hooks` lists none
  FAKE_AGY_FAULT=F[,F...]       Break one fact (for `agy-bridge conformance`'s test):
                                init-without-id, usage-per-turn, text-field-moved,
                                permission-mode

Subagent conversations in a recording are written by a child fake-agy process
(one per subagent database), as agy's subagents write their own databases.
See fake-agy/README.md for the details.
"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn durations_parse_and_format_like_go() {
        for (text, ms, canon) in [
            ("5m0s", 300_000, "5m0s"),
            ("30s", 30_000, "30s"),
            ("1m30s", 90_000, "1m30s"),
            ("500ms", 500, "500ms"),
            ("1h", 3_600_000, "1h0m0s"),
            ("1.5s", 1_500, "1.5s"),
            ("90s", 90_000, "1m30s"),
        ] {
            let d = parse_go_duration(text).unwrap();
            assert_eq!(d, Duration::from_millis(ms), "{text}");
            assert_eq!(go_duration_string(d), canon, "{text}");
        }
        assert_eq!(parse_go_duration("0").unwrap(), Duration::ZERO);
        assert!(parse_go_duration("5").is_err());
        assert!(parse_go_duration("5x").is_err());
        assert!(parse_go_duration("").is_err());
        assert!(parse_go_duration("-1s").is_err());
    }

    #[test]
    fn print_flags() {
        let Ok(Invocation::Print(p)) = parse(&args(&[
            "-p",
            "--weird prompt",
            "--conversation=abc",
            "--add-dir",
            "a",
            "--add-dir=b",
            "--output-format",
            "stream-json",
            "--print-timeout",
            "1m30s",
            "--dangerously-skip-permissions",
            "--effort",
            "high",
        ])) else {
            panic!("not print");
        };
        assert_eq!(p.prompt, "--weird prompt");
        assert_eq!(p.conversation.as_deref(), Some("abc"));
        assert_eq!(p.add_dirs, vec!["a", "b"]);
        assert_eq!(p.output_format, OutputFormat::StreamJson);
        assert_eq!(p.print_timeout, Duration::from_secs(90));
        assert!(p.skip_permissions);
    }

    #[test]
    fn usage_errors() {
        assert!(parse(&args(&["--bogus"])).is_err());
        assert!(parse(&args(&["-p"])).is_err());
        assert!(parse(&args(&[])).is_err());
        assert!(parse(&args(&["-p", "x", "stray"])).is_err());
        // agy judges an effort with its model, after the flags.
        assert!(parse(&args(&["-p", "x", "--effort", "max"])).is_ok());
        assert!(parse(&args(&["-p", "x", "-z"])).is_err());
        assert!(matches!(parse(&args(&["-px"])), Ok(Invocation::Print(_))));
        assert!(matches!(
            parse(&args(&["--version"])),
            Ok(Invocation::Version)
        ));
        assert!(matches!(parse(&args(&["models"])), Ok(Invocation::Models)));
        assert!(matches!(parse(&args(&["help"])), Ok(Invocation::Help)));
    }

    #[test]
    fn an_older_surface_lacks_the_slash_flag_in_parse_and_usage() {
        let flag = args(&["-p", "/model", "--disable-slash-commands"]);
        let Ok(Invocation::Print(p)) = parse(&flag) else {
            panic!("not print");
        };
        assert!(p.disable_slash_commands);
        let old = Surface { slash_flag: false };
        assert_eq!(
            parse_for(&flag, old).err(),
            Some(UsageError("unknown flag: --disable-slash-commands".into()))
        );
        assert!(usage(Surface::NEWEST).contains("--disable-slash-commands"));
        let without = usage(old);
        assert!(!without.contains("slash"), "{without}");
        assert_eq!(
            without.lines().count() + 2,
            usage(Surface::NEWEST).lines().count()
        );
    }
}
