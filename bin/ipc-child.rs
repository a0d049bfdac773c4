//! `ipc-child`: the far end of every `ipc-parent` run. The program lives in the harness
//! library's `ipc_child` module.

fn main() -> std::process::ExitCode {
    shmlink_harness::ipc_child::main()
}
