//! `shmlink-clean [--dry-run] [NAME...]`: lists the shmlink segments on this machine (owner pid,
//! state, whether the owner is alive, size) and removes the ones whose creator is gone.
//!
//! A segment is removed only when nobody holds its creator lock, so a live channel is never
//! touched. Entries named like a channel that are not one (a directory, a symbolic link, an
//! object without the shmlink magic...) are listed as skipped and never touched. With
//! `--dry-run` nothing is removed. With names, only those segments are considered.
//!
//! The `shmlink` command (package `shmlink-cli`: `list`, `stat`, `top`, `tap`, `clean`) does
//! this and more, on both backends.

use std::process::ExitCode;

use shmlink::segments::{self, EndpointInfo, Reclaim, SegmentInfo, Skipped};

fn endpoint(e: &EndpointInfo) -> String {
    if e.pid == 0 {
        e.state.to_owned()
    } else {
        let alive = if e.alive { "alive" } else { "dead" };
        format!("{} pid {} ({alive})", e.state, e.pid)
    }
}

fn row(seg: &SegmentInfo) -> String {
    let state = if seg.stale {
        "stale"
    } else if seg.ready {
        "live"
    } else {
        "initialising"
    };
    let readers = if seg.kind == "topic" {
        let alive = seg.subscribers.iter().filter(|s| s.alive).count();
        let pids: Vec<String> = seg.subscribers.iter().map(endpoint).collect();
        format!(
            "subscribers: {} ({alive} alive){}{}",
            seg.subscribers.len(),
            if pids.is_empty() { "" } else { ": " },
            pids.join(", ")
        )
    } else {
        format!("connector: {}", endpoint(&seg.connector))
    };
    format!(
        "{:<32} {:<13} {:>10}  {:<8} creator: {:<28} {readers}",
        seg.name,
        state,
        seg.size,
        seg.kind,
        endpoint(&seg.creator),
    )
}

fn run(dry_run: bool, names: &[String]) -> shmlink::Result<usize> {
    let (segs, skipped) = if names.is_empty() {
        let listing = segments::scan()?;
        (listing.channels, listing.skipped)
    } else {
        let mut found = Vec::new();
        let mut skipped = Vec::new();
        for name in names {
            match segments::inspect(name) {
                Ok(info) => found.push(info),
                Err(shmlink::OpenError::NotFound { .. }) => {
                    eprintln!("shmlink-clean: no segment {name:?}")
                }
                Err(shmlink::OpenError::NotAChannel { reason, .. }) => skipped.push(Skipped {
                    name: name.clone(),
                    reason,
                }),
                Err(e) => skipped.push(Skipped {
                    name: name.clone(),
                    reason: e.to_string(),
                }),
            }
        }
        (found, skipped)
    };
    println!("{:<32} {:<13} {:>10}  owner", "NAME", "STATE", "BYTES");
    let mut removed = 0;
    for seg in &segs {
        let mut line = row(seg);
        if seg.stale && !dry_run {
            match segments::reclaim(&seg.name) {
                Ok(Reclaim::Removed) => {
                    removed += 1;
                    line.push_str("  -> removed");
                }
                Ok(Reclaim::Vanished) => line.push_str("  -> already gone"),
                Ok(Reclaim::Alive) => line.push_str("  -> kept (owner came back)"),
                Ok(Reclaim::NotAChannel) => line.push_str("  -> kept (replaced by something else)"),
                // One segment that cannot be removed does not stop the others.
                Err(e) => line.push_str(&format!("  -> kept ({e})")),
            }
        }
        println!("{line}");
    }
    for skip in &skipped {
        println!("{:<32} skipped: {}", skip.name, skip.reason);
    }
    let stale = segs.iter().filter(|s| s.stale).count();
    if dry_run {
        println!(
            "{} segments, {stale} stale, {} skipped (dry run: nothing removed)",
            segs.len(),
            skipped.len()
        );
    } else {
        println!(
            "{} segments, {stale} stale, {removed} removed, {} skipped",
            segs.len(),
            skipped.len()
        );
    }
    Ok(removed)
}

fn main() -> ExitCode {
    let mut dry_run = false;
    let mut names = Vec::new();
    for arg in std::env::args().skip(1) {
        match arg.as_str() {
            "--dry-run" | "-n" => dry_run = true,
            "-h" | "--help" => {
                println!("usage: shmlink-clean [--dry-run] [NAME...]");
                println!("(the shmlink command, package shmlink-cli, lists, watches and cleans both backends)");
                return ExitCode::SUCCESS;
            }
            _ => names.push(arg),
        }
    }
    match run(dry_run, &names) {
        Ok(_) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("shmlink-clean: {e}");
            ExitCode::FAILURE
        }
    }
}
