//! `ipc-parent`: ping-pong, payload sweeps and charts over every local transport. The program
//! lives in the harness library's `parent` module; started as a child (see
//! `shmlink_harness::ipc_child`), it is the far end instead.

fn main() -> std::process::ExitCode {
    // Spawned as its own child, where no `ipc-child` binary was built beside it.
    if std::env::var_os(shmlink_harness::ipc_child::AS_CHILD_ENV).is_some() {
        return shmlink_harness::ipc_child::main();
    }
    shmlink_harness::parent::main()
}
