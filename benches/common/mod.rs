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

/// The number in environment variable `name`, else `default` (a bench's
/// knobs: sizes, rounds, batches).
#[allow(dead_code)]
pub fn env_num<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// CPU (user + system) in ms of `who`: this process, or its reaped
/// children.
#[allow(dead_code)]
pub fn cpu_ms_of(who: nix::sys::resource::UsageWho) -> f64 {
    nix::sys::resource::getrusage(who)
        .map(|u| {
            let t =
                |tv: nix::sys::time::TimeVal| tv.tv_sec() as f64 * 1e3 + tv.tv_usec() as f64 / 1e3;
            t(u.user_time()) + t(u.system_time())
        })
        .unwrap_or(0.0)
}

/// CPU of this process's reaped children so far, in ms.
#[allow(dead_code)]
pub fn children_cpu_ms() -> f64 {
    cpu_ms_of(nix::sys::resource::UsageWho::RUSAGE_CHILDREN)
}

/// `agy-bridge` (`bridge`) on fake-agy replaying `recording`, in `home`,
/// its stdio piped (stderr dropped), fake-agy's CPU logged to
/// `home/fake-agy-cpu.log` ([`fake_agy_cpu_ms`]), and none of the caller's
/// own bridge settings passed on.
#[allow(dead_code)]
pub fn bridge_on_fake_agy(bridge: &Path, home: &Path, recording: &Path) -> std::process::Command {
    use std::process::Stdio;
    let mut cmd = std::process::Command::new(bridge);
    cmd.env("HOME", home)
        .env("AGY_BIN", fake_agy())
        .env("FAKE_AGY_RECORDING", recording)
        .env("FAKE_AGY_CPU_LOG", home.join("fake-agy-cpu.log"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    for var in [
        "AGY_BRIDGE_STATE_DIR",
        "AGY_CONVERSATIONS_DIR",
        "AGY_EXTRA_ARGS",
        "FAKE_AGY_SYNCHRONOUS",
        "FAKE_AGY_SPEED",
    ] {
        cmd.env_remove(var);
    }
    cmd
}

/// pi's request line for one turn saying "go" in `home`.
#[allow(dead_code)]
pub fn stream_request(home: &Path, session: &str) -> serde_json::Value {
    serde_json::json!({
        "model": "gemini-3.7-flash",
        "sessionId": session,
        "cwd": home,
        "messages": [{"role": "user", "content": "go"}],
    })
}

/// One cold turn through `agy-bridge stream` (`bridge`) on fake-agy
/// replaying `recording` in `home` (no warm agy, permissions allowed,
/// `env` on top): pi's request for `session` sent, stdin held open to the
/// end as pi does (its end would abort), each stdout line handed to
/// `on_line` as it arrives. Panics unless the bridge exits 0; returns its
/// last line.
#[allow(dead_code)]
pub fn stream_turn(
    bridge: &Path,
    home: &Path,
    recording: &Path,
    session: &str,
    env: &[(&str, &str)],
    mut on_line: impl FnMut(&str),
) -> String {
    use std::io::{BufRead, BufReader, Write};
    let mut cmd = bridge_on_fake_agy(bridge, home, recording);
    cmd.arg("stream")
        .env("AGY_WARM", "off")
        .env("AGY_PERMISSIONS", "allow")
        .envs(env.iter().copied());
    let mut child = cmd.spawn().expect("spawn agy-bridge");
    let mut stdin = child.stdin.take().expect("stdin");
    writeln!(stdin, "{}", stream_request(home, session)).expect("request");
    let out = child.stdout.take().expect("stdout");
    let mut last = String::new();
    for line in BufReader::new(out).lines() {
        let Ok(line) = line else { break };
        on_line(&line);
        last = line;
    }
    drop(stdin);
    let status = child.wait().expect("wait");
    assert!(
        status.success(),
        "agy-bridge stream failed: {status}; last line {last}"
    );
    last
}

/// fake-agy's own CPU over the run, in ms, from its log: each process's
/// last line (its total so far; a warm agy logs after every turn), summed.
#[allow(dead_code)]
pub fn fake_agy_cpu_ms(log: &Path) -> f64 {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let mut last = std::collections::BTreeMap::new();
    for v in text
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
    {
        if let (Some(pid), Some(us)) = (v["pid"].as_u64(), v["cpu_us"].as_f64()) {
            last.insert(pid, us);
        }
    }
    last.values().sum::<f64>() / 1e3
}
