//! `agy-bridge usage`: agy's quota, in words or as JSON, for the user and
//! for the pi extension's `/agy usage` and footer. A thin shell over
//! `agy_bridge::runner::quota`, which asks agy and keeps the cache.

use agy_bridge::runner::quota::UsageLoader;
use clap::Args;
use std::process::ExitCode;
use std::time::Duration;

type CmdResult = Result<ExitCode, Box<dyn std::error::Error>>;

#[derive(Debug, Args)]
#[command(
    after_help = "Runs `$AGY_BIN -p /usage --output-format json` (agy 1.1.11 or later; no model \
turn, no quota spent), killed after 10 s. Good answers are cached per agy binary in usage-cache.json \
in the state directory; --max-age-secs N answers from that cache while it is younger than N \
seconds. Errors are one sentence on stderr, exit 1."
)]
pub struct UsageArgs {
    /// Print `{"buckets":[...],"lowest":"<words>","ageSecs":N}`: agy's
    /// buckets, the one with the least left in words (its group, what is
    /// left, when it resets), the cache's age (null: asked just now).
    #[arg(long)]
    json: bool,
    /// Answer from the cache when it is younger than this (0: always ask agy).
    #[arg(long, value_name = "N", default_value_t = 0)]
    max_age_secs: u64,
}

/// Ask (or take from the cache when younger than `max_age_secs`), then print
/// one line of words per bucket, or with `json` one object:
/// `{"buckets":[...],"lowest":"<words>"|null,"ageSecs":N|null}`.
pub fn cmd_usage(args: UsageArgs, settings: &agy_bridge::settings::Settings) -> CmdResult {
    let UsageArgs { json, max_age_secs } = args;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let loader = UsageLoader::from_settings(settings);
    // agy (`--version`, then `-p /usage`) ends on our stop signals: Ctrl-C
    // ends the command at once, exit 130.
    let stop = agy_bridge::process::caller::stop_token();
    let answer = runtime.block_on(loader.load(Duration::from_secs(max_age_secs), &stop));
    if let Some(code) = agy_bridge::process::caller::stopped_exit() {
        return Ok(code);
    }
    let answer = answer?;
    let now = agy_bridge::runner::quota::now_secs();
    let text = if json {
        let value = serde_json::json!({
            "buckets": answer.quota.buckets,
            "lowest": answer.quota.lowest().map(|b| b.words(now)),
            "ageSecs": answer.age.map(|a| a.as_secs()),
        });
        format!("{value}\n")
    } else if answer.quota.buckets.is_empty() {
        "agy reports no quota buckets\n".to_string()
    } else {
        answer
            .quota
            .buckets
            .iter()
            .map(|b| format!("{}\n", b.words(now)))
            .collect()
    };
    super::out::print_then(&text, ExitCode::SUCCESS)
}
