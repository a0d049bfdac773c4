//! Stale segments, live owners, permissions and names, with real processes where the feature is
//! about processes.

use crate::support;

use std::fs::OpenOptions;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::process::Command;
use std::time::{Duration, SystemTime};

use shmlink::segments::{self, Reclaim};
use shmlink::testing::segment_size;
use shmlink::{Channel, Config, Endpoint, Listener, OpenError, WaitStrategy};
use support::{echo, echo_creator, reap_killed, serial, shm_path, unique, NameGuard};

fn small() -> Config {
    Config {
        capacity: 4096,
        wait: WaitStrategy::Block,
    }
}

/// Leaves a segment behind the way a creator that died right after sizing it would: a sized
/// object nobody holds the lock of.
fn forge_unlocked(name: &str, len: u64, age: Duration) {
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(shm_path(name))
        .expect("forge segment");
    file.set_len(len).expect("size");
    file.set_modified(SystemTime::now() - age).expect("mtime");
}

#[test]
fn dead_owner_is_reclaimed_live_owner_is_refused() {
    let _serial = serial();
    let name = unique("dead-owner");
    let _unlink = NameGuard(name.clone());
    let mut owner = echo_creator(&[], &name, "block");

    // Alive: never taken, by create or by the cleaner.
    assert!(matches!(
        Channel::create(&name, &small()),
        Err(OpenError::AlreadyExists { channel: n }) if n == name
    ));
    let info = segments::inspect(&name).expect("inspect");
    assert!(info.ready && info.owner_locked && !info.stale, "{info:?}");
    assert_eq!(info.creator.pid, owner.pid());
    assert!(info.creator.alive);
    assert_eq!(segments::reclaim(&name).expect("reclaim"), Reclaim::Alive);

    owner.kill();
    reap_killed(&mut owner);
    let info = segments::inspect(&name).expect("inspect after the kill");
    assert!(info.ready && !info.owner_locked && info.stale, "{info:?}");
    assert!(!info.creator.alive);

    // Dead: `create` reclaims the name, and the new channel works.
    let mut ch = Channel::create(&name, &small()).expect("create over a dead owner");
    let _echo = echo(&[&name, "block"]);
    ch.send(b"x").expect("send");
    assert_eq!(&*ch.recv_timeout(support::WATCHDOG).expect("echo"), b"x");
}

#[test]
fn creator_that_died_before_ready_is_reclaimed() {
    let _serial = serial();
    let name = unique("half-made");
    let _unlink = NameGuard(name.clone());
    let mut half = echo(&["--half-create", "--capacity", "4096", &name]);
    assert_eq!(half.read_line(), "ready");

    // Still being made by a live process: not ready for connectors, not free for creators.
    assert!(matches!(
        Channel::connect(&name, WaitStrategy::Block),
        Err(OpenError::NotReady { .. })
    ));
    assert!(matches!(
        Channel::create(&name, &small()),
        Err(OpenError::AlreadyExists { .. })
    ));
    let info = segments::inspect(&name).expect("inspect");
    assert!(!info.ready && info.owner_locked && !info.stale, "{info:?}");

    half.kill();
    reap_killed(&mut half);
    let info = segments::inspect(&name).expect("inspect after the kill");
    assert!(!info.ready && info.stale, "{info:?}");
    let _ch = Channel::create(&name, &small()).expect("create over a half-made segment");
}

#[test]
fn unsized_segments_get_a_grace_period() {
    let _serial = serial();
    // Zero bytes and recent: a creator may be between making and locking it right now.
    let young = unique("unsized-young");
    let _unlink_young = NameGuard(young.clone());
    forge_unlocked(&young, 0, Duration::ZERO);
    assert!(!segments::inspect(&young).expect("inspect").stale);
    assert!(matches!(
        Channel::create(&young, &small()),
        Err(OpenError::AlreadyExists { .. })
    ));
    // Zero bytes, 4 s old: still within the 5 s the docs give a creator to size it.
    let recent = unique("unsized-4s");
    let _unlink_recent = NameGuard(recent.clone());
    forge_unlocked(&recent, 0, Duration::from_secs(4));
    assert!(!segments::inspect(&recent).expect("inspect").stale);
    // Zero bytes and 6 s old, past those 5 s: its creator died before sizing it.
    let old = unique("unsized-old");
    let _unlink_old = NameGuard(old.clone());
    forge_unlocked(&old, 0, Duration::from_secs(6));
    assert!(segments::inspect(&old).expect("inspect").stale);
    let _ch = Channel::create(&old, &small()).expect("create over an unsized segment");
    // Sized like a segment, header not written yet, unlocked: the creator locks before sizing,
    // so it is gone.
    let sized = unique("sized-unlocked");
    let _unlink_sized = NameGuard(sized.clone());
    forge_unlocked(&sized, segment_size(4096) as u64, Duration::ZERO);
    assert!(segments::inspect(&sized).expect("inspect").stale);
    let _ch2 = Channel::create(&sized, &small()).expect("create over a sized dead segment");
}

