//! What `tar` and `untar` share: the `.gitignore`-style `ignore` patterns and the bounds
//! that keep an archive from filling the disk.
//!
//! Not a step.

use std::path::Path;

use ignore::gitignore::{Gitignore, GitignoreBuilder};

use crate::StepOutcome;

/// At most this many bytes are archived or extracted by one step.
pub(crate) const MAX_BYTES: u64 = 2 << 30;
/// At most this many entries are archived or extracted by one step.
pub(crate) const MAX_ENTRIES: usize = 200_000;

/// Paths matched by `patterns` (one `.gitignore` line each) are left out.
pub(crate) struct Ignore(Option<Gitignore>);

impl Ignore {
    /// The patterns of `ignore` (a multi-line string); `kind` names the step in errors.
    pub(crate) fn parse(kind: &str, patterns: Option<&str>) -> Result<Self, StepOutcome> {
        let Some(patterns) = patterns.filter(|p| !p.trim().is_empty()) else {
            return Ok(Ignore(None));
        };
        let mut builder = GitignoreBuilder::new("");
        for line in patterns.lines() {
            builder.add_line(None, line).map_err(|e| {
                StepOutcome::failed(format!(
                    "invalid `{kind}` config at `ignore`: `{line}` is not a .gitignore pattern: {e}"
                ))
            })?;
        }
        let matcher = builder.build().map_err(|e| {
            StepOutcome::failed(format!("invalid `{kind}` config at `ignore`: {e}"))
        })?;
        Ok(Ignore(Some(matcher)))
    }

    /// Whether `relative` (a path inside the archive) is left out.
    pub(crate) fn skips(&self, relative: &Path, is_dir: bool) -> bool {
        self.0
            .as_ref()
            .is_some_and(|m| m.matched_path_or_any_parents(relative, is_dir).is_ignore())
    }
}

/// The error when an archive passes [`MAX_BYTES`] or [`MAX_ENTRIES`].
pub(crate) fn too_big(kind: &str, what: &str) -> StepOutcome {
    StepOutcome::failed(format!(
        "`{kind}` stopped: {what} holds more than {} entries or {} GiB; archive less (see \
         `ignore`) or split it",
        MAX_ENTRIES,
        MAX_BYTES >> 30
    ))
}
