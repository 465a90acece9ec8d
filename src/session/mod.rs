//! **session**: what a front end needs around the runner to serve an agy
//! session, whoever its user is (pi today, an ACP editor next): the runner's
//! settings with this binary as agy's guardian ([`setup`]), one turn per
//! session at a time across processes (`turn_lock`), the account's seats
//! ([`seat`]), the permission gate a turn opens in `ask` mode ([`gating`]),
//! and the turns nobody watches ([`unattended`]). What it takes from the
//! environment (whether a session keeps agy warm among the rest) comes
//! from [`crate::settings::Settings`], passed down.
//!
//! A front end ([`crate::pi`]) maps the turn's events to its own protocol;
//! nothing here knows any front end's words.
//!
//! May import: [`agy_format`](mod@agy_format), [`crate::follow`], [`crate::state`],
//! [`crate::settings`], [`crate::process`], [`crate::runner`], [`crate::gate`].

pub mod gating;
pub mod seat;
pub mod setup;
pub(crate) mod turn_lock;
pub mod unattended;
pub(crate) mod warm_slot;
