//! A hostile peer over time: frames fed into a live channel one after another, as fast as the
//! receiver takes them, by a writer that keeps its own mapping of the segment and writes the
//! frame protocol by hand. It sends fragments that never end, rewrites a frame while the
//! receiver decodes it, and announces messages no memory can hold. Every outcome must be a
//! typed error or a correct message within the caller's deadline; a call that is still busy
//! when the writer gives up (after the watchdog) is a failure, and an abort is caught by running
//! the receiver in a child process.

use crate::support;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use memmap2::MmapMut;
use shmlink::testing::{frame_size, max_payload, HEADER_SIZE, RINGS_OFFSET};
use shmlink::{Channel, Config, RecvError, WaitStrategy};
use support::{serial, unique, NameGuard, Watchdog, WATCHDOG};

const CAP: usize = 1024;
/// Size of one `RingHeader`: four cache-padded cells.
const RING_HEADER: usize = 512;

const DATA: u8 = 1;
const PAD: u8 = 2;
const FRAG_FIRST: u8 = 3;
const FRAG_MORE: u8 = 4;
const FRAG_LAST: u8 = 5;
const FRAG_ABORT: u8 = 6;

fn encode(index: u64, kind: u8, len: u32) -> u64 {
    (((index >> 3) & ((1 << 29) - 1)) << 35) | (u64::from(kind) << 32) | u64::from(len)
}

fn config() -> Config {
    Config {
        capacity: CAP,
        wait: WaitStrategy::SpinYield,
    }
}

/// The producing end of ring 1 (connector -> creator), written by hand through a second mapping
/// of the segment, the way a hostile connector process would.
struct RawProducer {
    map: MmapMut,
    capacity: usize,
    tail: u64,
    cached_head: u64,
}

impl RawProducer {
    fn new(name: &str, capacity: usize) -> RawProducer {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(support::shm_path(name))
            .expect("open the segment");
        // SAFETY: a segment this test made; the words shared with the receiver are accessed
        // atomically, payload bytes only while the receiver cannot be reading them (before the
        // header word publishes them) or atomically too (`region_word`).
        let map = unsafe { MmapMut::map_mut(&file) }.expect("map the segment");
        assert_eq!(map.len(), HEADER_SIZE + 2 * capacity);
        RawProducer {
            map,
            capacity,
            tail: 0,
            cached_head: 0,
        }
    }

    fn word(&self, offset: usize) -> &AtomicU64 {
        assert!(offset % 8 == 0 && offset + 8 <= self.map.len());
        // SAFETY: in bounds and 8-aligned (the mapping is page-aligned); the library accesses
        // these words atomically too.
        unsafe { &*(self.map.as_ptr().add(offset) as *const AtomicU64) }
    }

    fn region_word(&self, index: u64) -> &AtomicU64 {
        let cap = self.capacity;
        self.word(HEADER_SIZE + cap + (index as usize & (cap - 1)))
    }

    /// The receiver's index.
    fn head(&self) -> u64 {
        // Acquire: pairs with the receiver's Release store of its index.
        self.word(RINGS_OFFSET + RING_HEADER + 128)
            .load(Ordering::Acquire)
    }

    /// Publishes a frame of `len` bytes if there is room for it now, writing `payload` (if
    /// any) at its start and leaving the rest of the payload as it is; returns its end index.
    fn try_push_len(&mut self, kind: u8, len: usize, payload: &[u8]) -> Option<u64> {
        let cap = self.capacity as u64;
        let fs = frame_size(len) as u64;
        let pos = self.tail % cap;
        let start = if pos + fs <= cap {
            self.tail
        } else {
            self.tail + (cap - pos)
        };
        if start + fs + 8 - self.cached_head > cap {
            self.cached_head = self.head();
            if start + fs + 8 - self.cached_head > cap {
                return None;
            }
        }
        if start != self.tail {
            self.region_word(0).store(0, Ordering::Relaxed);
            // Release: the zero above is visible with the PAD.
            self.region_word(self.tail)
                .store(encode(self.tail, PAD, 0), Ordering::Release);
        }
        let at = HEADER_SIZE + self.capacity + (start % cap) as usize + 8;
        self.map[at..at + payload.len()].copy_from_slice(payload);
        self.region_word(start + fs).store(0, Ordering::Relaxed);
        // Release: publishes the payload and the zero above.
        self.region_word(start)
            .store(encode(start, kind, len as u32), Ordering::Release);
        self.tail = start + fs;
        Some(self.tail)
    }

