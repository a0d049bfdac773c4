//! Unit tests of the fallback's files: the choice of the directory, the rules a file is opened,
//! read and published under, and the checks of a server's socket and directory.

use super::server::{close_server_dir, server_dir, MAX_SOCKET_PATH};
use super::*;
use ipc_channel::ipc::IpcOneShotServer;
use std::ffi::CString;
use std::time::{Duration, Instant};

/// A directory of its own under the temporary directory, removed on drop.
struct Scratch(PathBuf);

impl Scratch {
    fn new(tag: &str) -> Scratch {
        let dir =
            std::env::temp_dir().join(format!("shmlink-rendezvous-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::DirBuilder::new().mode(0o700).create(&dir).unwrap();
        Scratch(dir)
    }
}

impl Scratch {
    /// A directory `name` in the scratch directory, with permission bits `mode`.
    fn dir(&self, name: &str, mode: u32) -> PathBuf {
        let dir = self.0.join(name);
        std::fs::DirBuilder::new().mode(0o700).create(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(mode)).unwrap();
        dir
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn a_private_directory_must_be_ours_closed_and_not_a_link() {
    let scratch = Scratch::new("dirs");
    let judge = |path: &Path| distrust(&std::fs::symlink_metadata(path).unwrap());
    let good = scratch.dir("good", 0o700);
    assert_eq!(judge(&good), None);

    let open = scratch.dir("open", 0o1777);
    let link = scratch.0.join("link");
    std::os::unix::fs::symlink(&good, &link).unwrap();
    let file = scratch.0.join("file");
    std::fs::write(&file, "").unwrap();
    for (path, says) in [
        (&open, "mode 1777"),
        (&link, "a symbolic link"),
        (&file, "not a directory"),
    ] {
        assert_eq!(judge(path).as_deref(), Some(says));
    }
    if euid() == 0 {
        // Another user's directory (only root can give one away).
        let theirs = scratch.dir("theirs", 0o700);
        std::os::unix::fs::chown(&theirs, Some(65534), Some(65534)).unwrap();
        assert_eq!(judge(&theirs).as_deref(), Some("owned by uid 65534"));
    }
}

/// The candidate names under `scratch`, in order.
fn candidates(scratch: &Scratch) -> Vec<PathBuf> {
    tmp_candidates(&scratch.0).collect()
}

#[test]
fn the_first_candidate_is_made_and_then_found_by_every_walk() {
    let scratch = Scratch::new("walk");
    let names = candidates(&scratch);
    assert_eq!(names.len(), TMP_CANDIDATES);
    assert_eq!(names[0], scratch.0.join(format!("shmlink-{}", euid())));
    assert_eq!(names[2], scratch.0.join(format!("shmlink-{}-2", euid())));
    assert_eq!(
        tmp_dir(&scratch.0, false).unwrap(),
        None,
        "nothing made yet"
    );
    let made = tmp_dir(&scratch.0, true).unwrap();
    assert_eq!(made.as_ref(), Some(&names[0]));
    let meta = std::fs::symlink_metadata(&names[0]).unwrap();
    assert_eq!(meta.mode() & 0o7777, 0o700);
    assert_eq!(tmp_dir(&scratch.0, false).unwrap(), made);
    assert_eq!(tmp_dir(&scratch.0, true).unwrap(), made);
}

#[test]
fn names_taken_by_others_are_skipped_by_creators_and_connectors_alike() {
    let scratch = Scratch::new("squat");
    let names = candidates(&scratch);
    // A link, a file, a directory open to all, and (as root) another user's directory.
    std::os::unix::fs::symlink(&scratch.0, &names[0]).unwrap();
    std::fs::write(&names[1], "").unwrap();
    scratch.dir(names[2].file_name().unwrap().to_str().unwrap(), 0o777);
    let mut taken = 3;
    if euid() == 0 {
        let theirs = scratch.dir(names[3].file_name().unwrap().to_str().unwrap(), 0o700);
        std::os::unix::fs::chown(&theirs, Some(65534), Some(65534)).unwrap();
        taken = 4;
    }
    assert_eq!(tmp_dir(&scratch.0, false).unwrap(), None);
    let made = tmp_dir(&scratch.0, true).unwrap();
    assert_eq!(made.as_ref(), Some(&names[taken]));
    assert_eq!(
        tmp_dir(&scratch.0, false).unwrap(),
        made,
        "a connector finds it"
    );
    // A name before it that comes free is not made while the one in use exists.
    std::fs::remove_file(&names[1]).unwrap();
    assert_eq!(tmp_dir(&scratch.0, true).unwrap(), made);
    assert!(!names[1].exists());
}

#[test]
fn with_every_name_taken_the_error_says_what_the_user_can_do() {
    let scratch = Scratch::new("denied");
    for name in candidates(&scratch) {
        std::os::unix::fs::symlink("/", &name).unwrap();
    }
    assert_eq!(tmp_dir(&scratch.0, false).unwrap(), None);
    let err = tmp_dir(&scratch.0, true).unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::PermissionDenied);
    let text = err.to_string();
    for says in [
        "TMPDIR",
        "XDG_RUNTIME_DIR",
        "a symbolic link",
        &scratch.0.display().to_string(),
    ] {
        assert!(text.contains(says), "{text}");
    }
}

#[test]
fn a_runtime_directory_is_used_only_when_nobody_else_can_write_it() {
    let scratch = Scratch::new("runtime");
    let trusted = |path: &Path| trusted_runtime_dir(path.as_os_str().to_owned());
    let ours = scratch.dir("ours", 0o700);
    assert_eq!(trusted(&ours), Some(ours.clone()));
    // Readable by others is fine (the files in it are not); writable is not.
    std::fs::set_permissions(&ours, std::fs::Permissions::from_mode(0o755)).unwrap();
    assert_eq!(trusted(&ours), Some(ours.clone()));
    let shared = scratch.dir("shared", 0o1777);
    assert_eq!(trusted(&shared), None);
    let link = scratch.0.join("link");
    std::os::unix::fs::symlink(&ours, &link).unwrap();
    assert_eq!(trusted(&link), None);
    assert_eq!(trusted(Path::new("relative/dir")), None);
    assert_eq!(trusted(Path::new("")), None);
    if euid() == 0 {
        std::os::unix::fs::chown(&ours, Some(65534), Some(65534)).unwrap();
        assert_eq!(trusted(&ours), None);
    }
}

#[test]
fn files_are_refused_unless_private_regular_and_not_links() {
    let scratch = Scratch::new("files");
    let open_at = |path: &Path| open(path, "x", Kind::Rendezvous, OpenOptions::new().read(true));
    let good = scratch.0.join("good");
    std::fs::write(&good, "1\n/s").unwrap();
    std::fs::set_permissions(&good, std::fs::Permissions::from_mode(0o600)).unwrap();
    open_at(&good).unwrap();

    let readable = scratch.0.join("readable");
    std::fs::write(&readable, "1\n/s").unwrap();
    std::fs::set_permissions(&readable, std::fs::Permissions::from_mode(0o644)).unwrap();
    assert!(matches!(
        open_at(&readable),
        Err(Error::NotPrivate { mode: 0o644, .. })
    ));

    let link = scratch.0.join("link");
    std::os::unix::fs::symlink(&good, &link).unwrap();
    assert!(
        matches!(open_at(&link), Err(Error::NotAChannel { reason, .. }) if reason.contains("symbolic link"))
    );

    let fifo = scratch.0.join("fifo");
    let c = CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: `c` is a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    // Opening does not wait for a writer; the FIFO is refused as what it is.
    assert!(
        matches!(open_at(&fifo), Err(Error::NotAChannel { reason, .. }) if reason.contains("a FIFO"))
    );
    assert!(
        matches!(open_at(&scratch.0.join("none")), Err(Error::NotFound { channel: n }) if n == "x")
    );
}

#[test]
fn publishing_never_writes_through_a_link_and_leaves_one_private_file() {
    let scratch = Scratch::new("publish");
    let path = scratch.0.join("shmlink-p.ipc");
    let victim = scratch.0.join("victim");
    std::fs::write(&victim, "victim").unwrap();
    // A link in place of the file itself is replaced, not written through.
    std::os::unix::fs::symlink(&victim, &path).unwrap();
    publish(&path, "7\n/tmp/x/socket").unwrap();
    publish(&path, "8\n/tmp/y/socket").unwrap();
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "victim");
    let meta = std::fs::symlink_metadata(&path).unwrap();
    assert!(meta.file_type().is_file());
    assert_eq!(meta.mode() & 0o7777, 0o600);
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "8\n/tmp/y/socket");
    let names: Vec<_> = std::fs::read_dir(&scratch.0)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names.len(), 2, "nothing left aside: {names:?}");
}

