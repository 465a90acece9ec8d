//! Switches for the follower's mechanisms beyond inotify and `PRAGMA
//! data_version`, so that the benches can measure what each one gains
//! (issue 51, item 8: `benches/latency.rs`, `LATENCY_ONLY=mechanisms`;
//! `benches/cpu.rs`, `CPU_ONLY=mechanisms`). Every mechanism is on unless
//! a bench turns it off; nothing a user sets reaches them.
//!
//! Process-wide, so that a bench reaches the readers a turn makes. Only
//! the reading side is built without the `testing` feature.

use std::sync::atomic::{AtomicU8, Ordering};

/// Which mechanisms run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mechanisms {
    /// `-shm` and `-wal` read through descriptors kept open
    /// (`follow::wal_files`): the writer's lock and the WAL-index header,
    /// asked without SQLite. Off: every look asks SQLite, and a reader is
    /// never known to be caught up.
    pub wal_files: bool,
}

impl Mechanisms {
    /// Every mechanism on: what the bridge runs.
    #[cfg(any(test, feature = "testing"))]
    pub const ALL: Mechanisms = Mechanisms { wal_files: true };

    /// inotify and `data_version` alone.
    #[cfg(any(test, feature = "testing"))]
    pub const NONE: Mechanisms = Mechanisms { wal_files: false };

    #[cfg(any(test, feature = "testing"))]
    fn bits(self) -> u8 {
        u8::from(self.wal_files)
    }

    fn from_bits(bits: u8) -> Mechanisms {
        Mechanisms {
            wal_files: bits & 1 != 0,
        }
    }
}

static SET: AtomicU8 = AtomicU8::new(0b1);

/// Turn mechanisms on or off for the readers made from now on (a bench's
/// switch), reached through `crate::testing`.
#[cfg(any(test, feature = "testing"))]
pub fn set_mechanisms(mechanisms: Mechanisms) {
    SET.store(mechanisms.bits(), Ordering::Relaxed);
}

/// The mechanisms that run now.
pub(crate) fn mechanisms() -> Mechanisms {
    Mechanisms::from_bits(SET.load(Ordering::Relaxed))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_is_the_default_and_the_bits_round_trip() {
        assert_eq!(mechanisms(), Mechanisms::ALL);
        assert_eq!(Mechanisms::from_bits(0b1), Mechanisms::ALL);
        for bits in 0..2 {
            assert_eq!(Mechanisms::from_bits(bits).bits(), bits);
        }
    }
}