    fn try_push(&mut self, kind: u8, payload: &[u8]) -> Option<u64> {
        self.try_push_len(kind, payload.len(), payload)
    }

    /// Publishes one frame, waiting (spinning) for room until `stop` is set. False if stopped.
    fn push_len(&mut self, kind: u8, len: usize, payload: &[u8], stop: &AtomicBool) -> bool {
        loop {
            if self.try_push_len(kind, len, payload).is_some() {
                return true;
            }
            if stop.load(Ordering::Relaxed) {
                return false;
            }
            std::hint::spin_loop();
        }
    }

    fn push(&mut self, kind: u8, payload: &[u8], stop: &AtomicBool) -> bool {
        self.push_len(kind, payload.len(), payload, stop)
    }
}

/// A first fragment announcing `total` bytes, with `body` bytes of the message.
fn first_fragment(total: u64, body: usize) -> Vec<u8> {
    let mut payload = total.to_le_bytes().to_vec();
    payload.resize(8 + body, 0x5a);
    payload
}

/// Ring size of the endless-fragment tests: room for many fragments, so a writer that only
/// writes header words keeps it full while the receiver copies payloads.
const STREAM_CAP: usize = 64 * 1024;

/// Feeds a first fragment and then middle fragments of `more` bytes for ever, as fast as it
/// can (header words only: the payload bytes are whatever the ring holds), until `stop` is
/// set. Counts the fragments sent.
fn feed_forever(name: &str, more: usize, stop: &AtomicBool, sent: &AtomicU64) {
    let mut raw = RawProducer::new(name, STREAM_CAP);
    if !raw.push(FRAG_FIRST, &first_fragment(1 << 30, 8), stop) {
        return;
    }
    while raw.push_len(FRAG_MORE, more, &[], stop) {
        sent.fetch_add(1, Ordering::Relaxed);
    }
}

/// Runs `receive` against a writer that never stops feeding fragments of `more` bytes. The
/// writer gives up only after the watchdog; `receive` must have returned long before (the flag
/// says who finished first). Returns what `receive` returned.
fn against_endless_fragments<T: Send>(
    test: &str,
    more: usize,
    receive: impl FnOnce(&mut Channel, &RawProducer) -> T + Send,
) -> T {
    let _serial = serial();
    let name = unique(test);
    let _unlink = NameGuard(name.clone());
    let config = Config {
        capacity: STREAM_CAP,
        wait: WaitStrategy::Spin,
    };
    let mut ch = Channel::create(&name, &config).expect("create");
    // The receiver's view of the ring, to see how far it went.
    let observer = RawProducer::new(&name, STREAM_CAP);
    let stop = AtomicBool::new(false);
    let sent = AtomicU64::new(0);
    let gave_up = AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| feed_forever(&name, more, &stop, &sent));
        let watchdog = s.spawn(|| {
            let deadline = std::time::Instant::now() + WATCHDOG;
            while !stop.load(Ordering::Relaxed) {
                if std::time::Instant::now() >= deadline {
                    gave_up.store(true, Ordering::Relaxed);
                    stop.store(true, Ordering::Relaxed);
                }
                std::thread::sleep(Duration::from_millis(5));
            }
        });
        // Let the writer fill most of the ring first, so the receiver meets the stream in full
        // flow.
        let frames = (STREAM_CAP / frame_size(more)) as u64 * 3 / 4;
        while sent.load(Ordering::Relaxed) < frames && !stop.load(Ordering::Relaxed) {
            std::thread::yield_now();
        }
        let out = receive(&mut ch, &observer);
        let finished_first = !gave_up.load(Ordering::Relaxed);
        stop.store(true, Ordering::Relaxed);
        watchdog.join().expect("watchdog");
        assert!(
            finished_first,
            "{test}: the receive was still busy when the writer gave up after {WATCHDOG:?}"
        );
        out
    })
}