/// Several creators race for one stale name: exactly one wins, and the winner's channel is the
/// one left under the name (a loser must not remove it and make its own).
#[test]
fn racing_creators_over_a_stale_name_leave_one_winner() {
    let _serial = serial();
    for round in 0..20 {
        let name = unique(&format!("race-{round}"));
        let _unlink = NameGuard(name.clone());
        forge_unlocked(&name, segment_size(4096) as u64, Duration::ZERO);
        let barrier = std::sync::Barrier::new(6);
        let results: Vec<Result<Channel, OpenError>> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..6)
                .map(|_| {
                    s.spawn(|| {
                        barrier.wait();
                        Channel::create(&name, &small())
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("creator thread"))
                .collect()
        });
        let winners = results.iter().filter(|r| r.is_ok()).count();
        for r in &results {
            if let Err(e) = r {
                assert!(
                    matches!(e, OpenError::AlreadyExists { .. }),
                    "round {round}: {e}"
                );
            }
        }
        assert_eq!(winners, 1, "round {round}: {winners} creators won");
        // The winner's segment is the one under the name: a connector reaches it.
        let mut winner = results.into_iter().find_map(Result::ok).expect("a winner");
        let mut peer = Channel::connect(&name, WaitStrategy::Block).expect("connect");
        peer.send(b"hi").expect("send");
        assert_eq!(&*winner.try_recv().expect("the winner hears it"), b"hi");
    }
}

/// A creator and cleaners race for one stale name: they never act on one segment, so no
/// cleaner removes the segment the creator just made, whichever comes first. The cleaners are
/// two threads calling `segments::reclaim` (what `clean_dead` does for each stale segment) in a
/// loop until the create returned and once more, and, in some rounds, the `shmlink-clean`
/// binary.
#[test]
fn a_create_racing_the_cleaner_over_a_stale_name_keeps_its_channel() {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    let _serial = serial();
    const ROUNDS: usize = 100;
    let (mut created, removed) = (0, AtomicUsize::new(0));
    for round in 0..ROUNDS {
        let name = unique(&format!("create-clean-{round}"));
        let _unlink = NameGuard(name.clone());
        forge_unlocked(&name, segment_size(4096) as u64, Duration::ZERO);
        let barrier = std::sync::Barrier::new(3);
        let done = AtomicBool::new(false);
        let creation = std::thread::scope(|s| {
            let clean = || {
                barrier.wait();
                if round % 10 == 0 {
                    let out = Command::new(env!("CARGO_BIN_EXE_shmlink-clean"))
                        .arg(&name)
                        .output()
                        .expect("run shmlink-clean");
                    assert!(out.status.success(), "{out:?}");
                    let report = String::from_utf8(out.stdout).expect("utf-8");
                    if report.contains("-> removed") {
                        removed.fetch_add(1, Ordering::Relaxed);
                    }
                    return;
                }
                loop {
                    // Relaxed: a stop flag; the create's outcome is joined through the scope.
                    let last = done.load(Ordering::Relaxed);
                    if segments::reclaim(&name).expect("reclaim") == Reclaim::Removed {
                        removed.fetch_add(1, Ordering::Relaxed);
                    }
                    if last {
                        return;
                    }
                }
            };
            s.spawn(clean);
            s.spawn(clean);
            barrier.wait();
            let creation = Channel::create(&name, &small());
            done.store(true, Ordering::Relaxed);
            creation
        });
        match creation {
            Ok(mut ch) => {
                created += 1;
                // The creator's segment is the one under the name, and it stays there.
                assert!(shm_path(&name).exists(), "round {round}: name removed");
                assert_eq!(
                    segments::reclaim(&name).expect("reclaim"),
                    Reclaim::Alive,
                    "round {round}"
                );
                let mut peer = Channel::connect(&name, WaitStrategy::Block).expect("connect");
                peer.send(b"hi").expect("send");
                assert_eq!(&*ch.try_recv().expect("the creator hears it"), b"hi");
            }
            // A cleaner held the stale segment's lock when the creator looked.
            Err(OpenError::AlreadyExists { .. }) => {}
            Err(e) => panic!("round {round}: {e}"),
        }
    }
    eprintln!(
        "segments: {ROUNDS} rounds of create against the cleaners: {created} created, {} \
         removed by a cleaner",
        removed.into_inner()
    );
    assert!(created > 0, "no create won a round");
}

