//! shmring

mod core_stub;
pub use core_stub::{Channel, Config, Error, ReadGuard, Result, WaitStrategy};

mod endpoint;
pub mod fallback;
pub mod transport;
pub use endpoint::{Backend, Endpoint, Received};
