//! `agy-bridge drift`: fingerprint what agy writes and compare it with the
//! corpus baseline, so that a new agy version's format change shows up as a
//! red report instead of an empty stream.
//!
//! Five parts, one job each, importing only those listed before them:
//! - `known`: the decoder's paths as drift sees them (every path its
//!   known-field tree reads, the zero-able ones, their fallbacks);
//! - `finding`: what a difference from the baseline is, and its class;
//! - `fingerprint`: what a set of recordings and databases shows about
//!   agy's format (step types, field paths with wire types and counts,
//!   statuses, tables, schema, `agy models` formats, decode errors);
//! - `report`: the findings as sentences (paths named by what they mean,
//!   from the decoder's known-field table) and as JSON;
//! - `compare`: the rules that judge a current fingerprint against the
//!   baseline, the way a maintainer would: a finding is **breaking** only
//!   when data a user sees would be lost or misread (`compare/paths`: the
//!   rules judged path by path within one step type).
//!
//! Drift reads the decoder's own tables ([`agy_format::steps`]'s known-field
//! tree and `LOAD_BEARING`) rather than a copy, so a decoder change moves
//! the judgement with it.

mod compare;
mod finding;
mod fingerprint;
mod known;
mod report;

pub use compare::compare;
pub use finding::{Class, Finding, FindingKind};
pub use fingerprint::{
    fingerprint, fingerprint_paths, load, models_format, source_name, DriftError, Fingerprint,
    PathKey, PathPrint, Source, StandIn, StepTypePrint, WriteTarget,
};
pub use known::{content_alternatives, known_paths, KnownPath, ZERO_ABLE};
pub use report::{describe_path, Report};

use std::path::PathBuf;

/// The baseline file name in `recordings/`.
pub const BASELINE_FILE: &str = "schema-baseline.json";

/// The baseline of this source tree.
pub fn bundled_baseline() -> PathBuf {
    crate::recording::bundled_dir().join(BASELINE_FILE)
}

/// The same baseline, built into the binary: an installed agy-bridge has no
/// source tree, and `drift` on a conversation database (which the bridge
/// tells users to run when agy writes a step it does not know) must work.
const BUILT_IN_BASELINE: &str = include_str!("../../../../recordings/schema-baseline.json");

/// The baseline `drift` compares with when none is named, and the name it
/// goes by in the report: this source tree's file when it is there (it may
/// be newer than the build), else the copy built into the binary.
pub fn default_baseline() -> Result<(Fingerprint, PathBuf), DriftError> {
    let path = bundled_baseline();
    if path.is_file() {
        return Fingerprint::load(&path).map(|fp| (fp, path));
    }
    let name = PathBuf::from(format!("{BASELINE_FILE} (built into agy-bridge)"));
    Fingerprint::from_json(BUILT_IN_BASELINE, &name).map(|fp| (fp, name))
}

/// The `steps` columns the reader needs: the four every `steps` table has,
/// and the side columns the poller reads when all four are present.
pub(crate) const NEEDED_STEP_COLUMNS: &[&str] = &[
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn the_built_in_baseline_is_the_source_trees() {
        let name = Path::new("built-in");
        let built_in = Fingerprint::from_json(BUILT_IN_BASELINE, name).expect("built in");
        let file = Fingerprint::load(&bundled_baseline()).expect("file");
        assert_eq!(built_in.to_json(), file.to_json());
        let (_, path) = default_baseline().expect("default");
        assert_eq!(path, bundled_baseline());
    }
}
