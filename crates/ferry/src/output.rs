//! How the client commands print: aligned tables, human sizes and ages, JSON, progress bars.
//!
//! Everything goes through [`write_stdout`], which reports a failed write (a closed pipe, a full
//! disk) as an error instead of panicking as `println!` does: `ferry recv` must know its output
//! was written before it acknowledges a bundle.

use std::io::{self, IsTerminal, Read, Write};

use anyhow::Result;
use indicatif::{ProgressBar, ProgressStyle};
use serde::Serialize;

/// Transfers larger than this get a progress bar (when stderr is a terminal).
const PROGRESS_MIN: u64 = 1 << 20;
/// What a progress bar shows.
const PROGRESS_TEMPLATE: &str = "{msg} [{bar:30}] {bytes}/{total_bytes} {bytes_per_sec} eta {eta}";

/// How a column lines up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Align {
    /// Text.
    Left,
    /// Numbers.
    Right,
}

/// A table with a header row, printed with columns aligned and two spaces between them.
#[derive(Debug)]
pub(crate) struct Table {
    header: Vec<(&'static str, Align)>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with these column titles.
    pub(crate) fn new(header: &[(&'static str, Align)]) -> Self {
        Self {
            header: header.to_vec(),
            rows: Vec::new(),
        }
    }

    /// Adds a row (one cell per column).
    pub(crate) fn row(&mut self, cells: Vec<String>) {
        debug_assert_eq!(cells.len(), self.header.len());
        self.rows.push(cells);
    }

    /// The table as lines, each ending in a newline, without trailing spaces.
    pub(crate) fn render(&self) -> String {
        let titles: Vec<String> = self.header.iter().map(|(t, _)| (*t).to_owned()).collect();
        let mut widths: Vec<usize> = titles.iter().map(|t| width(t)).collect();
        for row in &self.rows {
            for (w, cell) in widths.iter_mut().zip(row) {
                *w = (*w).max(width(cell));
            }
        }
        let mut out = String::new();
        for row in std::iter::once(&titles).chain(&self.rows) {
            let mut line = String::new();
            for (i, cell) in row.iter().enumerate() {
                if i > 0 {
                    line.push_str("  ");
                }
                let pad = " ".repeat(widths[i] - width(cell));
                match self.header[i].1 {
                    Align::Left => {
                        line.push_str(cell);
                        line.push_str(&pad);
                    }
                    Align::Right => {
                        line.push_str(&pad);
                        line.push_str(cell);
                    }
                }
            }
            out.push_str(line.trim_end());
            out.push('\n');
        }
        out
    }
}

/// Lines of `key  value`, keys padded to one width.
pub(crate) fn key_values(pairs: &[(&str, String)]) -> String {
    let w = pairs.iter().map(|(k, _)| width(k)).max().unwrap_or(0);
    pairs
        .iter()
        .map(|(k, v)| format!("{k}{}  {v}\n", " ".repeat(w - width(k))))
        .collect()
}

fn width(s: &str) -> usize {
    s.chars().count()
}

/// Bytes in binary units: `512 B`, `1.5 KiB`, `3.4 MiB`.
pub(crate) fn fmt_bytes(n: u64) -> String {
    const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    if n < 1024 {
        return format!("{n} B");
    }
    let mut value = n as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit < UNITS.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1} {}", UNITS[unit])
}

/// A span of seconds, its two largest units: `45s`, `3m 12s`, `2h 5m`, `3d 4h`.
pub(crate) fn fmt_secs(s: u64) -> String {
    let (d, h, m, s) = (s / 86_400, s / 3600 % 24, s / 60 % 60, s % 60);
    match (d, h, m) {
        (0, 0, 0) => format!("{s}s"),
        (0, 0, _) => format!("{m}m {s}s"),
        (0, _, _) => format!("{h}h {m}m"),
        _ => format!("{d}d {h}h"),
    }
}

/// Milliseconds with their sign, in the unit that reads best: `+3 ms`, `+1.25 s`, `-2m 5s`.
pub(crate) fn fmt_offset_ms(ms: i64) -> String {
    let sign = if ms < 0 { '-' } else { '+' };
    let abs = ms.unsigned_abs();
    if abs < 1000 {
        format!("{sign}{abs} ms")
    } else if abs < 60_000 {
        format!("{sign}{:.2} s", abs as f64 / 1000.0)
    } else {
        format!("{sign}{}", fmt_secs(abs / 1000))
    }
}

/// Writes `text` to stdout and flushes it.
pub(crate) fn write_stdout(text: &str) -> io::Result<()> {
    write_stdout_bytes(text.as_bytes())
}

/// Writes `bytes` to stdout and flushes it.
pub(crate) fn write_stdout_bytes(bytes: &[u8]) -> io::Result<()> {
    let mut out = io::stdout().lock();
    out.write_all(bytes)?;
    out.flush()
}

/// Prints a value as indented JSON (answers that are one document), every instant `*_ms` with
/// its RFC 3339 twin `*_utc` as the API writes them (a value this command built or re-read
/// gets them here).
pub(crate) fn print_json_pretty(value: &impl Serialize) -> Result<()> {
    let value = daemon::api_time::with_utc_twins(serde_json::to_value(value)?);
    let mut text = serde_json::to_string_pretty(&value)?;
    text.push('\n');
    Ok(write_stdout(&text)?)
}

/// Prints a value as one line of JSON (streams of items: `ferry recv`, `ferry trace`), with the
/// instants' twins as [`print_json_pretty`].
pub(crate) fn print_json_line(value: &impl Serialize) -> Result<()> {
    let value = daemon::api_time::with_utc_twins(serde_json::to_value(value)?);
    let mut text = serde_json::to_string(&value)?;
    text.push('\n');
    Ok(write_stdout(&text)?)
}

/// A progress bar for a transfer of `len` bytes, if it is large and someone watches stderr.
pub(crate) fn progress_bar(len: Option<u64>, what: &str) -> Option<ProgressBar> {
    let len = len?;
    if len <= PROGRESS_MIN || !io::stderr().is_terminal() {
        return None;
    }
    let bar = ProgressBar::new(len);
    if let Ok(style) = ProgressStyle::with_template(PROGRESS_TEMPLATE) {
        bar.set_style(style.progress_chars("=> "));
    }
    bar.set_message(what.to_owned());
    Some(bar)
}

/// `reader`, counted on `bar` if there is one.
pub(crate) fn with_progress<R: Read + 'static>(
    reader: R,
    bar: Option<&ProgressBar>,
) -> Box<dyn Read> {
    match bar {
        Some(bar) => Box::new(bar.wrap_read(reader)),
        None => Box::new(reader),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_align_left_and_right() {
        let mut t = Table::new(&[
            ("NODE", Align::Left),
            ("HOPS", Align::Right),
            ("VIA", Align::Left),
        ]);
        t.row(vec![
            "dtn://bravo/".into(),
            "1".into(),
            "dtn://bravo/".into(),
        ]);
        t.row(vec!["dtn://c/".into(), "12".into(), "".into()]);
        assert_eq!(
            t.render(),
            "NODE          HOPS  VIA\n\
             dtn://bravo/     1  dtn://bravo/\n\
             dtn://c/        12\n"
        );
    }

    #[test]
    fn an_empty_table_is_its_header() {
        let t = Table::new(&[("A", Align::Left), ("B", Align::Right)]);
        assert_eq!(t.render(), "A  B\n");
    }

    #[test]
    fn key_value_lines() {
        assert_eq!(
            key_values(&[("node", "dtn://a/".into()), ("uptime", "5s".into())]),
            "node    dtn://a/\nuptime  5s\n"
        );
    }

    #[test]
    fn sizes_and_spans() {
        assert_eq!(fmt_bytes(0), "0 B");
        assert_eq!(fmt_bytes(1023), "1023 B");
        assert_eq!(fmt_bytes(1536), "1.5 KiB");
        assert_eq!(fmt_bytes(3 << 30), "3.0 GiB");
        assert_eq!(fmt_secs(45), "45s");
        assert_eq!(fmt_secs(192), "3m 12s");
        assert_eq!(fmt_secs(7500), "2h 5m");
        assert_eq!(fmt_secs(3 * 86_400 + 4 * 3600 + 1), "3d 4h");
        assert_eq!(fmt_offset_ms(3), "+3 ms");
        assert_eq!(fmt_offset_ms(1250), "+1.25 s");
        assert_eq!(fmt_offset_ms(-125_000), "-2m 5s");
    }

    #[test]
    fn small_transfers_get_no_progress_bar() {
        assert!(ProgressStyle::with_template(PROGRESS_TEMPLATE).is_ok());
        assert!(progress_bar(Some(1 << 20), "x").is_none());
        assert!(progress_bar(None, "x").is_none());
    }
}
