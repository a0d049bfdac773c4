//! shmring
