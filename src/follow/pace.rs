//! When a settling poll looks again: the pauses between its looks, the
//! first learnt from whether agy's recent commits were visible when it
//! ended, so that it sleeps through the part of the wait that is known.
//!
//! A look is a `pread` of the WAL-index header and an `F_GETLK` (SQLite
//! asked only when the header moved), a few microseconds plus a wake-up;
//! the wake-ups are most of what waiting for a commit costs. The first look
//! comes with the notification, as agy writes the WAL; without an fsync the
//! commit is visible then or soon after, and with one (SQLite's default)
//! not for a quarter of a millisecond or more. Looks every [`PAUSE`] once
//! agy's fsync is due catch a commit within 0.1 ms of becoming visible:
//! against 0.2 ms throughout, the p99 from agy's commit to the event fell
//! from 0.46-0.56 to 0.34-0.35 ms at about the same CPU
//! (`docs/benchmarks.md`, "Looks every 0.1 ms once agy's fsync is due").
//!
//! The second look waits a first pause that follows agy's disk: a little
//! shorter each time the commit was there at that look ([`STEP_DOWN`]), a
//! little longer each time it was not ([`STEP_UP`]). Steps, not times:
//! what a look finds already counts every delay on the way (the fsync, our
//! own wake-up's lateness), and one slow fsync moves the pause by one step,
//! not to its own length (only a turn's first commit that waits sets it
//! outright, to its last look that missed, 1 ms at most). On a disk whose
//! fsync takes about as long each time, the second look settles just
//! around it: a commit costs one or two timed wake-ups, not the four to
//! six of looks every 0.1 ms, and is seen within a few tens of
//! microseconds of becoming visible; after a miss the third look comes
//! [`AFTER_MISS`] later, as the commit is most likely just past. The steps
//! up and down are about equal, so on a disk whose fsync varies the pause
//! settles where half the commits are there at its look. Timed wake-ups
//! are what the wait costs: on the two-core VMs the benches run on, each
//! is charged 20-60 µs of CPU (an eventfd's wake-up, 6-16 µs).

use std::time::Duration;

/// The first pause when nothing is known, and the shortest: a commit seen
/// at once needs none, and one just past the first look is seen this late.
const FIRST_PAUSE: Duration = Duration::from_micros(200);

/// The pause after the look that ended the first pause, when it missed.
const AFTER_MISS: Duration = Duration::from_micros(50);

/// The pause between the looks after that.
const PAUSE: Duration = Duration::from_micros(100);

/// The longest first pause: past it, the looks go at [`PAUSE`] whatever
/// the recent commits took (a stalled disk is no pace to keep).
const LONGEST_FIRST_PAUSE: Duration = Duration::from_millis(2);

/// How much shorter the first pause gets after a commit found at the look
/// it ends with, so that it follows a disk getting quicker: a 32nd of it,
/// [`STEP_DOWN`] at least (0.8 ms comes down to 0.3 in some thirty
/// commits).
const STEP_DOWN: Duration = Duration::from_micros(10);
const STEP_DOWN_PART: u32 = 32;

/// How much longer it gets after a commit not there at that look: about
/// what a step down is, so that on a disk whose fsync varies the pause
/// settles where half the commits are found at its look. At 40 µs it
/// settled where two in three were, and a quick commit waited for the
/// slow ones' pace: the median from commit to event with fsync was
/// 0.02-0.07 ms later, in five runs of five, for no CPU measurably saved
/// (`docs/benchmarks.md`).
const STEP_UP: Duration = Duration::from_micros(15);

/// The longest first pause a turn's first commit that waited sets
/// outright: a first fsync slower than this (a cold disk, one stall) would
/// otherwise make the next commits wait for it, a step at a time back.
const FIRST_SET_AT_MOST: Duration = Duration::from_millis(1);

/// The pauses of settling polls: the first learnt from how the last ones
/// went.
#[derive(Debug, Clone)]
pub(crate) struct Pace {
    first: Duration,
    /// Whether a commit that waited for a pause was seen yet: until then
    /// the first pause is a guess, and the first such commit sets it.
    learnt: bool,
}

impl Default for Pace {
    fn default() -> Pace {
        Pace {
            first: FIRST_PAUSE,
            learnt: false,
        }
    }
}

