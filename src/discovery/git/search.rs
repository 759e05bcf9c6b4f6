//! The `NewestFromBranch` search: the newest first-parent commits of a branch whose diff
//! against their first parent passes the path filters, at any depth.
//!
//! One `git log --first-parent --name-only` streams the branch's history from its tip, newest
//! first, and stops (the process is killed) as soon as `limit` commits are accepted. When
//! the filters allow it ([`PathFilter::pathspecs`]) the log is limited to literal
//! pathspecs, so git answers from the mirror's commit-graph and its changed-path Bloom
//! filters and the time does not grow with how far back the path was last touched;
//! otherwise (`regex:`, a glob starting with a wildcard, only `excludePaths`) every commit
//! of the branch is read, still without a depth horizon. Either way the paths git prints
//! are checked against the exact filters here, so both ways give the same answer.
//!
//! Incremental: given the tip seen last time, only `last..tip` is read; the caller checks
//! that `last` is on the tip's first-parent line ([`first_parent_line_reaches`]) and adds
//! the previous answer when fewer than `limit` new commits are found.
//! `since` also bounds the walk (`git log --since` stops at older commits).

use std::path::Path;
use std::time::Duration;

use tokio::io::AsyncReadExt as _;

use super::cli;
use super::history::CommitInfo;
use super::select::{PathFilter, is_dray_commit};

/// How long one search may read history.
pub(crate) const SEARCH_TIMEOUT: Duration = Duration::from_secs(300);

/// The log format: one record per commit, introduced by `\x01`, fields separated by NUL.
const FORMAT: &str = "--format=%x01%H%x00%ct%x00%an <%ae>%x00%cn <%ce>%x00%B";

/// What to search.
pub(crate) struct Search<'a> {
    /// The bare mirror.
    pub(crate) mirror: &'a Path,
    /// The branch tip to start from.
    pub(crate) tip: &'a str,
    /// Read only commits not reachable from this one (the tip seen last time).
    pub(crate) after: Option<&'a str>,
    /// The path filters.
    pub(crate) paths: &'a PathFilter,
    /// Stop walking at commits older than this.
    pub(crate) since: Option<jiff::Timestamp>,
    /// Stop after this many accepted commits.
    pub(crate) limit: usize,
}

/// What a search found.
#[derive(Debug, Default)]
pub(crate) struct Walk {
    /// Accepted commits, newest first.
    pub(crate) commits: Vec<CommitInfo>,
    /// How many commits git printed (after pathspec narrowing).
    pub(crate) scanned: usize,
    /// Whether pathspecs narrowed the log (the Bloom-filter path).
    pub(crate) narrowed: bool,
}

/// Why a search failed (a reason for a history error).
pub(crate) type Result<T> = std::result::Result<T, String>;

/// Run `search`; `accept` decides about each commit that passes the path filters and is
/// not Dray's own (`expressionFilter`, `since`); its error stops the search.
pub(crate) async fn search<E>(
    search: &Search<'_>,
    accept: &mut (dyn FnMut(&CommitInfo) -> std::result::Result<bool, E> + Send),
) -> std::result::Result<Result<Walk>, E> {
    let pathspecs = search.paths.pathspecs();
    let mut args: Vec<String> = vec![
        "log".into(),
        "--first-parent".into(),
        "--no-renames".into(),
        "--no-color".into(),
        "--no-show-signature".into(),
        "-z".into(),
        "--name-only".into(),
        FORMAT.into(),
    ];
    if let Some(since) = search.since {
        args.push(format!("--since=@{}", since.as_second()));
    }
    args.push(search.tip.to_owned());
    if let Some(after) = search.after {
        args.push(format!("^{after}"));
    }
    args.push("--".into());
    if let Some(specs) = &pathspecs {
        args.extend(specs.iter().cloned());
    }
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut walk = Walk {
        narrowed: pathspecs.is_some(),
        ..Walk::default()
    };
    let mut cmd = match cli::command(search.mirror, &argv, None) {
        Ok(cmd) => cmd,
        Err(e) => return Ok(Err(e)),
    };
    // Never a lazy fetch from a search: a partial mirror holds every commit and tree.
    cmd.stderr(std::process::Stdio::null())
        .env("GIT_NO_LAZY_FETCH", "1");
    let mut child = match cmd.spawn() {
        Ok(child) => child,
        Err(e) => return Ok(Err(format!("could not run `git log`: {e}"))),
    };
    let group = cli::ProcessGroup::of(&child);
    let Some(mut stdout) = child.stdout.take() else {
        return Ok(Err("`git log` has no output".into()));
    };
    let deadline = tokio::time::Instant::now() + SEARCH_TIMEOUT;
    let mut buffer: Vec<u8> = Vec::with_capacity(64 * 1024);
    let mut chunk = vec![0u8; 64 * 1024];
    let mut eof = false;
    loop {
        // Every complete record in the buffer (the last one is complete only at the end).
        while let Some(end) = record_end(&buffer, eof) {
            let record: Vec<u8> = buffer.drain(..end).collect();
            let Some((info, paths)) = parse_record(&record) else {
                continue;
            };
            walk.scanned += 1;
            let counts = !is_dray_commit(&info.message)
                && search.paths.is_relevant(paths.iter().map(String::as_str))
                && accept(&info)?;
            if counts {
                walk.commits.push(info);
                if walk.commits.len() >= search.limit {
                    // Dropping the group kills `git log`; nothing more is needed.
                    return Ok(Ok(walk));
                }
            }
        }
        if eof {
            break;
        }
        let read = tokio::time::timeout_at(deadline, stdout.read(&mut chunk)).await;
        match read {
            Err(_) => {
                return Ok(Err(format!(
                    "reading the branch history did not finish within {}s",
                    SEARCH_TIMEOUT.as_secs()
                )));
            }
            Ok(Err(e)) => return Ok(Err(format!("reading `git log` failed: {e}"))),
            Ok(Ok(0)) => eof = true,
            Ok(Ok(n)) => buffer.extend_from_slice(&chunk[..n]),
        }
    }
    let status = tokio::time::timeout_at(deadline, child.wait()).await;
    match status {
        Ok(Ok(status)) if status.success() => group.finished(),
        Ok(Ok(status)) => {
            group.finished();
            return Ok(Err(format!(
                "`git log` of `{}` in the mirror failed ({status})",
                search.tip
            )));
        }
        _ => return Ok(Err("`git log` did not exit".into())),
    }
    Ok(Ok(walk))
}

