//! `shmlink top` in a pseudo-terminal, read back as a terminal shows it: a busy channel's rate
//! rises above zero, and `q` ends it.

use std::io::{Read, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use portable_pty::{native_pty_system, CommandBuilder, PtySize};
use shmlink::{Channel, Config, WaitStrategy};
use shmlink_test_support::{unique, NameGuard};

const ROWS: u16 = 40;
const COLS: u16 = 160;

/// The MSGS/S figure on the screen's row for `name`, if the row is there.
fn rate_of(screen: &str, name: &str) -> Option<f64> {
    let line = screen.lines().find(|l| l.contains(name))?;
    let mut cells = line
        .split(|c: char| c == '│' || c.is_whitespace())
        .filter(|c| !c.is_empty());
    cells.find(|c| *c == name)?;
    let _kind = cells.next()?;
    cells.next()?.parse().ok()
}

#[test]
fn top_shows_a_busy_channel_rising_and_quits_on_q() {
    let name = unique("top");
    let _guard = NameGuard(name.clone());
    let mut tx = Channel::create(&name, &Config::default()).unwrap();
    let mut rx = Channel::connect(&name, WaitStrategy::Block).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let traffic = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let drain = std::thread::spawn(move || while rx.recv().is_ok() {});
            while !stop.load(Ordering::Relaxed) {
                tx.send(&[0u8; 64]).unwrap();
                std::thread::sleep(Duration::from_micros(50));
            }
            drop(tx);
            drain.join().unwrap();
        })
    };

    let pty = native_pty_system()
        .openpty(PtySize {
            rows: ROWS,
            cols: COLS,
            pixel_width: 0,
            pixel_height: 0,
        })
        .expect("a pseudo-terminal");
    let mut cmd = CommandBuilder::new(env!("CARGO_BIN_EXE_shmlink"));
    cmd.args(["top", "--interval", "0.3"]);
    cmd.env("TERM", "xterm-256color");
    let mut child = pty.slave.spawn_command(cmd).expect("spawn shmlink top");
    drop(pty.slave);
    let parser = Arc::new(Mutex::new(vt100::Parser::new(ROWS, COLS, 0)));
    let reading = {
        let parser = parser.clone();
        let mut reader = pty.master.try_clone_reader().unwrap();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = reader.read(&mut buf) {
                if n == 0 {
                    break;
                }
                parser.lock().unwrap().process(&buf[..n]);
            }
        })
    };
    let screen = || parser.lock().unwrap().screen().contents();

    // The busy channel appears, and a refresh later its rate is above zero.
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut rates = Vec::new();
    while Instant::now() < deadline && !rates.iter().any(|&r| r > 0.0) {
        if let Some(r) = rate_of(&screen(), &name) {
            rates.push(r);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let shown = screen();
    assert!(
        rates.iter().any(|&r| r > 0.0),
        "no rate above zero for {name} ({rates:?}):\n{shown}"
    );
    assert!(shown.contains("q to quit"), "{shown}");

    // `q` ends it, promptly and successfully.
    let mut writer = pty.master.take_writer().unwrap();
    writer.write_all(b"q").unwrap();
    writer.flush().unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            child.kill().unwrap();
            panic!("shmlink top did not quit on q:\n{}", screen());
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(status.success(), "{status:?}");
    drop((writer, pty.master));
    reading.join().unwrap();
    stop.store(true, Ordering::Relaxed);
    traffic.join().unwrap();
}
