//! Descriptors the runtime's reactor watches (tokio's `AsyncFd`): pi's
//! stdout, to write to it as it has room; inotify, to read its
//! notifications on the runtime itself.
//!
//! Registering a descriptor is `unsafe` in tokio: it must stay open, and the
//! same, for as long as it is registered. So the one registration is here,
//! and takes only values that own one descriptor for their whole life (an
//! `OwnedFd`, an `Inotify`: no other type can be given), and what it gives
//! back hands out only shared access, so the value cannot be swapped for
//! another while registered (`AsyncFd::get_mut` could).

use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};
use tokio::io::unix::AsyncFd;
use tokio::io::Interest;

mod sealed {
    /// A value that owns one descriptor from its making to its drop, and
    /// always gives that one. Implemented here only.
    pub trait OwnsFd: std::os::fd::AsFd {}
}

impl sealed::OwnsFd for OwnedFd {}

#[cfg(target_os = "linux")]
impl sealed::OwnsFd for nix::sys::inotify::Inotify {}

/// What the reactor sees of a watched value: its one descriptor.
#[derive(Debug)]
pub(crate) struct Owner<T>(T);

impl<T> Owner<T> {
    /// The value watched (inotify's, to read its events).
    #[cfg(target_os = "linux")]
    pub(crate) fn get(&self) -> &T {
        &self.0
    }
}

impl<T: AsFd> AsRawFd for Owner<T> {
    fn as_raw_fd(&self) -> RawFd {
        self.0.as_fd().as_raw_fd()
    }
}

/// A value registered with the reactor until dropped; only shared access.
#[derive(Debug)]
pub(crate) struct Watched<T: AsFd>(AsyncFd<Owner<T>>);

impl<T: AsFd> std::ops::Deref for Watched<T> {
    type Target = AsyncFd<Owner<T>>;

    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

/// Register `owner` with the current runtime's reactor for `interest`.
/// Panics outside a runtime, as tokio does.
pub(crate) fn watch<T: sealed::OwnsFd>(
    owner: T,
    interest: Interest,
) -> std::io::Result<Watched<T>> {
    // SAFETY: `owner` owns its descriptor until it is dropped, which is not
    // before the `AsyncFd` that now owns it is; `Owner::as_raw_fd` always
    // gives that one; and `Watched` lends the `AsyncFd` only shared, so
    // nothing can swap the value while it is registered.
    let fd = unsafe { AsyncFd::register_with_interest(Owner(owner), interest) }?;
    Ok(Watched(fd))
}
