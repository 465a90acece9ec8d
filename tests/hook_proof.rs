//! `gate::proof` against fake-agy: `agy -p /hooks --add-dir PROBE` must
//! list the probe's hook before the bridge trusts a hook as its gate; the
//! answer is remembered per binary, a failure to ask is not.

mod common;

use agy_bridge::gate::proof::{Proven, Unproven};
use agy_bridge::testing::gate as proof;
use std::path::{Path, PathBuf};
use std::time::Duration;

const TIMEOUT: Duration = Duration::from_secs(20);

/// A cancellation token nobody cancels.
fn never() -> tokio_util::sync::CancellationToken {
    tokio_util::sync::CancellationToken::new()
}

struct Setup {
    home: tempfile::TempDir,
}

impl Setup {
    fn new() -> Setup {
        Setup {
            home: tempfile::tempdir().expect("tempdir"),
        }
    }

    fn state(&self) -> PathBuf {
        self.home.path().join("state")
    }

    fn log(&self) -> PathBuf {
        self.home.path().join("argv.jsonl")
    }

    fn env(&self, extra: &[(&str, &str)]) -> Vec<(String, String)> {
        let mut env = vec![
            ("HOME".to_string(), self.home.path().display().to_string()),
            (
                "FAKE_AGY_ARGV_LOG".to_string(),
                self.log().display().to_string(),
            ),
        ];
        env.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        env
    }

    fn prove(&self, agy: &Path, extra: &[(&str, &str)]) -> Result<Proven, Unproven> {
        std::fs::create_dir_all(self.state()).expect("state dir");
        proof::prove_at(&self.state(), agy, &self.env(extra), TIMEOUT, &never())
    }

    /// The `/hooks` runs fake-agy logged.
    fn hooks_runs(&self) -> usize {
        common::argvs(&self.log())
            .iter()
            .filter(|a| a.iter().any(|x| x == "/hooks"))
            .count()
    }
}

#[test]
fn fake_agy_proves_once_and_the_answer_is_remembered_per_binary() {
    let s = Setup::new();
    let agy = common::fake_agy();
    assert_eq!(s.prove(&agy, &[]), Ok(Proven { cached: false }));
    assert_eq!(s.hooks_runs(), 1);
    let argv = &common::argvs(&s.log())[0];
    assert!(
        !argv.iter().any(|a| a == "--disable-slash-commands"),
        "{argv:?}"
    );
    assert!(
        !argv.iter().any(|a| a == "--dangerously-skip-permissions"),
        "{argv:?}"
    );
    assert_eq!(s.prove(&agy, &[]), Ok(Proven { cached: true }));
    assert_eq!(s.hooks_runs(), 1, "the second answer came from the cache");
    assert_eq!(proof::remembered_at(&s.state(), &agy), Some(true));
    assert!(s.state().join(proof::PROOF_CACHE_FILE).is_file());

    // Another binary (a copy) is asked again.
    let copy = s.home.path().join("agy-copy");
    std::fs::copy(&agy, &copy).expect("copy fake-agy");
    assert_eq!(proof::remembered_at(&s.state(), &copy), None);
    assert_eq!(s.prove(&copy, &[]), Ok(Proven { cached: false }));
    assert_eq!(s.hooks_runs(), 2);
    // The probe dirs are gone.
    let left: Vec<_> = common::argvs(&s.log())
        .iter()
        .filter_map(|a| a.iter().skip_while(|x| *x != "--add-dir").nth(1).cloned())
        .filter(|d| Path::new(d).exists())
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn an_agy_that_ignores_add_dir_hooks_is_unproven_and_that_is_remembered() {
    let s = Setup::new();
    let agy = common::fake_agy();
    let ignore = [("FAKE_AGY_IGNORE_HOOKS", "1")];
    let e = s.prove(&agy, &ignore).expect_err("unproven");
    assert!(matches!(e, Unproven::NotListed { .. }), "{e:?}");
    assert!(e.to_string().contains("did not list the hook"), "{e}");
    assert_eq!(proof::remembered_at(&s.state(), &agy), Some(false));
    let again = s.prove(&agy, &[]).expect_err("still unproven: remembered");
    assert!(matches!(again, Unproven::NotListed { .. }));
    assert_eq!(s.hooks_runs(), 1);
}

#[test]
fn failures_to_ask_are_not_remembered() {
    let s = Setup::new();
    let agy = common::fake_agy();
    std::fs::create_dir_all(s.state()).expect("state dir");
    let slow = s.env(&[("FAKE_AGY_BOOT_MS", "5000")]);
    let e = proof::prove_at(
        &s.state(),
        &agy,
        &slow,
        Duration::from_millis(500),
        &never(),
    )
    .expect_err("timed out");
    assert_eq!(e, Unproven::TimedOut { secs: 1 });
    assert_eq!(proof::remembered_at(&s.state(), &agy), None);
    // A bad recording makes fake-agy exit 2: a failure, not an answer.
    let e = s
        .prove(&agy, &[("FAKE_AGY_RECORDING", "/nonexistent.jsonl")])
        .expect_err("failed");
    assert!(matches!(e, Unproven::Failed(_)), "{e:?}");
    assert!(
        e.to_string()
            .starts_with("agy -p /hooks failed: exited with 2"),
        "{e}"
    );
    assert_eq!(proof::remembered_at(&s.state(), &agy), None);
    let missing = s.home.path().join("no-agy");
    let e = s.prove(&missing, &[]).expect_err("not installed");
    assert!(matches!(e, Unproven::NotInstalled { .. }), "{e:?}");
    assert_eq!(s.prove(&agy, &[]), Ok(Proven { cached: false }));
}