/// `rm /dev/shm/shmlink-NAME` while both ends have the segment mapped: they keep talking, the
/// name is free for a new channel, and the old creator's drop leaves that new channel alone.
#[test]
fn a_name_removed_by_hand_leaves_both_ends_working_and_the_name_free() {
    let _serial = serial();
    let name = unique("removed-by-hand");
    let _unlink = NameGuard(name.clone());
    let mut ch = Channel::create(&name, &small()).expect("create");
    let _peer = echo(&[&name, "block"]);
    ch.send(b"before").expect("send");
    assert_eq!(
        &*ch.recv_timeout(support::WATCHDOG).expect("echo"),
        b"before"
    );

    std::fs::remove_file(shm_path(&name)).expect("rm the segment");
    for i in 0..100u32 {
        ch.send(&i.to_le_bytes()).expect("send after rm");
        assert_eq!(
            &*ch.recv_timeout(support::WATCHDOG).expect("echo after rm"),
            i.to_le_bytes()
        );
    }
    // The name is free: a new channel takes it, while the old one still lives.
    let mut fresh = Channel::create(&name, &small()).expect("create after rm");
    let mut fresh_peer = Channel::connect(&name, WaitStrategy::Block).expect("connect");
    fresh_peer.send(b"new").expect("send");
    assert_eq!(&*fresh.try_recv().expect("recv"), b"new");
    // The old creator closes cleanly and does not remove the new channel's name.
    ch.send(b"last").expect("send");
    assert_eq!(&*ch.recv_timeout(support::WATCHDOG).expect("echo"), b"last");
    drop(ch);
    assert!(
        shm_path(&name).exists(),
        "the old creator removed the new name"
    );
    let info = segments::inspect(&name).expect("inspect");
    assert!(info.ready && !info.stale && info.creator.alive, "{info:?}");
    let again = Channel::connect(&name, WaitStrategy::Block);
    assert!(
        matches!(again, Err(OpenError::AlreadyConnected { .. })),
        "{again:?}"
    );
    fresh.send(b"still").expect("send");
    assert_eq!(&*fresh_peer.try_recv().expect("recv"), b"still");
}

/// The role `segments-fork-holder` of a re-run of this binary: creates the channel `name`,
/// forks a process that keeps every descriptor and only waits for signals, prints that
/// process's pid, and waits to be killed.
pub(crate) fn fork_holder(name: &str) {
    let _ch = Channel::create(name, &small()).expect("create");
    // SAFETY: the child only calls `alarm` and `pause` (async-signal-safe) until a signal ends
    // it.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork: {}", std::io::Error::last_os_error());
    if pid == 0 {
        // Ends itself after a while if the test never kills it.
        // SAFETY: alarm takes no pointers.
        unsafe { libc::alarm(2 * support::WATCHDOG.as_secs() as libc::c_uint) };
        loop {
            // SAFETY: pause takes no arguments.
            unsafe { libc::pause() };
        }
    }
    println!("forked {pid}");
    loop {
        std::thread::park();
    }
}

/// SIGKILLs a process that is not our child when dropped.
struct KillOnDrop(i32);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        // SAFETY: kill takes no pointers.
        unsafe { libc::kill(self.0, libc::SIGKILL) };
    }
}