#[test]
fn endless_empty_fragments_are_refused_as_corrupt() {
    let got = against_endless_fragments("empty-frags", 0, |ch, _| {
        (0..1000)
            .map(|_| ch.try_recv().map(|m| m.len()))
            .find(|r| !matches!(r, Err(RecvError::Empty { .. })))
    });
    // The error names the channel.
    assert!(
        matches!(&got, Some(Err(RecvError::Corrupt { channel, .. })) if channel.contains("empty-frags")),
        "{got:?}"
    );
}

#[test]
fn try_recv_does_bounded_work_while_fragments_keep_coming() {
    let calls = against_endless_fragments("try-recv-frags", 1000, |ch, ring| {
        (0..20)
            .map(|_| {
                let before = ring.head();
                let got = ch.try_recv().map(|m| m.len());
                (got, ring.head() - before)
            })
            .collect::<Vec<_>>()
    });
    // Each call hands control back after one ring's worth (the fragment that reaches it
    // included, a lap's padding, and up to 2 KiB of space released late from the call
    // before), with the message still under way and kept: the fragments keep being accepted,
    // not refused as out of sequence.
    for (got, consumed) in &calls {
        assert!(matches!(got, Err(RecvError::Empty { .. })), "{calls:?}");
        assert!(
            *consumed <= (STREAM_CAP + 2 * frame_size(1000) + 2048) as u64,
            "one try_recv took {consumed} bytes of fragments"
        );
    }
    assert!(calls.iter().map(|(_, c)| c).sum::<u64>() > 0);
}

#[test]
fn recv_timeout_returns_while_fragments_keep_coming() {
    let (expired, results) = against_endless_fragments("timeout-frags", 1000, |ch, ring| {
        // A deadline that has passed already: at most the fragment in hand is taken.
        let expired: Vec<_> = (0..20)
            .map(|_| {
                let before = ring.head();
                let got = ch.recv_timeout(Duration::ZERO).map(|m| m.len());
                (got, ring.head() - before)
            })
            .collect();
        let results: Vec<_> = (0..5)
            .map(|_| ch.recv_timeout(Duration::from_millis(10)).map(|m| m.len()))
            .collect();
        (expired, results)
    });
    // The fragment in hand is one frame; the padding that ends a lap may come before it, and
    // the index the receiver publishes may include the space it held back before (a batch of
    // releases: an eighth of the ring, at most 2 KiB).
    for (got, consumed) in &expired {
        assert!(matches!(got, Err(RecvError::Timeout { .. })), "{expired:?}");
        assert!(
            *consumed <= (2 * frame_size(1000) + 2048) as u64,
            "recv_timeout(0) took {consumed} bytes of fragments, more than the one in hand"
        );
    }
    assert!(
        results
            .iter()
            .all(|r| matches!(r, Err(RecvError::Timeout { .. }))),
        "{results:?}"
    );
}

#[test]
fn a_message_larger_than_the_ring_arrives_over_many_try_recvs() {
    let _serial = serial();
    let name = unique("many-try-recvs");
    let _unlink = NameGuard(name.clone());
    let mut a = Channel::create(&name, &config()).expect("create");
    let message: Vec<u8> = (0..20 * CAP).map(|i| (i * 7 + i / 251) as u8).collect();
    std::thread::scope(|s| {
        let sender = s.spawn(|| {
            let mut b = Channel::connect(&name, WaitStrategy::SpinYield).expect("connect");
            b.send_timeout(b"start", WATCHDOG).expect("send start");
            b.send_timeout(&message, WATCHDOG).expect("send");
            // Stay connected until the receiver has it all.
            let _ = b.recv_timeout(WATCHDOG);
        });
        // From the message before it on, so that only the calls that meet the large message
        // count.
        assert_eq!(&*a.recv_timeout(WATCHDOG).expect("start"), b"start");
        let deadline = std::time::Instant::now() + WATCHDOG;
        let mut calls = 0u64;
        loop {
            calls += 1;
            match a.try_recv() {
                Ok(got) => {
                    assert!(*got == message[..], "reassembled message differs");
                    break;
                }
                Err(RecvError::Empty { .. }) => {
                    assert!(std::time::Instant::now() < deadline, "no message");
                    std::thread::yield_now();
                }
                Err(e) => panic!("{e}"),
            }
        }
        // Each call takes at most a ring's worth: a message of twenty rings takes twenty calls
        // at the least.
        assert!(
            calls >= 20,
            "a message of 20 rings arrived in {calls} try_recv calls"
        );
        a.send(b"done").expect("done");
        sender.join().expect("sender");
    });
}

