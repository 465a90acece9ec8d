//! agy's command line for a turn: the flags the bridge sets, the prompt as
//! agy gets it, and the flags a user may not pass through `AGY_EXTRA_ARGS`.
//! Kept apart from the turn itself because it is pure (no process, no I/O
//! but the remembered version) and is what a reader checks against agy's
//! CLI surface (docs/agy-format.md).

use super::*;
use crate::settings::agy_flags::flag_name;
use agy_format::features::{shield_slash, DISABLE_SLASH_COMMANDS};

/// The longest duration Go's `time.ParseDuration` accepts, in whole hours
/// (its limit is about 2562047h47m).
const GO_DURATION_MAX: Duration = Duration::from_secs(2_562_047 * 3600);

/// Format a duration as Go does for `--print-timeout` (e.g. `11m0s`),
/// capped at what Go can parse: a longer watchdog must not make agy reject
/// its own flag.
pub(crate) fn go_duration(d: Duration) -> String {
    let secs = d.min(GO_DURATION_MAX).as_secs();
    let (h, m, s) = (secs / 3600, (secs / 60) % 60, secs % 60);
    if h > 0 {
        format!("{h}h{m}m{s}s")
    } else if m > 0 {
        format!("{m}m{s}s")
    } else {
        format!("{s}s")
    }
}

/// How a turn's agy is driven: what this agy offers
/// ([`agy_format::features`]), whether the turn reads its stream-json,
/// and whether agy reads the prompt on its stdin ([`crate::runner::prompt_file`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Surface {
    pub stream_json: bool,
    pub stdin_input: bool,
    pub features: AgyFeatures,
}

/// The prompt as agy gets it, on its stdin or on its command line: a
/// prompt is never an agy slash command. With `--disable-slash-commands`
/// (where agy has it) it goes as it is; else a prompt starting with `/`
/// gets one leading space, which agy does not expand.
pub(crate) fn agy_prompt(prompt: &str, features: AgyFeatures) -> std::borrow::Cow<'_, str> {
    match (!features.disable_slash_commands)
        .then(|| shield_slash(prompt))
        .flatten()
    {
        Some(shielded) => shielded.into(),
        None => prompt.into(),
    }
}

/// The argument list for one turn (docs/agy-format.md, "CLI surface").
pub(crate) fn agy_args(cfg: &RunConfig, req: &TurnRequest, surface: Surface) -> Vec<String> {
    let mut args: Vec<String> = Vec::new();
    for dir in &req.add_dirs {
        args.push("--add-dir".into());
        args.push(dir.display().to_string());
    }
    args.extend(cfg.extra_args.iter().cloned());
    if let Some(model) = &req.model {
        args.push("--model".into());
        args.push(model.clone());
    }
    if let Some(effort) = req.effort {
        args.push("--effort".into());
        args.push(effort.as_arg().into());
    }
    if let Some(mode) = req.mode {
        args.push("--mode".into());
        args.push(mode.as_arg().into());
    }
    if cfg.skip_permissions {
        args.push("--dangerously-skip-permissions".into());
    }
    if let Some(id) = &req.conversation {
        args.push("--conversation".into());
        args.push(id.as_str().into());
    }
    // The user's own --print-timeout in AGY_EXTRA_ARGS wins: agy would
    // take the later flag, ours, and the user's would silently do nothing.
    let users_timeout = cfg
        .extra_args
        .iter()
        .any(|a| flag_name(a) == Some("print-timeout"));
    if !users_timeout {
        args.push("--print-timeout".into());
        args.push(go_duration(
            cfg.timeout.saturating_add(Duration::from_secs(60)),
        ));
    }
    if surface.stream_json {
        args.push("--output-format".into());
        args.push("stream-json".into());
    }
    // A prompt is never an agy slash command (see `agy_prompt`); the flag
    // covers a prompt on stdin too.
    if surface.features.disable_slash_commands {
        args.push(DISABLE_SLASH_COMMANDS.into());
    }
    // The prompt itself comes on stdin (the capture's command line:
    // `--input-format stream-json --print ""`), else `req.prompt` is the
    // private file's note (`crate::runner::prompt_file`).
    if surface.stdin_input {
        args.extend(["--input-format".into(), "stream-json".into()]);
        args.extend(["-p".into(), String::new()]);
    } else {
        args.push("-p".into());
        args.push(agy_prompt(&req.prompt, surface.features).into_owned());
    }
    args
}

/// Whether agy's command line lets it run every tool unasked: the
/// bridge's own `--dangerously-skip-permissions`, or the user's in
/// `AGY_EXTRA_ARGS` (Go's boolean flag: `=false` turns it off again, and
/// the last one counts).
pub(super) fn skips_permissions(cfg: &RunConfig) -> bool {
    let mut skip = false;
    for arg in &cfg.extra_args {
        if flag_name(arg) == Some("dangerously-skip-permissions") {
            skip = !matches!(
                arg.split_once('=').map(|(_, v)| v),
                Some("false" | "0" | "f" | "F" | "FALSE" | "False")
            );
        }
    }
    skip || cfg.skip_permissions
}