/// A fork shares the creator's lock: once the creator is killed, its forked child keeps the
/// segment alive (never stale, never taken) until it dies too.
#[test]
fn a_forked_child_keeps_its_parents_channel_alive() {
    let _serial = serial();
    let name = unique("fork");
    let _unlink = NameGuard(name.clone());
    let mut creator = crate::roles::spawn("segments-fork-holder", &name, &[]);
    // After the test harness's own lines, and on the line where it names the test.
    let stdout = creator.child.stdout.take().expect("piped stdout");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(stdout).lines() {
            let Ok(line) = line else { return };
            if let Some((_, pid)) = line.split_once("forked ") {
                let _ = tx.send(pid.parse::<i32>().expect("the fork's pid"));
                return;
            }
        }
    });
    let fork = rx
        .recv_timeout(support::WATCHDOG)
        .expect("the creator did not fork");
    let forked = KillOnDrop(fork);
    let creator_pid = creator.pid();
    creator.kill();
    reap_killed(&mut creator);
    // The creator is dead; its fork holds the lock through the descriptor it inherited.
    let info = segments::inspect(&name).expect("inspect");
    assert!(info.owner_locked && !info.stale, "{info:?}");
    assert!(
        info.creator.alive && info.creator.pid == creator_pid,
        "{info:?}"
    );
    assert_eq!(segments::reclaim(&name).expect("reclaim"), Reclaim::Alive);
    assert!(matches!(
        Channel::create(&name, &small()),
        Err(OpenError::AlreadyExists { .. })
    ));
    // Once the fork dies too, the segment is stale and the name is taken over.
    drop(forked);
    let deadline = std::time::Instant::now() + support::WATCHDOG;
    while !segments::inspect(&name).expect("inspect").stale {
        assert!(
            std::time::Instant::now() < deadline,
            "still locked after the fork was killed"
        );
        // Waiting for another process to exit; nothing to be woken by.
        std::thread::sleep(Duration::from_millis(2));
    }
    let _ch = Channel::create(&name, &small()).expect("create once the fork died");
}

#[test]
fn shmlink_clean_removes_only_dead_segments() {
    let _serial = serial();
    let live = unique("clean-live");
    let dead = unique("clean-dead");
    let _unlink_live = NameGuard(live.clone());
    let _unlink_dead = NameGuard(dead.clone());
    let _ch = Channel::create(&live, &small()).expect("create");
    let mut owner = echo_creator(&[], &dead, "block");
    let dead_pid = owner.pid();
    owner.kill();
    reap_killed(&mut owner);

    let clean = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_shmlink-clean"))
            .args(args)
            .output()
            .expect("run shmlink-clean");
        assert!(out.status.success(), "{out:?}");
        String::from_utf8(out.stdout).expect("utf-8")
    };
    let listing = clean(&["--dry-run", &live, &dead]);
    let line = |name: &str| {
        listing
            .lines()
            .find(|l| l.starts_with(name))
            .unwrap_or_else(|| panic!("{name} not listed:\n{listing}"))
            .to_owned()
    };
    assert!(line(&dead).contains("stale"), "{listing}");
    assert!(
        line(&dead).contains(&format!("pid {dead_pid} (dead)")),
        "{listing}"
    );
    assert!(line(&live).contains("live"), "{listing}");
    assert!(
        line(&live).contains(&format!("pid {} (alive)", std::process::id())),
        "{listing}"
    );
    assert!(shm_path(&dead).exists(), "--dry-run removed something");

    let report = clean(&[&live, &dead]);
    assert!(report.contains("-> removed"), "{report}");
    assert!(!shm_path(&dead).exists(), "dead segment left:\n{report}");
    assert!(shm_path(&live).exists(), "live segment removed:\n{report}");

    // The full listing (no names) runs too and shows our live channel.
    assert!(clean(&["--dry-run"]).contains(&live));
}

/// Set in the child process that runs the umask test: the umask is the process's, so it is
/// changed only there, never in the test process whose other tests run meanwhile.
const UMASK_CHILD: &str = "SHMLINK_TEST_UMASK_CHILD";