/// A frame to write by hand: its kind and payload.
type Frame = (u8, Vec<u8>);

/// Fragments out of sequence, longer or shorter than announced, empty, or making up a message
/// that fits one frame: each is `Corrupt` (naming the channel) at the frame that breaks the
/// sequence, reported once, and the next whole message comes through. Every frame is written by
/// hand and received before the next is written: no timing is involved.
#[test]
fn fragments_out_of_sequence_or_longer_than_announced_are_corrupt() {
    let _serial = serial();
    let name = unique("bad-frags");
    let _unlink = NameGuard(name.clone());
    let mut ch = Channel::create(&name, &config()).expect("create");
    let mut raw = RawProducer::new(&name, CAP);
    let max = max_payload(CAP);
    // A first fragment of a message of 1000 bytes, carrying 400 of them.
    let first = || (FRAG_FIRST, first_fragment(1000, 400));
    let more = |len: usize| (FRAG_MORE, vec![7u8; len]);
    let last = |len: usize| (FRAG_LAST, vec![7u8; len]);
    let cases: Vec<(&str, Vec<Frame>)> = vec![
        ("a middle fragment before any first", vec![more(100)]),
        ("a last fragment before any first", vec![last(100)]),
        (
            "a withdrawal with no message under way",
            vec![(FRAG_ABORT, vec![])],
        ),
        (
            "a first fragment while one is under way",
            vec![first(), first()],
        ),
        (
            "a whole message while one is under way",
            vec![first(), (DATA, b"x".to_vec())],
        ),
        (
            "fragments longer than announced",
            vec![first(), more(400), last(300)],
        ),
        (
            "a middle fragment past the announced end",
            vec![first(), more(400), more(300)],
        ),
        (
            "a message that ends short of its length",
            vec![first(), last(100)],
        ),
        ("an empty middle fragment", vec![first(), more(0)]),
        ("an empty last fragment", vec![first(), more(400), last(0)]),
        (
            "a first fragment without its length",
            vec![(FRAG_FIRST, vec![1; 7])],
        ),
        (
            "a first fragment with no body",
            vec![(FRAG_FIRST, first_fragment(1000, 0))],
        ),
        (
            "a first fragment of a message that fits one frame",
            vec![(FRAG_FIRST, first_fragment(max as u64, 100))],
        ),
    ];
    for (what, frames) in &cases {
        let (&(kind, ref payload), rest) = frames.split_last().expect("frames");
        for (k, p) in rest {
            raw.try_push(*k, p).expect("room");
            let got = ch.try_recv().map(|m| m.len());
            assert!(
                matches!(got, Err(RecvError::Empty { .. })),
                "{what}: before the fault: {got:?}"
            );
        }
        raw.try_push(kind, payload).expect("room");
        let got = ch.try_recv().map(|m| m.len());
        assert!(
            matches!(&got, Err(RecvError::Corrupt { channel, .. }) if *channel == name),
            "{what}: {got:?}"
        );
        // The rest of the refused message, if any comes, is skipped without a second report;
        // the next whole message comes through.
        raw.try_push(FRAG_LAST, &[7; 10]).expect("room");
        raw.try_push(DATA, b"next").expect("room");
        let got = ch.try_recv().map(|m| m.to_vec());
        assert!(
            matches!(&got, Ok(m) if m == b"next"),
            "{what}: after the fault: {got:?}"
        );
        assert!(matches!(ch.try_recv(), Err(RecvError::Empty { .. })));
    }
    // A well-formed message of the same kind goes through, so the faults above are the faults.
    let body = vec![7u8; 300];
    let mut got = Err(RecvError::Empty {
        channel: "unread".into(),
    });
    for (kind, payload) in [
        (FRAG_FIRST, first_fragment(1000, 400)),
        (FRAG_MORE, body.clone()),
        (FRAG_LAST, body),
    ] {
        assert!(matches!(got, Err(RecvError::Empty { .. })), "{got:?}");
        raw.try_push(kind, &payload).expect("room");
        got = ch.try_recv().map(|m| m.len());
    }
    assert!(matches!(got, Ok(1000)), "{got:?}");
}

