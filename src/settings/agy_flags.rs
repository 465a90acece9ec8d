//! The flags of agy's command line the bridge sets itself, which a user may
//! not pass through `AGY_EXTRA_ARGS`, and how agy reads a flag's name: the
//! check of that variable, and what the runner asks of the arguments it
//! passes on.

/// The flags of agy's command line the bridge must decide itself (the
/// prompt, how agy prints, which conversation, and the settings it reports
/// and stores), each with where the user sets it instead. Any other flag in
/// `AGY_EXTRA_ARGS` is agy's to take; one the bridge also passes
/// (`--print-timeout`) is left to the user's value by the runner.
const BRIDGE_FLAGS: &[(&[&str], &str)] = &[
    (
        &["p", "print", "prompt", "i", "prompt-interactive"],
        "the prompt is the bridge's argument",
    ),
    (
        &["output-format"],
        "the bridge reads agy's output in the format it asks for; AGY_BIND chooses",
    ),
    (
        &["input-format"],
        "the bridge gives agy the prompt on its stdin itself, when agy can read it there",
    ),
    (
        &["conversation"],
        "use --conversation of run or ask; stream resumes pi's session itself",
    ),
    (
        &["model", "effort"],
        "use --model/--effort of run, ask's --model, AGY_DEFAULT_MODEL or pi's model picker",
    ),
    (&["mode"], "use AGY_MODE or `agy-bridge config mode`"),
];

/// A flag's name without its dashes or `=value` (agy parses flags the Go
/// way: `-x`, `--x` and `--x=v` are one flag); `None` for a non-flag.
pub(crate) fn flag_name(arg: &str) -> Option<&str> {
    let name = arg.strip_prefix("--").or_else(|| arg.strip_prefix('-'))?;
    let name = name.split('=').next().unwrap_or(name);
    (!name.is_empty()).then_some(name)
}

/// `arg` as one of [`BRIDGE_FLAGS`], with its hint.
pub(crate) fn bridge_flag(arg: &str) -> Option<(String, &'static str)> {
    let name = flag_name(arg)?;
    BRIDGE_FLAGS
        .iter()
        .find(|(names, _)| names.contains(&name))
        .map(|(_, hint)| (arg.to_string(), *hint))
}
