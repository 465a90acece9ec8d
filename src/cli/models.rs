//! `agy-bridge models`: agy's catalog for pi's model picker, from the cache
//! when it is fresh, refreshed in the background when it is not.

use clap::Args;
use std::process::ExitCode;

type CmdResult = Result<ExitCode, Box<dyn std::error::Error>>;

#[derive(Debug, Args)]
#[command(
    after_help = "Runs `$AGY_BIN models` (default `agy`), killed after 8 s. The result is \
cached for 5 minutes in models-cache.json in the state directory (~/.pi/agent/antigravity-bridge, \
AGY_BRIDGE_STATE_DIR overrides it); a stale entry, or one from another agy binary, is shown at \
once and refreshed in the background. When agy is missing, signed out, hangs or fails, a \
built-in catalog (agy 1.1.24's own listing) is shown and a note says so on stderr. A failure is \
remembered for a minute, and only for the agy binary that failed; a missing agy is never \
remembered."
)]
pub struct ModelsArgs {
    /// Print a JSON array of pi model objects (provider "antigravity").
    #[arg(long)]
    json: bool,
    /// Run `agy models` now instead of using the cache.
    #[arg(long)]
    refresh: bool,
    /// Print nothing (the background refresh uses `--refresh --quiet`).
    #[arg(long, hide = true)]
    quiet: bool,
}

/// `agy models` runs as a short program ending on this command's stop
/// signals: Ctrl-C ends it at once, exit 130, nothing printed but that.
pub fn cmd_models(args: ModelsArgs, settings: &agy_bridge::settings::Settings) -> CmdResult {
    use agy_bridge::pi::models::{Loader, Policy};
    let loader = Loader::from_settings(settings);
    let stop = agy_bridge::process::caller::stop_token();
    if args.quiet && args.refresh {
        let _ = loader.refresh_quietly(&stop);
        return Ok(agy_bridge::process::caller::stopped_exit().unwrap_or(ExitCode::SUCCESS));
    }
    let policy = if args.refresh {
        Policy::Refresh
    } else {
        Policy::CacheFirst
    };
    let loaded = loader.load(policy, &stop);
    if let Some(code) = agy_bridge::process::caller::stopped_exit() {
        return Ok(code);
    }
    if loaded.stale {
        if let Ok(exe) = std::env::current_exe() {
            loader.spawn_refresh(&exe);
        }
    }
    if args.quiet {
        return Ok(ExitCode::SUCCESS);
    }
    if let Some(note) = loaded.note() {
        eprintln!("agy-bridge: note: {}", note.replace(['\n', '\r'], " "));
    }
    let text = if args.json {
        format!("{}\n", serde_json::to_string(&loaded.catalog.to_pi())?)
    } else {
        let mut buf = Vec::new();
        agy_bridge::pi::models::write_table(&loaded.catalog, &mut buf)?;
        String::from_utf8_lossy(&buf).into_owned()
    };
    super::out::print_then(&text, ExitCode::SUCCESS)
}