#[test]
fn mappings_are_created_0600() {
    if std::env::var_os(UMASK_CHILD).is_none() {
        let mut child =
            support::respawn("segments::mappings_are_created_0600", &[(UMASK_CHILD, "1")]);
        let status = child.reap();
        let out = child.read_all();
        assert!(status.success(), "the umask child {status}: {out}");
        assert!(
            out.contains("modes checked"),
            "the umask child did not run: {out}"
        );
        return;
    }
    for mask in [0o022, 0o000, 0o277] {
        // SAFETY: umask takes no pointers; this process runs this test alone.
        unsafe { libc::umask(mask) };
        let name = unique(&format!("mode-{mask:o}"));
        let _unlink = NameGuard(name.clone());
        let _ch = Channel::create(&name, &small()).expect("create");
        let mode = std::fs::metadata(shm_path(&name))
            .expect("stat")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600, "named mapping with umask {mask:o}");

        let path = std::env::temp_dir().join(format!("shmlink-file-{name}"));
        let _ = std::fs::remove_file(&path);
        let ch = Channel::create_at(&path, &small()).expect("create_at");
        let mode = std::fs::metadata(&path).expect("stat").permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "file mapping with umask {mask:o}");
        drop(ch);
        assert!(!path.exists(), "create_at file left behind");
    }
    println!("modes checked");
}

#[test]
fn bad_names_are_refused_before_reaching_the_os() {
    let long = "a".repeat(300);
    for bad in ["../x", "", long.as_str(), "a\0b", "a/b", ".hidden", "-x"] {
        assert!(
            matches!(
                Channel::create(bad, &small()),
                Err(OpenError::InvalidName { .. })
            ),
            "create accepted {bad:?}"
        );
        assert!(
            matches!(
                Channel::connect(bad, WaitStrategy::Block),
                Err(OpenError::InvalidName { .. })
            ),
            "connect accepted {bad:?}"
        );
        assert!(matches!(
            segments::inspect(bad),
            Err(OpenError::InvalidName { .. })
        ));
    }
}

#[test]
fn connect_refuses_objects_not_private_to_this_user() {
    let _serial = serial();
    let name = unique("not-private");
    let _unlink = NameGuard(name.clone());
    let _ch = Channel::create(&name, &small()).expect("create");
    // SAFETY: geteuid takes no arguments and cannot fail.
    let me = unsafe { libc::geteuid() };
    let path = shm_path(&name);

    // Open to every user, as a squatter leaves the object it made under a victim's name.
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o666)).expect("chmod");
    match Channel::connect(&name, WaitStrategy::Block) {
        Err(OpenError::NotPrivate {
            channel: n,
            owner,
            mode,
            expected,
        }) => {
            assert_eq!(
                (n.as_str(), owner, mode, expected),
                (name.as_str(), me, 0o666, me)
            );
        }
        other => panic!("connect to a 0666 object: {other:?}"),
    }

    // Owned by another user, even with mode 0600 (only root can give an object away).
    if me == 0 {
        std::os::unix::fs::chown(&path, Some(4242), None).expect("chown");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).expect("chmod");
        match Channel::connect(&name, WaitStrategy::Block) {
            Err(e @ OpenError::NotPrivate { owner: 4242, .. }) => {
                assert!(e.to_string().contains("uid 4242"), "{e}");
                assert!(e.to_string().contains(&name), "{e}");
            }
            other => panic!("connect to another user's object: {other:?}"),
        }
    }

    // The same for a file-backed channel.
    let file = std::env::temp_dir().join(format!("shmlink-file-{name}"));
    let _ = std::fs::remove_file(&file);
    let _fch = Channel::create_at(&file, &small()).expect("create_at");
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    match Channel::connect_at(&file, WaitStrategy::Block) {
        Err(OpenError::NotPrivate { mode: 0o644, .. }) => {}
        other => panic!("connect_at a 0644 file: {other:?}"),
    }
}

/// Set in the child process that runs a test with a `/dev/shm` of its own.
const PRIVATE_SHM: &str = "SHMLINK_TEST_PRIVATE_SHM";