/// Where the first complete record in `buffer` ends: at the next `\x01` after the first
/// byte, or at the end of the buffer once the output has ended.
fn record_end(buffer: &[u8], eof: bool) -> Option<usize> {
    if buffer.is_empty() {
        return None;
    }
    match buffer[1..].iter().position(|b| *b == 0x01) {
        Some(at) => Some(at + 1),
        None if eof => Some(buffer.len()),
        None => None,
    }
}

/// One record: the commit and the paths printed.
fn parse_record(record: &[u8]) -> Option<(CommitInfo, Vec<String>)> {
    let record = record.strip_prefix(&[0x01])?;
    let text = String::from_utf8_lossy(record);
    let mut fields = text.split('\0');
    let id = fields.next()?.trim().to_owned();
    let seconds: i64 = fields.next()?.trim().parse().ok()?;
    let author = fields.next()?.trim().to_owned();
    let committer = fields.next()?.trim().to_owned();
    let message = fields.next()?.to_owned();
    let paths = fields
        .map(|p| p.trim_start_matches('\n'))
        .filter(|p| !p.is_empty())
        .map(str::to_owned)
        .collect();
    let committed_at = jiff::Timestamp::from_second(seconds).unwrap_or(jiff::Timestamp::UNIX_EPOCH);
    Some((
        CommitInfo {
            id,
            message,
            author,
            committer,
            committed_at,
        },
        paths,
    ))
}

/// Whether `after` is on the first-parent line of `tip` (so the answer for `after`
/// continues the history above it). `Ok(false)` after a force-push or a merge that left
/// `after` on a side line.
pub(crate) async fn first_parent_line_reaches(
    mirror: &Path,
    tip: &str,
    after: &str,
) -> Result<bool> {
    if tip == after {
        return Ok(true);
    }
    let range = format!("^{after}");
    let cmd = cli::command(
        mirror,
        &["rev-list", "--first-parent", "--parents", tip, &range, "--"],
        None,
    )?;
    let ran = match cli::run(cmd, SEARCH_TIMEOUT).await {
        Ok(ran) => ran,
        Err(cli::RunError::Spawn(e)) => return Err(e),
        Err(cli::RunError::TimedOut) => {
            return Err(format!(
                "listing `{after}..{tip}` did not finish within {}s",
                SEARCH_TIMEOUT.as_secs()
            ));
        }
    };
    if !ran.success {
        // `after` is gone from the mirror (a force-push pruned it): search afresh.
        return Ok(false);
    }
    let text = String::from_utf8_lossy(&ran.stdout);
    let last = text.lines().last().unwrap_or_default();
    Ok(last.split(' ').nth(1) == Some(after))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_are_split_and_parsed() {
        let out = b"\x01aaa\x0017\0A <a@x>\0C <c@x>\0Subject\n\nBody\n\0\napps/a.yaml\0b\0\x01bbb\x0016\0A <a@x>\0C <c@x>\0Root\n\0";
        let first = record_end(out, false).unwrap();
        let (info, paths) = parse_record(&out[..first]).unwrap();
        assert_eq!(info.id, "aaa");
        assert_eq!(info.subject(), "Subject");
        assert_eq!(info.committed_at.as_second(), 17);
        assert_eq!(paths, ["apps/a.yaml", "b"]);
        let rest = &out[first..];
        assert_eq!(record_end(rest, false), None, "incomplete until the end");
        let (root, paths) = parse_record(&rest[..record_end(rest, true).unwrap()]).unwrap();
        assert_eq!(root.id, "bbb");
        assert!(paths.is_empty());
        assert!(
            parse_record(b"\x01garbage").is_none(),
            "bad input is skipped"
        );
    }
}
