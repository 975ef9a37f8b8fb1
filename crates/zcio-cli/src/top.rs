//! `zcio top`: every live object with its message and byte rates, computed
//! from successive samples of the statistics pages, refreshed in a full
//! terminal screen (ratatui over crossterm: a plain terminal, so it works
//! over SSH). `q`, Esc or Ctrl-C quit; the terminal is restored on every
//! exit, an error or a panic included. `--once` prints one table instead.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::{Args, ValueEnum};
use ratatui::crossterm::event::{self, Event, KeyCode, KeyEventKind, KeyModifiers};
use ratatui::layout::{Constraint, Layout};
use ratatui::style::{Modifier, Style};
use ratatui::text::Line;
use ratatui::widgets::{Cell, Paragraph, Row, Table};
use serde_json::json;
use zcio_sys::registry::Entry;

use crate::objects::{self, byte_rate, msg_rate, parse_positive_duration, pid_text};
use crate::ring::columns;

#[derive(Args, Debug)]
pub struct TopArgs {
    /// Time between samples (rates are over this interval): 1s, 500ms.
    #[arg(long, short = 'i', default_value = "1s", value_parser = parse_positive_duration)]
    pub interval: Duration,
    /// Sort by this column first (`s` cycles it in the live view).
    #[arg(long, value_enum, default_value_t = SortKey::Bytes)]
    pub sort: SortKey,
    /// Print one table after one interval and exit (for scripts; no
    /// terminal needed).
    #[arg(long)]
    pub once: bool,
    /// With --once: JSON on stdout.
    #[arg(long, requires = "once")]
    pub json: bool,
}

/// What the table is sorted by.
#[derive(Clone, Copy, Debug, ValueEnum, PartialEq, Eq)]
pub enum SortKey {
    /// Bytes per second, highest first.
    Bytes,
    /// Messages per second, highest first.
    Messages,
    /// Kind, then name.
    Kind,
    /// Name.
    Name,
    /// Owner pid.
    Pid,
}

impl SortKey {
    fn next(self) -> Self {
        match self {
            SortKey::Bytes => SortKey::Messages,
            SortKey::Messages => SortKey::Kind,
            SortKey::Kind => SortKey::Name,
            SortKey::Name => SortKey::Pid,
            SortKey::Pid => SortKey::Bytes,
        }
    }
    fn as_str(self) -> &'static str {
        match self {
            SortKey::Bytes => "bytes/s",
            SortKey::Messages => "msg/s",
            SortKey::Kind => "kind",
            SortKey::Name => "name",
            SortKey::Pid => "pid",
        }
    }
}

/// One object's line.
struct Line1 {
    kind: &'static str,
    name: String,
    pid: String,
    pid_n: u32,
    file: String,
    /// (messages/s, bytes/s) and totals; None for kinds without traffic.
    rates: Option<(f64, f64)>,
    totals: Option<(u64, u64)>,
    gauges: String,
}

/// Successive samples: each object's traffic totals when last seen.
#[derive(Default)]
struct Sampler {
    last: HashMap<String, ((u64, u64), Instant)>,
    invalid: usize,
    unreadable: usize,
}

impl Sampler {
    fn sample(&mut self) -> Result<Vec<Line1>> {
        let (_, l) = objects::list(false)?;
        let t = Instant::now();
        self.invalid = l.invalid.len();
        self.unreadable = l.unreadable;
        let mut seen = HashMap::new();
        let rows = l
            .entries
            .iter()
            .filter(|e| e.state != zcio_sys::registry::State::Dead)
            .map(|e| {
                let totals = objects::traffic(e);
                let rates = totals.map(|now| match self.last.get(&e.file) {
                    Some(&(before, t0)) => objects::rates(before, now, t - t0),
                    None => (0.0, 0.0),
                });
                if let Some(now) = totals {
                    seen.insert(e.file.clone(), (now, t));
                }
                line(e, rates, totals)
            })
            .collect();
        self.last = seen;
        Ok(rows)
    }
}

