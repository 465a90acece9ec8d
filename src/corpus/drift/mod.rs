//! `agy-bridge drift`: fingerprint what agy writes and compare it with the
//! corpus baseline, so that a new agy version's format change shows up as a
//! red report instead of an empty stream.
//!
//! Three parts, one job each:
//! - `fingerprint`: what a set of recordings and databases shows about
//!   agy's format (step types, field paths with wire types and counts,
//!   statuses, tables, schema, `agy models` formats, decode errors);
//! - `compare`: the rules that judge a current fingerprint against the
//!   baseline, the way a maintainer would: a finding is **breaking** only
//!   when data a user sees would be lost or misread;
//! - `report`: the findings as sentences (paths named by what they mean,
//!   from the decoder's known-field table) and as JSON.
//!
//! Drift reads the decoder's own tables ([`crate::steps`]'s known-field
//! tree and `LOAD_BEARING`) rather than a copy, so a decoder change moves
//! the judgement with it.

mod compare;
mod fingerprint;
mod report;

pub use compare::{
    compare, content_alternatives, known_paths, Class, Finding, FindingKind, KnownPath, ZERO_ABLE,
};
pub use fingerprint::{
    fingerprint, fingerprint_paths, load, models_format, source_name, DriftError, Fingerprint,
    PathKey, PathPrint, Source, StandIn, StepTypePrint, WriteTarget, FINGERPRINT_FORMAT,
};
pub use report::{describe_path, Report};

use std::path::PathBuf;

/// The baseline file name in `recordings/`.
pub const BASELINE_FILE: &str = "schema-baseline.json";

/// The baseline of this source tree.
pub fn bundled_baseline() -> PathBuf {
    crate::recording::bundled_dir().join(BASELINE_FILE)
}

/// The `steps` columns the reader needs: the four every `steps` table has,
/// and the side columns the poller reads when all four are present.
pub const NEEDED_STEP_COLUMNS: &[&str] = &[
    "idx",
    "step_type",
    "status",
    "step_payload",
    "metadata",
    "error_details",
    "permissions",
    "task_details",
];

/// A baseline path absent from all N current steps that could carry it is
/// evidence of a change only when that would be unlikely by chance: when
/// `(1 - b/B)^N` is below this, where the baseline saw it in b of the B
/// steps whose enclosing message it belongs to. (20.1 is in 26 of the
/// corpus's 27 planner responses: missing from a single step is a 4% chance,
/// so even one step is evidence; thinking, 20.3, is in 5 of 27: fifteen
/// steps without it are needed.)
pub const SIGNIFICANCE: f64 = 0.05;
