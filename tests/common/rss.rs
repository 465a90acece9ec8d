//! Peak resident memory of a child process, for the memory test and bench
//! (`benches/memory.rs` includes this file by path).
//!
//! The kernel keeps each process's high-water mark (`VmHWM` in
//! `/proc/<pid>/status`) until the process exits; after that it is gone (a
//! zombie has no memory map), and `wait4`'s `ru_maxrss` would also count the
//! child's own children (agy). So the mark is sampled until the child exits;
//! being a maximum, the last sample before exit is the peak unless the peak
//! came in the final sampling interval.

use std::process::{Child, ExitStatus};
use std::time::Duration;

/// `VmHWM` of `pid`, in bytes.
pub fn vm_hwm(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// Wait for `child`, sampling its high-water mark every millisecond;
/// returns its exit status and peak RSS in bytes.
pub fn wait_with_peak(child: &mut Child) -> (ExitStatus, u64) {
    let pid = child.id();
    let mut peak = 0;
    loop {
        if let Some(hwm) = vm_hwm(pid) {
            peak = peak.max(hwm);
        }
        match child.try_wait() {
            Ok(Some(status)) => return (status, peak),
            Ok(None) => std::thread::sleep(Duration::from_millis(1)),
            Err(e) => panic!("waiting for {pid}: {e}"),
        }
    }
}