fn line(e: &Entry, rates: Option<(f64, f64)>, totals: Option<(u64, u64)>) -> Line1 {
    Line1 {
        kind: e.kind.as_str(),
        name: e.name.clone(),
        pid: pid_text(e),
        pid_n: e.pid,
        file: e.file.clone(),
        rates,
        totals,
        gauges: objects::gauges(e),
    }
}

fn sort(rows: &mut [Line1], key: SortKey) {
    let r = |l: &Line1| l.rates.unwrap_or((-1.0, -1.0));
    rows.sort_by(|a, b| {
        let by = match key {
            SortKey::Bytes => r(b).1.total_cmp(&r(a).1),
            SortKey::Messages => r(b).0.total_cmp(&r(a).0),
            SortKey::Kind => a.kind.cmp(b.kind),
            SortKey::Name => a.name.cmp(&b.name),
            SortKey::Pid => a.pid_n.cmp(&b.pid_n),
        };
        by.then_with(|| (a.kind, &a.name, &a.file).cmp(&(b.kind, &b.name, &b.file)))
    });
}

const HEADER: [&str; 8] = [
    "kind", "name", "pid", "msg/s", "bytes/s", "messages", "bytes", "gauges",
];

/// Which columns hold numbers (right-aligned).
const RIGHT: [bool; 8] = [false, false, true, true, true, true, true, false];

fn cells(l: &Line1) -> [String; 8] {
    let (mr, br) = match l.rates {
        Some((m, b)) => (msg_rate(m), byte_rate(b)),
        None => ("-".into(), "-".into()),
    };
    let (tm, tb) = match l.totals {
        Some((m, b)) => (m.to_string(), zcio_fmt::bytes_u64(b)),
        None => ("-".into(), "-".into()),
    };
    [
        l.kind.to_owned(),
        l.name.clone(),
        l.pid.clone(),
        mr,
        br,
        tm,
        tb,
        l.gauges.clone(),
    ]
}

/// Run `zcio top`; `Ok(status)` is the exit status.
pub fn run(a: TopArgs) -> Result<i32> {
    if a.once {
        return once(&a);
    }
    use std::io::IsTerminal;
    if !std::io::stdout().is_terminal() || !std::io::stdin().is_terminal() {
        bail!("zcio top needs a terminal (stdin and stdout); for scripts use `zcio top --once` (add --json for JSON)");
    }
    // Fail before the screen is taken if the registry cannot be listed.
    let mut s = Sampler::default();
    let rows = s.sample()?;
    // `init` enters the alternate screen and raw mode and installs a panic
    // hook that restores the terminal; `restore` below undoes it on every
    // other exit.
    // SIGTERM and SIGHUP end the view through the same exit as `q`.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGHUP] {
        signal_hook::flag::register(sig, stop.clone()).context("install a signal handler")?;
    }
    let mut term = ratatui::try_init().context("cannot set up the terminal")?;
    let r = live(&mut term, &a, s, rows, &stop);
    ratatui::restore();
    r.map(|()| 0)
}

fn once(a: &TopArgs) -> Result<i32> {
    let mut s = Sampler::default();
    s.sample()?;
    std::thread::sleep(a.interval);
    let mut rows = s.sample()?;
    sort(&mut rows, a.sort);
    if a.json {
        let v: Vec<_> = rows
            .iter()
            .map(|l| {
                json!({
                    "kind": l.kind, "name": l.name, "pid": l.pid_n, "file": l.file,
                    "messages_per_s": l.rates.map(|r| r.0),
                    "bytes_per_s": l.rates.map(|r| r.1),
                    "messages": l.totals.map(|t| t.0),
                    "bytes": l.totals.map(|t| t.1),
                    "gauges": l.gauges,
                })
            })
            .collect();
        println!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(0);
    }
    if rows.is_empty() {
        eprintln!("no live zcio objects (`zcio ls` says where it looked)");
        return Ok(0);
    }
    let mut t = vec![HEADER.map(str::to_owned)];
    t.extend(rows.iter().map(cells));
    print!("{}", columns(&t, RIGHT, ""));
    Ok(0)
}

