//! The timed loop every row goes through: warmup, then one measured round with a latency
//! histogram.

use std::time::{Duration, Instant};

use crate::Error;
use anyhow::{anyhow, Context};
use hdrhistogram::Histogram;

use super::document::RoundTrips;

/// How long a row's rounds last.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Timing {
    /// Unmeasured round trips before each round.
    pub(crate) warmup: Duration,
    /// One measured round.
    pub(crate) duration: Duration,
    /// A pause before each round trip.
    pub(crate) pace: Duration,
}

pub(crate) fn new_histogram() -> anyhow::Result<Histogram<u64>> {
    Histogram::new_with_bounds(1, 60_000_000_000, 3).map_err(|e| anyhow!("histogram: {e}"))
}

/// Runs `round_trip` unmeasured for the warmup, then for one measured round; returns the round
/// and its latency histogram. Every row, limits included, goes through this same loop.
pub(crate) fn measure(
    timing: &Timing,
    mut round_trip: impl FnMut() -> Result<(), Error>,
    what: &str,
) -> anyhow::Result<(RoundTrips, Histogram<u64>)> {
    let mut histogram = new_histogram()?;
    timed(timing.warmup, timing.pace, None, &mut round_trip)
        .with_context(|| format!("{what}: warmup"))?;
    let (round_trips, seconds) = timed(
        timing.duration,
        timing.pace,
        Some(&mut histogram),
        &mut round_trip,
    )
    .context(what.to_owned())?;
    let rt_per_s = if seconds > 0.0 {
        round_trips as f64 / seconds
    } else {
        0.0
    };
    Ok((
        RoundTrips {
            round_trips,
            seconds,
            rt_per_s,
            slices: Vec::new(),
        },
        histogram,
    ))
}

/// Repeats `round_trip` for `duration` (at least once), `pace` apart; returns (round trips,
/// seconds). The histogram records each round trip alone, without the pause before it.
#[inline]
pub(crate) fn timed(
    duration: Duration,
    pace: Duration,
    mut histogram: Option<&mut Histogram<u64>>,
    round_trip: &mut impl FnMut() -> Result<(), Error>,
) -> Result<(u64, f64), Error> {
    let start = Instant::now();
    let deadline = start + duration;
    let mut count = 0u64;
    let mut before = start;
    loop {
        if !pace.is_zero() {
            std::thread::sleep(pace);
            before = Instant::now();
        }
        round_trip()?;
        count += 1;
        let now = Instant::now();
        if let Some(h) = histogram.as_deref_mut() {
            h.saturating_record(u64::try_from((now - before).as_nanos()).unwrap_or(u64::MAX));
        }
        before = now;
        if now >= deadline {
            return Ok((count, (now - start).as_secs_f64()));
        }
    }
}