/// A JSON string of `len` letters, in quotes.
fn json_letters(len: usize) -> Vec<u8> {
    let mut text = vec![b'a'; len + 2];
    text[0] = b'"';
    text[len + 1] = b'"';
    text
}

/// What the rewriting writer stores into word `word` of the letters on its pass `pass`: `a`s
/// and `b`s on alternate passes, except that every fourth pass puts bytes that are never UTF-8
/// into one word (a different one each time), where they stay until the next pass.
fn rewrite_fill(pass: u32, word: u32, words: u32) -> u64 {
    if pass % 4 == 0 && word == (pass / 4) % words {
        u64::MAX
    } else if pass % 2 == 1 {
        0x6262_6262_6262_6262
    } else {
        0x6161_6161_6161_6161
    }
}

#[test]
fn json_strings_stay_utf8_while_the_peer_rewrites_the_frame() {
    let _serial = serial();
    let _dog = Watchdog::arm(6 * WATCHDOG, "json_strings_stay_utf8");
    let name = unique("json-flip");
    let _unlink = NameGuard(name.clone());
    let mut ch = Channel::create(&name, &config()).expect("create");
    const MESSAGES: usize = 20_000;
    let letters = max_payload(CAP) - 2 - 16;
    let stop = AtomicBool::new(false);
    let (mut invalid, mut decoded, mut mixed, mut refused) = (0usize, 0usize, 0usize, 0usize);
    std::thread::scope(|s| {
        s.spawn(|| {
            let mut raw = RawProducer::new(&name, CAP);
            let text = json_letters(letters);
            let size = frame_size(text.len()) as u64;
            for _ in 0..MESSAGES {
                if !raw.push(DATA, &text, &stop) {
                    return;
                }
                let start = raw.tail - size;
                // While the receiver holds the frame, rewrite its letters (never the quotes)
                // over and over (see `rewrite_fill`): a copy the receiver makes holds a word
                // that is not UTF-8 now and then, and letters of two passes often.
                // The frame's words that hold letters only: payload bytes 8 .. 8 * k, before the
                // closing quote at payload byte `letters + 1`.
                let words: Vec<u64> = (16..=letters as u64 + 1).step_by(8).collect();
                let mut pass = 0u32;
                while raw.head() < raw.tail && !stop.load(Ordering::Relaxed) {
                    pass = pass.wrapping_add(1);
                    for (k, &w) in words.iter().enumerate() {
                        raw.region_word(start + w).store(
                            rewrite_fill(pass, k as u32, words.len() as u32),
                            Ordering::Relaxed,
                        );
                    }
                }
            }
        });
        for i in 0..MESSAGES {
            // Half through `recv_json`, half borrowing the string from the guard.
            let text: Result<String, RecvError> = if i % 2 == 0 {
                ch.recv_json::<String>()
            } else {
                match ch.recv_timeout(WATCHDOG) {
                    Ok(frame) => frame.json::<&str>().map(str::to_owned),
                    Err(e) => Err(e),
                }
            };
            match text {
                Ok(text) => {
                    decoded += 1;
                    if std::str::from_utf8(text.as_bytes()).is_err()
                        || !text.bytes().all(|b| b == b'a' || b == b'b')
                    {
                        invalid += 1;
                    }
                    if text.contains('a') && text.contains('b') {
                        mixed += 1;
                    }
                }
                Err(RecvError::Json { .. }) => refused += 1,
                Err(e) => {
                    stop.store(true, Ordering::Relaxed);
                    panic!("message {i}: {e}");
                }
            }
        }
        stop.store(true, Ordering::Relaxed);
    });
    eprintln!(
        "json-flip: {decoded} decoded ({mixed} copied while being rewritten), {refused} refused"
    );
    assert_eq!(
        invalid, 0,
        "decoded strings that are not letters the peer wrote"
    );
    assert!(
        decoded >= MESSAGES / 10,
        "only {decoded} of {MESSAGES} messages decoded"
    );
    // The rewrites did reach the receiver's reads: some copies caught one part-way.
    assert!(
        mixed + refused > 0,
        "no message was read while it was being rewritten"
    );
}