fn live(
    term: &mut ratatui::DefaultTerminal,
    a: &TopArgs,
    mut s: Sampler,
    mut rows: Vec<Line1>,
    stop: &std::sync::atomic::AtomicBool,
) -> Result<()> {
    let mut key = a.sort;
    let mut next = Instant::now() + a.interval;
    // A signal is noticed within this (or at once when it ends a poll).
    const SIGNAL_CHECK: Duration = Duration::from_millis(200);
    loop {
        // SYNC: Relaxed: a flag set by the signal handler, ordering nothing.
        if stop.load(std::sync::atomic::Ordering::Relaxed) {
            return Ok(());
        }
        sort(&mut rows, key);
        term.draw(|f| draw(f, &rows, key, a.interval, &s))
            .context("draw")?;
        // Wait for a key until the next sample is due.
        let wait = next
            .saturating_duration_since(Instant::now())
            .min(SIGNAL_CHECK);
        if event::poll(wait).context("read the terminal")? {
            if let Event::Key(k) = event::read().context("read the terminal")? {
                if k.kind != KeyEventKind::Press {
                    continue;
                }
                match k.code {
                    KeyCode::Char('q') | KeyCode::Esc => return Ok(()),
                    KeyCode::Char('c') if k.modifiers.contains(KeyModifiers::CONTROL) => {
                        return Ok(())
                    }
                    KeyCode::Char('s') => key = key.next(),
                    _ => {}
                }
            }
            continue;
        }
        if Instant::now() < next {
            continue;
        }
        rows = s.sample()?;
        next = Instant::now() + a.interval;
    }
}

fn draw(f: &mut ratatui::Frame, rows: &[Line1], key: SortKey, every: Duration, s: &Sampler) {
    let [top, body] = Layout::vertical([Constraint::Length(1), Constraint::Min(0)]).areas(f.area());
    let mut extra = String::new();
    if s.unreadable > 0 {
        extra += &format!("  {} more you may not open", s.unreadable);
    }
    if s.invalid > 0 {
        extra += &format!("  {} invalid entries (zcio ls)", s.invalid);
    }
    f.render_widget(
        Paragraph::new(Line::from(format!(
            "zcio top — {} object{}, every {:.1} s, sorted by {}   q quit  s sort{extra}",
            rows.len(),
            if rows.len() == 1 { "" } else { "s" },
            every.as_secs_f64(),
            key.as_str()
        )))
        .style(Style::new().add_modifier(Modifier::REVERSED)),
        top,
    );
    if rows.is_empty() {
        f.render_widget(
            Paragraph::new(
                "no live zcio objects you may see (channels, listeners, rings, ... register while they live; `zcio ls` says where it looked)",
            ),
            body,
        );
        return;
    }
    // Numbers right-aligned, words left.
    let cell = |i: usize, s: String| {
        let l = Line::from(s);
        Cell::from(if RIGHT[i] { l.right_aligned() } else { l })
    };
    let header = Row::new(
        HEADER
            .iter()
            .enumerate()
            .map(|(i, h)| cell(i, (*h).to_owned())),
    )
    .style(Style::new().add_modifier(Modifier::BOLD));
    let body_rows = rows
        .iter()
        .map(|l| Row::new(cells(l).into_iter().enumerate().map(|(i, c)| cell(i, c))));
    let widths = [
        Constraint::Length(11),
        Constraint::Fill(2),
        Constraint::Length(8),
        Constraint::Length(12),
        Constraint::Length(12),
        Constraint::Length(11),
        Constraint::Length(10),
        Constraint::Fill(3),
    ];
    f.render_widget(Table::new(body_rows, widths).header(header), body);
}
