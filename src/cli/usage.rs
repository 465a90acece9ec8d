//! `agy-bridge usage`: agy's quota, in words or as JSON, for the user and
//! for the pi extension's `/agy usage` and footer. A thin shell over
//! `agy_bridge::run::quota`, which asks agy and keeps the cache.

use agy_bridge::run::quota::UsageLoader;
use std::process::ExitCode;
use std::time::Duration;

type CmdResult = Result<ExitCode, Box<dyn std::error::Error>>;

/// Ask (or take from the cache when younger than `max_age_secs`), then print
/// one line of words per bucket, or with `json` one object:
/// `{"buckets":[...],"lowest":"<words>"|null,"ageSecs":N|null}`.
pub fn cmd_usage(json: bool, max_age_secs: u64) -> CmdResult {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let loader = UsageLoader::from_env();
    let answer = runtime.block_on(loader.load(Duration::from_secs(max_age_secs)))?;
    let text = if json {
        let value = serde_json::json!({
            "buckets": answer.quota.buckets,
            "lowest": answer.quota.lowest().map(|b| b.words()),
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
            .map(|b| format!("{}\n", b.words()))
            .collect()
    };
    super::out::print_then(&text, ExitCode::SUCCESS)
}