impl Pace {
    /// The pause before the look after `sleeps` pauses.
    pub(crate) fn pause(&self, sleeps: usize) -> Duration {
        match sleeps {
            0 => self.first,
            1 => AFTER_MISS,
            _ => PAUSE,
        }
    }

    /// A settling poll found its commit after `sleeps` pauses.
    pub(crate) fn saw(&mut self, sleeps: usize) {
        self.first = match sleeps {
            // Visible at once: no fsync waited for, nothing learnt.
            0 => return,
            1 => self
                .first
                .saturating_sub((self.first / STEP_DOWN_PART).max(STEP_DOWN)),
            // The first commit that waited sets the pace: its last look
            // that missed (a turn's first commits would otherwise each
            // pay the looks of a guess, a step at a time), up to
            // `FIRST_SET_AT_MOST` (one slow fsync is no pace either).
            _ if !self.learnt => (0..sleeps - 1)
                .map(|n| self.pause(n))
                .sum::<Duration>()
                .min(FIRST_SET_AT_MOST),
            _ => self.first + STEP_UP,
        }
        .clamp(FIRST_PAUSE, LONGEST_FIRST_PAUSE);
        self.learnt = true;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn us(n: u64) -> Duration {
        Duration::from_micros(n)
    }

    /// How late a wake-up comes after the pause asked for (here, on the
    /// benches' VMs: about 40 µs).
    const LATE: Duration = Duration::from_micros(40);

    /// One settling poll as `Poller::poll_settling` paces it, on a clock
    /// whose wake-ups come [`LATE`], for a commit visible `visible` after
    /// its notification: (pauses slept, when the commit was seen).
    fn settle(pace: &mut Pace, visible: Duration) -> (usize, Duration) {
        let (mut now, mut sleeps) = (Duration::ZERO, 0);
        while now < visible {
            now += pace.pause(sleeps) + LATE;
            sleeps += 1;
        }
        pace.saw(sleeps);
        (sleeps, now)
    }

    fn first(pace: &Pace) -> Duration {
        pace.pause(0)
    }

    #[test]
    fn nothing_known_waits_the_first_pause() {
        assert_eq!(first(&Pace::default()), FIRST_PAUSE);
    }

    /// A disk whose fsync takes 0.6 ms each time: once the pace is found,
    /// a commit costs one or two timed wake-ups (about 1.5 on average; six
    /// at 0.1 ms steps), and is seen within 0.1 ms of becoming visible,
    /// about half within 50 µs.
    #[test]
    fn an_even_disk_costs_one_or_two_wake_ups_a_commit() {
        let mut pace = Pace::default();
        let visible = us(600);
        for _ in 0..30 {
            settle(&mut pace, visible);
        }
        let runs: Vec<_> = (0..100).map(|_| settle(&mut pace, visible)).collect();
        let sleeps: usize = runs.iter().map(|(s, _)| s).sum();
        assert!(sleeps <= 160, "{sleeps} wake-ups for 100 commits");
        assert!(
            runs.iter().all(|&(_, seen)| seen - visible <= PAUSE),
            "{runs:?}"
        );
        let close = runs.iter().filter(|&&(_, seen)| seen - visible <= us(50));
        assert!(close.count() >= 40, "{runs:?}");
    }

    /// One fsync of 8 ms among 0.6 ms ones moves the first pause by one
    /// step, and the next commits are seen as before.
    #[test]
    fn one_slow_fsync_barely_moves_the_pace() {
        let mut pace = Pace::default();
        for _ in 0..30 {
            settle(&mut pace, us(600));
        }
        let before = first(&pace);
        settle(&mut pace, Duration::from_millis(8));
        assert_eq!(first(&pace), before + STEP_UP);
        let (_, seen) = settle(&mut pace, us(600));
        assert!(seen - us(600) <= PAUSE, "seen at {seen:?}");
    }

    /// A disk getting quicker (0.8 ms, then 0.3 ms) is followed down.
    #[test]
    fn a_quicker_disk_is_followed() {
        let mut pace = Pace::default();
        for _ in 0..40 {
            settle(&mut pace, us(800));
        }
        assert!(first(&pace) >= us(650), "{pace:?}");
        for _ in 0..40 {
            settle(&mut pace, us(300));
        }
        let runs: Vec<_> = (0..20).map(|_| settle(&mut pace, us(300))).collect();
        assert!(
            runs.iter().all(|&(_, seen)| seen - us(300) <= PAUSE),
            "{runs:?}"
        );
        let close = runs.iter().filter(|&&(_, seen)| seen - us(300) <= us(50));
        assert!(close.count() >= 12, "{runs:?}");
    }

    /// A disk whose fsync varies from commit to commit (visible 0.3 to 0.9
    /// ms after the notification, evenly): the first pause settles about
    /// half-way (a commit as likely found at its look as not), so a quick
    /// commit is not seen at the slow end, and a slow one is caught by the
    /// short looks after it. With a step up of 40 µs (the build before)
    /// the pause stood at 0.66 ms and the p99 of how late a commit was
    /// seen was 0.43 ms, at 1.6 wake-ups a commit.
    #[test]
    fn a_varying_disk_keeps_the_pace_near_its_middle() {
        let mut pace = Pace::default();
        // A fixed walk over 0.3-0.9 ms (a prime stride), the same each run.
        let visible = |n: u64| us(300 + (n * 137) % 601);
        for n in 0..200 {
            settle(&mut pace, visible(n));
        }
        let (mut firsts, mut late, mut sleeps) = (Vec::new(), Vec::new(), 0);
        for n in 200..1200 {
            firsts.push(first(&pace));
            let (slept, seen) = settle(&mut pace, visible(n));
            sleeps += slept;
            late.push(seen - visible(n));
        }
        firsts.sort();
        late.sort();
        let median_first = firsts[firsts.len() / 2];
        assert!(median_first <= us(600), "{median_first:?}");
        assert!(late[989] <= us(350), "p99 late {:?}", late[989]);
        assert!(sleeps <= 2_200, "{sleeps} wake-ups for 1000 commits");
    }

    /// A turn's first commit that waits sets the pace at once: the next
    /// ones are seen with two or three wake-ups, then one or two, not six
    /// while the pace climbs from its first guess a step at a time.
    #[test]
    fn the_first_commit_that_waits_sets_the_pace() {
        let mut pace = Pace::default();
        let visible = us(800);
        let (sleeps, _) = settle(&mut pace, visible);
        assert!(sleeps >= 5, "{sleeps}");
        assert!(
            first(&pace) <= visible && first(&pace) >= us(500),
            "{pace:?}"
        );
        // The looks' own lateness (not in the pauses asked for) is made up
        // a step at a time.
        let runs: Vec<_> = (0..15).map(|_| settle(&mut pace, visible)).collect();
        assert!(runs.iter().all(|&(s, _)| s <= 3), "{runs:?}");
        assert!(runs[10..].iter().all(|&(s, _)| s <= 2), "{runs:?}");
    }

    /// A turn whose first waiting commit stalled (8 ms) does not make the
    /// next ones wait that long: the pause it sets is 1 ms at most, and
    /// comes back down.
    #[test]
    fn a_stalled_first_commit_is_not_the_pace() {
        let mut pace = Pace::default();
        settle(&mut pace, Duration::from_millis(8));
        assert_eq!(first(&pace), FIRST_SET_AT_MOST);
        for _ in 0..40 {
            settle(&mut pace, us(400));
        }
        let (_, seen) = settle(&mut pace, us(400));
        assert!(seen - us(400) <= PAUSE, "seen at {seen:?}");
    }

    /// Commits visible at once (no fsync) teach nothing, and no pause is
    /// shorter than [`FIRST_PAUSE`] or longer than the longest.
    #[test]
    fn the_first_pause_stays_within_its_bounds() {
        let mut pace = Pace::default();
        pace.saw(0);
        assert_eq!(first(&pace), FIRST_PAUSE);
        assert!(!pace.learnt);
        for _ in 0..50 {
            pace.saw(1);
        }
        assert_eq!(first(&pace), FIRST_PAUSE);
        for _ in 0..200 {
            settle(&mut pace, Duration::from_millis(30));
        }
        assert_eq!(first(&pace), LONGEST_FIRST_PAUSE);
    }
}