/// True when the caller should run the body of `test` here: in the child process that runs it
/// with a `/dev/shm` of its own (a fresh tmpfs in a private mount namespace, so the odd entries
/// it makes cannot disturb other test runs on the machine), or in this process where a mount
/// namespace is not allowed. False in the parent once the child passed.
fn in_private_shm(test: &str) -> bool {
    if std::env::var_os(PRIVATE_SHM).is_some() {
        return true;
    }
    let mut cmd = Command::new(std::env::current_exe().expect("test binary"));
    cmd.args(["--exact", test, "--nocapture", "--test-threads=1"])
        .env(PRIVATE_SHM, "1");
    // SAFETY: the closure runs in the forked child before exec and only makes system calls
    // with pointers to constant C strings.
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(&mut cmd, || {
            let fail = || Err(std::io::Error::last_os_error());
            if libc::unshare(libc::CLONE_NEWNS) != 0 {
                return fail();
            }
            let none = std::ptr::null();
            let flags = libc::MS_REC | libc::MS_PRIVATE;
            if libc::mount(c"none".as_ptr(), c"/".as_ptr(), none, flags, none.cast()) != 0 {
                return fail();
            }
            let tmpfs = c"tmpfs".as_ptr();
            if libc::mount(tmpfs, c"/dev/shm".as_ptr(), tmpfs, 0, none.cast()) != 0 {
                return fail();
            }
            Ok(())
        });
    }
    match cmd.output() {
        Ok(out) => {
            let stdout = String::from_utf8_lossy(&out.stdout);
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert!(out.status.success(), "{test} failed:\n{stdout}\n{stderr}");
            assert!(stdout.contains("body ran"), "{test} did not run:\n{stdout}");
            false
        }
        Err(e) => {
            eprintln!("{test}: no private /dev/shm ({e}); running in the shared one");
            true
        }
    }
}

/// Removes a directory entry of any kind when dropped.
struct EntryGuard(std::path::PathBuf);

impl Drop for EntryGuard {
    fn drop(&mut self) {
        if std::fs::remove_dir(&self.0).is_err() {
            let _ = std::fs::remove_file(&self.0);
        }
    }
}

/// Makes an entry `shmlink-<name>` that is not a channel, of the given kind.
fn make_odd(name: &str, kind: &str, link_to: &std::path::Path) -> EntryGuard {
    let path = shm_path(name);
    let guard = EntryGuard(path.clone());
    let new_file = || {
        OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)
            .expect("make the object")
    };
    match kind {
        "directory" => std::fs::create_dir(&path).expect("mkdir"),
        "symlink" => std::os::unix::fs::symlink(link_to, &path).expect("symlink"),
        "dangling" => std::os::unix::fs::symlink("/nonexistent", &path).expect("symlink"),
        "sparse" => new_file()
            .set_len(1 << 62)
            .expect("a 2^62-byte sparse file"),
        "foreign" => {
            let file = new_file();
            file.set_len(segment_size(4096) as u64).expect("size");
            std::os::unix::fs::FileExt::write_all_at(&file, b"NOTOURS!", 0).expect("write");
        }
        "small" => new_file().set_len(100).expect("size"),
        "fifo" => {
            let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).expect("path");
            // SAFETY: a valid NUL-terminated path; mkfifo only reads it.
            assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo");
        }
        other => unreachable!("{other}"),
    }
    guard
}

const ODD_KINDS: [(&str, &str); 7] = [
    ("directory", "a directory"),
    ("symlink", "a symbolic link"),
    ("dangling", "a symbolic link"),
    ("sparse", "without the shmlink magic"),
    ("foreign", "without the shmlink magic"),
    ("small", "smaller than a channel header"),
    ("fifo", "not a regular file but a FIFO"),
];

/// The kinds of entry `connect` must refuse before mapping anything: links (never followed,
/// even to a live channel) and what is not a regular file.
const NOT_REGULAR: [&str; 4] = ["directory", "symlink", "dangling", "fifo"];

