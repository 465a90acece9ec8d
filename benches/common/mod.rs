//! What the benches share: finding the workspace's own binaries, and the
//! CPU a bridge process tree spent without its fake agy.

use std::path::{Path, PathBuf};

/// A binary of this workspace next to the bench (release or debug).
pub fn workspace_bin(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("bench exe");
    let profile = exe.parent().and_then(Path::parent).expect("profile dir");
    let target = profile.parent().expect("target dir");
    [
        profile.join(name),
        target.join("release").join(name),
        target.join("debug").join(name),
    ]
    .into_iter()
    .find(|c| c.is_file())
    .unwrap_or_else(|| panic!("{name} not built: run `cargo build --release --workspace` first"))
}

/// fake-agy, as agy.
#[allow(dead_code)]
pub fn fake_agy() -> PathBuf {
    workspace_bin("fake-agy")
}

/// CPU of this process's reaped children so far, in ms.
#[allow(dead_code)]
pub fn children_cpu_ms() -> f64 {
    use nix::sys::resource::{getrusage, UsageWho};
    getrusage(UsageWho::RUSAGE_CHILDREN)
        .map(|u| {
            let t =
                |tv: nix::sys::time::TimeVal| tv.tv_sec() as f64 * 1e3 + tv.tv_usec() as f64 / 1e3;
            t(u.user_time()) + t(u.system_time())
        })
        .unwrap_or(0.0)
}

/// fake-agy's own CPU over the run, in ms, from its log.
#[allow(dead_code)]
pub fn fake_agy_cpu_ms(log: &Path) -> f64 {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    text.lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter_map(|v| v["cpu_us"].as_f64())
        .sum::<f64>()
        / 1e3
}
