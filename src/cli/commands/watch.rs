//! `dray get … -w/--watch`: prints the listing, then polls the server once a second and
//! prints each resource again when its line changes (and each new one), until Ctrl-C, which
//! ends the command with status 0. Nothing is kept but the last line of each resource.

use std::collections::BTreeMap;
use std::future::Future;
use std::time::Duration;

use crate::cli::CliError;

/// How often the server is asked again.
pub const POLL: Duration = Duration::from_secs(1);

/// One listing as printed: an optional header line, then one line per resource with the
/// key (its name) it is tracked by.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Frame {
    /// The header, printed once.
    pub header: Option<String>,
    /// `(key, line)` per resource, in listing order.
    pub lines: Vec<(String, String)>,
}

/// The lines of `frame` to print after `seen` (new resources and changed lines), updating
/// `seen`.
pub fn changes(seen: &mut BTreeMap<String, String>, frame: &Frame) -> Vec<String> {
    let mut out = Vec::new();
    for (key, line) in &frame.lines {
        if seen.get(key) != Some(line) {
            seen.insert(key.clone(), line.clone());
            out.push(line.clone());
        }
    }
    out
}

/// Polls `next` every [`POLL`], printing what changed, until Ctrl-C (status 0) or an error.
pub async fn watch<F, Fut>(mut next: F) -> Result<(), CliError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<Frame, CliError>>,
{
    let mut seen = BTreeMap::new();
    let mut header_printed = false;
    let interrupted = tokio::signal::ctrl_c();
    tokio::pin!(interrupted);
    loop {
        let frame = tokio::select! {
            frame = next() => frame?,
            _ = &mut interrupted => return Ok(()),
        };
        if !header_printed && let Some(header) = &frame.header {
            println!("{header}");
            header_printed = true;
        }
        for line in changes(&mut seen, &frame) {
            println!("{line}");
        }
        tokio::select! {
            () = tokio::time::sleep(POLL) => {}
            _ = &mut interrupted => return Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(lines: &[(&str, &str)]) -> Frame {
        Frame {
            header: Some("NAME   FREIGHT".into()),
            lines: lines
                .iter()
                .map(|(k, l)| ((*k).to_owned(), (*l).to_owned()))
                .collect(),
        }
    }

    #[test]
    fn only_new_and_changed_lines_are_printed_again() {
        let mut seen = BTreeMap::new();
        let first = frame(&[("dev", "dev   -"), ("prod", "prod  -")]);
        assert_eq!(changes(&mut seen, &first), ["dev   -", "prod  -"]);
        assert!(changes(&mut seen, &first).is_empty());
        let moved = frame(&[("dev", "dev   fresh-otter"), ("prod", "prod  -")]);
        assert_eq!(changes(&mut seen, &moved), ["dev   fresh-otter"]);
    }
}
