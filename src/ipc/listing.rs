//! What the fallback's files say of the channels, listeners and topics made on it: the public
//! [`FallbackInfo`] and [`list_fallback`] (at `shmlink::segments`), beside the shared-memory
//! listing of `shm::segments`.

use super::listener;
use super::rendezvous::{self, Published, Serves};

/// A channel, listener or topic of the ipc-channel fallback, as its rendezvous and lock files
/// show it. Less is known than of a mapping: no sizes, no fill, no peers beyond the creator.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct FallbackInfo {
    /// The name it was made under.
    pub name: String,
    /// `"channel"`, `"listener"` or `"topic"`.
    pub kind: &'static str,
    /// The process id its creator recorded (information only).
    pub pid: u32,
    /// Whether its creator still holds the name's lock.
    pub alive: bool,
}

/// Every channel, listener and topic of this user's ipc-channel fallback on this machine, by
/// name; an entry whose file cannot be read or parsed is left out.
pub fn list_fallback() -> Vec<FallbackInfo> {
    rendezvous::published_names()
        .into_iter()
        .filter_map(|name| {
            let (kind, pid) = match rendezvous::read(&name).ok()? {
                Published::Channel { pid, .. } => ("channel", pid),
                Published::Listener {
                    pid,
                    serves: Serves::Clients,
                    ..
                } => ("listener", pid),
                Published::Listener {
                    pid,
                    serves: Serves::Topic { .. },
                    ..
                } => ("topic", pid),
            };
            let alive = listener::alive(&name).unwrap_or(false);
            Some(FallbackInfo {
                name,
                kind,
                pid,
                alive,
            })
        })
        .collect()
}
