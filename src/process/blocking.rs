//! Running a blocking call from async code without stalling the runtime.
//!
//! Most blocking work moves to a thread of its own (`spawn_blocking`), but
//! a call that borrows the caller's state (a `&mut` observer, pi's mapper
//! and pi's stdout, which waits for pi to read) cannot leave the task. On
//! a multi-thread runtime such a call runs in `block_in_place`, which
//! hands the worker's other tasks to another worker first; on a
//! current-thread runtime there is no other worker, so it runs where it
//! is.

/// Run `f` here, the runtime's other tasks moved off this worker first
/// where the runtime allows it.
pub(crate) fn in_place<R>(f: impl FnOnce() -> R) -> R {
    match tokio::runtime::Handle::try_current().map(|h| h.runtime_flavor()) {
        Ok(tokio::runtime::RuntimeFlavor::MultiThread) => tokio::task::block_in_place(f),
        _ => f(),
    }
}

#[cfg(test)]
mod tests {
    use super::in_place;

    #[test]
    fn outside_a_runtime_it_just_runs() {
        assert_eq!(in_place(|| 7), 7);
    }

    #[tokio::test(flavor = "current_thread")]
    async fn on_a_current_thread_runtime_it_runs_in_place() {
        assert_eq!(in_place(|| 8), 8);
    }

    // One worker, and the blocking call made on it (a test's own body runs
    // on the main thread, not a worker): the other task can only run if
    // this worker is handed away.
    #[tokio::test(flavor = "multi_thread", worker_threads = 1)]
    async fn on_a_multi_thread_runtime_other_tasks_go_on_meanwhile() {
        let on_worker = tokio::spawn(async {
            let (tx, rx) = std::sync::mpsc::channel();
            let other = tokio::spawn(async move { tx.send(()).is_ok() });
            let got = in_place(|| rx.recv_timeout(std::time::Duration::from_secs(10)));
            got.is_ok() && other.await.unwrap_or(false)
        });
        assert!(on_worker.await.unwrap_or(false));
    }
}