#[test]
fn every_name_written_aside_is_new() {
    let scratch = Scratch::new("aside");
    let path = scratch.0.join("shmlink-a.ipc");
    let (first, file) = create_aside(aside_names(&path).unwrap()).unwrap();
    drop(file);
    let (second, file) = create_aside(aside_names(&path).unwrap()).unwrap();
    drop(file);
    assert_ne!(first, second);
    let prefix = aside_prefix(&path).unwrap();
    for made in [&first, &second] {
        let file_name = made.file_name().unwrap().to_str().unwrap();
        assert!(file_name.starts_with(&prefix), "{file_name}");
        let meta = std::fs::symlink_metadata(made).unwrap();
        assert_eq!(meta.mode() & 0o7777, 0o600);
    }
}

#[test]
fn a_link_under_the_name_written_aside_is_skipped_not_written_through() {
    let scratch = Scratch::new("aside-link");
    let path = scratch.0.join("shmlink-l.ipc");
    let victim = scratch.0.join("victim");
    std::fs::write(&victim, "victim").unwrap();
    std::fs::set_permissions(&victim, std::fs::Permissions::from_mode(0o600)).unwrap();
    let prefix = aside_prefix(&path).unwrap();
    // The names the publisher takes: the first one a link to the victim, as a neighbour who
    // guessed it would plant it.
    let planted = aside_name(&path, &prefix, 0, 0x5eed);
    std::os::unix::fs::symlink(&victim, &planted).unwrap();
    let fresh = aside_name(&path, &prefix, 1, 0x5eed);
    let mut names = [planted.clone(), fresh].into_iter();
    publish_under(&path, "9\n/tmp/z/socket", || names.next().unwrap()).unwrap();
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "victim");
    assert_eq!(
        std::fs::symlink_metadata(&victim).unwrap().mode() & 0o7777,
        0o600
    );
    assert!(std::fs::symlink_metadata(&planted)
        .unwrap()
        .file_type()
        .is_symlink());
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "9\n/tmp/z/socket");
    assert!(names.next().is_none(), "the publisher took the second name");
}