/// Lowers this process's address-space limit to what it uses now plus `extra` bytes.
fn limit_address_space(extra: u64) {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    let kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmSize:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmSize");
    let limit = libc::rlimit {
        rlim_cur: kib * 1024 + extra,
        rlim_max: libc::RLIM_INFINITY,
    };
    // SAFETY: setrlimit only reads the struct we pass.
    let rc = unsafe { libc::setrlimit(libc::RLIMIT_AS, &limit) };
    assert_eq!(rc, 0, "setrlimit: {}", std::io::Error::last_os_error());
}

/// The receiver's side, in a child process (an abort must not take the test binary down): a
/// first fragment announcing more than the process can ever reserve, then the message ends
/// early. Prints `survived` at the end.
pub(crate) fn huge_announcement_receiver(base: &str) {
    limit_address_space(512 << 20);
    // As announced in the wild (1 GiB, within the default limit), and as large as a limit of
    // `usize::MAX` lets through.
    for (suffix, total, max) in [
        ("gib", 1u64 << 30, None),
        ("huge", 1u64 << 62, Some(usize::MAX)),
    ] {
        let name = format!("{base}-{suffix}");
        let _unlink = NameGuard(name.clone());
        let mut ch = Channel::create(&name, &config()).expect("create");
        if let Some(max) = max {
            ch.set_max_message(max);
        }
        let mut raw = RawProducer::new(&name, CAP);
        raw.try_push(FRAG_FIRST, &first_fragment(total, 8))
            .expect("room for the first fragment");
        let first = ch.try_recv().map(|m| m.len());
        assert!(
            matches!(first, Err(RecvError::Empty { .. })),
            "{suffix}: {first:?}"
        );
        raw.try_push(FRAG_LAST, &[1; 8]).expect("room for the last");
        let last = ch.try_recv().map(|m| m.len());
        assert!(
            matches!(last, Err(RecvError::Corrupt { .. })),
            "{suffix}: {last:?}"
        );
    }
    // Real fragments of a message announced at 1 GiB, more than the limit lets the buffer grow
    // to: a typed error when the memory runs out, not an abort.
    let name = format!("{base}-grow");
    let _unlink = NameGuard(name.clone());
    let capacity = 1 << 20;
    let config = Config {
        capacity,
        wait: WaitStrategy::Spin,
    };
    let mut ch = Channel::create(&name, &config).expect("create");
    let mut raw = RawProducer::new(&name, capacity);
    let chunk = max_payload(capacity);
    raw.try_push(FRAG_FIRST, &first_fragment(1 << 30, chunk - 8))
        .expect("room for the first fragment");
    let mut fragments = 0u64;
    let out_of_memory = loop {
        while raw.try_push_len(FRAG_MORE, chunk, &[]).is_some() {
            fragments += 1;
        }
        match ch.try_recv().map(|m| m.len()) {
            Err(RecvError::Empty { .. }) => assert!(fragments < 4096, "1 GiB fitted after all"),
            Err(RecvError::Io(e)) => break e,
            other => panic!("after {fragments} fragments: {other:?}"),
        }
    };
    assert_eq!(
        out_of_memory.kind(),
        std::io::ErrorKind::OutOfMemory,
        "{out_of_memory}"
    );
    println!("survived ({fragments} fragments of {chunk} bytes before: {out_of_memory})");
}

#[test]
fn a_huge_announced_message_does_not_abort() {
    let _serial = serial();
    let base = unique("huge");
    let _unlink = [
        NameGuard(format!("{base}-gib")),
        NameGuard(format!("{base}-huge")),
        NameGuard(format!("{base}-grow")),
    ];
    let mut child = crate::roles::spawn("huge-announcement-receiver", &base, &[]);
    let status = child.reap();
    let out = child.read_all();
    assert!(status.success(), "receiver failed: {status:?}\n{out}");
    assert!(out.contains("survived"), "receiver did not finish:\n{out}");
}