#[test]
fn odd_entries_named_like_channels_are_skipped_and_never_touched() {
    if !in_private_shm("segments::odd_entries_named_like_channels_are_skipped_and_never_touched") {
        return;
    }
    let _serial = serial();
    // A live channel (a symlink points at it), and a dead one that must still be cleaned.
    let live = unique("odd-live");
    let _unlink_live = NameGuard(live.clone());
    let _ch = Channel::create(&live, &small()).expect("create");
    let dead = unique("odd-dead");
    let _unlink_dead = NameGuard(dead.clone());
    let mut owner = echo_creator(&[], &dead, "block");
    owner.kill();
    reap_killed(&mut owner);
    let odd: Vec<(String, &str)> = ODD_KINDS
        .iter()
        .map(|&(kind, reason)| (unique(&format!("odd-{kind}")), reason))
        .collect();
    let _entries: Vec<EntryGuard> = odd
        .iter()
        .zip(ODD_KINDS)
        .map(|((name, _), (kind, _))| make_odd(name, kind, &shm_path(&live)))
        .collect();

    // Listing works and shows the channels only.
    let names: Vec<String> = segments::list()
        .expect("list")
        .into_iter()
        .map(|s| s.name)
        .collect();
    assert!(names.contains(&live) && names.contains(&dead), "{names:?}");
    for (name, _) in &odd {
        assert!(!names.contains(name), "{name} listed as a channel");
    }
    // The scan says what each odd entry is.
    let listing = segments::scan().expect("scan");
    for (name, reason) in &odd {
        let skipped = listing
            .skipped
            .iter()
            .find(|s| s.name == format!("shmlink-{name}"))
            .unwrap_or_else(|| panic!("{name} not reported: {:?}", listing.skipped));
        assert!(skipped.reason.contains(reason), "{name}: {skipped:?}");
        // One by one, too: never a channel, never reclaimed, never replaced by `create`.
        assert!(
            matches!(segments::inspect(name), Err(OpenError::NotAChannel { channel: ref n, .. }) if n == name),
            "{name}"
        );
        assert_eq!(
            segments::reclaim(name).expect("reclaim"),
            Reclaim::NotAChannel
        );
        // `create` and `bind` say what the entry is, rather than that a creator holds it.
        for (call, got) in [
            ("create", Channel::create(name, &small()).map(drop)),
            ("bind", Listener::bind(name, &small()).map(drop)),
        ] {
            match got {
                Err(OpenError::NotAChannel {
                    channel: n,
                    reason: r,
                }) => {
                    assert_eq!(&n, name);
                    assert!(r.contains(reason), "{call} {name}: {r}");
                }
                other => panic!("{call} over {name}: {other:?}"),
            }
        }
    }
    // `connect` refuses links (a link to a live channel too) and whatever is not a regular
    // file, at once and saying what it is: nothing is followed, opened blocking or mapped.
    for ((name, reason), (kind, _)) in odd.iter().zip(ODD_KINDS) {
        if !NOT_REGULAR.contains(&kind) {
            continue;
        }
        for (call, got) in [
            (
                "connect",
                Channel::connect(name, WaitStrategy::Block).map(drop),
            ),
            (
                "connect_timeout",
                Channel::connect_timeout(name, WaitStrategy::Block, support::WATCHDOG).map(drop),
            ),
            (
                "Endpoint::connect",
                Endpoint::connect(name, WaitStrategy::Block).map(drop),
            ),
        ] {
            match got {
                Err(e @ OpenError::NotAChannel { .. }) => {
                    let text = e.to_string();
                    assert!(
                        text.contains(reason) && text.contains(name),
                        "{call}: {text}"
                    );
                }
                other => panic!("{call} to a {kind}: {other:?}"),
            }
        }
    }

    // The command-line cleaner lists them as skipped, and cleaning removes the dead channel and
    // nothing else.
    let out = Command::new(env!("CARGO_BIN_EXE_shmlink-clean"))
        .output()
        .expect("run shmlink-clean");
    let report = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    for (name, _) in &odd {
        assert!(
            report
                .lines()
                .any(|l| l.starts_with(&format!("shmlink-{name}")) && l.contains("skipped")),
            "{name} not reported:\n{report}"
        );
    }
    assert!(!shm_path(&dead).exists(), "dead channel left:\n{report}");
    let mut again = Channel::create(&dead, &small()).expect("create over the cleaned name");
    drop(std::mem::replace(
        &mut again,
        Channel::create(&unique("odd-other"), &small()).expect("create"),
    ));
    assert!(segments::clean_dead().expect("clean_dead").is_empty());
    for (name, _) in &odd {
        assert!(
            std::fs::symlink_metadata(shm_path(name)).is_ok(),
            "{name} was removed"
        );
    }
    assert!(shm_path(&live).exists());
    println!("body ran");
}

