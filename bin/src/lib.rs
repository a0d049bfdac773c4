//! The shmlink harness: every local transport behind one trait, and the ping-pong workload the
//! `ipc-parent` and `ipc-child` binaries run over them. Not part of the library: nothing here is
//! published.

#![deny(unsafe_op_in_unsafe_fn)]
#![warn(clippy::undocumented_unsafe_blocks)]

pub mod client;
pub mod fanout;
pub mod ipc_child;
pub mod parent;
pub mod stream_format;
pub mod transport;
pub mod workload;

mod error;
pub use error::{garbled, Error, Result};

/// The code blocks of the harness manual, checked by `cargo test --doc` like the library's.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
