//! What the benches reach of `maintain` beyond its API. Built only with
//! the `testing` feature, which the crate's own tests and benches turn on.

use std::time::Duration;

/// How often the live recorder copies agy's conversation database.
pub const CAPTURE_INTERVAL: Duration = crate::maintain::record::CAPTURE_INTERVAL;