#[test]
fn connect_at_refuses_fifos_and_links() {
    let _serial = serial();
    let dir = std::env::temp_dir();
    let tag = unique("at");
    let real = dir.join(format!("shmlink-{tag}-real"));
    let link = dir.join(format!("shmlink-{tag}-link"));
    let fifo = dir.join(format!("shmlink-{tag}-fifo"));
    let _entries = [
        EntryGuard(real.clone()),
        EntryGuard(link.clone()),
        EntryGuard(fifo.clone()),
    ];
    let _ch = Channel::create_at(&real, &small()).expect("create_at");
    std::os::unix::fs::symlink(&real, &link).expect("symlink");
    let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).expect("path");
    // SAFETY: a valid NUL-terminated path; mkfifo only reads it.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo");
    for (path, reason) in [(&link, "a symbolic link"), (&fifo, "not a regular file")] {
        match Channel::connect_at(path, WaitStrategy::Block) {
            Err(e @ OpenError::NotAChannel { .. }) => {
                assert!(e.to_string().contains(reason), "{e}");
                assert!(e.to_string().contains(&path.display().to_string()), "{e}");
            }
            other => panic!("connect_at {}: {other:?}", path.display()),
        }
    }
    // The file itself is a channel.
    Channel::connect_at(&real, WaitStrategy::Block).expect("connect_at the file");
}

#[test]
fn connect_timeout_to_an_object_that_never_becomes_ready_times_out() {
    let _serial = serial();
    let short = Duration::from_millis(50);
    // Empty (its creator would size it next), and sized with the header still zero.
    for len in [0, segment_size(4096) as u64] {
        let name = unique("never-ready");
        let _unlink = NameGuard(name.clone());
        forge_unlocked(&name, len, Duration::ZERO);
        // A look says what it is now; a wait that ends at its deadline says Timeout.
        assert!(matches!(
            Channel::connect(&name, WaitStrategy::Block),
            Err(OpenError::NotReady { channel: n }) if n == name
        ));
        for (call, got) in [
            (
                "channel",
                Channel::connect_timeout(&name, WaitStrategy::Block, short).map(drop),
            ),
            (
                "endpoint",
                Endpoint::connect_timeout(&name, WaitStrategy::Block, short).map(drop),
            ),
        ] {
            assert!(
                matches!(got, Err(OpenError::Timeout { .. })),
                "{call} connect_timeout to a {len}-byte object: {got:?}"
            );
        }
    }
}

/// A listener with a client connected shows up in the segment list as ready and live, its
/// creator this process; the client's connection is listed with the listener's name, and a
/// channel merely named like a connection, of a listener that does not exist, is not.
#[test]
fn a_live_listener_with_a_client_is_listed_with_its_connection() {
    let name = unique("seglistener");
    let _guard = NameGuard(name.clone());
    let listener = Listener::bind_with_limit(&name, &small(), 2).expect("bind");
    let connecting = {
        let name = name.clone();
        std::thread::spawn(move || Channel::connect(&name, WaitStrategy::Block))
    };
    let _conn = listener.accept_timeout(support::WATCHDOG).expect("accept");
    let _client = connecting.join().unwrap().expect("connect");
    let info = segments::inspect(&name).expect("inspect");
    assert!(info.ready && !info.stale, "{info:?}");
    assert_eq!(info.creator.pid, std::process::id());

    let lone = format!("{name}x.{}.7", std::process::id());
    let _lone_guard = NameGuard(lone.clone());
    let _lone = Channel::create(&lone, &small()).expect("create");
    let listing = segments::scan().expect("scan");
    let ours: Vec<_> = listing
        .channels
        .iter()
        .filter(|s| s.name.starts_with(&name))
        .collect();
    let connection = format!("{name}.{}.", std::process::id());
    let conns: Vec<_> = ours
        .iter()
        .filter(|s| s.name.starts_with(&connection))
        .collect();
    assert_eq!(conns.len(), 1, "{ours:#?}");
    assert_eq!(
        conns[0].listener.as_deref(),
        Some(name.as_str()),
        "{ours:#?}"
    );
    assert_eq!(conns[0].creator.pid, std::process::id());
    for s in ours.iter().filter(|s| !s.name.starts_with(&connection)) {
        assert_eq!(s.listener, None, "{s:#?}");
    }
    assert_eq!(ours.len(), 3, "{ours:#?}");
    // `inspect` looks at one segment and says nothing of listeners.
    assert_eq!(segments::inspect(&conns[0].name).unwrap().listener, None);
}