/// A socket listening at `path` (without blocking its accepts).
fn listening(path: &Path) -> std::os::unix::net::UnixListener {
    let socket = std::os::unix::net::UnixListener::bind(path).unwrap();
    socket.set_nonblocking(true).unwrap();
    socket
}

#[test]
fn a_server_is_refused_unless_its_socket_and_directory_are_ours_and_closed() {
    let scratch = Scratch::new("server");
    let check = |path: &Path| server_dir("n", path.to_str().unwrap());
    let good = scratch.dir("good", 0o700).join("socket");
    let _good = listening(&good);
    check(&good).unwrap();

    let open = scratch.dir("open", 0o777).join("socket");
    let open_socket = listening(&open);
    assert!(matches!(
        check(&open),
        Err(Error::NotPrivate { mode: 0o777, .. })
    ));
    let link = scratch.0.join("link");
    std::os::unix::fs::symlink(scratch.0.join("good"), &link).unwrap();
    assert!(matches!(check(&link.join("socket")),
        Err(Error::NotAChannel { reason, .. }) if reason.contains("not a directory")));
    let file = scratch.dir("file", 0o700).join("socket");
    std::fs::write(&file, "").unwrap();
    assert!(matches!(check(&file),
        Err(Error::NotAChannel { reason, .. }) if reason.contains("a regular file")));
    assert!(matches!(
        check(&scratch.0.join("good/none")),
        Err(Error::NotFound { .. })
    ));
    assert!(matches!(
        server_dir("n", "relative/socket"),
        Err(Error::NotAChannel { .. })
    ));
    let long = format!("/{}/socket", "d".repeat(MAX_SOCKET_PATH));
    assert!(matches!(server_dir("n", &long),
        Err(Error::NotAChannel { reason, .. }) if reason.contains("longer than")));
    if euid() == 0 {
        let theirs = scratch.dir("theirs", 0o700);
        let socket = theirs.join("socket");
        let _theirs = listening(&socket);
        std::os::unix::fs::chown(&theirs, Some(65534), Some(65534)).unwrap();
        assert!(matches!(
            check(&socket),
            Err(Error::NotPrivate { owner: 65534, .. })
        ));
        std::os::unix::fs::chown(&theirs, Some(0), Some(0)).unwrap();
        std::os::unix::fs::chown(&socket, Some(65534), Some(65534)).unwrap();
        assert!(matches!(
            check(&socket),
            Err(Error::NotPrivate { owner: 65534, .. })
        ));
    }
    // A connect to a refused server ends before it reaches the socket.
    let refused = connect_server::<u8>(
        "n",
        open.to_str().unwrap(),
        Some(Instant::now() + Duration::from_secs(10)),
    );
    assert!(matches!(refused, Err(Error::NotPrivate { .. })));
    assert_eq!(
        open_socket.accept().unwrap_err().kind(),
        io::ErrorKind::WouldBlock,
        "nobody connected"
    );
}