/// The turn's [`Surface`], from what is known of agy's features.
pub(super) fn surface_of(cfg: &RunConfig, features: AgyFeatures) -> Surface {
    let stream_json = match cfg.bind {
        BindMode::Discovery => false,
        BindMode::StreamJson => true,
        BindMode::Auto => features.stream_json_output(),
    };
    Surface {
        stream_json,
        stdin_input: crate::runner::prompt_file::uses_stdin(features, stream_json),
        features,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runner::version::{parse_version, STREAM_JSON_MIN_VERSION};

    #[test]
    fn the_users_skip_permissions_counts_as_the_bridges() {
        let with = |skip: bool, extra: &[&str]| RunConfig {
            skip_permissions: skip,
            extra_args: extra.iter().map(|a| a.to_string()).collect(),
            ..RunConfig::default()
        };
        assert!(skips_permissions(&with(true, &[])));
        assert!(!skips_permissions(&with(false, &[])));
        assert!(skips_permissions(&with(
            false,
            &["-dangerously-skip-permissions"]
        )));
        assert!(!skips_permissions(&with(
            false,
            &[
                "--dangerously-skip-permissions",
                "--dangerously-skip-permissions=false"
            ]
        )));
    }

    #[test]
    fn go_durations() {
        assert_eq!(go_duration(Duration::from_secs(660)), "11m0s");
        assert_eq!(go_duration(Duration::from_secs(30)), "30s");
        assert_eq!(go_duration(Duration::from_secs(3725)), "1h2m5s");
        assert_eq!(go_duration(Duration::MAX), "2562047h0m0s");
    }

    #[test]
    fn versions() {
        assert_eq!(parse_version("1.2.8\n"), Some((1, 2, 8)));
        assert_eq!(parse_version("agy version v1.1.14"), Some((1, 1, 14)));
        assert_eq!(parse_version("garbage"), None);
        assert!(parse_version("1.1.7").map(|v| v >= STREAM_JSON_MIN_VERSION) == Some(false));
    }

    #[test]
    fn a_prompt_starting_with_a_slash_stays_a_prompt() {
        let cfg = RunConfig::default();
        let req = TurnRequest {
            prompt: "/model is wrong here, why?".into(),
            ..TurnRequest::default()
        };
        let with_flag = Surface {
            stream_json: true,
            stdin_input: false,
            features: AgyFeatures {
                version: Some((1, 2, 14)),
                disable_slash_commands: true,
            },
        };
        let args = agy_args(&cfg, &req, with_flag);
        assert!(args.contains(&"--disable-slash-commands".to_string()));
        assert_eq!(
            args.last().map(String::as_str),
            Some("/model is wrong here, why?")
        );
        let without = Surface {
            stream_json: true,
            stdin_input: false,
            features: AgyFeatures {
                version: Some((1, 1, 9)),
                disable_slash_commands: false,
            },
        };
        let args = agy_args(&cfg, &req, without);
        assert!(!args.contains(&"--disable-slash-commands".to_string()));
        assert_eq!(
            args.last().map(String::as_str),
            Some(" /model is wrong here, why?")
        );
        // Any other prompt is sent as it is.
        let plain = TurnRequest {
            prompt: "a /path".into(),
            ..TurnRequest::default()
        };
        assert_eq!(
            agy_args(&cfg, &plain, without).last().map(String::as_str),
            Some("a /path")
        );
        // On stdin the same rule holds: the flag where agy has it, else the
        // leading space.
        assert_eq!(agy_prompt(&req.prompt, with_flag.features), req.prompt);
        assert_eq!(
            agy_prompt(&req.prompt, without.features),
            " /model is wrong here, why?"
        );
    }

    #[test]
    fn a_stdin_turn_has_no_prompt_on_the_command_line() {
        let req = TurnRequest {
            prompt: "secret words".into(),
            ..TurnRequest::default()
        };
        let surface = surface_of(
            &RunConfig::default(),
            AgyFeatures {
                version: Some((1, 2, 7)),
                disable_slash_commands: false,
            },
        );
        assert!(surface.stdin_input && surface.stream_json);
        let args = agy_args(&RunConfig::default(), &req, surface);
        assert!(!args.iter().any(|a| a.contains("secret")), "{args:?}");
        let tail: Vec<&str> = args[args.len() - 6..].iter().map(String::as_str).collect();
        assert_eq!(
            tail,
            [
                "--output-format",
                "stream-json",
                "--input-format",
                "stream-json",
                "-p",
                ""
            ]
        );
    }

    #[test]
    fn args_follow_agy_surface() {
        let cfg = RunConfig {
            extra_args: vec!["--sandbox".into()],
            timeout: Duration::from_secs(600),
            ..RunConfig::default()
        };
        let req = TurnRequest {
            prompt: "-not a flag".into(),
            model: Some("gemini-3.7-flash".into()),
            effort: Some(Effort::High),
            mode: Some(Mode::Plan),
            conversation: ConversationId::parse("0f8fad5b-d9cb-469f-a165-70867728950e").ok(),
            add_dirs: vec![PathBuf::from("/tmp/x")],
            ..TurnRequest::default()
        };
        let args = agy_args(&cfg, &req, Surface::default());
        assert_eq!(
            args,
            [
                "--add-dir",
                "/tmp/x",
                "--sandbox",
                "--model",
                "gemini-3.7-flash",
                "--effort",
                "high",
                "--mode",
                "plan",
                "--dangerously-skip-permissions",
                "--conversation",
                "0f8fad5b-d9cb-469f-a165-70867728950e",
                "--print-timeout",
                "11m0s",
                "-p",
                "-not a flag"
            ]
        );
    }
}
