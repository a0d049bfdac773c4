//! `ipc-parent`: ping-pong, payload sweeps and charts over every local transport. The program
//! lives in the harness library's `parent` module.

fn main() -> std::process::ExitCode {
    shmlink_harness::parent::main()
}