#[test]
fn a_server_directory_made_again_while_connecting_is_not_trusted() {
    let (server, name) = IpcOneShotServer::<u8>::new().unwrap();
    close_server_dir(&name).unwrap();
    let socket = Path::new(&name);
    let dir = socket.parent().unwrap().to_owned();
    let moved = dir.with_extension("moved");
    let connecting = Connecting::<u8>::start("n", &name).unwrap();
    // The directory goes and another one, with the same socket in it, takes its name.
    std::fs::rename(&dir, &moved).unwrap();
    std::fs::DirBuilder::new().mode(0o700).create(&dir).unwrap();
    std::fs::rename(moved.join("socket"), socket).unwrap();
    let waited = connecting.wait(Duration::from_secs(10));
    let _ = std::fs::remove_dir_all(&moved);
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        matches!(&waited, Err(Error::NotFound { channel: n }) if *n == "n"),
        "{waited:?}"
    );
}

#[test]
fn rendezvous_contents_parse_or_are_refused() {
    assert_eq!(
        parse(b"12\n/tmp/.tmpA/socket"),
        Some(Published::Channel {
            pid: 12,
            server: "/tmp/.tmpA/socket".into()
        })
    );
    assert_eq!(
        parse(b"listener\n13\n/tmp/.tmpB/socket"),
        Some(Published::Listener {
            pid: 13,
            server: "/tmp/.tmpB/socket".into(),
            serves: Serves::Clients,
        })
    );
    for (tag, overwrite) in [("topic", false), ("topic-overwrite", true)] {
        assert_eq!(
            parse(format!("{tag}\n14\n/tmp/.tmpC/socket").as_bytes()),
            Some(Published::Listener {
                pid: 14,
                server: "/tmp/.tmpC/socket".into(),
                serves: Serves::Topic { overwrite },
            })
        );
    }
    for bad in [
        &b""[..],
        b"12",
        b"x\n/s",
        b"12\n",
        b"12\n/a\n/b",
        b"\xff\n/s",
    ] {
        assert_eq!(parse(bad), None, "{bad:?}");
    }
}
