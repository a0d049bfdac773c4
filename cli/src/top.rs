//! `shmlink top`: every shared-memory channel, topic and listener on this machine with its
//! rates, refreshed in the terminal until `q`.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use ratatui::crossterm::event::{self, Event, KeyCode, KeyEventKind, KeyModifiers};
use ratatui::layout::Constraint;
use ratatui::style::{Modifier, Style};
use ratatui::text::Line;
use ratatui::widgets::{Block, Row, Table};
use shmlink::segments::{self, Stats};

/// What one channel did between two looks.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Rates {
    pub(crate) name: String,
    pub(crate) kind: &'static str,
    pub(crate) msgs: f64,
    pub(crate) mb: f64,
    pub(crate) full: f64,
    pub(crate) sleeps: f64,
    /// The fullest ring's fill, percent.
    pub(crate) fill: f64,
    /// A topic's subscribers, a listener's connections.
    pub(crate) peers: usize,
}

/// Sums over every sender of a channel or topic (messages sent, bytes, full rings), and
/// every side's sleeps.
fn totals(s: &Stats) -> [u64; 4] {
    let mut t = [0; 4];
    for r in &s.rings {
        t[0] += r.sender.messages;
        t[1] += r.sender.bytes;
        t[2] += r.sender.full;
        t[3] += r.sender.sleeps + r.receiver.sleeps;
    }
    for sub in &s.subscribers {
        t[3] += sub.counts.sleeps;
    }
    t
}

/// The rates of `now` against `before`, `secs` earlier (none before the first look: zero).
pub(crate) fn rates(now: &Stats, before: Option<&Stats>, secs: f64) -> Rates {
    let (n, b) = (totals(now), before.map(totals));
    let per = |i: usize| match b {
        Some(b) if secs > 0.0 => n[i].saturating_sub(b[i]) as f64 / secs,
        _ => 0.0,
    };
    Rates {
        name: now.name.clone(),
        kind: now.kind,
        msgs: per(0),
        mb: per(1) / 1e6,
        full: per(2),
        sleeps: per(3),
        fill: now
            .rings
            .iter()
            .map(|r| 100.0 * r.fill as f64 / r.capacity.max(1) as f64)
            .fold(0.0, f64::max),
        peers: now.subscribers.len() + now.clients.len(),
    }
}

/// The rows of one refresh, busiest first: each live channel's rates since the last look.
struct Looks {
    last: HashMap<String, (Stats, Instant)>,
}

impl Looks {
    fn look(&mut self) -> Vec<Rates> {
        let now = Instant::now();
        let mut seen = HashMap::new();
        let mut rows: Vec<Rates> = segments::list()
            .unwrap_or_default()
            .into_iter()
            .filter(|s| s.ready && !s.stale)
            // Gone or not ours by now: left out of this refresh.
            .filter_map(|s| segments::stats(&s.name).ok())
            .map(|stats| {
                let before = self.last.get(&stats.name);
                let secs = before.map_or(0.0, |(_, t)| (now - *t).as_secs_f64());
                let r = rates(&stats, before.map(|(b, _)| b), secs);
                seen.insert(stats.name.clone(), (stats, now));
                r
            })
            .collect();
        self.last = seen;
        rows.sort_by(|a, b| {
            b.msgs
                .total_cmp(&a.msgs)
                .then(b.mb.total_cmp(&a.mb))
                .then(a.name.cmp(&b.name))
        });
        rows
    }
}

fn table(rows: &[Rates], every: Duration) -> Table<'static> {
    let header = Row::new([
        "NAME", "KIND", "MSGS/S", "MB/S", "FULL/S", "SLEEPS/S", "FILL", "PEERS",
    ])
    .style(Style::default().add_modifier(Modifier::BOLD));
    let body = rows.iter().map(|r| {
        Row::new([
            r.name.clone(),
            r.kind.to_owned(),
            format!("{:.0}", r.msgs),
            format!("{:.2}", r.mb),
            format!("{:.0}", r.full),
            format!("{:.0}", r.sleeps),
            format!("{:.1}%", r.fill),
            r.peers.to_string(),
        ])
    });
    let widths = [
        Constraint::Min(24),
        Constraint::Length(8),
        Constraint::Length(12),
        Constraint::Length(10),
        Constraint::Length(8),
        Constraint::Length(9),
        Constraint::Length(7),
        Constraint::Length(6),
    ];
    Table::new(body, widths)
        .header(header)
        .block(Block::bordered().title(Line::from(format!(
            " shmlink top: {} channels, every {:.1} s, q to quit ",
            rows.len(),
            every.as_secs_f64()
        ))))
}

/// One refresh as text, `width` columns wide, a refresh interval after a first look: for
/// scripts and captures (`--once`), no terminal needed.
pub(crate) fn once(every: f64, width: u16) -> Result<(), Box<dyn std::error::Error>> {
    let every = interval(every)?;
    let mut looks = Looks {
        last: HashMap::new(),
    };
    looks.look();
    std::thread::sleep(every);
    let rows = looks.look();
    let height = u16::try_from(rows.len() + 3).unwrap_or(u16::MAX);
    let mut terminal = ratatui::Terminal::new(ratatui::backend::TestBackend::new(width, height))?;
    terminal.draw(|f| f.render_widget(table(&rows, every), f.area()))?;
    let buffer = terminal.backend().buffer();
    for line in buffer.content().chunks(usize::from(width)) {
        let text: String = line.iter().map(|c| c.symbol()).collect();
        println!("{}", text.trim_end());
    }
    Ok(())
}

fn interval(every: f64) -> Result<Duration, Box<dyn std::error::Error>> {
    Ok(Duration::try_from_secs_f64(every)
        .ok()
        .filter(|d| !d.is_zero())
        .ok_or("--interval takes a positive number of seconds")?)
}

/// Runs until `q`, Esc or Ctrl-C.
pub(crate) fn top(every: f64) -> Result<(), Box<dyn std::error::Error>> {
    let every = interval(every)?;
    let mut looks = Looks {
        last: HashMap::new(),
    };
    let mut terminal = ratatui::try_init()?;
    let result = (|| -> Result<(), Box<dyn std::error::Error>> {
        loop {
            let rows = looks.look();
            terminal.draw(|f| f.render_widget(table(&rows, every), f.area()))?;
            let next = Instant::now() + every;
            while let Some(left) = next.checked_duration_since(Instant::now()) {
                if !event::poll(left)? {
                    break;
                }
                match event::read()? {
                    Event::Key(k) if k.kind == KeyEventKind::Press => {
                        let ctrl_c = k.code == KeyCode::Char('c')
                            && k.modifiers.contains(KeyModifiers::CONTROL);
                        if matches!(k.code, KeyCode::Char('q') | KeyCode::Esc) || ctrl_c {
                            return Ok(());
                        }
                    }
                    Event::Resize(..) => {
                        terminal.draw(|f| f.render_widget(table(&rows, every), f.area()))?;
                    }
                    _ => {}
                }
            }
        }
    })();
    ratatui::try_restore()?;
    result
}
